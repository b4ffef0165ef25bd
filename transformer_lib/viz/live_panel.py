"""The reader's own input, run by the book's trained models (chapters 11 and 14).

``LivePanel(model, "reversal" | "addition")`` is one cell's output with one front end,
``tl-live-panels.js`` (package data, served on the site as
``book/_static/tl-live-panels.js``), in two hosts:

* on the static site, a ``<div class="tl-live-panel">`` (:func:`panel_html`) that the
  script fills in: the model runs in the page (``tl-live.js``, ``window.tlLive``);
* in Jupyter, an `anywidget <https://anywidget.dev>`_ whose ES module is that same
  script: it reads the input, draws the answer, maps and chain, and asks the kernel for
  the numbers, which this PyTorch model answers (:meth:`LivePanel.answer`).

The panel's words (:data:`WORDS`) are written into the markup as
``<span class="tl-live-word" data-key=...>``; the Chinese editions translate them from
``figures.po`` like every interactive figure's words (``booktools/figures.py``), and a
Chinese notebook passes the same catalog to :func:`.live.use_words`.
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

import anywidget
import torch
import traitlets

from ..layers import DecoderLayer, EncoderLayer, GPTBlock
from . import image_words, live
from .static import PageWords

# key -> the panel's English words (package data, tl-live-words.json); {name} is
# filled in by the script
WORDS: dict[str, str] = json.loads(
    resources.files(__package__).joinpath("tl-live-words.json").read_text("utf-8")
)

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


def _package_file(name: str) -> Path:
    return Path(str(resources.files(__package__).joinpath(name)))


# --------------------------------------------------------------------------------------
# Every attention of one forward pass, as the page's Trace (tl-live.js) gives it
# --------------------------------------------------------------------------------------


def attention_trace(model: torch.nn.Module, *inputs: torch.Tensor) -> tuple:
    """Run ``model(*inputs)`` (batch 1) with ``trace=`` given to every layer (a forward
    pre-hook passes it), and return (logits (T, V), [the trace dict of each layer, in
    the order they ran]); each layer's dict holds its attentions' "self_attn" (and
    "cross_attn"), filled by :meth:`~transformer_lib.MultiHeadAttention.attend`."""
    traces: list[dict] = []

    def give_trace(module, args, kwargs):
        kwargs["trace"] = {}
        traces.append(kwargs["trace"])
        return args, kwargs

    layers = (EncoderLayer, DecoderLayer, GPTBlock)
    hooks = [
        m.register_forward_pre_hook(give_trace, with_kwargs=True)
        for m in model.modules()
        if isinstance(m, layers)
    ]
    try:
        with torch.no_grad():
            logits = model(*inputs)
    finally:
        for h in hooks:
            h.remove()
    return logits[0], traces


def _attn(a: dict) -> dict:
    """One attention's trace (batch 1) -> the page's Attn, as nested lists."""
    q, k = a["q"][0], a["k"][0]  # (h, T_q, d_k), (h, T_k, d_k)
    T_q, T_k = q.size(1), k.size(1)
    mask = a["mask"]
    full = torch.ones(T_q, T_k, dtype=torch.bool) if mask is None else mask
    return {
        "q": q.tolist(),
        "k": k.tolist(),
        "v": a["v"][0].tolist(),
        "scores": (q @ k.transpose(-2, -1)).tolist(),  # (h, T_q, T_k), before scaling
        "scale": 1 / math.sqrt(q.size(-1)),
        "mask": full.expand(1, 1, T_q, T_k)[0, 0].tolist(),
        "weights": a["weights"][0].tolist(),
        "out": a["heads"][0].tolist(),  # (h, T_q, d_k), before W_O
    }


def page_trace(model: torch.nn.Module, *ids: list[int]) -> dict:
    """The page's Trace of ``model`` on token ids (one sequence; src and tgt for the
    encoder-decoder): {"logits", "layers"} or {"logits", "encoder", "decoder"}."""
    logits, traces = attention_trace(model, *(torch.tensor([i]) for i in ids))
    out: dict[str, Any] = {"logits": logits.tolist()}
    if len(ids) == 1:
        out["layers"] = [{"self": _attn(t["self_attn"])} for t in traces]
        return out
    L = model.cfg.n_layers
    out["encoder"] = [{"self": _attn(t["self_attn"])} for t in traces[:L]]
    out["decoder"] = [
        {"self": _attn(t["self_attn"]), "cross": _attn(t["cross_attn"])}
        for t in traces[L:]
    ]
    return out


# --------------------------------------------------------------------------------------
# The panel: the site's markup, and the widget on a kernel
# --------------------------------------------------------------------------------------


class LivePanel(anywidget.AnyWidget):
    """The reader's own input through a trained model: ``name`` "reversal" (a
    :class:`~transformer_lib.Transformer`, chapter 11) or "addition" (a
    :class:`~transformer_lib.GPT` adder, chapter 14). ``length``: the one source length
    the reversal model was trained on (None: any up to max_len); ``vocab``: the token
    strings (index = id), as :func:`~transformer_lib.export_model` writes them.

    On the site the page runs the model (``tl-live.js``); in Jupyter the same script
    runs on this PyTorch model's answers, so both show the same numbers.
    """

    _esm = _package_file("tl-live-panels.js")
    _css = _package_file("tl-site.css")  # the site's stylesheet, a link to it
    name = traitlets.Unicode().tag(sync=True)
    words = traitlets.Dict().tag(sync=True)
    length = traitlets.Int(0).tag(sync=True)
    example = traitlets.Unicode().tag(sync=True)
    meta = traitlets.Dict().tag(sync=True)  # {kind, config, vocab}

    def __init__(
        self,
        model: torch.nn.Module,
        name: str,
        *,
        length: int | None = None,
        vocab: list[str] | None = None,
        example: str | None = None,
    ) -> None:
        if name not in EXAMPLES:
            raise ValueError(
                f"no live panel for {name!r}: choose one of {list(EXAMPLES)}"
            )
        kind = "gpt" if name == "addition" else "transformer"
        if vocab is not None and len(vocab) != model.cfg.vocab_size:
            raise ValueError(
                f"vocab has {len(vocab)} tokens, the model's vocab_size is "
                f"{model.cfg.vocab_size}"
            )
        words = {k: live._word(v) for k, v in WORDS.items()}
        super().__init__(
            name=name,
            words=words,
            length=length or 0,
            example=EXAMPLES[name] if example is None else example,
            meta={
                "kind": kind,
                "config": dataclasses.asdict(model.cfg),
                "vocab": vocab,
            },
        )
        self.model = model.eval()
        self.on_msg(self._answer)

    def answer(self, op: str, args: list) -> Any:
        """What the page's model would return: op "logits" ((T, V) as lists) or
        "trace" (:func:`page_trace`), for the token ids ``args``."""
        if op == "logits":
            with torch.no_grad():
                return self.model(*(torch.tensor([a]) for a in args))[0].tolist()
        if op == "trace":
            return page_trace(self.model, *args)
        raise ValueError(f"unknown request {op!r}: 'logits' or 'trace'")

    def _answer(self, _widget, content: dict, _buffers) -> None:
        try:
            reply = {"id": content["id"], "result": self.answer(**_request(content))}
        except Exception as err:  # the page shows it, and the kernel's log too
            reply = {"id": content.get("id"), "error": f"{type(err).__name__}: {err}"}
        self.send(reply)

    def to_html(self, words: PageWords | None = None) -> str:
        """The site's panel, its words in ``words``' language (the notebook's when
        None)."""
        words = words if words is not None else live.page_words()
        return panel_html(
            self.name, length=self.length or None, example=self.example, words=words
        )

    def _repr_mimebundle_(self, **kwargs):
        words = live.page_words()
        view = super()._repr_mimebundle_(**kwargs)
        bundle = dict(view[0]) if view else {}
        bundle["text/plain"] = f"Live panel: the {self.name} model on your own input"
        bundle["text/html"] = self.to_html(words)
        if not image_words.editions():
            return bundle
        # while the book is built: the panel in each edition's words, as an Explorer
        twins = {
            lang: self.to_html(PageWords(image_words.edition_words(lang)[1]))
            for lang in image_words.editions()
        }
        data, meta = image_words.edition_bundle(
            "text/html", twins, [], [w for w in words.seen if w]
        )
        return {**bundle, **data}, meta


def _request(content: dict) -> dict:
    """A message from the page, {id, op, args}, checked: (op, args)."""
    op, args = content.get("op"), content.get("args")
    if not isinstance(args, list) or not all(isinstance(a, list) for a in args):
        raise ValueError(f"args must be lists of token ids, got {args!r}")
    return {"op": op, "args": args}
