"""Attention computed three ways: peak memory and time (chapter 13).

The paths: the explicit one, ``tl.scaled_dot_product_attention`` (it builds the
(T, T) scores and weights); ``tl.tiled_attention``, the FlashAttention forward pass in
Python loops; and ``F.scaled_dot_product_attention``, which on this CPU dispatches to
PyTorch's C++ flash kernel (``aten::_scaled_dot_product_flash_attention_for_cpu``, named
below from the profiler). B = 1, h = 8, d_k = d_v = 64, float32, no mask, one thread.

Memory, for T = 512 ... 16384: every (path, T) point runs in a fresh subprocess and is
measured twice. (1) The allocator: ``tl.measure.peak_allocated_bytes``, the running sum
of the allocations and frees that ``torch.profiler(profile_memory=True)`` records: the
bytes of tensors the call holds at its worst moment, outputs included, exact and
independent of other processes. (2) The operating system: the process's peak resident
set (VmHWM, reset through /proc/self/clear_refs just before the call) minus its
resident set before it, which also counts allocator overhead and pages malloc keeps.
The explicit path stops at T = 8192: its scores are then 2 GiB (h T^2 4 bytes) and it
holds about three such matrices at once; at 16384 the scores alone would be 8 GiB, more
than this shared machine (24 GiB, five users) can give one benchmark.

Time, for T = 512 ... 4096: the paths timed round-robin in one process (median of the
rounds), so machine load affects them alike; ratios to F.scaled_dot_product_attention.

Targets, ratios from one run: at T = 8192 the explicit path's allocator peak is at
least 100x the tiled path's; from T = 1024 on, doubling T multiplies the explicit peak
by 3.5-4.5 (T^2) and, from T = 4096 on, the tiled peak by 1.6-2.4 (T).
Run: `make bench` or `python benchmarks/flash_attention.py` (about 5 minutes); the
tables are written to benchmarks/results/flash_attention.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

import transformer_lib as tl
from transformer_lib import measure

B, H, D = 1, 8, 64
MEMORY_T = [512, 1024, 2048, 4096, 8192, 16384]
EXPLICIT_MAX_T = 8192  # 2 GiB of scores; 16384 would need 8 GiB for the scores alone
TIME_T = [512, 1024, 2048, 4096]
MEMORY_BLOCKS = (128, 128)  # the tiled path's blocks in the memory table
PATHS = {
    "explicit": lambda q, k, v: tl.scaled_dot_product_attention(q, k, v),
    "tiled": lambda q, k, v: tl.tiled_attention(q, k, v, None, *MEMORY_BLOCKS),
    "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
}


def inputs(T: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(T)
    return tuple(torch.randn(B, H, T, D, generator=g) for _ in range(3))


def _status_bytes(field: str) -> int:
    """VmRSS or VmHWM of this process, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def measure_point(path: str, T: int) -> dict:
    """Runs in its own process: the OS's and the allocator's peak for one call."""
    torch.set_num_threads(1)
    fn = PATHS[path]
    fn(*inputs(128))  # one-time costs (code pages, thread pools) are not attention's
    q, k, v = inputs(T)
    before = _status_bytes("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    with measure.Stopwatch() as clock:
        out = fn(q, k, v)
    seconds = clock.wall
    del out
    rss_peak = _status_bytes("VmHWM") - before
    alloc_peak = measure.peak_allocated_bytes(fn, q, k, v)
    return {"path": path, "T": T, "alloc": alloc_peak, "rss": rss_peak, "s": seconds}


def memory_table() -> list[dict]:
    rows = []
    for T in MEMORY_T:
        for path in PATHS:
            if path == "explicit" and T > EXPLICIT_MAX_T:
                continue
            cmd = [sys.executable, __file__, "--point", path, str(T)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return rows


def sdpa_backend() -> str:
    """The aten kernel that F.scaled_dot_product_attention runs, from the profiler."""
    from torch.profiler import profile

    q, k, v = inputs(256)
    with measure._quiet_stderr(), profile() as prof:
        F.scaled_dot_product_attention(q, k, v)
    names = {e.name for e in prof.events()}
    kernels = sorted(n for n in names if n.startswith("aten::_scaled_dot_product"))
    return ", ".join(kernels) or "the math fallback (no fused kernel)"


def time_table(rounds: int) -> list[dict]:
    torch.set_num_threads(1)
    rows = []
    for T in TIME_T:
        q, k, v = inputs(T)
        contenders = {
            "explicit": lambda q=q, k=k, v=v: tl.scaled_dot_product_attention(q, k, v),
            "tiled 64x64": lambda q=q, k=k, v=v: tl.tiled_attention(q, k, v),
            "tiled 256x256": lambda q=q, k=k, v=v: tl.tiled_attention(
                q, k, v, None, 256, 256
            ),
            "sdpa": lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v),
        }
        ref = contenders["sdpa"]()
        for fn in contenders.values():  # warm-up, and the same answer
            got = fn()
            torch.testing.assert_close(
                got[0] if isinstance(got, tuple) else got, ref, atol=1e-5, rtol=1e-4
            )
        times = {name: [] for name in contenders}
        for _ in range(rounds if T < 4096 else max(2, rounds // 2)):
            for name, fn in contenders.items():
                with measure.Stopwatch() as clock:
                    fn()
                times[name].append(clock.wall)
        base = statistics.median(times["sdpa"])
        for name, ts in times.items():
            med = statistics.median(ts)
            rows.append({"T": T, "path": name, "ms": med * 1e3, "ratio": med / base})
    return rows


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--point", nargs=2, metavar=("PATH", "T"), help=argparse.SUPPRESS)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument(
        "--json", type=Path, default=Path("benchmarks/results/flash_attention.json")
    )
    args = p.parse_args()
    if args.point:
        print(json.dumps(measure_point(args.point[0], int(args.point[1]))))
        return 0

    mib = 2**20
    print(
        f"B={B} h={H} d_k=d_v={D}, CPU float32, torch {torch.__version__}; "
        f"F.scaled_dot_product_attention runs {sdpa_backend()}"
    )
    mem = memory_table()
    peak = {(r["path"], r["T"]): r for r in mem}
    print(
        "\nPeak memory of one call, MiB (allocator: torch.profiler's allocation events;"
        "\nRSS: the process's peak resident set, one fresh process per point; "
        f"tiled blocks {MEMORY_BLOCKS[0]}x{MEMORY_BLOCKS[1]})"
    )
    print(
        f"{'T':>6s} {'scores h T^2 4B':>16s} {'explicit':>10s} {'(RSS)':>9s} "
        f"{'tiled':>8s} {'(RSS)':>8s} {'F.sdpa':>8s} {'(RSS)':>8s}"
    )
    for T in MEMORY_T:
        cells = []
        for path in PATHS:
            r = peak.get((path, T))
            cells += (
                [f"{r['alloc'] / mib:.1f}", f"{r['rss'] / mib:.1f}"]
                if r
                else ["-", "-"]
            )
        print(
            f"{T:6d} {H * T * T * 4 / mib:16.0f} {cells[0]:>10s} {cells[1]:>9s} "
            f"{cells[2]:>8s} {cells[3]:>8s} {cells[4]:>8s} {cells[5]:>8s}"
        )
    print(
        f"explicit stops at T={EXPLICIT_MAX_T}: at 16384 its scores alone are "
        f"{H * 16384**2 * 4 / 2**30:.0f} GiB"
    )

    timing = time_table(args.rounds)
    print(
        f"\nTime of one call, ms (median of rounds, {torch.get_num_threads()} thread)"
    )
    names = list(dict.fromkeys(r["path"] for r in timing))
    print(f"{'T':>6s} " + " ".join(f"{n:>15s}" for n in names))
    for T in TIME_T:
        row = {r["path"]: r for r in timing if r["T"] == T}
        print(
            f"{T:6d} "
            + " ".join(f"{row[n]['ms']:8.1f} ({row[n]['ratio']:4.1f}x)" for n in names)
        )
    print("(x: ratio to F.scaled_dot_product_attention)")

    top = EXPLICIT_MAX_T
    saving = peak[("explicit", top)]["alloc"] / peak[("tiled", top)]["alloc"]
    explicit_growth = [
        peak[("explicit", 2 * T)]["alloc"] / peak[("explicit", T)]["alloc"]
        for T in MEMORY_T
        if 1024 <= T and 2 * T <= top
    ]
    tiled_growth = [
        peak[("tiled", 2 * T)]["alloc"] / peak[("tiled", T)]["alloc"]
        for T in MEMORY_T
        if 4096 <= T and 2 * T <= MEMORY_T[-1]
    ]
    checks = {
        f"explicit / tiled peak at T={top} >= 100 (got {saving:.0f})": saving >= 100,
        "explicit peak x3.5-4.5 per doubling of T (got "
        + ", ".join(f"{g:.2f}" for g in explicit_growth)
        + ")": all(3.5 <= g <= 4.5 for g in explicit_growth),
        "tiled peak x1.6-2.4 per doubling of T (got "
        + ", ".join(f"{g:.2f}" for g in tiled_growth)
        + ")": all(1.6 <= g <= 2.4 for g in tiled_growth),
    }
    for text, ok in checks.items():
        print(f"{text}: {'OK' if ok else 'MISSED'}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "config": {"B": B, "h": H, "d": D, "tiled_blocks": MEMORY_BLOCKS},
                "memory": mem,
                "time": timing,
                "targets_met": all(checks.values()),
            },
            indent=2,
        )
    )
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
