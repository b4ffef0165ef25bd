"""Chapter 7: layer normalisation, ``layer_norm(x, gamma, beta, eps=1e-5)``."""

from __future__ import annotations

from functools import cached_property

import torch

from ..norm import layer_norm, layer_norm_article
from .compare import ATOL, close, finite
from .harness import Checker, Mistake, Trial, gen, randn
from .language import N_, _


def _ln_variant(
    x,
    gamma,
    beta,
    eps=1e-5,
    *,
    unbiased=False,
    eps_outside=False,
    dims=(-1,),
    no_beta=False,
    no_gamma=False,
    no_sqrt=False,
) -> torch.Tensor:
    """LayerNorm with one of the common mistakes, each named by its keyword."""
    mu = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, unbiased=unbiased)
    if no_sqrt:
        denom = var + eps
    elif eps_outside:
        denom = var.sqrt() + eps
    else:
        denom = (var + eps).sqrt()
    y = (x - mu) / denom
    if not no_gamma:
        y = gamma * y
    return y if no_beta else y + beta


class LayerNormTrial(Trial):
    def __init__(self, inputs, x, gamma, beta, kwargs: dict, atol: float) -> None:
        super().__init__(inputs, (x, gamma, beta), kwargs)
        self.x, self.gamma, self.beta, self.atol = x, gamma, beta, atol
        self.eps = kwargs.get("eps", 1e-5)

    @cached_property
    def want(self) -> torch.Tensor:
        return layer_norm(self.x, self.gamma, self.beta, **self.kwargs)

    @cached_property
    def float64(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.x.double(), self.gamma.double(), self.beta.double()

    def like(self, **variant) -> bool:
        """The output equals LayerNorm computed with ``_ln_variant(..., **variant)``."""
        eps = variant.pop("eps", self.eps)
        want = _ln_variant(*self.float64, eps, **variant)
        return close(self.got, want, atol=self.atol)

    @cached_property
    def nan_on_constant_rows_only(self) -> bool:
        constant = (self.x == self.x[..., :1]).all(dim=-1)  # rows with variance 0
        return bool(constant.any()) and finite(self.got[~constant])

    @cached_property
    def needs_eps(self) -> bool:
        """Leaving eps out changes the result beyond the tolerance for this input."""
        no_eps = _ln_variant(*self.float64, 0.0)
        return not close(self.want, no_eps, atol=self.atol)

    @cached_property
    def wrong_dim(self) -> int | None:
        """A single axis other than the last one over which the output is normalised."""
        for d in range(self.x.dim() - 1):
            if self.like(dims=(d,)):
                return d
        return None

    @cached_property
    def wrong_axis(self) -> str:
        return (
            _("the batch axis, BatchNorm's axis")
            if self.wrong_dim == 0
            else _("the wrong axis")
        )

    @cached_property
    def right_in_float64(self) -> bool:
        """The learner's function, run again in float64, is right there."""
        try:
            got64 = self.candidate(*self.float64, **self.kwargs)
        except Exception:
            return False
        return isinstance(got64, torch.Tensor) and close(
            got64, layer_norm(*self.float64, **self.kwargs)
        )


def _layer_norm_trials() -> list[LayerNormTrial]:
    g = gen(7)
    const = randn(g, 3, 5)
    const[1] = 3.0  # a constant row: variance exactly 0

    def trial(inputs, x, kwargs=None, atol=ATOL) -> LayerNormTrial:
        gamma, beta = 1 + 0.5 * randn(g, x.size(-1)), randn(g, x.size(-1))
        return LayerNormTrial(inputs, x, gamma, beta, kwargs or {}, atol)

    return [
        trial(
            _("x (2, 3, 8) with random gamma and beta (8,)"),
            randn(g, 2, 3, 8, scale=2.0) + 0.5,
        ),
        trial(
            _("x (4, 7), an odd width, with random gamma and beta (7,)"),
            randn(g, 4, 7) - 1.0,
        ),
        trial(
            _("x (3, 6) whose rows vary very little (standard deviation about 0.003)"),
            0.003 * randn(g, 3, 6),
        ),
        trial(_("x (3, 5) whose row 1 is constant (variance 0)"), const),
        trial(
            _("x (2, 8) = 1e4 + noise (a large common offset)"),
            1e4 + randn(g, 2, 8),
            atol=5e-3,
        ),
        trial(_("x (2, 6) with eps=0.1"), 0.3 * randn(g, 2, 6), {"eps": 0.1}),
    ]


# Known mistakes, each as a learner would write it


def ln_unbiased_variance(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(x.var(-1, keepdim=True) + eps) + beta


def ln_eps_outside_sqrt(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    sigma = ((x - mu) ** 2).mean(-1, keepdim=True).sqrt()
    return gamma * (x - mu) / (sigma + eps) + beta


def ln_divides_by_variance(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return gamma * (x - mu) / (var + eps) + beta


def ln_no_eps(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var) + beta


def ln_beta_forgotten(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var + eps)


def ln_gamma_forgotten(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) + beta


def ln_over_batch_axis(x, gamma, beta, eps=1e-5):
    mu = x.mean(0, keepdim=True)
    var = ((x - mu) ** 2).mean(0, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def ln_over_whole_tensor(x, gamma, beta, eps=1e-5):
    mu = x.mean()
    var = ((x - mu) ** 2).mean()
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def ln_ignores_eps(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var + 1e-5) + beta


def ln_naive_variance(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = (x * x).mean(-1, keepdim=True) - mu * mu  # cancels when |mu| >> sigma
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


LAYER_NORM_MISTAKES = [
    # what the function returns
    Mistake.not_a_tensor(N_("your output for {inputs}")),
    Mistake.wrong_shape(
        N_("your output"), N_("LayerNorm returns a tensor of the shape of its input")
    ),
    # inf or NaN
    Mistake(  # a learner without eps meets the tiny-variance input (row below) first
        None,
        lambda t: not finite(t.got) and t.nan_on_constant_rows_only,
        N_(
            "your output has NaN or inf for {inputs}: a constant row has variance 0,"
            " and"
            " dividing by sqrt(0) fails. That is what eps is for: divide by"
            " sqrt(variance + eps)"
        ),
    ),
    Mistake(  # catch-all for inf or NaN
        None,
        lambda t: not finite(t.got),
        Mistake.mismatch(N_("your output"), atol=ATOL).message,
    ),
    # the formula
    Mistake(
        ln_unbiased_variance,
        lambda t: t.like(unbiased=True) or t.like(unbiased=True, eps_outside=True),
        N_(
            "for {inputs}, you used the unbiased variance (dividing by N - 1, the"
            " default"
            " of"
            " torch.var and torch.std); LayerNorm divides by N: use"
            " x.var(dim=-1, unbiased=False), or ((x - mu) ** 2).mean(dim=-1)"
        ),
    ),
    Mistake(
        ln_eps_outside_sqrt,
        lambda t: (
            t.like(eps_outside=True)
            or close(
                t.got, layer_norm_article(t.x, t.gamma, t.beta, t.eps), atol=t.atol
            )
        ),
        N_(
            "for {inputs}, you put eps outside the square root, (z - mu) / (sigma +"
            " eps),"
            " the first article's form; nn.LayerNorm and the library use"
            " (z - mu) / sqrt(sigma^2 + eps). They differ when sigma is small"
        ),
    ),
    Mistake(
        ln_divides_by_variance,
        lambda t: t.like(no_sqrt=True),
        N_(
            "for {inputs}, you divided by the variance; divide by the standard"
            " deviation,"
            " sqrt(variance + eps)"
        ),
    ),
    Mistake(
        ln_no_eps,
        lambda t: t.like(eps=0.0) and t.needs_eps,
        N_(
            "for {inputs}, your output matches LayerNorm without eps: add eps inside"
            " the"
            " square root, sqrt(variance + eps); it matters when the variance is"
            " small, and"
            " keeps a constant row from dividing by 0"
        ),
    ),
    Mistake(
        ln_beta_forgotten,
        lambda t: t.like(no_beta=True),
        N_(
            "for {inputs}, your output matches gamma * normalised without beta: add the"
            " shift beta at the end"
        ),
    ),
    Mistake(
        ln_gamma_forgotten,
        lambda t: t.like(no_gamma=True),
        N_(
            "for {inputs}, your output matches normalised + beta without gamma:"
            " multiply by"
            " the scale gamma"
        ),
    ),
    # the axis
    Mistake(
        ln_over_batch_axis,
        lambda t: t.wrong_dim is not None,
        N_(
            "for {inputs}, you normalised over dim {wrong_dim} ({wrong_axis});"
            " LayerNorm"
            " normalises each token's own feature vector, the last dim (dim=-1)"
        ),
    ),
    Mistake(
        ln_over_whole_tensor,
        lambda t: t.x.dim() > 1 and t.like(dims=tuple(range(t.x.dim()))),
        N_(
            "for {inputs}, you normalised over the whole tensor; LayerNorm normalises"
            " each"
            " token's feature vector, the last dim (dim=-1)"
        ),
    ),
    # the arguments and the precision
    Mistake(
        ln_ignores_eps,
        lambda t: (
            bool(t.kwargs)
            and close(t.got, layer_norm(t.x, t.gamma, t.beta), atol=t.atol)
        ),
        N_("your function ignores its eps argument: for {inputs} it used eps = 1e-5"),
    ),
    Mistake(
        ln_naive_variance,
        lambda t: t.right_in_float64,
        N_(
            "your output is right in float64 but not in float32 for {inputs}, whose"
            " rows"
            " have a mean large compared with their spread: the variance computed as"
            " mean(x^2) - mean(x)^2 cancels catastrophically. Centre first and average"
            " the"
            " squares, mean((x - mu)^2)"
        ),
    ),
    Mistake.mismatch(N_("your output")),
]

check_layer_norm = Checker(
    "check_layer_norm",
    "Check ``candidate(x, gamma, beta, eps=1e-5)`` against"
    " :func:`transformer_lib.layer_norm`.",
    _layer_norm_trials,
    LAYER_NORM_MISTAKES,
    N_(
        "{n} inputs agree with tl.layer_norm (= nn.LayerNorm), including tiny and zero"
        " variance, an offset of 1e4 and eps=0.1."
    ),
)
