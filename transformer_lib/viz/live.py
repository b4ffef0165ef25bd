"""The live side of an Explorer: an ipywidgets form whose controls redraw the figure.

In a notebook with a kernel, Jupyter shows this form (the
``application/vnd.jupyter.widget-view+json`` part of the Explorer's output). Each
control's change calls ``redraw`` (``Explorer.update``, in :mod:`.interactive`) with
every control's value and shows the PNG it returns.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from .controls import Spec, is_bool_options, is_number_options, option_text


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
        label = spec.labels[name]
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
                options=opts,
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
        parts.insert(0, W.HTMLMath(f"<b>{html.escape(spec.title)}</b>"))
    return W.VBox(parts)
