"""Diagrams drawn from code: the encoder-decoder Transformer, with its chapters.

``draw_transformer(ax)`` draws the model of *Attention Is All You Need* bottom to top:
token embeddings plus positional encodings, a stack of N encoder layers and N decoder
layers with their sublayers and residual connections, the encoder's output (the memory)
feeding every decoder layer's cross-attention, and the final linear layer and softmax.
Each box names the chapter that derives it, from ``CHAPTERS``; pass another mapping when
chapters move.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

__all__ = ["CHAPTERS", "draw_transformer"]

# component -> where the book derives it (shown under the component's name)
CHAPTERS: dict[str, str] = {
    "embedding": "ch. 11",
    "positional": "ch. 8",
    "self_attn": "ch. 1–3, 5",
    "masked_attn": "ch. 4, 10",
    "cross_attn": "ch. 1, 10",
    "add_norm": "ch. 7",
    "ffn": "ch. 6",
    "encoder": "ch. 9",
    "decoder": "ch. 10",
    "output": "ch. 10–11",
    "kv_cache": "ch. 12",
}

COLORS = {  # face colours, light enough for black text
    "attn": "#fbd9b5",
    "norm": "#fff3b0",
    "ffn": "#c9e4f6",
    "embed": "#f6d4e1",
    "out": "#dcd3f0",
    "frame": "#f4f4f4",
}
EDGE, CHAPTER_COLOR = "#444444", "#8a3b12"


def _box(ax, x, y, w, h, text, chapter=None, color="white", fontsize=9):
    """A rounded box centred at (x, y): its name, and below it its chapter."""
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=1.2",
            facecolor=color,
            edgecolor=EDGE,
            lw=1.0,
            zorder=2,
        )
    )
    if chapter is None:
        ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, zorder=3)
        return
    ax.text(
        x, y + h * 0.17, text, ha="center", va="center", fontsize=fontsize, zorder=3
    )
    ax.text(
        x,
        y - h * 0.27,
        chapter,
        ha="center",
        va="center",
        fontsize=fontsize - 1.5,
        color=CHAPTER_COLOR,
        style="italic",
        zorder=3,
    )


def _path(ax, points: Sequence[tuple[float, float]], arrow=True, color=EDGE, lw=1.1):
    """A polyline through ``points``; an arrow head on the last segment."""
    for (x0, y0), (x1, y1) in zip(points[:-2], points[1:-1], strict=True):
        ax.plot([x0, x1], [y0, y1], color=color, lw=lw, solid_capstyle="butt", zorder=1)
    (x0, y0), (x1, y1) = points[-2], points[-1]
    ax.add_patch(
        FancyArrowPatch(
            (x0, y0),
            (x1, y1),
            arrowstyle="-|>" if arrow else "-",
            mutation_scale=10,
            color=color,
            lw=lw,
            shrinkA=0,
            shrinkB=0,
            zorder=1,
        )
    )


def _stack(ax, x, bottom, blocks, w, ch, residual_side):
    """Sublayers from ``bottom`` up, each with Add & Norm and its residual path.

    ``blocks`` is a list of (name, chapter, colour, height). Returns the y of the
    stack's top and the centre y of every sublayer box, in order.
    """
    gap, norm_h = 3.0, 3.6
    y, centres = bottom, []
    side = -1 if residual_side == "left" else 1
    for name, chapter, color, h in blocks:
        start = y  # the residual stream before this sublayer
        box_y = y + gap + h / 2
        norm_y = box_y + h / 2 + gap + norm_h / 2
        _path(ax, [(x, start), (x, box_y - h / 2)])
        _box(ax, x, box_y, w, h, name, chapter, color)
        _path(ax, [(x, box_y + h / 2), (x, norm_y - norm_h / 2)])
        _box(
            ax,
            x,
            norm_y,
            w,
            norm_h,
            f"Add & Norm  ·  {ch['add_norm']}",
            None,
            COLORS["norm"],
            fontsize=8.5,
        )
        # residual: around the sublayer, into the side of Add & Norm
        rx = x + side * (w / 2 + 2.2)
        _path(
            ax,
            [
                (x, start + 1.2),
                (rx, start + 1.2),
                (rx, norm_y),
                (x + side * w / 2, norm_y),
            ],
            color="#777777",
            lw=1.0,
        )
        centres.append(box_y)
        y = norm_y + norm_h / 2
    return y, centres


def draw_transformer(
    ax, chapters: Mapping[str, str] | None = None, n_label: str = "N"
) -> dict[str, float]:
    """The Transformer on ``ax``, bottom to top: every part with its chapter.

    Returns the y coordinates of a few landmarks (for tests and annotations).
    """
    ch = {**CHAPTERS, **(chapters or {})}
    ax.set_xlim(0, 100)
    ax.set_ylim(-1.5, 100)
    ax.axis("off")
    xe, xd, w = 28.0, 72.0, 30.0  # encoder and decoder columns, box width

    # inputs: token embedding, plus positional encoding (drawn between the columns)
    for x, tokens, side in [
        (xe, "source tokens  $x$", 1),
        (xd, "target tokens, shifted right  $y$", -1),
    ]:
        ax.text(x, 0.3, tokens, ha="center", va="center", fontsize=9)
        _path(ax, [(x, 1.8), (x, 3.8)])
        _box(ax, x, 7.0, w, 6.4, "token embedding", ch["embedding"], COLORS["embed"])
        _path(ax, [(x, 10.2), (x, 13.4)])
        ax.add_patch(
            FancyBboxPatch(
                (x - 1.6, 13.4),
                3.2,
                3.2,
                boxstyle="circle,pad=0",
                facecolor="white",
                edgecolor=EDGE,
                zorder=2,
            )
        )
        ax.text(x, 15.0, "+", ha="center", va="center", fontsize=11, zorder=3)
        px = x + side * 12.6
        _box(
            ax,
            px,
            15.0,
            18.0,
            6.4,
            "positional encoding",
            ch["positional"],
            COLORS["embed"],
            fontsize=7.5,
        )
        _path(ax, [(px - side * 9.0, 15.0), (x + side * 1.6, 15.0)])

    # one encoder layer and one decoder layer, each a stack of sublayers
    bottom = 20.0
    enc_top, (enc_attn_y, _) = _stack(
        ax,
        xe,
        bottom,
        [
            ("multi-head self-attention", ch["self_attn"], COLORS["attn"], 7.0),
            ("feed-forward network", ch["ffn"], COLORS["ffn"], 7.0),
        ],
        w,
        ch,
        residual_side="left",
    )
    dec_top, (dec_self_y, dec_cross_y, _) = _stack(
        ax,
        xd,
        bottom,
        [
            (
                "masked self-attention",
                f"{ch['masked_attn']}  ·  K, V cached: {ch['kv_cache']}",
                COLORS["attn"],
                7.0,
            ),
            (
                "cross-attention\nK, V from the memory $M$",
                ch["cross_attn"],
                COLORS["attn"],
                9.0,
            ),
            ("feed-forward network", ch["ffn"], COLORS["ffn"], 7.0),
        ],
        w,
        ch,
        residual_side="right",
    )
    _path(ax, [(xe, 16.6), (xe, bottom)], arrow=False)
    _path(ax, [(xd, 16.6), (xd, bottom)], arrow=False)

    # frames around the layers, each repeated N times
    pad, head = 4.5, 1.8
    frame_top = {}
    for x, top, kind, side in [
        (xe, enc_top, f"encoder\nlayer\n{ch['encoder']}", -1),
        (xd, dec_top, f"decoder\nlayer\n{ch['decoder']}", 1),
    ]:
        frame_top[x] = top + head
        ax.add_patch(
            FancyBboxPatch(
                (x - w / 2 - pad, bottom + 0.8),
                w + 2 * pad,
                top + head - bottom - 0.8,
                boxstyle="round,pad=0,rounding_size=2",
                facecolor=COLORS["frame"],
                edgecolor="#999999",
                lw=1.0,
                zorder=0,
            )
        )
        _path(ax, [(x, top), (x, top + head)], arrow=False)
        nx, align = x + side * (w / 2 + pad + 1.0), "right" if side < 0 else "left"
        mid_y = (bottom + top) / 2
        ax.text(
            nx,
            mid_y + 3.0,
            f"{n_label} ×",
            ha=align,
            va="center",
            fontsize=11,
            fontweight="bold",
        )
        ax.text(
            nx,
            mid_y - 3.5,
            kind,
            ha=align,
            va="center",
            fontsize=8,
            color="#333333",
            linespacing=1.3,
        )

    # the memory: the last encoder layer's output goes to every decoder layer
    mem_y = frame_top[xe] + 4.0
    mid = (xe + w / 2 + pad + xd - w / 2 - pad) / 2
    _path(
        ax,
        [
            (xe, frame_top[xe]),
            (xe, mem_y),
            (mid, mem_y),
            (mid, dec_cross_y),
            (xd - w / 2, dec_cross_y),
        ],
    )
    ax.text(
        xe,
        mem_y + 2.0,
        "memory $M$: the encoder's output",
        ha="center",
        va="center",
        fontsize=8.5,
    )

    # output: a linear layer to the vocabulary, and the softmax
    lin_y = frame_top[xd] + 5.0
    soft_y = lin_y + 7.4
    _path(ax, [(xd, frame_top[xd]), (xd, lin_y - 2.5)])
    _box(
        ax,
        xd,
        lin_y,
        w,
        5.0,
        "linear, to the vocabulary",
        None,
        COLORS["out"],
        fontsize=8.5,
    )
    _path(ax, [(xd, lin_y + 2.5), (xd, soft_y - 2.5)])
    _box(
        ax,
        xd,
        soft_y,
        w,
        5.0,
        f"softmax  ·  {ch['output']}",
        None,
        COLORS["out"],
        fontsize=8.5,
    )
    _path(ax, [(xd, soft_y + 2.5), (xd, soft_y + 5.0)])
    ax.text(
        xd,
        soft_y + 6.6,
        "probabilities of the next token",
        ha="center",
        va="center",
        fontsize=9,
    )
    return {
        "enc_top": enc_top,
        "dec_top": dec_top,
        "enc_attn": enc_attn_y,
        "dec_self_attn": dec_self_y,
        "dec_cross_attn": dec_cross_y,
        "softmax": soft_y,
    }
