"""Greedy decoding with and without the KV cache: time per token, tokens per second,
measured and FLOP-predicted speedup (chapter 12), and the cache's memory against
eq. kv-memory-total.

The model is chapter 12's, ``transformer_lib.demos.kv_cache_bench``: a random-weight
encoder-decoder, d_model=128, 4 heads, 2 + 2 layers, d_ff=512, vocabulary 1000, a
source of 32 tokens; CPU float32, one torch thread (on a shared machine two threads
make timings swing). For every (batch, new tokens) the two paths are timed
round-robin, in wall-clock time and in the CPU time of this process (which other jobs
on a shared machine do not inflate), and the median of the rounds is kept.
Target: the cache at least 8x faster at 512 new tokens, batch 2, in CPU time.
Run: `make bench` or `python benchmarks/kv_cache.py`; the table is written to
benchmarks/results/kv_cache.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

import transformer_lib as tl
from transformer_lib.demos.kv_cache_bench import BENCH_CONFIG, T_SRC, bench_model
from transformer_lib.measure import Stopwatch

TARGET_BATCH, TARGET_NEW, TARGET_SPEEDUP = 2, 512, 8.0
BATCHES, NEW_TOKENS = (1, 2), (8, 32, 128, 512)


def totals(
    model: tl.Transformer, src: torch.Tensor, n: int, use_cache: bool
) -> tuple[float, float]:
    """(wall-clock seconds, CPU seconds) of one greedy generation of n tokens."""
    steps = tl.time_decoding(model, src, n, use_cache)
    return sum(steps["wall"]), sum(steps["cpu"])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="round-robin rounds per row (2 for 512 tokens)",
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--batch",
        type=int,
        nargs="+",
        default=list(BATCHES),
        help="batch sizes of the table (the target needs batch 2)",
    )
    p.add_argument(
        "--json", type=Path, default=Path("benchmarks/results/kv_cache.json")
    )
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    torch.manual_seed(0)  # the sources below
    model = bench_model(seed=0)
    cfg = model.cfg
    rows = []
    print(
        f"d_model={cfg.d_model} h={cfg.n_heads} layers={cfg.n_layers} d_ff={cfg.d_ff} "
        f"vocab={cfg.vocab_size} T_src={T_SRC}, CPU float32, "
        f"{torch.get_num_threads()} thread(s)"
    )
    print(
        f"{'':8s}{'----- wall-clock s -----':>25s} {'------ CPU s ------':>21s} "
        f"{'-- tokens per CPU s --':>22s} {'------ speedup ------':>24s}"
    )
    print(
        f"{'B':>2s} {'new':>4s} {'no cache':>12s} {'cache':>12s} {'no cache':>10s} "
        f"{'cache':>10s} {'no cache':>11s} {'cache':>10s} {'wall':>7s} {'CPU':>7s} "
        f"{'FLOPs':>8s}"
    )
    for B in args.batch:
        src = torch.randint(2, cfg.vocab_size, (B, T_SRC))
        for n in NEW_TOKENS:
            rounds = min(args.rounds, 2) if n >= 512 else args.rounds
            times = {True: [], False: []}
            # warm-up: the first call of each shape pays for setting up kernels
            for use_cache in (True, False):
                totals(model, src, min(n, 16), use_cache)
            for _ in range(rounds):
                for use_cache in (True, False):
                    times[use_cache].append(totals(model, src, n, use_cache))
            (cw, cc), (uw, uc) = (
                [statistics.median(x) for x in zip(*times[u], strict=True)]
                for u in (True, False)
            )
            predicted = tl.generate_macs(cfg, T_SRC, n, False) / tl.generate_macs(
                cfg, T_SRC, n, True
            )
            row = {
                "batch": B,
                "new_tokens": n,
                "uncached_wall_s": uw,
                "cached_wall_s": cw,
                "uncached_cpu_s": uc,
                "cached_cpu_s": cc,
                "uncached_tok_per_cpu_s": B * n / uc,
                "cached_tok_per_cpu_s": B * n / cc,
                "speedup_wall": uw / cw,
                "speedup_cpu": uc / cc,
                "flop_predicted_speedup": predicted,
                "rounds": rounds,
            }
            rows.append(row)
            print(
                f"{B:2d} {n:4d} {uw:12.3f} {cw:12.3f} {uc:10.3f} {cc:10.3f} "
                f"{B * n / uc:11.0f} {B * n / cc:10.0f} "
                f"{uw / cw:6.1f}x {uc / cc:6.1f}x {predicted:7.1f}x"
            )

    if TARGET_BATCH not in args.batch:
        print(f"batch {TARGET_BATCH} not measured: no target checked")
        return 0

    # per-token time against position, one run of each path at the target size
    src = torch.randint(2, cfg.vocab_size, (TARGET_BATCH, T_SRC))
    per_step = {
        name: tl.time_decoding(model, src, TARGET_NEW, use_cache)["cpu"]
        for name, use_cache in (("cached", True), ("uncached", False))
    }
    print(
        "CPU ms per token, median of 16 steps ending at position   "
        + "  ".join(f"{t:>5d}" for t in (16, 64, 128, 256, 512))
    )
    for name, ts in per_step.items():
        print(
            f"  {name:9s}{'':48s}"
            + "  ".join(
                f"{1e3 * statistics.median(ts[t - 16 : t]):5.2f}"
                for t in (16, 64, 128, 256, 512)
            )
        )

    # appending: torch.cat (copies the cache every step) against a preallocated buffer
    # (writes in place)
    def cached_loop(capacity):
        with torch.no_grad():
            cache = model.init_cache(model.encode(src), capacity=capacity)
            tok = torch.full((TARGET_BATCH, 1), cfg.bos_id)
            with Stopwatch() as clock:
                for _ in range(TARGET_NEW):
                    tok = model.decode_step(tok, cache)[:, -1:].argmax(-1)
            return clock.wall

    appends = {"torch.cat": [], "preallocated": []}
    for _ in range(args.rounds):
        for name, capacity in (("torch.cat", None), ("preallocated", TARGET_NEW)):
            appends[name].append(cached_loop(capacity))  # wall-clock
    append_s = {name: statistics.median(ts) for name, ts in appends.items()}
    print(
        "cached decoding, 512 tokens, batch 2:  "
        + ",  ".join(f"{n} {s:.3f} s" for n, s in append_s.items())
    )

    # memory: eq. kv-memory-total against the tensors' nbytes, with and without GQA
    memory = []
    print(
        "KV cache after 512 new tokens, batch 2:  "
        "n_kv_heads  formula bytes  tensors' nbytes"
    )
    for kv in (4, 2, 1):
        m = bench_model(n_kv_heads=kv)
        with torch.no_grad():
            cache = m.init_cache(m.encode(src), capacity=TARGET_NEW)
            tok = torch.full((TARGET_BATCH, 1), cfg.bos_id)
            for _ in range(TARGET_NEW):
                tok = m.decode_step(tok, cache)[:, -1:].argmax(-1)
        formula = tl.kv_cache_nbytes(
            cfg.n_layers, TARGET_BATCH, kv, TARGET_NEW + T_SRC, cfg.d_k
        )
        memory.append(
            {"n_kv_heads": kv, "formula_bytes": formula, "nbytes": cache.nbytes()}
        )
        print(f"{'':41s}{kv:10d} {formula:14,d} {cache.nbytes():16,d}")

    target = next(
        r for r in rows if r["batch"] == TARGET_BATCH and r["new_tokens"] == TARGET_NEW
    )
    ok = target["speedup_cpu"] >= TARGET_SPEEDUP and all(
        m["formula_bytes"] == m["nbytes"] for m in memory
    )
    print(
        f"speedup at {TARGET_NEW} new tokens, batch {TARGET_BATCH}: "
        f"{target['speedup_cpu']:.1f}x in CPU time, "
        f"{target['speedup_wall']:.1f}x wall-clock "
        f"(target >= {TARGET_SPEEDUP:.0f}x in CPU time): {'OK' if ok else 'MISSED'}"
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "config": {
                    **BENCH_CONFIG,
                    "T_src": T_SRC,
                    "threads": torch.get_num_threads(),
                },
                "rows": rows,
                "per_token_cpu_ms": {
                    name: [1e3 * t for t in ts] for name, ts in per_step.items()
                },
                "memory": memory,
                "append_s": append_s,
                "target_met": ok,
            },
            indent=2,
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
