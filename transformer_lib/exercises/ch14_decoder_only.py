"""Chapter 14: the causal language-model loss, with shifted targets."""

from __future__ import annotations

from functools import cached_property

import torch
import torch.nn.functional as F

from ..gpt import causal_lm_loss
from .compare import close, num
from .harness import Checker, Mistake, Trial, gen, randn
from .language import N_, _


def _nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """-log softmax(logits)[target] at every position, float64, shape of targets."""
    logp = torch.log_softmax(logits.double(), dim=-1)
    return -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


class LMLossTrial(Trial):
    def __init__(self, inputs: str, logits, tokens, loss_mask=None) -> None:
        kwargs = {} if loss_mask is None else {"loss_mask": loss_mask}
        super().__init__(inputs, (logits, tokens), kwargs)
        self.logits, self.tokens, self.loss_mask = logits, tokens, loss_mask

    @cached_property
    def want(self) -> torch.Tensor:
        return causal_lm_loss(self.logits, self.tokens, self.loss_mask)

    def variant(self, *, shift: str = "forward", mask: str = "targets") -> torch.Tensor:
        """The loss with the shift (forward, none, backward) and the mask (targets,
        predictions, ignored, all-positions denominator) chosen."""
        z, x = self.logits, self.tokens
        if shift == "forward":
            nll = _nll(z[:, :-1], x[:, 1:])
        elif shift == "none":
            nll = _nll(z, x)
        else:
            nll = _nll(z[:, 1:], x[:, :-1])
        m = self.loss_mask
        if m is None or mask == "ignored":
            return nll.mean()
        m = (m[:, 1:] if mask in ("targets", "all") else m[:, :-1]).double()
        if shift == "none":
            m = self.loss_mask.double()
        denom = nll.numel() if mask == "all" else m.sum()
        return (nll * m).sum() / denom

    def like(self, **variant) -> bool:
        return close(self.got, self.variant(**variant))

    @cached_property
    def summed(self) -> bool:
        """The sum over the targets instead of their mean."""
        n = (
            self.tokens[:, 1:].numel()
            if self.loss_mask is None
            else int(self.loss_mask[:, 1:].sum())
        )
        return close(self.got, self.want * n)

    @property
    def want_value(self) -> str:
        return num(self.want)

    @property
    def got_value(self) -> str:
        return num(self.got)


def _lm_loss_trials() -> list[LMLossTrial]:
    g = gen(14)
    answer = torch.zeros(3, 6, dtype=torch.bool)
    answer[:, 4:] = True  # a prompt of 4 tokens, then the answer
    sparse = torch.tensor([[False, True, False, True, True]])
    return [
        LMLossTrial(
            _("logits (2, 6, 7), tokens (2, 6), no loss_mask"),
            randn(g, 2, 6, 7, scale=2.0),
            torch.randint(0, 7, (2, 6), generator=g),
        ),
        LMLossTrial(
            _(
                "logits (3, 6, 5), tokens (3, 6), loss_mask True on tokens 4 and 5 (the"
                " answer)"
            ),
            randn(g, 3, 6, 5, scale=2.0),
            torch.randint(0, 5, (3, 6), generator=g),
            answer,
        ),
        LMLossTrial(
            _("logits (1, 5, 4), tokens (1, 5), loss_mask [[F, T, F, T, T]]"),
            randn(g, 1, 5, 4, scale=2.0),
            torch.randint(0, 4, (1, 5), generator=g),
            sparse,
        ),
    ]


# Known mistakes, each as a learner would write it


def lm_loss_no_shift(logits, tokens, loss_mask=None):
    V = logits.size(-1)
    nll = F.cross_entropy(logits.reshape(-1, V), tokens.reshape(-1), reduction="none")
    if loss_mask is None:
        return nll.mean()
    m = loss_mask.reshape(-1).float()
    return (nll * m).sum() / m.sum()


def lm_loss_shift_backwards(logits, tokens, loss_mask=None):
    V = logits.size(-1)
    pred, target = logits[:, 1:], tokens[:, :-1]  # position t + 1 scored on token t
    nll = F.cross_entropy(pred.reshape(-1, V), target.reshape(-1), reduction="none")
    if loss_mask is None:
        return nll.mean()
    m = loss_mask[:, 1:].reshape(-1).float()
    return (nll * m).sum() / m.sum()


def _shifted_nll(logits, tokens):
    V = logits.size(-1)
    pred, target = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(pred.reshape(-1, V), target.reshape(-1), reduction="none")


def lm_loss_mask_on_predictions(logits, tokens, loss_mask=None):
    nll = _shifted_nll(logits, tokens)
    if loss_mask is None:
        return nll.mean()
    m = loss_mask[:, :-1].reshape(-1).float()  # the predicting positions
    return (nll * m).sum() / m.sum()


def lm_loss_ignores_mask(logits, tokens, loss_mask=None):
    return _shifted_nll(logits, tokens).mean()


def lm_loss_mean_over_all(logits, tokens, loss_mask=None):
    nll = _shifted_nll(logits, tokens)
    if loss_mask is None:
        return nll.mean()
    return (nll * loss_mask[:, 1:].reshape(-1).float()).mean()  # / every position


def lm_loss_sum(logits, tokens, loss_mask=None):
    nll = _shifted_nll(logits, tokens)
    if loss_mask is None:
        return nll.sum()
    return (nll * loss_mask[:, 1:].reshape(-1).float()).sum()


def lm_loss_per_position(logits, tokens, loss_mask=None):
    return _shifted_nll(logits, tokens).view(tokens.size(0), -1)  # not averaged


LM_LOSS_MISTAKES = [
    Mistake.not_a_tensor(N_("your loss for {inputs}")),
    Mistake.wrong_shape(
        N_("your loss"),
        N_("the loss is one number, the mean over the targets (shape ())"),
        example=lm_loss_per_position,
    ),
    Mistake(
        lm_loss_no_shift,
        lambda t: t.like(shift="none"),
        N_(
            "for {inputs}, each position is scored on its own token, which it can see;"
            " position t predicts token t + 1: compare logits[:, :-1] with tokens[:,"
            " 1:]"
        ),
    ),
    Mistake(
        lm_loss_shift_backwards,
        lambda t: t.like(shift="backward"),
        N_(
            "for {inputs}, you shifted the wrong way (logits[:, 1:] against"
            " tokens[:, :-1]): that scores each position on the token before it; the"
            " targets are tokens[:, 1:], for logits[:, :-1]"
        ),
    ),
    Mistake(
        lm_loss_mask_on_predictions,
        lambda t: t.loss_mask is not None and t.like(mask="predictions"),
        N_(
            "for {inputs}, the mask was applied to the predicting positions; loss_mask"
            " marks the target tokens, so the prediction at t counts when"
            " loss_mask[:, t + 1]: use loss_mask[:, 1:]"
        ),
    ),
    Mistake(
        lm_loss_ignores_mask,
        lambda t: t.loss_mask is not None and t.like(mask="ignored"),
        N_(
            "for {inputs}, your loss ignores loss_mask: average over the masked targets"
            " only"
        ),
    ),
    Mistake(
        lm_loss_mean_over_all,
        lambda t: t.loss_mask is not None and t.like(mask="all"),
        N_(
            "for {inputs}, you divided by every position instead of by the number of"
            " targets: (nll * m).sum() / m.sum()"
        ),
    ),
    Mistake(
        lm_loss_sum,
        lambda t: t.summed,
        N_(
            "for {inputs}, you summed the cross-entropies; the loss is their mean over"
            " the"
            " targets ({want_value})"
        ),
    ),
    Mistake(
        None,
        lambda t: True,
        N_("for {inputs}, your loss is {got_value}; expected {want_value}"),
    ),
]

check_causal_lm_loss = Checker(
    "check_causal_lm_loss",
    "Check ``candidate(logits, tokens, loss_mask=None)`` against"
    " :func:`transformer_lib.causal_lm_loss`.",
    _lm_loss_trials,
    LM_LOSS_MISTAKES,
    N_("{n} inputs agree with tl.causal_lm_loss, with and without a loss_mask."),
)
