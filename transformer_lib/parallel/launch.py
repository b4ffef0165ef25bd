"""Starting a process group of local ranks, as ``torchrun`` does on one machine."""

from __future__ import annotations

import os
import pickle
import socket
import sys
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
        # plain pickle copies tensors into the message (torch's own sharing would
        # hand over a file descriptor, gone once this process exits)
        results.put((rank, pickle.dumps(fn(rank, world_size, *args))))
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
    results = mp.get_context("spawn").SimpleQueue()
    ranks = mp.start_processes(
        _rank_main,
        args=(world_size, _free_port(), fn, args, results),
        nprocs=world_size,
        join=False,
        start_method="spawn",
    )
    out: dict[int, bytes] = {}
    done = False
    while not done:
        # read while the ranks run: a large result fills the pipe, and its rank
        # cannot exit until it is read
        done = ranks.join(timeout=0.05)  # raises with the traceback of a failed rank
        while not results.empty():
            rank, payload = results.get()
            out[rank] = payload
    missing = sorted(set(range(world_size)) - set(out))
    if missing:
        raise RuntimeError(f"ranks {missing} exited without a result")
    return [pickle.loads(out[r]) for r in range(world_size)]


def _bytes_written() -> int:
    with open("/proc/self/io", encoding="ascii") as f:
        for line in f:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    raise RuntimeError("/proc/self/io has no wchar line")


def count_bytes_sent(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple:
    """(fn(*args, **kwargs), the bytes this process wrote while it ran): on one
    machine gloo sends over TCP sockets, and the kernel counts every byte written to
    them (``wchar`` of ``/proc/self/io``, Linux only), message headers included.
    Measured, not computed: compare it with the costs in ``transformer_lib.costs``."""
    if not sys.platform.startswith("linux"):
        raise RuntimeError(
            f"count_bytes_sent reads /proc/self/io, which {sys.platform} does not have"
        )
    before = _bytes_written()
    result = fn(*args, **kwargs)
    return result, _bytes_written() - before
