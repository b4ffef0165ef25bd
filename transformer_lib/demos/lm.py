"""Training a decoder-only language model on the causal LM objective, on the CPU.

The task is a function ``batch_fn(batch_size, generator) -> (tokens, loss_mask)``, both
(B, T): the sequences, and which of their tokens are targets (e.g. only the answer
after a prompt). The loss is :func:`~transformer_lib.causal_lm_loss` (eq. lm-loss):
position t predicts token t + 1, averaged over the targets.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..configs import GPTConfig
from ..gpt import GPT, causal_lm_loss
from .training import make_optimizer, train, warmup_cosine

BatchFn = Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor]]


def train_lm(
    model: GPT | GPTConfig,
    batch_fn: BatchFn,
    *,
    steps: int,
    batch_size: int = 64,
    lr: float = 1e-3,
    warmup: int = 50,
    weight_decay: float = 0.1,
    grad_clip: float | None = 1.0,
    seed: int = 0,
    num_threads: int | None = 1,
    max_seconds: float | None = None,
    callback: Callable[[int, GPT], None] | None = None,
    callback_every: int = 0,
    stop_after: int | None = None,
) -> tuple[GPT, dict]:
    """Train ``model`` (a :class:`GPT`, trained in place, or a :class:`GPTConfig` to
    build one from ``seed``) with AdamW on :func:`causal_lm_loss`, in the demos' one
    loop, :func:`~transformer_lib.demos.training.train`.

    The learning rate follows :func:`~transformer_lib.demos.training.warmup_cosine`
    (down to lr / 10); gradients are clipped to norm ``grad_clip``; ``max_seconds``,
    ``callback``, ``callback_every`` and ``num_threads`` are ``train``'s.
    ``stop_after`` runs only the first that many steps of the ``steps``-step schedule
    (the same losses as the full run's first steps).

    Returns the model, in eval mode, and ``train``'s history: per step "loss" and
    "lr"; "steps" run, "seconds" and "cpu_seconds" of training. Seeded: the same seed
    gives the same model; the global RNG is left as it was.
    """
    if steps < 1 or batch_size < 1:
        raise ValueError(
            f"need steps >= 1 and batch_size >= 1, got {steps} and {batch_size}"
        )
    gen = torch.Generator().manual_seed(seed)
    if isinstance(model, GPTConfig):
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = GPT(model)
    opt = make_optimizer(model, lr, weight_decay)

    def loss_fn(step: int) -> tuple[torch.Tensor, dict[str, float]]:
        tokens, loss_mask = batch_fn(batch_size, gen)
        return causal_lm_loss(model(tokens), tokens, loss_mask), {}

    with torch.random.fork_rng():
        torch.manual_seed(seed)  # dropout masks
        history = train(
            model,
            loss_fn,
            opt,
            steps=steps if stop_after is None else min(steps, stop_after),
            lr_at=lambda step: warmup_cosine(step, steps, lr, warmup),
            grad_clip=grad_clip,
            num_threads=num_threads,
            max_seconds=max_seconds,
            callback=callback,
            callback_every=callback_every,
        )
    return model, history
