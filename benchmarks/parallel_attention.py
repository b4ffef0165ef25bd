"""Attention across processes (chapter 18): what each rank holds and sends, measured on
real gloo process groups of P local ranks, against the formulas of the chapter.

For ring attention over T positions, causal, P = 2 and 4 ranks: the peak memory of one
rank's ring attention (``peak_allocated_bytes``, PyTorch's allocator) against the peak
of exact attention over the whole sequence in one process, and the bytes each rank
sent (``count_bytes_sent``, the bytes written to gloo's sockets) against eq.
ring-bytes. For a tensor-parallel GPT: the bytes each rank sent in one forward pass
against eq. tp-bytes. Time is not measured: on a 2-core CPU the ranks share two cores.

Targets: each rank's peak at most 1.5 / P^2 of the one-process peak (the scores of a
block, (T / P)^2, dominate; the K/V shards, T / P, come second); the bytes sent within
2 % (plus 4 kB of message headers) of the formulas.
Run: `make bench` or `python benchmarks/parallel_attention.py`; the table is written
to benchmarks/results/parallel_attention.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from transformer_lib.demos.across_processes import (
    rank_ring_attention,
    rank_tensor_parallel,
    whole_qkv,
)
from transformer_lib.flash import peak_allocated_bytes
from transformer_lib.parallel import run_ranks

T, B, H, H_KV, D = 2048, 1, 4, 2, 32
WORLDS = (2, 4)
MEMORY_TARGET = 1.5  # a rank's peak <= 1.5 / P^2 of the one-process peak
TP_BATCH, TP_T = 4, 128  # (B, T, d_model = 64) float64: 256 kB per all-reduce
BYTES_SLACK = 0.02, 4096  # relative, and absolute (headers)


def whole_sequence_peak() -> int:
    q, k, v = whole_qkv(B, H, H_KV, T, D)

    # the library's explicit path: the (T, T) scores held at once, as ring attention's
    # blocks are; PyTorch's fused CPU kernel tiles them away
    def explicit():
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        s = (q @ k.repeat_interleave(H // H_KV, 1).transpose(-2, -1)) / D**0.5
        w = F.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)
        return w @ v.repeat_interleave(H // H_KV, 1)

    return peak_allocated_bytes(explicit)


def main() -> int:
    torch.set_num_threads(1)
    whole = whole_sequence_peak()
    rows, missed = [], []
    for P in WORLDS:
        ring = run_ranks(rank_ring_attention, P, B, H, H_KV, T, D, True)
        tp = run_ranks(rank_tensor_parallel, P, None, TP_BATCH, TP_T)
        for rank, (r, t) in enumerate(zip(ring, tp, strict=True)):
            row = dict(
                P=P,
                rank=rank,
                ring_peak_over_whole=r["peak_bytes"] / whole,
                ring_bytes=r["bytes_measured"],
                ring_bytes_formula=r["bytes_formula"],
                tp_bytes=t["bytes_measured"],
                tp_bytes_formula=t["bytes_formula"],
                blocks_computed=r["blocks_computed"],
                ring_error=r["error"],
                tp_error=t["error"],
            )
            rows.append(row)
            print(
                f"P={P} rank {rank}: peak {row['ring_peak_over_whole']:.3f} of one "
                f"process (target <= {MEMORY_TARGET / P**2:.3f}), blocks "
                f"{r['blocks_computed']}/{P}, ring bytes {r['bytes_measured']} "
                f"(formula {r['bytes_formula']}), TP bytes {t['bytes_measured']} "
                f"(formula {t['bytes_formula']})"
            )
            if row["ring_peak_over_whole"] > MEMORY_TARGET / P**2:
                missed.append(f"P={P} rank {rank}: memory")
            for what in ("ring", "tp"):
                measured, formula = row[f"{what}_bytes"], row[f"{what}_bytes_formula"]
                if (
                    not formula
                    <= measured
                    <= formula * (1 + BYTES_SLACK[0]) + BYTES_SLACK[1]
                ):
                    missed.append(f"P={P} rank {rank}: {what} bytes")
            if r["error"] > 1e-10 or t["error"] > 1e-10:
                missed.append(f"P={P} rank {rank}: not equal to one process")
    out = Path(__file__).parent / "results" / "parallel_attention.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(dict(whole_peak=whole, rows=rows), indent=1))
    if missed:
        print("missed:", ", ".join(missed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
