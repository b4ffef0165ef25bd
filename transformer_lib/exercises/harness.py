"""The machinery every checker shares: trials, the mistakes table, and how a check runs.

A checker runs the learner's function on a list of :class:`Trial` objects (one seeded
input each, with the library's answer). When a result is not right, it reads the
checker's table of :class:`Mistake` rows from the top and stops at the first row whose
``detect`` holds: the learner sees that row's ``message``, filled in from the trial. A
table ends with a catch-all row (usually :meth:`Mistake.mismatch`), so every wrong
result gets a message. How tensors are compared and numbers said in the messages is in
:mod:`.compare`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch

from .compare import (
    ATOL,
    RTOL,
    close,
    finite,
    first_index,
    first_mismatch,
    num,
    shape,
    where,
)
from .language import N_, _, edition_mime, speaking, twin_languages

NOT_ATTEMPTED_HINT = N_(
    "Replace the `raise NotImplementedError` line and run the cell again."
)


# --------------------------------------------------------------------------------------
# One input, and what the learner's function returned for it
# --------------------------------------------------------------------------------------


class Trial:
    """One input for the learner's function, the library's answer, and the learner's.

    ``args`` and ``kwargs`` are what the function is called with (each tensor cloned, so
    a function that writes into its inputs cannot change the reference); ``want`` is the
    library's result and ``got`` the learner's, set by the checker. A chapter subclasses
    Trial to add the fields its table reads, as ``cached_property`` so that each is
    computed only when a row asks for it. Every attribute is a field that a message
    template may name.
    """

    atol: float = ATOL
    rtol: float = RTOL
    raise_hint: str = (
        ""  # added in brackets when the learner's function raises on this input
    )

    def __init__(self, inputs: str, args: Sequence, kwargs: dict | None = None) -> None:
        self.inputs = inputs  # the input, described in the learner's terms
        self.args, self.kwargs = tuple(args), dict(kwargs or {})
        self.candidate: Callable | None = None
        self.got: Any = None

    @cached_property
    def want(self) -> Any:
        """The library's result for this input."""
        raise NotImplementedError

    @cached_property
    def correct(self) -> bool:
        """A tensor of ``want``'s shape, close to it (override for other results)."""
        return (
            isinstance(self.got, torch.Tensor)
            and self.got.shape == self.want.shape
            and close(self.got, self.want, self.atol, self.rtol)
        )

    @property
    def got_shape(self) -> str:
        return shape(self.got)

    @property
    def want_shape(self) -> str:
        return shape(self.want)

    def run(self, candidate: Callable) -> None:
        """Call the learner's function on this input; keep its result in ``got``."""
        self.candidate = candidate
        try:
            self.got = call(candidate, self.inputs, *self.args, **self.kwargs)
        except Wrong as wrong:
            if not self.raise_hint:
                raise
            raise Wrong(f"{wrong} ({self.raise_hint})") from wrong.__cause__


# --------------------------------------------------------------------------------------
# The mistakes table
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mistake:
    """One row of a checker's table of known mistakes.

    ``example``: a wrong function, written as a learner would write it, that makes this
    mistake; the catalogue test (tests/test_exercises.py) runs the checker on it and
    expects this very row to answer. None only for a catch-all row that names no single
    mistake, or a row that an earlier row always answers first. ``detect(trial) ->
    bool``: how the checker recognises the mistake in a wrong result. ``message``: what
    the learner reads. A ``str.format`` template whose fields are the trial's attributes
    (``{inputs}``, ``{got_shape}``, ``{bad_sum:.4g}``), a tuple of templates said one
    after the other (each a message of the catalogs), or a function of the trial for a
    message that a template cannot say. A template is marked ``N_()`` and translated
    when it is said (:mod:`.language`).
    """

    example: Callable | None
    detect: Callable[[Any], bool]
    message: str | tuple[str, ...] | Callable[[Any], str]

    def says(self, trial: Trial) -> str:
        if callable(self.message):
            return self.message(trial)
        parts = self.message if isinstance(self.message, tuple) else (self.message,)
        return "".join(_(part) for part in parts).format_map(_Fields(trial))

    # Rows that several tables share: a tuple where one tensor is due, and the
    # catch-alls

    @classmethod
    def returns_a_tuple(cls, example: Callable, what: str) -> Mistake:
        """The learner returned a tuple or list where one tensor, ``what``, is due."""

        def message(t: Trial) -> str:
            kind = type(t.got).__name__
            return _("your function returned a {kind}; return only {what}").format(
                kind=kind, what=_(what)
            )

        return cls(example, lambda t: isinstance(t.got, (tuple, list)), message)

    @classmethod
    def not_a_tensor(cls, what: str, attr: str = "got") -> Mistake:
        """Catch-all: ``trial.<attr>`` is not a tensor (``what``, a template, names
        it)."""

        def message(t: Trial) -> str:
            got = getattr(t, attr)
            named = _(what).format_map(_Fields(t))
            return _("{named} should be a torch.Tensor, got {kind}").format(
                named=named, kind=type(got).__name__
            )

        return cls(
            None, lambda t: not isinstance(getattr(t, attr), torch.Tensor), message
        )

    @classmethod
    def wrong_shape(
        cls,
        what: str,
        hint: str | Callable[[Any], str] = "",
        attr: str = "got",
        want: str = "want",
        example: Callable | None = None,
    ) -> Mistake:
        """Catch-all: ``trial.<attr>`` has another shape than ``trial.<want>``.

        The message says both shapes and then ``hint``, the shape the result should
        have and why.
        """

        def message(t: Trial) -> str:
            got, expected = getattr(t, attr), getattr(t, want)
            said = hint(t) if callable(hint) else _(hint) if hint else ""
            template = (
                N_("{what} have shape {got} for {inputs}; expected {want}")
                if what.endswith("weights")
                else N_("{what} has shape {got} for {inputs}; expected {want}")
            )
            text = _(template).format(
                what=_(what), got=shape(got), inputs=t.inputs, want=shape(expected)
            )
            return text + (_(": {hint}").format(hint=said) if said else "")

        return cls(
            example, lambda t: getattr(t, attr).shape != getattr(t, want).shape, message
        )

    @classmethod
    def not_finite(
        cls, template: str, attr: str = "got", want: str = "want"
    ) -> Mistake:
        """Catch-all: ``trial.<attr>`` holds an inf or a NaN. ``template`` says the
        first such element (``{index}``, ``{got}``) and the value due there
        (``{want}``, from ``trial.<want>``) for ``{inputs}``."""

        def message(t: Trial) -> str:
            got = getattr(t, attr)
            at = first_index(~torch.isfinite(got))
            return _(template).format(
                index=where(at), got=got[at], inputs=t.inputs, want=getattr(t, want)[at]
            )

        return cls(None, lambda t: not finite(getattr(t, attr)), message)

    @classmethod
    def mismatch(
        cls,
        what: str = "your output",
        attr: str = "got",
        want: str = "want",
        atol: float | None = None,
        example: Callable | None = None,
    ) -> Mistake:
        """Catch-all: the first element where ``trial.<attr>`` differs from ``<want>``.


        ``atol`` defaults to the trial's own tolerance.
        """

        def message(t: Trial) -> str:
            tol = t.atol if atol is None else atol
            idx, g, w = first_mismatch(getattr(t, attr), getattr(t, want), tol, t.rtol)
            return _("for {inputs}, {what}{index} is {got}; expected {want}").format(
                inputs=t.inputs, what=_(what), index=where(idx), got=num(g), want=num(w)
            )

        return cls(example, lambda t: True, message)


class _Fields(dict):
    """A template's fields, read from the trial's attributes."""

    def __init__(self, trial: Trial) -> None:
        super().__init__()
        self.trial = trial

    def __missing__(self, name: str) -> Any:
        return getattr(self.trial, name)


# --------------------------------------------------------------------------------------
# Running a check
# --------------------------------------------------------------------------------------


class NotAttempted(Exception):
    """The candidate raised NotImplementedError: the exercise stub is still in place."""


class Wrong(Exception):
    """A diagnosed mistake; the checker makes it an AssertionError with its name first.


    ``mistake`` is the row of the table that answered (None for a problem found while
    calling the learner's function).
    """

    def __init__(self, message: str, mistake: Mistake | None = None) -> None:
        super().__init__(message)
        self.mistake = mistake


class CheckFailed(AssertionError):
    """A checker's verdict on a wrong function: the message, and the row that answered
    (``mistake``). ``editions`` holds the same message in the build's other languages
    (:func:`.language.say_also_in`); IPython's ``display(err)`` shows it with them,
    each under its edition's type."""

    def __init__(
        self, message: str, mistake: Mistake | None, editions: dict[str, str]
    ) -> None:
        super().__init__(message)
        self.mistake, self.editions = mistake, editions

    def _repr_mimebundle_(self, include=None, exclude=None):
        return _bundle(str(self), self.editions)

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        # IPython's plain-text printer of exceptions writes the repr,
        # CheckFailed('...'), over the bundle's text/plain: the message is what is shown
        printer.text(str(self))


@dataclass
class Verdict:
    """What a check says: ``text``; ``failed`` with the answering row and the learner's
    own error (``cause``), or not."""

    text: str
    failed: bool = False
    mistake: Mistake | None = None
    cause: BaseException | None = None


class Checker:
    """``check_<name>(candidate)``: run ``candidate`` on each trial, name the mistake.


    On success it prints one line, ``"<name>: correct — <passed>"`` (``passed`` may use
    ``{n}``, the number of trials), and returns None. On failure it raises
    ``AssertionError`` (a :class:`CheckFailed`) with the answering row's message; the
    error's ``mistake`` attribute is that row. A candidate that still raises
    ``NotImplementedError`` is "not attempted yet": the checker prints a hint and
    returns, so that a notebook with the exercise stubs in place still runs. Every
    message is in the learner's language (:mod:`.language`); while the book executes,
    the check runs once more per edition's language, for the edition's twin of it.
    """

    def __init__(
        self,
        name: str,
        doc: str,
        trials: Callable[[], Sequence[Trial]],
        mistakes: Sequence[Mistake],
        passed: str,
    ) -> None:
        self.__name__ = self.__qualname__ = name
        self.__doc__ = doc
        self.trials, self.mistakes, self.passed = trials, list(mistakes), passed

    def __repr__(self) -> str:
        return f"<checker {self.__name__}>"

    def __call__(self, candidate: Callable) -> None:
        verdict = self.verdict(candidate)
        editions = {}
        for language in twin_languages():
            with speaking(language):
                editions[language] = self.verdict(candidate).text
        if verdict.failed:
            raise CheckFailed(verdict.text, verdict.mistake, editions) from (
                verdict.cause  # the learner's own error, if any
            )
        say(verdict.text, editions)
        return None

    def verdict(self, candidate: Callable) -> Verdict:
        """Run ``candidate`` on every trial; what the check says, in the current
        language."""
        name = self.__name__
        if not callable(candidate):
            return Verdict(
                _(
                    "{name}: pass your function itself (no parentheses), got {kind}"
                ).format(name=name, kind=type(candidate).__name__),
                failed=True,
            )
        try:
            trials = self.trials()
            for trial in trials:
                self._judge(trial, candidate)
        except NotAttempted:
            return Verdict(
                _("{name}: not attempted yet.").format(name=name)
                + "\n"
                + _(NOT_ATTEMPTED_HINT)
            )
        except Wrong as wrong:
            said = _("{name}: {message}").format(name=name, message=wrong)
            return Verdict(said, True, wrong.mistake, wrong.__cause__)
        passed = _(self.passed).format(n=len(trials))
        return Verdict(_("{name}: correct — {passed}").format(name=name, passed=passed))

    def _judge(self, trial: Trial, candidate: Callable) -> None:
        trial.run(candidate)
        if trial.correct:
            return
        for mistake in self.mistakes:
            if mistake.detect(trial):
                raise Wrong(mistake.says(trial), mistake)
        raise RuntimeError(  # a table must end with a catch-all row
            f"{self.__name__}: no row of the mistakes table answers {trial.inputs}"
        )


def _bundle(text: str, editions: dict[str, str]) -> dict[str, str]:
    """A text output: the English ``text/plain``, and the same message in each
    edition's language under the edition's own type (``text/vnd.tl.zh_CN+plain``),
    which that edition's build shows in its place."""
    data = {"text/plain": text}
    for language, said in editions.items():
        data[edition_mime("text/plain", language)] = said
    return data


def say(text: str, editions: dict[str, str]) -> None:
    """Print a checker's message; in the book's build, a display output with its
    twins in the editions' languages."""
    if not editions:
        print(text)
        return
    from IPython.display import display

    display(_bundle(text, editions), raw=True)


def call(candidate: Callable, inputs: str, *args: Any, **kwargs: Any) -> Any:
    """Call the learner's function on clones of the inputs; name the input on error."""
    args = tuple(clone(a) for a in args)
    kwargs = {k: clone(v) for k, v in kwargs.items()}
    try:
        return candidate(*args, **kwargs)
    except NotImplementedError:
        raise NotAttempted from None
    except (
        Exception
    ) as err:  # anything else the learner's code raised: say on which input
        raise Wrong(
            _("your function raised {kind} on {inputs}: {err}").format(
                kind=type(err).__name__, inputs=inputs, err=err
            )
        ) from err


def clone(x: Any) -> Any:
    return x.clone() if isinstance(x, torch.Tensor) else x


# --------------------------------------------------------------------------------------
# Seeded inputs
# --------------------------------------------------------------------------------------


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(g: torch.Generator, *size: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*size, generator=g) * scale
