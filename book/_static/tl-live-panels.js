// The live panels of chapters 11 and 14: the reader's own input, run through the book's
// trained models in this page (book/_static/tl-live.js, window.tlLive; see ARCHITECTURE.md).
// Each panel is a <div class="tl-live-panel" data-model="reversal|addition"> written by
// transformer_lib/viz/live_panel.py: its words are <span class="tl-live-word" data-key=...>
// inside it (the Chinese editions translate them from figures.po, booktools/figures.py), its
// settings data-* attributes. Nothing is fetched but tl-live.js and the model's weights.

const TL = window.tlLive
  ? Promise.resolve(window.tlLive)
  : import(new URL("tl-live.js", import.meta.url)).then(() => window.tlLive);

const STYLE = `
.tl-live-panel{border:1px solid #c8ccd4;border-radius:6px;padding:.7em .9em;margin:1em 0;font-size:.95em;max-width:100%;overflow-wrap:anywhere}
.tl-live-panel h4{margin:.2em 0 .5em;font-size:1.08em}
.tl-live-panel h5{margin:.9em 0 .35em;font-size:1em}
.tl-live-row{display:flex;flex-wrap:wrap;gap:.4em .8em;align-items:center;margin:.3em 0}
.tl-live-panel input[type=text]{font:1.05em/1.3 monospace;padding:.2em .4em;min-width:9em;max-width:100%;flex:1 1 12em}
.tl-live-panel button{padding:.2em .8em;cursor:pointer}
.tl-live-msg{color:#a40000;font-weight:600;margin:.4em 0}
.tl-live-msg:empty{display:none}
.tl-live-note{color:#444;font-size:.92em}
.tl-live-tokens{display:flex;flex-wrap:wrap;gap:3px}
.tl-live-tok{font:1em monospace;border:1px solid #bbb;border-radius:3px;padding:0 .35em;background:#f6f7f9}
.tl-live-tok.new{background:#e3f1e3;border-color:#6a6}
.tl-live-steps{border-collapse:collapse;font-size:.9em;margin:.2em 0;display:block;overflow-x:auto;max-width:100%}
.tl-live-steps td,.tl-live-steps th{border:1px solid #ddd;padding:1px 5px;text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.tl-live-steps th{background:#f3f4f6}
.tl-live-steps td.best{outline:2px solid #2a7;outline-offset:-2px;font-weight:700}
.tl-live-maps{display:flex;flex-wrap:wrap;gap:.6em}
.tl-live-map{margin:0;text-align:center;font-size:.85em;cursor:pointer}
.tl-live-map.chosen canvas{outline:3px solid #e67e00}
.tl-live-map canvas{display:block;height:auto}
.tl-live-tip{position:fixed;z-index:10;pointer-events:none;background:rgba(255,255,255,.96);color:#111;border:1px solid #888;border-radius:3px;padding:1px 6px;font:12px/1.5 sans-serif;white-space:nowrap;display:none}
.tl-live-formula{font-family:monospace;font-size:.95em;margin:.25em 0}
.tl-live-vec{font:.85em monospace;overflow-x:auto;white-space:nowrap;padding:.2em 0}
.tl-live-drop{border:2px dashed #aab;border-radius:6px;padding:.5em .7em;margin-top:.6em}
.tl-live-drop.over{background:#eef3ff}
.tl-live-samples .right{color:#176317}.tl-live-samples .wrong{color:#a40000}
html[data-theme=dark] .tl-live-tok,html[data-theme=dark] .tl-live-steps th{background:#2a2d33}
html[data-theme=dark] .tl-live-msg{color:#ff7070}
`;

function injectStyle() {
  if (document.getElementById("tl-live-style")) return;
  const s = document.createElement("style");
  s.id = "tl-live-style";
  s.textContent = STYLE;
  document.head.appendChild(s);
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
// Words: the panel's <span class="tl-live-word" data-key=...>, with {name} filled in
// ---------------------------------------------------------------------------------------
function wordsOf(root) {
  const words = {};
  root.querySelectorAll(".tl-live-word").forEach((s) => { words[s.getAttribute("data-key")] = s.textContent; });
  return function (key, fill) {
    let text = words[key] !== undefined ? words[key] : key;
    for (const [k, v] of Object.entries(fill || {})) text = text.split("{" + k + "}").join(String(v));
    return text;
  };
}

class InputError extends Error {
  constructor(key, fill) { super(key); this.key = key; this.fill = fill; }
}

// ---------------------------------------------------------------------------------------
// The tasks: the reader's text -> the model's tokens, and the answer back
// ---------------------------------------------------------------------------------------
const reversalTask = {
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
  parse(text, model, length) {
    const map = new Map(this.symbols(model));
    const parts = /\s/.test(text.trim()) ? text.trim().split(/\s+/) : Array.from(text.trim());
    if (!parts.length || parts[0] === "") throw new InputError("err_empty");
    const ids = parts.map((p) => {
      const id = map.get(p) !== undefined ? map.get(p) : map.get(p.toLowerCase());
      if (id === undefined) throw new InputError("err_char", { c: p, vocab: [...map.keys()].join(" ") });
      return id;
    });
    if (length && ids.length !== length) throw new InputError("err_length_exact", { n: length, m: ids.length });
    if (ids.length > model.config.max_len) throw new InputError("err_length_max", { n: model.config.max_len, m: ids.length });
    return ids;
  },
};

const additionTask = {
  digits(model) {
    return Math.round((model.config.max_len - 3) / 3);
  },
  check(model) {
    const v = model.vocab, want = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "+", "="];
    const n = (model.config.max_len - 3) / 3;
    const vocabOk = v ? want.every((t, i) => v[i] === t) && v.length === 12 : model.config.vocab_size === 12;
    return vocabOk && Number.isInteger(n) && n >= 1;
  },
  parse(text, model) {
    const n = this.digits(model);
    const s = text.replace(/\s+/g, "");
    const example = "347+85=";
    if (!s) throw new InputError("err_empty");
    for (const c of s) if (!/[0-9+=]/.test(c)) throw new InputError("err_char", { c, vocab: "0 1 2 3 4 5 6 7 8 9 + =" });
    const eq = s.indexOf("=");
    if (eq < 0) throw new InputError("err_no_equals", { example });
    if (eq !== s.length - 1) throw new InputError("err_after_equals", { example });
    const left = s.slice(0, eq).split("+");
    if (left.length !== 2) throw new InputError("err_no_plus", { example });
    const [a, b] = left;
    if (!a || !b) throw new InputError("err_no_plus", { example });
    for (const num of [a, b]) if (num.length > n) throw new InputError("err_digits", { n, num, m: num.length });
    // the model's form: each operand zero-padded to n digits, units first
    const rev = (num) => num.padStart(n, "0").split("").reverse().map(Number);
    return { a, b, tokens: [...rev(a), 10, ...rev(b), 11], n };
  },
};

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
  constructor(root, tl) {
    this.root = root;
    this.tl = tl;
    this.name = root.getAttribute("data-model");
    this.task = this.name === "addition" ? additionTask : reversalTask;
    this.length = +root.getAttribute("data-length") || 0; // the length the book's model learned
    this.w = wordsOf(root);
    this.book = tl.models[this.name];
    this.model = this.book;
    this.own = false;
    this.choice = { kind: null, layer: 0, head: 0, query: 0 };
    this.seed = 1;
    this.build();
  }

  build() {
    const w = this.w;
    const box = this.root.querySelector(".tl-live-ui");
    box.textContent = "";
    const id = "tl-live-" + this.name;
    this.input = el("input", { type: "text", id: id + "-input", value: this.root.getAttribute("data-example"), spellcheck: "false", autocomplete: "off", "aria-describedby": id + "-msg" });
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
      (this.hint = el("div", { class: "tl-live-note tl-live-hint" })),
      this.msg, this.status, this.out, this.dropZone());
    this.run();
  }

  dropZone() {
    const w = this.w;
    const file = el("input", { type: "file", accept: ".safetensors", class: "tl-live-file" });
    this.ownNote = el("div", { class: "tl-live-note tl-live-own" });
    this.back = el("button", { type: "button", text: w("own_back"), hidden: "" });
    this.back.addEventListener("click", () => this.useModel(this.book, false));
    const zone = el("div", { class: "tl-live-drop" },
      el("h5", { text: w("own_title") }),
      el("div", { class: "tl-live-note", text: w("own_hint") }),
      el("div", { class: "tl-live-row" }, file, this.back), this.ownNote);
    const take = async (f) => {
      if (!f) return;
      this.ownNote.textContent = "";
      try {
        const buf = await f.arrayBuffer();
        const m = await this.tl.load(this.name, buf);
        if (this.name === "addition" && !additionTask.check(m)) throw Object.assign(new Error(), { code: "not-adder" });
        this.useModel(m, true, f.name);
      } catch (err) {
        this.tl.models[this.name] = this.model; // the model that was running runs on
        const key = ["not-safetensors", "no-config", "bad-config", "missing-tensor", "unexpected-tensor", "bad-shape", "not-adder"].includes(err.code) ? "file_" + err.code : "file_other";
        this.ownNote.textContent = w(key, { detail: err.detail || err.message || "" });
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
    this.tl.models[this.name] = m;
    this.back.hidden = !own;
    const c = m.config;
    this.ownNote.className = "tl-live-note tl-live-own";
    this.ownNote.textContent = own
      ? this.w("own_running", { file: fileName, layers: c.n_layers, heads: c.n_heads, d: c.d_model })
      : "";
    this.run();
  }

  async run() {
    const w = this.w;
    const n = this.name === "addition" ? additionTask.digits(this.model) : this.length || this.model.config.max_len;
    this.hint.textContent = w(this.name === "addition" ? "hint_addition" : "hint_reversal", { n });
    this.msg.textContent = "";
    let parsed;
    try {
      parsed = this.name === "addition"
        ? this.task.parse(this.input.value, this.model)
        : this.task.parse(this.input.value, this.model, this.own ? 0 : this.length);
    } catch (err) {
      if (!(err instanceof InputError)) throw err;
      this.msg.textContent = w(err.key, err.fill);
      this.out.textContent = ""; // no picture for an input the model cannot take
      this.root.setAttribute("data-state", "refused");
      return;
    }
    this.root.setAttribute("data-state", "running");
    const runId = (this.runId = (this.runId || 0) + 1);
    this.out.textContent = "";
    if (this.name === "addition") await this.runAddition(parsed, runId);
    else await this.runReversal(parsed, runId);
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
    const label = (id) => (m.vocab && m.vocab[id] !== undefined ? m.vocab[id] : String(id));
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
        if (x > 0.5) td.style.color = "#fff";
        if (v === next) td.className = "best";
        tr.append(td);
      });
      probs.append(tr);
      tokens.push(next);
      digits.push(next);
      shown.append(el("span", { class: "tl-live-tok new", text: label(next) }));
      await new Promise((r) => setTimeout(r, 30));
    }
    const sum = String(BigInt(problem.a) + BigInt(problem.b));
    const said = digits.every((d) => d < 10) ? digits.slice().reverse().join("").replace(/^0+(?=\d)/, "") : digits.map(label).reverse().join("");
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
        const text = digits.every((d) => d < 10) ? digits.slice().reverse().join("").replace(/^0+(?=\d)/, "") : digits.map((d) => (m.vocab ? m.vocab[d] : d)).reverse().join("");
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

async function start() {
  const roots = document.querySelectorAll(".tl-live-panel:not([data-ready])");
  if (!roots.length) return;
  injectStyle();
  roots.forEach((r) => r.setAttribute("data-ready", "loading"));
  let tl;
  try {
    tl = await TL;
    await tl.ready;
  } catch (err) {
    roots.forEach((r) => {
      const w = wordsOf(r);
      r.querySelector(".tl-live-ui").textContent = w("no_engine", { detail: String((err && err.message) || err) });
      r.setAttribute("data-ready", "failed");
    });
    return;
  }
  roots.forEach((r) => {
    const w = wordsOf(r);
    if (!tl.models[r.getAttribute("data-model")]) {
      r.querySelector(".tl-live-ui").textContent = w("no_engine", { detail: r.getAttribute("data-model") });
      r.setAttribute("data-ready", "failed");
      return;
    }
    r.panel = new Panel(r, tl);
    r.setAttribute("data-ready", "1");
  });
}

start();
export { additionTask, reversalTask, softmax };
