"""The live side of an Explorer: an ipywidgets form whose controls redraw the figure.

In a notebook with a kernel, Jupyter shows this form (the
``application/vnd.jupyter.widget-view+json`` part of the Explorer's output). Each
control's change calls ``redraw`` (``Explorer.update``, in :mod:`.interactive`) with
every control's value and shows the PNG it returns.

:func:`use_words` gives the form's words (title, control labels, options) in another
language: a Chinese edition's notebook calls it in its first cells with the words of
that chapter's figures, from the catalog the edition's site uses (``figures.po``).
"""

from __future__ import annotations

import html
from collections.abc import Callable

from .controls import Spec, is_bool_options, is_number_options, option_text
from .static import PageWords

# English words of the figures -> the words the forms show, keyed as the kernel-free
# twin writes them (HTML, math as \\(...\\)), like the editions' catalog figures.po
_WORDS: dict[str, str] = {}


def use_words(words: dict[str, str]) -> None:
    """Show the live forms' title, labels and options in another language from now on.

    ``words`` maps a word as the static twin's HTML writes it (``label_html``) to its
    translation, in the same form; words it lacks stay as they are. ``use_words({})``
    goes back to English.
    """
    _WORDS.clear()
    _WORDS.update(words)


def page_words() -> PageWords:
    """The words of the notebook's language (English unless :func:`use_words` gave
    others), for the kernel-free twin and the form alike."""
    return PageWords(_WORDS)


def _word(text: str) -> str:
    """``text`` (a label or title as written, with ``$...$``) in the current words."""
    return PageWords(_WORDS).text(text)


def build_widget(spec: Spec, redraw: Callable[..., bytes]):
    """One control per entry of ``spec.controls``, over an Image of the figure.

    ``redraw(**values) -> PNG bytes`` draws the figure for the controls' values; it runs
    once here, so that the figure shows before any control moves. Returns the form, a
    VBox whose last child is the Image.
    """
    import ipywidgets as W

    image = W.Image(format="png", layout=W.Layout(max_width="100%", height="auto"))
    style = {"description_width": "initial"}  # never truncate a label
    ctrls = {}
    for name, opts in spec.controls.items():
        label = _word(spec.labels[name])
        if is_bool_options(opts):
            c = W.Checkbox(
                value=bool(spec.defaults[name]),
                description=label,
                indent=False,
                style=style,
            )
        elif is_number_options(opts):
            c = W.SelectionSlider(
                options=[(option_text(o), o) for o in opts],
                value=spec.defaults[name],
                description=label,
                continuous_update=True,
                style=style,
            )
        else:
            c = W.Dropdown(
                options=[(_word(str(o)), o) for o in opts],
                value=spec.defaults[name],
                description=label,
                style=style,
            )
        ctrls[name] = c

    def on_change(_change=None):
        image.value = redraw(**{n: c.value for n, c in ctrls.items()})

    for c in ctrls.values():
        c.observe(on_change, names="value")
    on_change()
    row = W.HBox(list(ctrls.values()), layout=W.Layout(flex_flow="row wrap"))
    parts = [row, image]
    if spec.title:  # HTMLMath typesets $...$
        parts.insert(0, W.HTMLMath(f"<b>{html.escape(_word(spec.title))}</b>"))
    return W.VBox(parts)
