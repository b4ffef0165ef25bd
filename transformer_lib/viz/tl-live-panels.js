// The live panel of chapters 11 and 14: the reader's own input, run through a trained
// model, with its answer, probabilities, attention maps and formula chain. One front end,
// two hosts (see ARCHITECTURE.md, "The live pages"):
//
// * on the site, each <div class="tl-live-panel" data-model="reversal|addition"> written by
//   transformer_lib/viz/live_panel.py is filled in by start(): the model runs in the page
//   (book/_static/tl-live.js, window.tlLive), and its words are the panel's
//   <span class="tl-live-word" data-key=...> (the Chinese editions translate them);
// * in Jupyter, this file is the ES module of the anywidget LivePanel (render() below):
//   the same panel, whose model is a proxy that asks the kernel, where the PyTorch model
//   answers logits() and trace() with the numbers tl-live.js would give.
//
// A model is {kind, config, vocab, logits(...ids), trace(...ids)}, as window.tlLive's.
// Token ids come from the model's vocab (the file's metadata), its sizes from its config.
// The styles are the site's stylesheet's (tl-site.css; the widget loads the same file).

// the engine, fetched beside this file, only on the site
function engine() {
  if (window.tlLive) return Promise.resolve(window.tlLive);
  return import(new URL("tl-live.js", import.meta.url)).then(() => window.tlLive);
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}

// ---------------------------------------------------------------------------------------
// Numbers
// ---------------------------------------------------------------------------------------
function softmax(row, temperature = 1) {
  // logits (V,) -> probabilities (V,)
  const z = row.map((x) => x / temperature);
  const m = Math.max(...z);
  const e = z.map((x) => Math.exp(x - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
}
function argmax(row) {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}
function fmt(x, digits = 3) {
  if (x === -Infinity) return "\u2212\u221e";
  if (!Number.isFinite(x)) return String(x);
  const s = Math.abs(x) >= 1000 || (x !== 0 && Math.abs(x) < 1e-3) ? x.toExponential(2) : x.toFixed(digits);
  return s.replace("-", "\u2212");
}
function mulberry32(seed) {
  return function () {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
// viridis, 9 stops
const VIRIDIS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141], [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37]];
function colour(v) {
  const x = Math.min(1, Math.max(0, v)) * (VIRIDIS.length - 1), i = Math.min(VIRIDIS.length - 2, Math.floor(x)), f = x - i;
  return VIRIDIS[i].map((c, k) => Math.round(c + f * (VIRIDIS[i + 1][k] - c)));
}

// ---------------------------------------------------------------------------------------
// Words: the panel's <span class="tl-live-word" data-key=...> on the site, the widget's
// words on a kernel; {name} filled in
// ---------------------------------------------------------------------------------------
function wordsOf(source) {
  const words = {};
  if (source instanceof Element) {
    source.querySelectorAll(".tl-live-word").forEach((s) => { words[s.getAttribute("data-key")] = s.textContent; });
  } else Object.assign(words, source || {});
  const w = function (key, fill) {
    let text = words[key] !== undefined ? words[key] : key;
    for (const [k, v] of Object.entries(fill || {})) text = text.split("{" + k + "}").join(String(v));
    return text;
  };
  // "1 layer", "2 layers": the word for one, else the word for n
  w.count = (n, one, many) => (n === 1 ? w(one) : w(many, { n }));
  return w;
}

// a refused input: the message's key and its blanks; a blank [n, one, many] is a count
class InputError extends Error {
  constructor(key, fill) { super(key); this.key = key; this.fill = fill; }
  text(w) {
    const fill = {};
    for (const [k, v] of Object.entries(this.fill || {})) fill[k] = Array.isArray(v) ? w.count(...v) : v;
    return w(this.key, fill);
  }
}

// what a file holds, in a few words, for the messages that refuse it
function describe(m) {
  const c = m.config, v = m.vocab ? m.vocab.join(" ") : `${c.vocab_size} tokens, no vocab`;
  return `${m.kind}: n_layers=${c.n_layers}, n_heads=${c.n_heads}, d_model=${c.d_model}, max_len=${c.max_len}, vocab=[${v}]`;
}

// ---------------------------------------------------------------------------------------
// The tasks: the reader's text -> the model's tokens (ids from the model's vocab), what a
// model must be to run the task, and an example input that fits it
// ---------------------------------------------------------------------------------------
const reversalTask = {
  kind: "transformer",
  symbols(model) {
    const vocab = model.vocab || [];
    const out = [];
    for (let id = 0; id < model.config.vocab_size; id++) {
      if (id === model.config.pad_id || id === model.config.bos_id) continue;
      out.push([vocab[id] !== undefined ? vocab[id] : String.fromCharCode(97 + id - 2), id]);
    }
    return out;
  },
  label(model, id) {
    if (model.vocab && model.vocab[id] !== undefined) return model.vocab[id];
    if (id === model.config.bos_id) return "<bos>";
    if (id === model.config.pad_id) return "<pad>";
    return String.fromCharCode(97 + id - 2);
  },
  // null when the model can run the task, else what is missing
  misfit(model) {
    if (model.kind !== "transformer") return "kind";
    return this.symbols(model).length ? null : "vocab";
  },
  // the length to type: the one the book's model learned, else up to max_len
  length(model, book) { return book || model.config.max_len; },
  example(model, length) {
    const symbols = this.symbols(model).map(([t]) => t);
    const pattern = [2, 0, 7, 9, 3, 0, 4, 1]; // c a h j d a e b, on the model's symbols
    const n = Math.min(length, 8);
    return Array.from({ length: n }, (_, i) => symbols[pattern[i] % symbols.length]).join(" ");
  },
  hint(model, w, exact, length) {
    const symbols = this.symbols(model).map(([t]) => t);
    const fill = { count: w.count(length, "one_symbol", "n_symbols"), first: symbols[0], last: symbols[symbols.length - 1] };
    return w(exact ? "hint_reversal" : "hint_reversal_up_to", fill);
  },
  parse(text, model, exact, length) {
    const map = new Map(this.symbols(model));
    const parts = /\s/.test(text.trim()) ? text.trim().split(/\s+/) : Array.from(text.trim());
    if (!parts.length || parts[0] === "") throw new InputError("err_empty");
    const ids = parts.map((p) => {
      const id = map.get(p) !== undefined ? map.get(p) : map.get(p.toLowerCase());
      if (id === undefined) throw new InputError("err_char", { c: p, vocab: [...map.keys()].join(" ") });
      return id;
    });
    if (exact && ids.length !== length) throw new InputError("err_length_exact", { count: [length, "one_symbol", "n_symbols"], m: ids.length });
    if (ids.length > length) throw new InputError("err_length_max", { count: [length, "one_symbol", "n_symbols"], m: ids.length });
    return ids;
  },
};

const ADDER_VOCAB = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "+", "="];
const additionTask = {
  kind: "gpt",
  // token -> id: the file's vocab, or, in a file without one, the order of ADDER_VOCAB
  ids(model) {
    const v = model.vocab || ADDER_VOCAB;
    return new Map(v.map((t, i) => [t, i]));
  },
  digits(model) {
    return (model.config.max_len - 3) / 3; // n digits: 2n + 2 prompt tokens, n + 1 answer
  },
  misfit(model) {
    if (model.kind !== "gpt") return "kind";
    const ids = this.ids(model);
    const n = this.digits(model);
    if (!ADDER_VOCAB.every((t) => ids.has(t) && ids.get(t) < model.config.vocab_size)) return "vocab";
    return Number.isInteger(n) && n >= 1 ? null : "length";
  },
  length(model) { return this.digits(model); },
  example(model) {
    const n = this.digits(model);
    return `${"3479".slice(0, n)}+${"8516".slice(0, Math.max(1, n - 1))}=`;
  },
  hint(model, w) {
    const n = this.digits(model);
    return w("hint_addition", { count: w.count(n, "one_digit", "n_digits"), example: this.example(model) });
  },
  label(model, id) {
    return model.vocab && model.vocab[id] !== undefined ? model.vocab[id] : ADDER_VOCAB[id] ?? String(id);
  },
  parse(text, model) {
    const n = this.digits(model), ids = this.ids(model);
    const s = text.replace(/\s+/g, "");
    const example = this.example(model);
    if (!s) throw new InputError("err_empty");
    for (const c of s) if (!/[0-9+=]/.test(c)) throw new InputError("err_char", { c, vocab: ADDER_VOCAB.join(" ") });
    const eq = s.indexOf("=");
    if (eq < 0) throw new InputError("err_no_equals", { example });
    if (eq !== s.length - 1) throw new InputError("err_after_equals", { example });
    const left = s.slice(0, eq).split("+");
    if (left.length !== 2) throw new InputError("err_no_plus", { example });
    const [a, b] = left;
    if (!a || !b) throw new InputError("err_no_plus", { example });
    for (const num of [a, b]) if (num.length > n) throw new InputError("err_digits", { count: [n, "one_digit", "n_digits"], num, m: num.length });
    // the model's form: each operand zero-padded to n digits, units first
    const rev = (num) => num.padStart(n, "0").split("").reverse().map((d) => ids.get(d));
    return { a, b, tokens: [...rev(a), ids.get("+"), ...rev(b), ids.get("=")], n };
  },
};

// answer tokens, units first -> the number as written (leading zeros dropped); the tokens
// as they are when one is not a digit
function number(m, ids) {
  const t = ids.map((id) => additionTask.label(m, id)).reverse();
  return t.every((x) => /^[0-9]$/.test(x)) ? t.join("").replace(/^0+(?=\d)/, "") : t.join("");
}

// ---------------------------------------------------------------------------------------
// Heatmaps with values on hover
// ---------------------------------------------------------------------------------------
let tip = null;
function tooltip() {
  if (!tip) { tip = el("div", { class: "tl-live-tip", role: "status" }); document.body.appendChild(tip); }
  return tip;
}

function heatmap(weights, mask, rowLabels, colLabels, w, caption, onPick) {
  // weights (T_q, T_k), mask (T_q, T_k) true where the query may attend; rows and
  // columns labelled with their tokens; drawn at twice the size shown, for sharp text
  const Tq = weights.length, Tk = weights[0].length, cell = 28, px = 2;
  const canvas = el("canvas", { "aria-label": caption, role: "img" });
  const ctx = canvas.getContext("2d");
  ctx.font = `${9 * px}px sans-serif`;
  const left = Math.ceil(Math.max(...rowLabels.map((t) => ctx.measureText(t).width))) + 4 * px;
  const top = 13 * px;
  canvas.width = left + Tk * cell;
  canvas.height = top + Tq * cell;
  canvas.style.width = `min(${canvas.width / px}px, 44vw)`;
  ctx.font = `${9 * px}px sans-serif`;
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.fillStyle = "#222"; ctx.textBaseline = "middle"; ctx.textAlign = "right";
  rowLabels.forEach((t, i) => ctx.fillText(t, left - 2 * px, top + (i + 0.5) * cell));
  ctx.textAlign = "center";
  colLabels.forEach((t, j) => ctx.fillText(t, left + (j + 0.5) * cell, top / 2));
  let max = 0;
  weights.forEach((r, i) => r.forEach((x, j) => { if ((!mask || mask[i][j]) && x > max) max = x; }));
  for (let i = 0; i < Tq; i++) for (let j = 0; j < Tk; j++) {
    const x0 = left + j * cell, y0 = top + i * cell;
    if (mask && !mask[i][j]) {
      ctx.fillStyle = "#e4e4e4"; ctx.fillRect(x0, y0, cell, cell);
      ctx.strokeStyle = "#b0b0b0"; ctx.beginPath(); ctx.moveTo(x0, y0 + cell); ctx.lineTo(x0 + cell, y0); ctx.stroke();
    } else {
      const [r, g, b] = colour(weights[i][j] / (max || 1));
      ctx.fillStyle = `rgb(${r},${g},${b})`; ctx.fillRect(x0, y0, cell, cell);
    }
  }
  const fig = el("figure", { class: "tl-live-map" }, canvas, el("figcaption", { text: caption }));
  function at(e) {
    // the cell under the pointer: (i, j), or null over the labels
    const r = canvas.getBoundingClientRect(), sx = canvas.width / r.width, sy = canvas.height / r.height;
    const j = Math.floor(((e.clientX - r.left) * sx - left) / cell), i = Math.floor(((e.clientY - r.top) * sy - top) / cell);
    return i < 0 || j < 0 || i >= Tq || j >= Tk ? null : [i, j];
  }
  function hover(e) {
    const t = tooltip(), hit = at(e);
    if (!hit) { t.style.display = "none"; return; }
    const [i, j] = hit;
    const v = mask && !mask[i][j] ? w("masked") : fmt(weights[i][j]);
    t.textContent = `${w("query")} ${rowLabels[i]} \u2192 ${w("key")} ${colLabels[j]}: ${v}`;
    t.style.display = "block";
    t.style.left = Math.max(0, Math.min(e.clientX + 12, window.innerWidth - t.offsetWidth - 4)) + "px";
    t.style.top = e.clientY + 14 + "px";
    canvas.setAttribute("data-hover", t.textContent);
  }
  canvas.addEventListener("pointermove", hover);
  canvas.addEventListener("pointerdown", hover);
  canvas.addEventListener("pointerleave", () => { tooltip().style.display = "none"; });
  fig.addEventListener("click", (e) => { const hit = at(e); onPick(hit ? hit[0] : -1); });
  return fig;
}

const SUBSCRIPTS = "\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089";
function positionLabels(labels) {
  // a token with its position as a subscript, as the chapters' figures label rows and columns
  return labels.map((t, i) => t + String(i).split("").map((d) => SUBSCRIPTS[+d]).join(""));
}

// ---------------------------------------------------------------------------------------
// One panel
// ---------------------------------------------------------------------------------------
class Panel {
  // root: the panel's element, with a .tl-live-ui inside; opts: {name, model (the book's
  // or the kernel's), words (w), length (the one length the book's reversal model
  // learned, 0: any up to max_len), example, load (a dropped file's bytes -> a model, or
  // null where no file can be run: on a kernel)}
  constructor(root, opts) {
    this.root = root;
    this.name = opts.name;
    this.task = this.name === "addition" ? additionTask : reversalTask;
    this.bookLength = opts.length || 0;
    this.w = opts.w;
    this.load = opts.load;
    this.book = opts.model;
    this.model = this.book;
    this.own = false;
    this.choice = { kind: null, layer: 0, head: 0, query: 0 };
    this.seed = 1;
    this.build(opts.example);
  }

  // the length the reader types: exactly the book's model's, or up to the own model's
  get exact() { return !this.own && this.bookLength > 0; }
  get length() { return this.task.length(this.model, this.own ? 0 : this.bookLength); }

  build(example) {
    const w = this.w;
    const box = this.root.querySelector(".tl-live-ui");
    box.textContent = "";
    const id = "tl-live-" + this.name + "-" + (Panel.count = (Panel.count || 0) + 1);
    this.input = el("input", { type: "text", id: id + "-input", value: example || this.task.example(this.model, this.length), spellcheck: "false", autocomplete: "off", "aria-describedby": id + "-hint " + id + "-msg" });
    this.input.addEventListener("keydown", (e) => { if (e.key === "Enter") this.run(); });
    this.msg = el("div", { class: "tl-live-msg", id: id + "-msg", role: "alert" });
    this.status = el("div", { class: "tl-live-note tl-live-status" });
    this.out = el("div", { class: "tl-live-out" });
    box.append(
      el("h4", { text: w(this.name === "addition" ? "title_addition" : "title_reversal") }),
      el("div", { class: "tl-live-row" },
        el("label", { for: id + "-input", text: w(this.name === "addition" ? "input_addition" : "input_reversal") }),
        this.input,
        el("button", { type: "button", class: "tl-live-run", text: w("run"), onclick: () => this.run() })),
      (this.hint = el("div", { class: "tl-live-note tl-live-hint", id: id + "-hint" })),
      this.msg, this.status, this.out, this.load ? this.dropZone(id) : null);
    this.run();
  }

  dropZone(id) {
    const w = this.w;
    const file = el("input", { type: "file", accept: ".safetensors", class: "tl-live-file", id: id + "-file" });
    this.ownNote = el("div", { class: "tl-live-note tl-live-own", role: "status" });
    this.back = el("button", { type: "button", text: w("own_back"), hidden: "" });
    this.back.addEventListener("click", () => this.useModel(this.book, false));
    const zone = el("div", { class: "tl-live-drop" },
      el("h5", { text: w("own_title") }),
      el("div", { class: "tl-live-note", text: w("own_hint") + " " + w("own_needs_" + this.name) }),
      el("div", { class: "tl-live-row" }, el("label", { for: id + "-file", text: w("own_choose") }), file, this.back), this.ownNote);
    const take = async (f) => {
      if (!f) return;
      this.ownNote.textContent = "";
      try {
        const m = await this.load(await f.arrayBuffer());
        const misfit = this.task.misfit(m);
        if (misfit) throw Object.assign(new Error(), { code: "misfit", detail: misfit, model: m });
        this.useModel(m, true, f.name);
      } catch (err) {
        let text;
        if (err.code === "misfit") text = w("file_misfit_" + this.name, { found: describe(err.model) });
        else {
          const key = ["not-safetensors", "no-config", "bad-config", "missing-tensor", "unexpected-tensor", "bad-shape"].includes(err.code) ? "file_" + err.code : "file_other";
          text = w(key, { detail: err.detail || err.message || "" });
        }
        this.ownNote.textContent = text;
        this.ownNote.className = "tl-live-msg tl-live-own";
      }
    };
    file.addEventListener("change", () => take(file.files[0]));
    zone.addEventListener("dragover", (e) => { e.preventDefault(); zone.classList.add("over"); });
    zone.addEventListener("dragleave", () => zone.classList.remove("over"));
    zone.addEventListener("drop", (e) => { e.preventDefault(); zone.classList.remove("over"); take(e.dataTransfer.files[0]); });
    return zone;
  }

  useModel(m, own, fileName) {
    this.model = m;
    this.own = own;
    this.back.hidden = !own;
    const c = m.config, w = this.w;
    this.ownNote.className = "tl-live-note tl-live-own";
    this.ownNote.textContent = own
      ? w("own_running", { file: fileName, layers: w.count(c.n_layers, "one_layer", "n_layers"), heads: w.count(c.n_heads, "one_head", "n_heads"), d: c.d_model })
      : "";
    // another model: the choices start again, and an input it cannot take gives way to
    // an example that fits it
    this.choice = { kind: null, layer: 0, head: 0, query: 0 };
    try {
      this.parse();
    } catch (err) {
      if (!(err instanceof InputError)) throw err;
      this.input.value = this.task.example(m, this.length);
    }
    this.run();
  }

  parse() {
    return this.name === "addition"
      ? this.task.parse(this.input.value, this.model)
      : this.task.parse(this.input.value, this.model, this.exact, this.length);
  }

  async run() {
    const w = this.w;
    this.hint.textContent = this.task.hint(this.model, w, this.exact, this.length);
    this.msg.textContent = "";
    let parsed;
    try {
      parsed = this.parse();
    } catch (err) {
      if (!(err instanceof InputError)) throw err;
      this.msg.textContent = err.text(w);
      this.out.textContent = ""; // no picture for an input the model cannot take
      this.root.setAttribute("data-state", "refused");
      return;
    }
    this.root.setAttribute("data-state", "running");
    const runId = (this.runId = (this.runId || 0) + 1);
    this.out.textContent = "";
    try {
      if (this.name === "addition") await this.runAddition(parsed, runId);
      else await this.runReversal(parsed, runId);
    } catch (err) {
      if (runId !== this.runId) return;
      this.msg.textContent = w("no_engine", { detail: String((err && err.message) || err) });
      this.root.setAttribute("data-state", "failed");
      throw err;
    }
    if (runId === this.runId) this.root.setAttribute("data-state", "done");
  }

  // -- chapter 11: encoder-decoder, greedy
  async runReversal(src, runId) {
    const w = this.w, m = this.model, c = m.config, label = (id) => reversalTask.label(m, id);
    const tgt = [c.bos_id], answer = [];
    const tokens = el("div", { class: "tl-live-tokens tl-live-answer" });
    const steps = el("table", { class: "tl-live-steps" });
    steps.append(el("tr", {}, el("th", { text: w("step") }), el("th", { text: w("reads") }), el("th", { text: w("writes") }), el("th", { text: w("probability") })));
    this.out.append(el("h5", { text: w("answer") }), tokens, steps);
    for (let t = 0; t < src.length; t++) {
      const logits = await m.logits(src, tgt);
      if (runId !== this.runId) return;
      const last = logits[logits.length - 1], p = softmax(last), next = argmax(last);
      answer.push(next);
      tokens.append(el("span", { class: "tl-live-tok new", text: label(next) }));
      steps.append(el("tr", {}, el("td", { text: String(t) }), el("td", { text: label(tgt[t]) }), el("td", { text: label(next) }), el("td", { text: fmt(p[next]) })));
      tgt.push(next);
      await new Promise((r) => setTimeout(r, 30)); // token by token, visibly
    }
    const expected = src.slice().reverse();
    const right = expected.every((x, i) => x === answer[i]);
    this.out.append(el("div", { class: "tl-live-note tl-live-verdict", text: w(right ? "verdict_right" : "verdict_wrong", { want: expected.map(label).join(" ") }) }));
    const tgtIn = tgt.slice(0, src.length); // BOS + the answer but its last token: what the decoder read
    const trace = await m.trace(src, tgtIn);
    if (runId !== this.runId) return;
    const srcL = positionLabels(src.map(label)), tgtL = positionLabels(tgtIn.map(label));
    this.views(trace, [
      ["cross", w("kind_cross"), (l) => trace.decoder[l].cross, tgtL, srcL],
      ["encoder", w("kind_encoder"), (l) => trace.encoder[l].self, srcL, srcL],
      ["decoder", w("kind_decoder"), (l) => trace.decoder[l].self, tgtL, tgtL],
    ], c.n_layers);
  }

  // -- chapter 14: the GPT, greedy digit by digit, probabilities, sampling
  async runAddition(problem, runId) {
    const w = this.w, m = this.model, n = problem.n, V = m.config.vocab_size;
    const label = (id) => additionTask.label(m, id);
    const tokens = problem.tokens.slice(), digits = [];
    const shown = el("div", { class: "tl-live-tokens tl-live-answer" });
    problem.tokens.forEach((id) => shown.append(el("span", { class: "tl-live-tok", text: label(id) })));
    const probs = el("table", { class: "tl-live-steps tl-live-probs" });
    const head = el("tr", {}, el("th", { text: w("step") }));
    for (let v = 0; v < V; v++) head.append(el("th", { text: label(v) }));
    probs.append(head);
    const result = el("div", { class: "tl-live-result" });
    this.out.append(
      el("h5", { text: w("answer") }), el("div", { class: "tl-live-note", text: w("model_form") }), shown,
      el("h5", { text: w("probs_title") }), probs, result);
    for (let j = 0; j <= n; j++) {
      const logits = await m.logits(tokens);
      if (runId !== this.runId) return;
      const row = logits[logits.length - 1], p = softmax(row), next = argmax(row);
      const tr = el("tr", {}, el("th", { text: w("digit_j", { j }) }));
      p.forEach((x, v) => {
        const [r, g, b] = colour(x);
        const td = el("td", { text: fmt(x), title: `${label(v)}: ${x}` });
        td.style.background = `rgba(${r},${g},${b},${0.15 + 0.6 * x})`;
        td.className = (x > 0.5 ? "dark" : "") + (v === next ? " best" : "");
        tr.append(td);
      });
      probs.append(tr);
      tokens.push(next);
      digits.push(next);
      shown.append(el("span", { class: "tl-live-tok new", text: label(next) }));
      await new Promise((r) => setTimeout(r, 30));
    }
    const sum = String(BigInt(problem.a) + BigInt(problem.b));
    const said = number(m, digits);
    result.append(el("p", { class: "tl-live-verdict" },
      el("strong", { text: `${problem.a} + ${problem.b} = ${said}` }), " ",
      el("span", { text: w(said === sum ? "sum_right" : "sum_wrong", { sum }) })));
    this.samplingControls(problem, sum);
    const trace = await m.trace(tokens.slice(0, m.config.max_len));
    if (runId !== this.runId) return;
    const L = positionLabels(tokens.slice(0, m.config.max_len).map(label));
    this.views(trace, [["self", w("kind_self"), (l) => trace.layers[l].self, L, L]], m.config.n_layers);
  }

  samplingControls(problem, sum) {
    const w = this.w;
    const slider = el("input", { type: "range", min: "0.1", max: "2", step: "0.1", value: "1", class: "tl-live-temp", "aria-label": w("temperature") });
    const shown = el("output", { text: "1.0" });
    const list = el("div", { class: "tl-live-samples" });
    const go = el("button", { type: "button", class: "tl-live-sample", text: w("sample") });
    const sample = async () => {
      const T = +slider.value, m = this.model, rand = mulberry32(this.seed++), runId = this.runId;
      const counts = new Map();
      for (let s = 0; s < 10; s++) {
        const tokens = problem.tokens.slice(), digits = [];
        for (let j = 0; j <= problem.n; j++) {
          const logits = await m.logits(tokens);
          const p = softmax(logits[logits.length - 1], T);
          let u = rand(), next = p.length - 1;
          for (let v = 0; v < p.length; v++) { u -= p[v]; if (u < 0) { next = v; break; } }
          tokens.push(next); digits.push(next);
        }
        if (runId !== this.runId) return;
        const text = number(m, digits);
        counts.set(text, (counts.get(text) || 0) + 1);
      }
      list.textContent = "";
      list.append(el("span", { text: w("sampled", { t: T.toFixed(1) }) + " " }));
      [...counts.entries()].sort((a, b) => b[1] - a[1]).forEach(([text, k], i) => {
        if (i) list.append(", ");
        list.append(el("span", { class: text === sum ? "right" : "wrong", text: `${text} \u00d7${k}` }));
      });
    };
    slider.addEventListener("input", () => { shown.textContent = (+slider.value).toFixed(1); });
    slider.addEventListener("change", sample);
    go.addEventListener("click", sample);
    this.out.append(el("h5", { text: w("sampling_title") }),
      el("div", { class: "tl-live-row" }, el("label", {}, w("temperature") + " ", slider, " ", shown), go), list);
    sample();
  }

  // -- the attention maps of every layer and head, and the formula chain of one
  views(trace, kinds, nLayers) {
    const w = this.w;
    if (!kinds.some((k) => k[0] === this.choice.kind)) {
      // the first query to follow: for the adder the "=" sign, which predicts the units digit
      const first = this.name === "addition" ? 2 * additionTask.digits(this.model) + 1 : 0;
      this.choice = { kind: kinds[0][0], layer: nLayers - 1, head: 0, query: first };
    }
    // clamp to this model's sizes (a model of fewer layers or heads may have come)
    this.choice.layer = Math.min(this.choice.layer, nLayers - 1);
    this.choice.head = Math.min(this.choice.head, this.model.config.n_heads - 1);
    const maps = el("div", { class: "tl-live-mapsbox" });
    const chain = el("div", { class: "tl-live-chain" });
    const kindSel = el("select", { class: "tl-live-kind" });
    kinds.forEach(([key, text]) => kindSel.append(el("option", { value: key, text })));
    kindSel.value = this.choice.kind;
    const layerSel = el("select", { class: "tl-live-layer" }), headSel = el("select", { class: "tl-live-head" }), querySel = el("select", { class: "tl-live-query" });
    for (let l = 0; l < nLayers; l++) layerSel.append(el("option", { value: l, text: String(l + 1) }));
    const H = this.model.config.n_heads;
    for (let h = 0; h < H; h++) headSel.append(el("option", { value: h, text: String(h + 1) }));
    const draw = () => {
      const [, , get, rows, cols] = kinds.find((k) => k[0] === this.choice.kind);
      maps.textContent = "";
      const grid = el("div", { class: "tl-live-maps" });
      for (let l = 0; l < nLayers; l++) for (let h = 0; h < H; h++) {
        const a = get(l);
        const fig = heatmap(a.weights[h], a.mask, rows, cols, w, w("layer_head", { l: l + 1, h: h + 1 }), (q) => {
          this.choice.layer = l; this.choice.head = h;
          if (q >= 0 && q < rows.length) this.choice.query = q;
          sync(); draw();
        });
        if (l === this.choice.layer && h === this.choice.head) fig.classList.add("chosen");
        grid.append(fig);
      }
      maps.append(grid);
      querySel.textContent = "";
      rows.forEach((r, i) => querySel.append(el("option", { value: i, text: r })));
      if (this.choice.query >= rows.length) this.choice.query = rows.length - 1;
      querySel.value = this.choice.query;
      this.chain(chain, get(this.choice.layer), rows, cols);
    };
    const sync = () => { kindSel.value = this.choice.kind; layerSel.value = this.choice.layer; headSel.value = this.choice.head; querySel.value = this.choice.query; };
    kindSel.addEventListener("change", () => { this.choice.kind = kindSel.value; this.choice.query = 0; draw(); });
    layerSel.addEventListener("change", () => { this.choice.layer = +layerSel.value; draw(); });
    headSel.addEventListener("change", () => { this.choice.head = +headSel.value; draw(); });
    querySel.addEventListener("change", () => { this.choice.query = +querySel.value; draw(); });
    sync();
    this.out.append(
      el("h5", { text: w("maps_title") }),
      el("div", { class: "tl-live-row" }, kinds.length > 1 ? el("label", {}, w("attention") + " ", kindSel) : null),
      el("div", { class: "tl-live-note", text: w("maps_hint") }), maps,
      el("h5", { text: w("chain_title") }),
      el("div", { class: "tl-live-row" }, el("label", {}, w("layer") + " ", layerSel), el("label", {}, w("head") + " ", headSel), el("label", {}, w("query") + " ", querySel)),
      chain);
    draw();
  }

  chain(box, a, rows, cols) {
    const w = this.w, { head: h, query: i } = this.choice;
    const q = a.q[h][i], scores = a.scores[h][i], weights = a.weights[h][i], mask = a.mask[i], out = a.out[h][i];
    const dk = q.length;
    box.textContent = "";
    const vec = (name, v) => el("div", { class: "tl-live-vec" }, `${name} = [${v.map((x) => fmt(x)).join(", ")}]`);
    const table = el("table", { class: "tl-live-steps tl-live-chain-table" });
    table.append(el("tr", {},
      el("th", { text: w("key") }),
      el("th", { text: "q\u00b7k\u2c7c" }),
      el("th", { text: `\u00d7 1/\u221ad\u2096 = \u00d7 ${fmt(a.scale, 4)}` }),
      el("th", { text: w("mask") }),
      el("th", { text: w("softmax") })));
    let total = 0;
    scores.forEach((s, j) => {
      const ok = mask[j];
      total += weights[j];
      const tr = el("tr", {},
        el("th", { text: cols[j] }),
        el("td", { text: fmt(s) }),
        el("td", { text: ok ? fmt(s * a.scale) : "\u2212\u221e" }),
        el("td", { text: ok ? "\u2713" : "\u2717 " + w("masked") }),
        el("td", { text: fmt(weights[j]) }));
      if (weights[j] === Math.max(...weights)) tr.lastChild.className = "best";
      table.append(tr);
    });
    table.append(el("tr", {}, el("th", { text: "\u03a3" }), el("td"), el("td"), el("td"), el("td", { text: fmt(total) })));
    box.append(
      el("div", { class: "tl-live-note", text: w("chain_for", { l: this.choice.layer + 1, h: h + 1, q: rows[i], dk }) }),
      el("div", { class: "tl-live-formula", text: "s\u2c7c = q\u00b7k\u2c7c,   a = softmax(s / \u221ad\u2096 + mask),   o = \u03a3\u2c7c a\u2c7c v\u2c7c" }),
      vec("q", q), table,
      el("div", { class: "tl-live-note", text: w("weighted_sum") }), vec("o", out));
  }
}

// ---------------------------------------------------------------------------------------
// On the site: every .tl-live-panel of the page, run by tl-live.js
// ---------------------------------------------------------------------------------------
async function start() {
  const roots = document.querySelectorAll(".tl-live-panel:not([data-ready])");
  if (!roots.length) return;
  roots.forEach((r) => r.setAttribute("data-ready", "loading"));
  let tl;
  try {
    tl = await engine();
    await tl.ready;
  } catch (err) {
    roots.forEach((r) => {
      r.querySelector(".tl-live-ui").textContent = wordsOf(r)("no_engine", { detail: String((err && err.message) || err) });
      r.setAttribute("data-ready", "failed");
    });
    return;
  }
  roots.forEach((r) => {
    const w = wordsOf(r), name = r.getAttribute("data-model");
    if (!tl.models[name]) {
      r.querySelector(".tl-live-ui").textContent = w("no_engine", { detail: name });
      r.setAttribute("data-ready", "failed");
      return;
    }
    const book = tl.models[name];
    // a dropped file: read by tl-live.js under its own name, the book's model kept; the
    // last dropped model goes first, so that tlLive.load does not hold the next file to
    // its kind (the panel checks the kind itself, and says what the file holds)
    const load = (buffer) => {
      delete tl.models[name + "-own"];
      return tl.load(name + "-own", buffer);
    };
    r.panel = new Panel(r, { name, model: book, w, length: +r.getAttribute("data-length") || 0, example: r.getAttribute("data-example"), load });
    r.setAttribute("data-ready", "1");
  });
}

// ---------------------------------------------------------------------------------------
// In Jupyter: the anywidget's view. The widget's traits: name, words, length, example and
// meta ({kind, config, vocab} of the PyTorch model); logits() and trace() are messages
// to the kernel, {id, op, args}, answered by {id, result} or {id, error}.
// ---------------------------------------------------------------------------------------
function kernelModel(model) {
  const waiting = new Map();
  let next = 0;
  model.on("msg:custom", (msg) => {
    const p = waiting.get(msg.id);
    if (!p) return;
    waiting.delete(msg.id);
    if (msg.error) p.reject(new Error(msg.error));
    else p.resolve(msg.result);
  });
  const ask = (op, args) => new Promise((resolve, reject) => {
    const id = ++next;
    waiting.set(id, { resolve, reject });
    model.send({ id, op, args });
  });
  const meta = model.get("meta");
  return { ...meta, logits: (...args) => ask("logits", args), trace: (...args) => ask("trace", args) };
}

function render({ model, el: host }) {
  const root = el("div", { class: "tl-live-panel", "data-model": model.get("name"), "data-ready": "1" }, el("div", { class: "tl-live-ui", "aria-live": "polite" }));
  host.append(root);
  const panel = new Panel(root, {
    name: model.get("name"), model: kernelModel(model), w: wordsOf(model.get("words")),
    length: model.get("length"), example: model.get("example"), load: null,
  });
  root.panel = panel;
  return () => { panel.runId = -1; root.remove(); };
}

if (typeof document !== "undefined") start();
export default { render };
export { additionTask, reversalTask, softmax };
