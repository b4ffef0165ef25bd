"""The live side of an Explorer: an ipywidgets form whose controls redraw the figure.

In a notebook with a kernel, Jupyter shows this form (the
``application/vnd.jupyter.widget-view+json`` part of the Explorer's output). Each
control's change calls :meth:`Explorer.update
<transformer_lib.viz.interactive.Explorer.update>`, which redraws the figure and puts
the new PNG into the form's Image.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from .controls import is_bool_options, is_number_options, option_text

if TYPE_CHECKING:
    from .interactive import Explorer


def build_widget(explorer: Explorer):
    """One control per entry of ``explorer.controls`` over an Image of the figure.

    Sets ``explorer._image`` (the Image that :meth:`Explorer.update` fills) and returns
    the form, a VBox.
    """
    import ipywidgets as W

    explorer._image = W.Image(
        format="png", layout=W.Layout(max_width="100%", height="auto")
    )
    style = {"description_width": "initial"}  # never truncate a label
    ctrls = {}
    for name, opts in explorer.controls.items():
        label = explorer.labels[name]
        if is_bool_options(opts):
            c = W.Checkbox(
                value=bool(explorer.defaults[name]),
                description=label,
                indent=False,
                style=style,
            )
        elif is_number_options(opts):
            c = W.SelectionSlider(
                options=[(option_text(o), o) for o in opts],
                value=explorer.defaults[name],
                description=label,
                continuous_update=True,
                style=style,
            )
        else:
            c = W.Dropdown(
                options=opts,
                value=explorer.defaults[name],
                description=label,
                style=style,
            )
        ctrls[name] = c

    def on_change(_change=None):
        explorer.update(**{n: c.value for n, c in ctrls.items()})

    for c in ctrls.values():
        c.observe(on_change, names="value")
    on_change()
    row = W.HBox(list(ctrls.values()), layout=W.Layout(flex_flow="row wrap"))
    parts = [row, explorer._image]
    if explorer.title:  # HTMLMath typesets $...$
        parts.insert(0, W.HTMLMath(f"<b>{html.escape(explorer.title)}</b>"))
    return W.VBox(parts)
