"""The three kinds of control of an Explorer, for the live widget and the static twin.


Two bool options make a checkbox, numbers a slider, anything else a selector.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np


class Spec(Protocol):
    """What the live widget and the static twin read from an interactive figure."""

    controls: dict[str, list]  # name -> the options, in order
    defaults: dict[str, Any]  # name -> the option shown first
    labels: dict[str, str]  # name -> its label (may hold $...$ math)
    title: str | None


def is_bool_options(options: Sequence) -> bool:
    return len(options) == 2 and all(isinstance(o, (bool, np.bool_)) for o in options)


def is_number_options(options: Sequence) -> bool:
    return all(
        isinstance(o, (int, float, np.number)) and not isinstance(o, (bool, np.bool_))
        for o in options
    )


def option_text(option: Any) -> str:
    """How an option reads on a slider and in alt text: floats as ``:g``."""
    return f"{option:g}" if isinstance(option, (float, np.floating)) else str(option)
