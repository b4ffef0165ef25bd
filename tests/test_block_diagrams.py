"""Chapters 9 and 10's block diagrams name the tensors the layers compute, legibly."""

import itertools
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import transformer_lib as tl  # noqa: E402
from transformer_lib.viz import block_diagrams as bd  # noqa: E402
from transformer_lib.viz import ch09_encoder  # noqa: E402

BOOK = Path(__file__).resolve().parent.parent / "book"


def draw(fn, norm_first):
    encoder = fn is bd.draw_encoder_layer
    size = bd.ENCODER_FIGSIZE if encoder else bd.DECODER_FIGSIZE
    fig, ax = plt.subplots(figsize=size)
    names = fn(ax, norm_first=norm_first)
    fig.canvas.draw()
    return fig, ax, names


def test_tensor_label_is_mathtext():
    assert bd.tensor_label("Z_add_norm_1") == r"$Z_{\mathrm{add\_norm\_1}}$"
    assert bd.tensor_label("P") == "$P$"


def test_encoder_names_are_the_layers_named_tensors():
    _, _, names = draw(bd.draw_encoder_layer, False)
    assert names == bd.ENCODER_TENSORS == ch09_encoder.STEPS
    # they are the tensors one layer records in its trace, in the order it computes them
    layer = tl.EncoderLayer(16, 4, 32).eval()
    trace: dict = {}
    with torch.no_grad():
        layer(torch.randn(1, 5, 16), trace=trace)
    assert [k for k in trace if k in names] == names


def test_decoder_names_are_the_layers_named_tensors():
    _, _, names = draw(bd.draw_decoder_layer, False)
    assert names == bd.DECODER_TENSORS
    layer = tl.DecoderLayer(16, 4, 32).eval()
    trace: dict = {}
    with torch.no_grad():
        layer(torch.randn(1, 3, 16), torch.randn(1, 4, 16), trace=trace)
    assert [k for k in trace if k in names] == names


def test_decoder_names_are_the_chapters_equations():
    _, _, names = draw(bd.draw_decoder_layer, False)
    assert names == bd.DECODER_TENSORS
    cells = json.loads((BOOK / "10_decoder.ipynb").read_text(encoding="utf-8"))["cells"]
    text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    for name in names:  # each is written in one of the chapter's equations
        assert bd.tensor_label(name).strip("$") in text, name


@pytest.mark.parametrize("fn", [bd.draw_encoder_layer, bd.draw_decoder_layer])
def test_pre_ln_names_its_stream(fn):
    _, _, names = draw(fn, True)
    assert names[0] in ("X_pos", "Y_pos") and names[-1] == "Z_out"
    assert all(n.startswith("Z_") for n in names[1:])


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("fn", [bd.draw_encoder_layer, bd.draw_decoder_layer])
def test_every_name_is_drawn_and_no_two_texts_overlap(fn, norm_first):
    fig, ax, names = draw(fn, norm_first)
    texts = [t for t in ax.texts if t.get_text().strip()]
    shown = {t.get_text() for t in texts}
    assert all(any(bd.tensor_label(n) in s for s in shown) for n in names)
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    clashes = [
        (a, b)
        for (a, ea), (b, eb) in itertools.combinations(boxes, 2)
        if ea.overlaps(eb) and a != "+" and b != "+"
    ]
    assert not clashes, clashes
    # everything inside the figure
    fig_box = fig.bbox
    for text, extent in boxes:
        assert fig_box.x0 <= extent.x0 and extent.x1 <= fig_box.x1, text
    plt.close(fig)
