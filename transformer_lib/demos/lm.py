"""Training a decoder-only language model on the causal LM objective, on the CPU.

The task is a function ``batch_fn(batch_size, generator) -> (tokens, loss_mask)``, both
(B, T): the sequences, and which of their tokens are targets (e.g. only the answer
after a prompt). The loss is :func:`~transformer_lib.causal_lm_loss` (eq. lm-loss):
position t predicts token t + 1, averaged over the targets.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import contextmanager

import torch

from ..configs import GPTConfig
from ..gpt import GPT, causal_lm_loss

BatchFn = Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor]]


def warmup_cosine(step: int, steps: int, lr: float, warmup: int) -> float:
    """The learning rate at ``step``: a linear rise over ``warmup`` steps to ``lr``,
    then a cosine decay to lr / 10 at the last step."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


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
) -> tuple[GPT, dict]:
    """Train ``model`` (a :class:`GPT`, trained in place, or a :class:`GPTConfig` to
    build one from ``seed``) with AdamW on :func:`causal_lm_loss`.

    The learning rate follows :func:`warmup_cosine`; gradients are clipped to norm
    ``grad_clip``. ``max_seconds`` stops early after that much wall-clock time.
    ``callback(step, model)`` runs every ``callback_every`` steps (for an evaluation;
    its time is excluded from "seconds").

    Returns the model, in eval mode, and a history: per step "loss" and "lr";
    "steps" run, "seconds" and "cpu_seconds" of training (wall-clock, and CPU time of
    this process). Seeded: the same seed gives the same model; the global RNG is left
    as it was. ``num_threads``: torch threads while training (restored afterwards):
    one is fastest for small models, and on a busy machine two threads can wait on
    each other for many times longer; None keeps the setting.
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
    history: dict = {"loss": [], "lr": []}
    wall = cpu = 0.0
    model.train()
    with torch_threads(num_threads), torch.random.fork_rng():
        torch.manual_seed(seed)  # dropout masks
        for step in range(steps):
            w0, c0 = time.perf_counter(), time.process_time()
            tokens, loss_mask = batch_fn(batch_size, gen)
            rate = warmup_cosine(step, steps, lr, warmup)
            for group in opt.param_groups:
                group["lr"] = rate
            loss = causal_lm_loss(model(tokens), tokens, loss_mask)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            opt.step()
            history["loss"].append(loss.item())
            history["lr"].append(rate)
            wall += time.perf_counter() - w0
            cpu += time.process_time() - c0
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
    return model, history


@contextmanager
def torch_threads(n: int | None):
    """Run with ``n`` torch threads, then restore the caller's setting
    (None: leave it alone)."""
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
