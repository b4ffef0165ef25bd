"""Starting a process group of local ranks, as ``torchrun`` does on one machine."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(
    rank: int,
    world_size: int,
    port: int,
    fn: Callable[..., Any],
    args: tuple,
    results: Any,
) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        results.put((rank, fn(rank, world_size, *args)))
    finally:
        dist.destroy_process_group()


def run_ranks(fn: Callable[..., Any], world_size: int, *args: Any) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` new processes joined in a
    gloo process group on 127.0.0.1 (what ``torchrun`` does on one machine); returns
    each rank's result, in rank order. ``fn`` must be importable by name (defined in a
    module, not in a notebook cell), as the processes are started fresh. An error on
    any rank is raised here with that rank's traceback."""
    import torch.multiprocessing as mp

    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    mp.start_processes(
        _rank_main,
        args=(world_size, _free_port(), fn, args, results),
        nprocs=world_size,
        join=True,
        start_method="spawn",
    )
    out = dict(results.get() for _ in range(world_size))
    return [out[r] for r in range(world_size)]
