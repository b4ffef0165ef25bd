"""The reader's own input, run by the book's trained models (chapters 11 and 14).

``LivePanel(model, "reversal" | "addition")`` is one cell's output with two lives,
like an :class:`~.interactive.Explorer`:

* on the static site, a ``<div class="tl-live-panel">`` that
  ``book/_static/tl-live-panels.js`` fills in: the model runs in the page
  (``tl-live.js``, ``window.tlLive``) on whatever the reader types;
* in Jupyter, an ipywidgets form with the same controls, whose answers, probabilities,
  attention maps and formula chain come from the PyTorch model itself (:meth:`render`).

The panel's words (:data:`WORDS`) are written into the markup as
``<span class="tl-live-word" data-key=...>``; the Chinese editions translate them from
``figures.po`` like every interactive figure's words (``booktools/figures.py``), and a
Chinese notebook passes the same catalog to :func:`.live.use_words`.
"""

from __future__ import annotations

import html
import math
from typing import Any

import torch

from . import image_words, live
from .static import PageWords

# key -> the English words; {name} is filled in by the page (and by render())
WORDS: dict[str, str] = {
    "loading": "Loading the model into this page\u2026",
    "no_engine": "The model could not be run in this browser ({detail}).",
    "title_reversal": "Your own input: the reversal model, computed in this page",
    "title_addition": "Your own input: the adder, computed in this page",
    "input_reversal": "Symbols to reverse",
    "input_addition": "Addition problem",
    "hint_reversal": "Type {n} symbols from a to j (with or without spaces) and "
    "press Enter: the model was trained on sequences of exactly {n}.",
    "hint_addition": "Type two numbers of up to {n} digits, a plus sign and an "
    "equals sign, as in 347+85=, and press Enter.",
    "run": "Run",
    "answer": "The answer, token by token (greedy)",
    "step": "decoding step",
    "reads": "decoder reads",
    "writes": "writes",
    "probability": "probability",
    "verdict_right": "Right: the reversal is {want}.",
    "verdict_wrong": "Wrong: the reversal is {want}.",
    "model_form": "What the model reads and writes: each number zero-padded and "
    "units first; the answer digits follow the equals sign.",
    "probs_title": "The probability of each candidate token at each step",
    "digit_j": "digit {j}",
    "sum_right": "(right)",
    "sum_wrong": "(wrong: the sum is {sum})",
    "sampling_title": "Sampled answers (chapter 15): softmax(logits / temperature)",
    "temperature": "Temperature",
    "sample": "Sample 10 answers",
    "sampled": "10 answers sampled at temperature {t}:",
    "maps_title": "Attention maps of this input, every layer and head",
    "maps_hint": "Rows are queries, columns keys; point at a cell to read its weight, "
    "click a map to follow that head and query below.",
    "attention": "Attention",
    "kind_cross": "cross-attention",
    "kind_encoder": "encoder self-attention",
    "kind_decoder": "decoder self-attention",
    "kind_self": "causal self-attention",
    "layer_head": "layer {l}, head {h}",
    "chain_title": "The formula chain of one head and one query, with this "
    "input's numbers",
    "chain_for": "Layer {l}, head {h}, query {q}; d_k = {dk}.",
    "layer": "Layer",
    "head": "Head",
    "query": "query",
    "key": "key",
    "mask": "mask",
    "masked": "masked",
    "softmax": "softmax weight",
    "weighted_sum": "The head's output for this query: the values weighted by the "
    "softmax weights, before the output projection.",
    "own_title": "Run your own model",
    "own_hint": "Drop a .safetensors file exported with tl.export_model here, or "
    "choose one: it is read in this page and sent nowhere.",
    "own_back": "Back to the book's model",
    "own_running": "Running your model from {file}: {layers} layers, {heads} heads, "
    "d_model = {d}.",
    "err_empty": "Type an input first.",
    "err_char": "\u201c{c}\u201d is not in the model's vocabulary; it knows only "
    "{vocab}.",
    "err_length_exact": "The model was trained on sequences of exactly {n} symbols; "
    "this one has {m}.",
    "err_length_max": "This model has positions for at most {n} symbols; this input "
    "has {m}.",
    "err_no_equals": "The problem needs an equals sign at the end, as in {example}.",
    "err_after_equals": "Nothing may follow the equals sign: the model writes the "
    "answer. Type the problem as in {example}.",
    "err_no_plus": "The problem needs one plus sign between two numbers, as in "
    "{example}.",
    "err_digits": "The model was trained on numbers of at most {n} digits; {num} has "
    "{m}.",
    "file_not-safetensors": "This is not a .safetensors file.",
    "file_no-config": "The file carries no model configuration: export the model "
    "with tl.export_model.",
    "file_bad-config": "The file's configuration does not fit this model: {detail}",
    "file_missing-tensor": "A tensor the model needs is missing from the file: "
    "{detail}",
    "file_unexpected-tensor": "The file has a tensor this model does not have: "
    "{detail}",
    "file_bad-shape": "A tensor of the file has the wrong shape: {detail}",
    "file_not-adder": "This panel runs adders: a GPT whose vocabulary is the digits, "
    "+ and =, with 3n + 3 positions.",
    "file_other": "The file could not be read: {detail}",
}

# what each chapter's panel shows first
EXAMPLES = {"reversal": "c a h j d a e b", "addition": "347+85="}


def panel_html(
    name: str,
    *,
    length: int | None = None,
    example: str | None = None,
    words: PageWords | None = None,
) -> str:
    """The static site's panel for the model ``name`` ("reversal" or "addition"): the
    markup that ``tl-live-panels.js`` fills in, every word of :data:`WORDS` in it
    (looked up in ``words``, English when None), and the script that loads the panels
    from the site's ``_static`` (the page's ``data-content_root``, in every edition)."""
    if name not in EXAMPLES:
        raise ValueError(f"no live panel for {name!r}: choose one of {list(EXAMPLES)}")
    words = words if words is not None else PageWords()
    example = EXAMPLES[name] if example is None else example
    attrs = f' data-model="{name}" data-example="{html.escape(example)}"'
    if length is not None:
        attrs += f' data-length="{int(length)}"'
    spans = "".join(
        f'<span class="tl-live-word" data-key="{key}">{words(html.escape(text))}</span>'
        for key, text in WORDS.items()
        if key != "loading"
    )
    loading = words(html.escape(WORDS["loading"]))
    return (
        f'<div class="tl-live-panel"{attrs}>'
        f'<div class="tl-live-words" hidden="">{spans}</div>'
        '<div class="tl-live-ui" aria-live="polite"><span class="tl-live-word"'
        f' data-key="loading">{loading}</span></div></div>'
        f'<script type="module">{_LOADER}</script>'
    )


# the panels' script, from the site's _static directory, wherever the page sits
_LOADER = (
    'const root = document.documentElement.dataset.content_root || "../";'
    ' import(new URL(root + "_static/tl-live-panels.js", document.baseURI).href);'
)


def word(key: str, **fill: Any) -> str:
    """The panel's word ``key`` in the notebook's language (:func:`.live.use_words`),
    with ``{name}`` filled in."""
    text = live._word(WORDS[key])
    for name, value in fill.items():
        text = text.replace("{" + name + "}", str(value))
    return text


class InputRefused(ValueError):
    """The reader's input is not one the model was trained on; ``key`` names the
    message in :data:`WORDS` and ``fill`` its blanks."""

    def __init__(self, key: str, **fill: Any) -> None:
        super().__init__(word(key, **fill))
        self.key, self.fill = key, fill


# --------------------------------------------------------------------------------------
# The reader's text -> the model's tokens (as tl-live-panels.js does it)
# --------------------------------------------------------------------------------------


def parse_reversal(text: str, vocab: list[str], length: int | None) -> list[int]:
    """ "c a h" or "cah" -> symbol ids; ``length``: the one length the model knows."""
    symbols = {t: i for i, t in enumerate(vocab) if not t.startswith("<")}
    text = text.strip()
    parts = text.split() if any(c.isspace() for c in text) else list(text)
    if not parts:
        raise InputRefused("err_empty")
    ids = []
    for p in parts:
        if p not in symbols and p.lower() not in symbols:
            raise InputRefused("err_char", c=p, vocab=" ".join(symbols))
        ids.append(symbols.get(p, symbols.get(p.lower())))
    if length and len(ids) != length:
        raise InputRefused("err_length_exact", n=length, m=len(ids))
    return ids


def parse_addition(text: str, n_digits: int) -> tuple[str, str, list[int]]:
    """ "347+85=" -> (a, b, the prompt's tokens: each operand zero-padded to
    ``n_digits``, units first, as :func:`transformer_lib.demos.addition.encode`)."""
    s, example = "".join(text.split()), "347+85="
    if not s:
        raise InputRefused("err_empty")
    for c in s:
        if c not in "0123456789+=":
            raise InputRefused("err_char", c=c, vocab="0 1 2 3 4 5 6 7 8 9 + =")
    if "=" not in s:
        raise InputRefused("err_no_equals", example=example)
    if s.index("=") != len(s) - 1:
        raise InputRefused("err_after_equals", example=example)
    operands = s[:-1].split("+")
    if len(operands) != 2 or not all(operands):
        raise InputRefused("err_no_plus", example=example)
    for num in operands:
        if len(num) > n_digits:
            raise InputRefused("err_digits", n=n_digits, num=num, m=len(num))
    a, b = operands

    def units_first(num: str) -> list[int]:
        return [int(d) for d in reversed(num.zfill(n_digits))]

    return a, b, units_first(a) + [10] + units_first(b) + [11]


# --------------------------------------------------------------------------------------
# Every attention of one forward pass, with its intermediates (the page's Trace)
# --------------------------------------------------------------------------------------


def attention_trace(model: torch.nn.Module, *inputs: torch.Tensor) -> tuple:
    """Run ``model(*inputs)`` (batch 1) and keep, for every MultiHeadAttention in the
    order they ran, q, k, v, the scores q·k, the scale, the mask, the weights and the
    per-head output, as the page's ``trace`` gives them (tl-live.js). Returns (logits,
    [dict, ...])."""
    from ..attention import scaled_dot_product_attention
    from ..heads import MultiHeadAttention, repeat_kv

    seen: list[dict] = []
    patched = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]

    def keep(module, attend):
        def attend_and_keep(q, k, v, mask=None, need_weights=True):
            n_rep = module.n_heads // module.n_kv_heads
            kr, vr = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (1, h, T_k, d_k)
            full = mask if mask is not None else torch.ones((), dtype=torch.bool)
            full = full.expand(1, 1, q.size(2), k.size(2))[0, 0]  # (T_q, T_k)
            out, weights = scaled_dot_product_attention(q, kr, vr, full)
            seen.append(
                {
                    "q": q[0],  # (h, T_q, d_k)
                    "k": kr[0],
                    "v": vr[0],
                    "scores": (q @ kr.transpose(-2, -1))[0],  # (h, T_q, T_k)
                    "scale": 1 / math.sqrt(q.size(-1)),
                    "mask": full,
                    "weights": weights[0],
                    "out": out[0],  # (h, T_q, d_k)
                }
            )
            return attend(q, k, v, mask, need_weights)

        return attend_and_keep

    try:
        for m in patched:
            m.attend = keep(m, m.attend)
        with torch.no_grad():
            logits = model(*inputs)
    finally:
        for m in patched:
            del m.attend  # the class's method again
    if isinstance(logits, tuple):
        logits = logits[0]
    return logits[0], seen


# --------------------------------------------------------------------------------------
# The panel: the site's markup, and the live widget on a kernel
# --------------------------------------------------------------------------------------

MINUS_INF, TICK, CROSS = "\u2212\u221e", "\u2713", "\u2717"
_VIRIDIS = [(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)]


def _colour(x: float) -> str:
    """viridis-like colour of a weight in [0, 1]."""
    pos = min(max(x, 0.0), 1.0) * (len(_VIRIDIS) - 1)
    i = min(int(pos), len(_VIRIDIS) - 2)
    f = pos - i
    r, g, b = (
        round(a + f * (c - a))
        for a, c in zip(_VIRIDIS[i], _VIRIDIS[i + 1], strict=True)
    )
    return f"rgb({r},{g},{b})"


def _fmt(x: float) -> str:
    return f"{x:.3f}".replace("-", "\u2212")


def _subscript(labels: list[str]) -> list[str]:
    """Tokens with their positions as subscripts, as the chapters' figures have
    them."""
    sub = str.maketrans(
        "0123456789", "\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089"
    )
    return [f"{t}{str(i).translate(sub)}" for i, t in enumerate(labels)]


class LivePanel:
    """The reader's own input through a trained model: ``name`` "reversal" (a
    :class:`~transformer_lib.Transformer`, chapter 11) or "addition" (a
    :class:`~transformer_lib.GPT` adder, chapter 14). ``length``: the one source length
    the reversal model was trained on; ``n_digits``: the adder's operand digits.

    On the site the page runs the model (``tl-live.js``); in Jupyter the same controls
    run this PyTorch model (:meth:`widget`), so both show the same numbers.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        name: str,
        *,
        length: int | None = None,
        n_digits: int | None = None,
        example: str | None = None,
    ) -> None:
        if name not in EXAMPLES:
            raise ValueError(
                f"no live panel for {name!r}: choose one of {list(EXAMPLES)}"
            )
        self.model, self.name, self.length = model.eval(), name, length
        self.example = EXAMPLES[name] if example is None else example
        cfg = model.cfg
        if name == "addition":
            self.n_digits = n_digits or (cfg.max_len - 3) // 3
            self.vocab = [str(d) for d in range(10)] + ["+", "="]
        else:
            symbols = [chr(ord("a") + i) for i in range(cfg.vocab_size - 2)]
            self.vocab = ["<pad>", "<bos>", *symbols]
        self._widget = None

    # -- the computation, as the page does it
    def run(self, text: str, temperature: float = 1.0, seed: int = 0) -> dict:
        """Greedy answer, per-step probabilities, the attention of every layer and
        head (:func:`attention_trace`) and, for the adder, 10 sampled answers. Raises
        :class:`InputRefused` for an input the model was not trained on."""
        if self.name == "reversal":
            src = parse_reversal(text, self.vocab, self.length)
            tgt = [self.model.cfg.bos_id]
            steps = []
            with torch.no_grad():
                for _ in src:
                    logits = self.model(torch.tensor([src]), torch.tensor([tgt]))[0, -1]
                    p = torch.softmax(logits, -1)
                    steps.append(p)
                    tgt.append(int(p.argmax()))
            answer = tgt[1:]
            tgt_in = tgt[: len(src)]
            _, attns = attention_trace(
                self.model, torch.tensor([src]), torch.tensor([tgt_in])
            )
            L = self.model.cfg.n_layers
            src_l = _subscript([self.vocab[i] for i in src])
            tgt_l = _subscript([self.vocab[i] for i in tgt_in])
            dec = attns[L:]
            kinds = {
                "cross": (word("kind_cross"), dec[1::2], tgt_l, src_l),
                "encoder": (word("kind_encoder"), attns[:L], src_l, src_l),
                "decoder": (word("kind_decoder"), dec[0::2], tgt_l, tgt_l),
            }
            right = answer == src[::-1]
            return {
                "answer": answer,
                "steps": steps,
                "kinds": kinds,
                "right": right,
                "want": src[::-1],
                "tokens": tgt,
            }
        a, b, tokens = parse_addition(text, self.n_digits)
        steps = []
        with torch.no_grad():
            for _ in range(self.n_digits + 1):
                p = torch.softmax(self.model(torch.tensor([tokens]))[0, -1], -1)
                steps.append(p)
                tokens = tokens + [int(p.argmax())]
            gen = torch.Generator().manual_seed(seed)
            prompt = torch.tensor([tokens[: 2 * self.n_digits + 2]] * 10)
            sampled = self.model.generate(
                prompt,
                self.n_digits + 1,
                do_sample=True,
                temperature=temperature,
                generator=gen,
            )
        _, attns = attention_trace(self.model, torch.tensor([tokens]))
        labels = _subscript([self.vocab[i] for i in tokens])
        kinds = {"self": (word("kind_self"), attns, labels, labels)}
        return {
            "a": a,
            "b": b,
            "answer": tokens[-self.n_digits - 1 :],
            "steps": steps,
            "kinds": kinds,
            "tokens": tokens,
            "sampled": [self._number(row.tolist()) for row in sampled],
        }

    def _number(self, digits: list[int]) -> str:
        """Answer tokens, units first -> the number as written."""
        if all(d < 10 for d in digits):
            return str(int("".join(str(d) for d in reversed(digits))))
        return "".join(self.vocab[d] for d in reversed(digits))

    # -- the same views as the page, as HTML
    def render(
        self,
        text: str,
        kind: str | None = None,
        layer: int = -1,
        head: int = 0,
        query: int | None = None,
        temperature: float = 1.0,
    ) -> str:
        """The panel's output for ``text``, as HTML: what the page shows for it."""
        try:
            r = self.run(text, temperature)
        except InputRefused as err:
            return (
                f'<p style="color:#a40000;font-weight:600">{html.escape(str(err))}</p>'
            )
        e, parts = html.escape, []
        tok = " ".join(
            f"<code style='border:1px solid #bbb'>{e(self.vocab[i])}</code>"
            for i in r["answer"]
        )
        parts.append(f"<h4>{e(word('answer'))}</h4><div>{tok}</div>")
        head_row = "".join(f"<th>{e(v)}</th>" for v in self.vocab)
        rows = []
        for j, p in enumerate(r["steps"]):
            best = int(p.argmax())
            cells = "".join(
                f'<td style="background:{_colour(float(x))}40;'
                f'{"font-weight:700;outline:2px solid #2a7" if v == best else ""}">'
                f"{_fmt(float(x))}</td>"
                for v, x in enumerate(p)
            )
            step = word("digit_j", j=j) if self.name == "addition" else str(j)
            rows.append(f"<tr><th>{e(step)}</th>{cells}</tr>")
        title = "probs_title"
        parts.append(
            f"<h4>{e(word(title))}</h4><table><tr><th>{e(word('step'))}</th>"
            f"{head_row}</tr>{''.join(rows)}</table>"
        )
        if self.name == "addition":
            total = str(int(r["a"]) + int(r["b"]))
            said = self._number(r["answer"])
            verdict = (
                word("sum_right") if said == total else word("sum_wrong", sum=total)
            )
            parts.append(
                f"<p><b>{e(r['a'])} + {e(r['b'])} = {e(said)}</b> {e(verdict)}</p>"
            )
            parts.append(
                f"<p>{e(word('sampled', t=f'{temperature:.1f}'))} "
                f"{e(', '.join(r['sampled']))}</p>"
            )
        else:
            want = " ".join(self.vocab[i] for i in r["want"])
            key = "verdict_right" if r["right"] else "verdict_wrong"
            parts.append(f"<p>{e(word(key, want=want))}</p>")
        kind = kind if kind in r["kinds"] else next(iter(r["kinds"]))
        name, per_layer, rows_l, cols_l = r["kinds"][kind]
        parts.append(f"<h4>{e(word('maps_title'))}: {e(name)}</h4>")
        maps = []
        for li, a in enumerate(per_layer):
            for h in range(a["weights"].size(0)):
                maps.append(
                    self._heatmap(
                        a, h, rows_l, cols_l, word("layer_head", l=li + 1, h=h + 1)
                    )
                )
        parts.append(
            '<div style="display:flex;flex-wrap:wrap;gap:8px">'
            + "".join(maps)
            + "</div>"
        )
        a = per_layer[layer]
        layer_no = layer % len(per_layer) + 1
        if query is None:  # as the page: the adder's "=", the reversal's first query
            query = 2 * self.n_digits + 1 if self.name == "addition" else 0
        query = min(query, len(rows_l) - 1)
        parts.append(f"<h4>{e(word('chain_title'))}</h4>")
        parts.append(self._chain(a, head, query, rows_l, cols_l, layer_no))
        return "".join(parts)

    @staticmethod
    def _heatmap(
        a: dict, h: int, rows: list[str], cols: list[str], caption: str
    ) -> str:
        w, mask = a["weights"][h], a["mask"]
        top = float(w.max()) or 1.0
        body = []
        for i, row in enumerate(w):
            cells = []
            for j, x in enumerate(row):
                ok = bool(mask[i, j])
                value = _fmt(float(x)) if ok else word("masked")
                tip = (
                    f"{word('query')} {rows[i]} \u2192 {word('key')} {cols[j]}: {value}"
                )
                bg = _colour(float(x) / top) if ok else "#e4e4e4"
                cells.append(
                    f'<td title="{html.escape(tip)}" style="width:10px;height:10px;'
                    f'padding:0;background:{bg}"></td>'
                )
            body.append("<tr>" + "".join(cells) + "</tr>")
        return (
            '<figure style="margin:0;text-align:center;font-size:85%">'
            '<table style="border-collapse:collapse">' + "".join(body) + "</table>"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )

    @staticmethod
    def _chain(
        a: dict, h: int, i: int, rows: list[str], cols: list[str], layer: int
    ) -> str:
        e = html.escape
        q, scores, weights = a["q"][h, i], a["scores"][h, i], a["weights"][h, i]
        mask, out, scale = a["mask"][i], a["out"][h, i], a["scale"]
        vec = lambda name, v: (  # noqa: E731
            f"<div style='font:85% monospace;overflow-x:auto;white-space:nowrap'>"
            f"{name} = [{', '.join(_fmt(float(x)) for x in v)}]</div>"
        )
        head = (
            f"<tr><th>{e(word('key'))}</th><th>q\u00b7k\u2c7c</th>"
            f"<th>\u00d7 1/\u221ad\u2096 = \u00d7 {scale:.4f}</th>"
            f"<th>{e(word('mask'))}</th><th>{e(word('softmax'))}</th></tr>"
        )
        body = "".join(
            f"<tr><th>{e(cols[j])}</th><td>{_fmt(float(s))}</td>"
            f"<td>{_fmt(float(s) * scale) if bool(mask[j]) else MINUS_INF}</td>"
            f"<td>{TICK if bool(mask[j]) else CROSS + ' ' + e(word('masked'))}</td>"
            f"<td>{_fmt(float(weights[j]))}</td></tr>"
            for j, s in enumerate(scores)
        )
        return (
            f"<p>{e(word('chain_for', l=layer, h=h + 1, q=rows[i], dk=q.numel()))}</p>"
            + vec("q", q)
            + f"<table>{head}{body}</table><p>{e(word('weighted_sum'))}</p>"
            + vec("o", out)
        )

    def widget(self):
        """The form on a kernel: an input box, the attention kind, layer, head, query
        and (for the adder) the temperature, over :meth:`render`'s HTML."""
        if self._widget is not None:
            return self._widget
        import ipywidgets as W

        style = {"description_width": "initial"}
        text = W.Text(
            value=self.example,
            description=word(f"input_{self.name}"),
            style=style,
            continuous_update=False,  # runs on Enter or when the box loses focus
        )
        run = W.Button(description=word("run"))
        L, H = self.model.cfg.n_layers, self.model.cfg.n_heads
        kinds = (
            [(word("kind_self"), "self")]
            if self.name == "addition"
            else [(word(f"kind_{k}"), k) for k in ("cross", "encoder", "decoder")]
        )
        kind = W.Dropdown(options=kinds, description=word("attention"), style=style)
        layer = W.Dropdown(
            options=[(str(i + 1), i) for i in range(L)],
            value=L - 1,
            description=word("layer"),
            style=style,
        )
        head = W.Dropdown(
            options=[(str(h + 1), h) for h in range(H)],
            description=word("head"),
            style=style,
        )
        # the adder's first query to follow: "=", which predicts the units digit
        first = 2 * self.n_digits + 1 if self.name == "addition" else 0
        query = W.BoundedIntText(
            value=first,
            min=0,
            max=self.model.cfg.max_len - 1,
            description=word("query"),
            style=style,
        )
        temp = W.FloatSlider(
            value=1.0,
            min=0.1,
            max=2.0,
            step=0.1,
            description=word("temperature"),
            style=style,
        )
        out = W.HTML()

        def redraw(_change=None):
            out.value = self.render(
                text.value, kind.value, layer.value, head.value, query.value, temp.value
            )

        run.on_click(redraw)
        for c in (text, kind, layer, head, query, temp):
            c.observe(redraw, names="value")
        redraw()
        controls = [kind, layer, head, query] + (
            [temp] if self.name == "addition" else []
        )
        row = W.HBox(controls, layout=W.Layout(flex_flow="row wrap"))
        title = W.HTML(f"<b>{html.escape(word('title_' + self.name))}</b>")
        self._widget = W.VBox([title, W.HBox([text, run]), row, out])
        return self._widget

    def to_html(self, words: PageWords | None = None) -> str:
        """The site's panel, its words in ``words``' language (the notebook's when
        None)."""
        words = words if words is not None else live.page_words()
        return panel_html(
            self.name, length=self.length, example=self.example, words=words
        )

    def _repr_mimebundle_(self, include=None, exclude=None):
        words = live.page_words()
        bundle = {
            "text/plain": f"Live panel: the {self.name} model on your own input",
            "text/html": self.to_html(words),
        }
        try:
            view = self.widget()._repr_mimebundle_()
        except Exception:  # no ipywidgets or no frontend: the site's panel is enough
            view = {}
        key = "application/vnd.jupyter.widget-view+json"
        if view and key in view:
            bundle[key] = view[key]
        if not image_words.editions():
            return bundle
        # while the book is built: the panel in each edition's words, as an Explorer
        twins = {
            lang: self.to_html(PageWords(image_words.edition_words(lang)[1]))
            for lang in image_words.editions()
        }
        page = [w for w in words.seen if w]
        meta = {"tl_editions": twins, "tl_words": [], "tl_page_words": page}
        return bundle, {"text/html": meta}
