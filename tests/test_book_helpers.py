"""The book's helpers outside the formulas: ``viz.glue`` and ``viz.diagrams``."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from transformer_lib.viz import diagrams  # noqa: E402
from transformer_lib.viz.glue import GLUE_PREFIX, glue  # noqa: E402


@pytest.mark.parametrize(
    ("value", "display"), [(0.25, False), (1234, True), ("2.13.0", False)]
)
def test_glue_stores_values_exactly_as_myst_nb_does(value, display):
    myst_nb = pytest.importorskip("myst_nb")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()
    with capture_output() as ours:
        glue("key", value, display=display)
    with capture_output() as theirs:
        myst_nb.glue("key", value, display=display)
    assert len(ours.outputs) == 1
    assert [(o.data, o.metadata) for o in ours.outputs] == [
        (o.data, o.metadata) for o in theirs.outputs
    ]
    hidden = all(k.startswith(GLUE_PREFIX) for k in ours.outputs[0].data)
    assert hidden == (not display)


def test_glue_rejects_a_missing_name():
    with pytest.raises(ValueError, match="non-empty string name"):
        glue("", 1.0)


def _texts(ax) -> str:
    return "\n".join(t.get_text() for t in ax.texts)


def test_transformer_diagram_has_every_part_and_its_chapter():
    fig, ax = plt.subplots(figsize=(6.6, 6.8))
    marks = diagrams.draw_transformer(ax)
    text = _texts(ax)
    for part in [
        "token embedding",
        "positional encoding",
        "multi-head self-attention",
        "masked self-attention",
        "cross-attention",
        "feed-forward network",
        "Add & Norm",
        "softmax",
        "N ×",
        "memory",
    ]:
        assert part in text, f"the diagram lost {part!r}"
    for chapter in diagrams.CHAPTERS.values():
        assert chapter in text, f"the diagram does not show {chapter!r}"
    # bottom to top: the decoder's sublayers, then its output above the encoder's top
    assert marks["dec_self_attn"] < marks["dec_cross_attn"] < marks["dec_top"]
    assert marks["enc_top"] < marks["dec_top"] < marks["softmax"]
    plt.close(fig)


def test_transformer_diagram_takes_other_chapter_numbers():
    fig, ax = plt.subplots()
    diagrams.draw_transformer(ax, chapters={"ffn": "ch. 99"}, n_label="6")
    text = _texts(ax)
    assert "ch. 99" in text and "6 ×" in text and "ch. 6" not in text.split("\n")
    plt.close(fig)
