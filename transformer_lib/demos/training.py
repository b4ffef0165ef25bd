"""The demos' one training loop and their learning-rate schedule, on the CPU.

:func:`train` runs any loss: the reversal task (chapter 11), the toy translator
(chapter 10) and the decoder-only language models (chapters 14-17,
:func:`~transformer_lib.demos.lm.train_lm`) all train with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from ..measure import Stopwatch

# step -> (the loss to minimise, numbers to record for that step, e.g. an accuracy)
LossFn = Callable[[int], tuple[torch.Tensor, dict[str, float]]]


def warmup_cosine(
    step: int, steps: int, lr: float, warmup: int, floor: float = 0.1
) -> float:
    """The learning rate at ``step``: a linear rise over ``warmup`` steps to ``lr``,
    then a cosine decay to ``floor * lr`` at the last step (the language models use
    lr / 10, the reversal task 0)."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = min((step - warmup) / max(1, steps - warmup), 1.0)
    return lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def make_optimizer(
    model: torch.nn.Module, lr: float, weight_decay: float
) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices only (not on biases, norms' gains or
    1-D parameters), betas (0.9, 0.98)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": rest, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.98))


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` torch threads, then restore the caller's setting
    (None: leave it alone)."""
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train(
    model: torch.nn.Module,
    loss_fn: LossFn,
    opt: torch.optim.Optimizer,
    *,
    steps: int,
    lr_at: Callable[[int], float] | None = None,
    grad_clip: float | None = None,
    num_threads: int | None = 1,
    max_seconds: float | None = None,
    callback: Callable[[int, torch.nn.Module], None] | None = None,
    callback_every: int = 0,
) -> dict:
    """Minimise ``loss_fn(step)`` with ``opt`` for ``steps`` steps, in train mode.

    Each step sets the learning rate to ``lr_at(step)`` (if given), computes the
    loss, back-propagates, clips the gradient norm to ``grad_clip`` (if given) and
    updates. ``max_seconds`` stops early after that much wall-clock time of training;
    ``callback(step, model)`` runs in eval mode every ``callback_every`` steps, outside
    the clock. ``num_threads``: torch threads while training (restored afterwards):
    one is fastest for these small models, and on a busy machine two threads can wait
    on each other for many times longer; None keeps the setting.

    Returns the history: per step "loss", "lr" (with ``lr_at``) and what ``loss_fn``
    recorded; "steps" run, "seconds" and "cpu_seconds" of training (wall-clock, and
    CPU time of this process). Leaves the model in eval mode.
    """
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    history: dict = {"loss": []}
    wall = cpu = 0.0
    model.train()
    with torch_threads(num_threads):
        for step in range(steps):
            with Stopwatch() as clock:
                if lr_at is not None:
                    rate = lr_at(step)
                    for group in opt.param_groups:
                        group["lr"] = rate
                    history.setdefault("lr", []).append(rate)
                loss, record = loss_fn(step)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if grad_clip is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
                opt.step()
                history["loss"].append(loss.item())
                for name, value in record.items():
                    history.setdefault(name, []).append(value)
            wall, cpu = wall + clock.wall, cpu + clock.cpu
            if (
                callback is not None
                and callback_every
                and (step + 1) % callback_every == 0
            ):
                model.eval()
                callback(step + 1, model)
                model.train()
            if max_seconds is not None and wall > max_seconds:
                break
    model.eval()
    history.update(steps=len(history["loss"]), seconds=wall, cpu_seconds=cpu)
    return history
