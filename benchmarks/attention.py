"""Attention speed: tl.MultiHeadAttention (fused and explicit paths) against
nn.MultiheadAttention.

B=8, T=512, d_model=256, h=8, CPU float32, inference mode. The three are timed
interleaved in one run (round-robin, median of the rounds), so machine load affects
them alike. Target: the fused path within 1.2x of nn.MultiheadAttention.
Run: `make bench` or `python benchmarks/attention.py`.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch
import torch.nn as nn

import transformer_lib as tl
from transformer_lib.measure import Stopwatch


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument(
        "--json", type=Path, default=Path("benchmarks/results/attention.json")
    )
    args = p.parse_args()

    B, T, d_model, h = 8, 512, 256, 8
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(d_model, h, batch_first=True).eval()
    ours = tl.MultiHeadAttention.from_torch(ref).eval()
    x = torch.randn(B, T, d_model)

    with torch.inference_mode():
        torch.testing.assert_close(
            ours(x, x, x, need_weights=False)[0],
            ref(x, x, x, need_weights=False)[0],
            atol=1e-5,
            rtol=1e-4,
        )
        contenders = {
            "tl fused (need_weights=False)": lambda: ours(x, x, x, need_weights=False),
            "tl explicit (need_weights=True)": lambda: ours(x, x, x, need_weights=True),
            "nn.MultiheadAttention": lambda: ref(x, x, x, need_weights=False),
        }
        times = {name: [] for name in contenders}
        for fn in contenders.values():  # warm-up
            fn()
        for _ in range(args.rounds):
            for name, fn in contenders.items():
                with Stopwatch() as clock:
                    fn()
                times[name].append(clock.wall)

    base = statistics.median(times["nn.MultiheadAttention"])
    rows = []
    print(
        f"B={B} T={T} d_model={d_model} h={h}, CPU float32, "
        f"{torch.get_num_threads()} threads, {args.rounds} rounds"
    )
    print(f"{'path':34s} {'median ms':>10s} {'ratio to nn.MHA':>16s}")
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append({"path": name, "median_ms": med * 1e3, "ratio": med / base})
        print(f"{name:34s} {med * 1e3:10.2f} {med / base:16.2f}")
    fused_ratio = rows[0]["ratio"]
    ok = fused_ratio <= 1.2
    verdict = "OK" if ok else "MISSED"
    print(
        f"fused / nn.MultiheadAttention = {fused_ratio:.2f} (target <= 1.20): {verdict}"
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "config": {"B": B, "T": T, "d_model": d_model, "h": h},
                "rows": rows,
                "target_met": ok,
            },
            indent=2,
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
