"""Data parallelism on the addition task (chapter 18): each rank takes its slice of
the batch, ``DistributedDataParallel`` all-reduces the gradients, and every rank takes
the same optimiser step as one process with the whole batch would.

The functions whose name starts with ``rank_`` run on every rank of a process group
(started by :func:`transformer_lib.parallel.run_ranks`, or by ``torchrun``); with one
rank, ``rank_train(0, 1, ...)`` is the training in one process that the data-parallel
run is compared with, and ``full_batch_gradient`` the gradient in one process.
"""

from __future__ import annotations

import torch
from torch.nn.parallel import DistributedDataParallel

from ..configs import GPTConfig
from ..gpt import GPT, causal_lm_loss
from .addition import addition_batch, addition_config
from .lm import train_lm


def _model(cfg: GPTConfig, seed: int, dtype: torch.dtype = torch.float32) -> GPT:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return GPT(cfg).to(dtype)


def _check_split(batch_size: int, world_size: int) -> None:
    if batch_size % world_size:
        raise ValueError(
            f"a batch of {batch_size} does not split evenly over {world_size} ranks: "
            "the ranks' mean losses would then weigh their examples unequally"
        )


def full_batch_gradient(
    seed: int = 0, batch_size: int = 32, n_digits: int = 3
) -> dict[str, torch.Tensor]:
    """One process, the whole batch: the gradient of the mean loss (eq. lm-loss)."""
    model = _model(addition_config(n_digits), seed)
    tokens, loss_mask = addition_batch(
        batch_size, torch.Generator().manual_seed(seed), n_digits=n_digits
    )
    causal_lm_loss(model(tokens), tokens, loss_mask).backward()
    return {name: p.grad.clone() for name, p in model.named_parameters()}


def rank_gradient(
    rank: int, world_size: int, seed: int = 0, batch_size: int = 32, n_digits: int = 3
) -> dict[str, torch.Tensor]:
    """This rank's slice of the same batch, through ``DistributedDataParallel``: the
    gradient after its all-reduce, the mean of the ranks' gradients (eq. ddp-grad)."""
    _check_split(batch_size, world_size)
    model = DistributedDataParallel(_model(addition_config(n_digits), seed))
    tokens, loss_mask = addition_batch(
        batch_size, torch.Generator().manual_seed(seed), n_digits=n_digits
    )
    tokens = tokens.tensor_split(world_size)[rank]  # (B / P, T)
    loss_mask = loss_mask.tensor_split(world_size)[rank]
    causal_lm_loss(model(tokens), tokens, loss_mask).backward()
    return {name: p.grad.clone() for name, p in model.module.named_parameters()}


def rank_train(
    rank: int,
    world_size: int,
    seed: int = 0,
    steps: int = 100,
    batch_size: int = 32,
    n_digits: int = 3,
    lr: float = 3e-3,
    dtype: torch.dtype = torch.float32,
) -> dict:
    """Train the addition GPT with ``DistributedDataParallel`` by the book's one
    training loop (:func:`~transformer_lib.demos.lm.train_lm`), each rank on its slice
    of every batch; returns the history and the final weights. With one rank
    (``rank_train(0, 1, ...)``) it is plain training on the whole batch in one process,
    nothing to all-reduce: the run the data-parallel one is compared with."""
    _check_split(batch_size, world_size)
    model = _model(addition_config(n_digits), seed, dtype)
    net = DistributedDataParallel(model) if world_size > 1 else model

    def batch_fn(B: int, gen: torch.Generator):
        tokens, loss_mask = addition_batch(B, gen, n_digits=n_digits)
        # every rank draws the same batch and keeps its slice: (B / P, T) each
        return tokens.tensor_split(world_size)[rank], loss_mask.tensor_split(
            world_size
        )[rank]

    _, history = train_lm(
        net, batch_fn, steps=steps, batch_size=batch_size, lr=lr, seed=seed
    )
    history["state_dict"] = {
        k: v.detach().clone() for k, v in model.state_dict().items()
    }
    return history
