"""Chapter 18's checks as a script, one process per rank, started by torchrun:

    torchrun --standalone --nproc_per_node 2 scripts/attention_across_processes.py

Each rank runs ring attention on its shard of the sequence and its part of a
tensor-parallel GPT, compares both with the computation in one process, and prints
what it measured. The exit status is 1 if any rank's result differs.
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist

from transformer_lib.demos.across_processes import (
    rank_ring_attention,
    rank_tensor_parallel,
)


def main() -> int:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_* from torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        ring = rank_ring_attention(rank, world)
        tp = rank_tensor_parallel(rank, world)
    finally:
        dist.destroy_process_group()
    # one write per line: the ranks share the launcher's stdout, and print() writes
    # the text and its newline separately, so two ranks' lines could run together
    sys.stdout.write(
        f"rank {rank} of {world}: ring attention error {ring['error']:.1e}, "
        f"sent {ring['bytes_measured']} bytes (formula {ring['bytes_formula']}); "
        f"tensor-parallel GPT error {tp['error']:.1e}, "
        f"sent {tp['bytes_measured']} bytes (formula {tp['bytes_formula']})\n"
    )
    sys.stdout.flush()
    return 0 if ring["error"] < 1e-10 and tp["error"] < 1e-10 else 1


if __name__ == "__main__":
    sys.exit(main())
