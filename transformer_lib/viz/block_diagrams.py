"""Block diagrams of one encoder layer and one decoder layer, with their named tensors.

``draw_encoder_layer(ax)`` and ``draw_decoder_layer(ax)`` draw a layer bottom to
top, the way chapters 9 and 10 compute it: each sublayer as a box, each Add & Norm
as a box with its residual path, and on every arrow the name of the tensor that
flows there, as the first source article names them (``X_pos`` → ``Z_attn`` →
``Z_add_norm_1`` → …). With ``norm_first=True`` they draw the Pre-LN wiring of the
same layer instead. Both return the names they wrote, in order, so that a test can
hold the picture to the tensors the layers compute.

The boxes, arrows and colours are those of :mod:`transformer_lib.viz.diagrams`,
which draws the whole model.
"""

from __future__ import annotations

from matplotlib.patches import Circle, FancyBboxPatch

from .diagrams import COLORS, EDGE, _box, _path

__all__ = [
    "DECODER_FIGSIZE",
    "DECODER_TENSORS",
    "ENCODER_FIGSIZE",
    "ENCODER_TENSORS",
    "draw_decoder_layer",
    "draw_encoder_layer",
    "tensor_label",
]

# the names on the arrows, bottom to top (Post-LN, as in the source article)
ENCODER_TENSORS = ["X_pos", "Z_attn", "Z_add_norm_1", "Z_ffn", "Z_encoder_output"]
DECODER_TENSORS = [
    "Y_pos",
    "Z_masked_attn",
    "Z_add_norm_2",
    "Z_cross_attn",
    "Z_add_norm_3",
    "Z_ffn_decoder",
    "Z_decoder_output",
]
# figure sizes (inches) at which the labels are legible and clear of each other
ENCODER_FIGSIZE = (4.6, 5.6)
DECODER_FIGSIZE = (5.6, 7.4)
RESIDUAL = "#777777"
NAME_COLOR = "#1f4e79"

_X, _W = 44.0, 52.0  # the centre line of the stream, the width of a box
_BOX_H, _NORM_H, _GAP = 10.0, 6.0, 7.0
_RESIDUAL_X = _X - _W / 2 - 5.0  # where the residual path runs, left of the boxes
_FRAME = (_RESIDUAL_X - 4.0, 95.0)  # left and right edge of a layer's frame
_MEMORY_X = 122.0  # where the encoder's output comes in, right of the frame


def tensor_label(name: str) -> str:
    """'Z_add_norm_1' -> mathtext $Z_{\\mathrm{add\\_norm\\_1}}$."""
    if "_" not in name:
        return f"${name}$"
    base, sub = name.split("_", 1)
    sub = sub.replace("_", r"\_")
    return rf"${base}_{{\mathrm{{{sub}}}}}$"


def _name(ax, y, name, names):
    """The tensor ``name`` on the stream at height y, right of the arrow."""
    if not name:
        return
    names.append(name)
    ax.text(
        _X + 1.5,
        y,
        tensor_label(name),
        ha="left",
        va="center",
        fontsize=10,
        color=NAME_COLOR,
        zorder=4,
    )


def _plus(ax, y):
    ax.add_patch(Circle((_X, y), 2.0, facecolor="white", edgecolor=EDGE, zorder=2))
    ax.text(_X, y, "+", ha="center", va="center", fontsize=10, zorder=3)


def _residual(ax, y_from, y_to, x_to):
    points = [(_X, y_from), (_RESIDUAL_X, y_from), (_RESIDUAL_X, y_to), (x_to, y_to)]
    _path(ax, points, color=RESIDUAL, lw=1.0)


def _sublayer(ax, y, text, color, inner, side, norm_first, names):
    """One sublayer and its Add & Norm, from stream height y; returns the top."""
    if not norm_first:  # Post-LN: LN(x + Sublayer(x))
        box_y = y + _GAP + _BOX_H / 2
        norm_y = box_y + _BOX_H / 2 + _GAP + _NORM_H / 2
        _path(ax, [(_X, y), (_X, box_y - _BOX_H / 2)])
        _box(ax, _X, box_y, _W, _BOX_H, text, None, color, fontsize=9)
        _path(ax, [(_X, box_y + _BOX_H / 2), (_X, norm_y - _NORM_H / 2)])
        _name(ax, norm_y - _NORM_H / 2 - _GAP / 2, inner, names)
        _box(ax, _X, norm_y, _W, _NORM_H, "Add & Norm", None, COLORS["norm"], 9)
        _residual(ax, y + 2.0, norm_y, _X - _W / 2)
        top = norm_y + _NORM_H / 2
    else:  # Pre-LN: x + Sublayer(LN(x))
        norm_y = y + _GAP + _NORM_H / 2
        box_y = norm_y + _NORM_H / 2 + _GAP * 0.7 + _BOX_H / 2
        plus_y = box_y + _BOX_H / 2 + _GAP
        _path(ax, [(_X, y), (_X, norm_y - _NORM_H / 2)])
        _box(ax, _X, norm_y, _W, _NORM_H, "LayerNorm", None, COLORS["norm"], 9)
        _path(ax, [(_X, norm_y + _NORM_H / 2), (_X, box_y - _BOX_H / 2)])
        _box(ax, _X, box_y, _W, _BOX_H, text, None, color, fontsize=9)
        _path(ax, [(_X, box_y + _BOX_H / 2), (_X, plus_y - 2.0)])
        _plus(ax, plus_y)
        _residual(ax, y + 2.0, plus_y, _X - 2.0)
        top = plus_y + 2.0
    if side is not None:  # keys and values from the encoder, into the box's right side
        _path(ax, [(_MEMORY_X, box_y), (_X + _W / 2, box_y)])
        ax.text(
            (_FRAME[1] + _MEMORY_X) / 2,
            box_y + 1.2,
            side,
            ha="center",
            va="bottom",
            fontsize=8.5,
            color=NAME_COLOR,
            linespacing=1.2,
        )
    return top


def _layer(ax, sublayers, first, inputs, output, norm_first, title):
    """``sublayers``: (text, colour, inner name, outgoing name, side input) each."""
    names: list[str] = []
    ax.axis("off")
    ax.text(_X, 1.5, inputs, ha="center", va="center", fontsize=8.5)
    _path(ax, [(_X, 3.5), (_X, 11.0)], arrow=False)
    _name(ax, 7.0, first, names)
    y = bottom = 11.0
    for i, (text, color, inner, after, side) in enumerate(sublayers):
        top = _sublayer(ax, y, text, color, inner, side, norm_first, names)
        last = i == len(sublayers) - 1
        y = top + (_GAP + 4.0 if last else _GAP)
        _path(ax, [(_X, top), (_X, y)], arrow=last)
        _name(ax, top + _GAP / 2 + (2.0 if last else 0.0), after, names)
        if last:
            frame_top = top + 2.0
    ax.add_patch(
        FancyBboxPatch(
            (_FRAME[0], bottom - 1.0),
            _FRAME[1] - _FRAME[0],
            frame_top - bottom + 1.0,
            boxstyle="round,pad=0,rounding_size=2",
            facecolor=COLORS["frame"],
            edgecolor="#999999",
            lw=1.0,
            zorder=0,
        )
    )
    ax.text(
        _FRAME[1] - 2.0,
        bottom - 0.5,
        title,
        ha="right",
        va="bottom",
        fontsize=9,
        fontweight="bold",
        color="#333333",
    )
    ax.text(_X, y + 2.5, output, ha="center", va="center", fontsize=8.5)
    wide = any(side is not None for *_, side in sublayers)  # room for the memory
    ax.set_xlim(0, _MEMORY_X + 3.0 if wide else 100)
    ax.set_ylim(0, y + 5.0)
    ax.set_aspect("equal")
    return names


def draw_encoder_layer(ax, norm_first: bool = False) -> list[str]:
    """One encoder layer on ``ax`` (eq. x-pos ... enc-out); Pre-LN if ``norm_first``.

    Returns the tensor names written on the arrows, bottom to top.
    """
    if norm_first:  # eq. enc-pre-ln
        inner, stream = [None, None], ["Z_1", "Z_out"]
    else:
        inner, stream = ENCODER_TENSORS[1::2], ENCODER_TENSORS[2::2]
    boxes = [
        ("multi-head\nself-attention", COLORS["attn"]),
        ("feed-forward network", COLORS["ffn"]),
    ]
    sublayers = [
        (text, color, inner[i], stream[i], None)
        for i, (text, color) in enumerate(boxes)
    ]
    return _layer(
        ax,
        sublayers,
        "X_pos",
        "token embeddings + positional encoding",
        "to the next layer; after the last, a final LayerNorm"
        if norm_first
        else "to the next layer, or to the decoder",
        norm_first,
        "Pre-LN\nencoder layer" if norm_first else "encoder layer",
    )


def draw_decoder_layer(ax, norm_first: bool = False) -> list[str]:
    """One decoder layer on ``ax`` (eq. y-pos ... dec-out); Pre-LN if ``norm_first``.

    The keys and values of the cross-attention come in from the encoder, at the side.
    Returns the tensor names written on the arrows, bottom to top.
    """
    if norm_first:
        inner, stream = [None, None, None], ["Z_1", "Z_2", "Z_out"]
    else:
        inner, stream = DECODER_TENSORS[1::2], DECODER_TENSORS[2::2]
    memory = tensor_label("Z_encoder_output") + "\nkeys and values"
    boxes = [
        ("masked multi-head\nself-attention", COLORS["attn"], None),
        ("cross-attention\nQ from below", COLORS["attn"], memory),
        ("feed-forward network", COLORS["ffn"], None),
    ]
    sublayers = [
        (text, color, inner[i], stream[i], side)
        for i, (text, color, side) in enumerate(boxes)
    ]
    return _layer(
        ax,
        sublayers,
        "Y_pos",
        "target embeddings, shifted right, + positional encoding",
        "linear to the vocabulary, softmax: $P$",
        norm_first,
        "Pre-LN\ndecoder layer" if norm_first else "decoder layer",
    )
