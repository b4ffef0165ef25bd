"""Redraw time of every live control in the book.

Targets, per control: median <= 50 ms and worst case <= 100 ms. Each chapter registers
its interactive figures in ``transformer_lib.viz.chNN_*.EXPLORERS``. For every explorer,
this times the first ``Explorer.update()`` after it is built (what a reader waits for
when the widget appears), then, for every control, moves that control through all of
its values ``--repeats`` times (the others at their defaults) and times each
``Explorer.update`` -- exactly what the live widget calls on a change. The worst case
includes the first visit of every value. The targets are wall-clock times; the CPU
column (this process's CPU time, median) shows the work itself when other jobs share
the machine. The load average is printed with the table.

Run: `make bench` or `python benchmarks/widgets.py` (exit status 1 when a control
misses a target). `--only ch05` times the explorers whose name contains "ch05".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

from transformer_lib.measure import Stopwatch
from transformer_lib.viz import all_explorers

MEDIAN_MS = 50.0  # target for the median redraw of one control
WORST_MS = 100.0  # target for its slowest redraw


def measure(repeats: int, only: str = "") -> tuple[list[dict], list[dict]]:
    """(a row per control, a row per explorer with its build and first-draw time)."""
    rows, firsts = [], []
    for name, factory in all_explorers().items():
        if only not in name:
            continue
        with Stopwatch() as build:
            explorer = factory()
        with Stopwatch() as first:
            explorer.update()
        firsts.append(
            {
                "explorer": name,
                "build_ms": build.wall * 1e3,
                "first_ms": first.wall * 1e3,
            }
        )
        for control, options in explorer.controls.items():
            times, cpu = [], []
            for _ in range(repeats):
                for value in options:
                    with Stopwatch() as clock:
                        explorer.update(**{control: value})
                    times.append(clock.wall * 1e3)
                    cpu.append(clock.cpu * 1e3)
            explorer.update()  # back to the defaults before the next control
            rows.append(
                {
                    "explorer": name,
                    "control": control,
                    "values": len(options),
                    "median_ms": statistics.median(times),
                    "max_ms": max(times),
                    "cpu_median_ms": statistics.median(cpu),
                }
            )
    return rows, firsts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3, help="passes over each control")
    p.add_argument("--only", default="", help="time only explorers whose name has this")
    p.add_argument("--json", type=Path, default=Path("benchmarks/results/widgets.json"))
    args = p.parse_args()

    load = os.getloadavg()
    rows, firsts = measure(args.repeats, args.only)
    print(f"load average before: {load[0]:.2f}, after: {os.getloadavg()[0]:.2f}")
    head = f"{'explorer':28s} {'control':12s} {'values':>6s}"
    print(f"{head} {'median ms':>9s} {'max ms':>7s} {'CPU ms':>7s}")
    for r in rows:
        flag = "  <-- median" if r["median_ms"] > MEDIAN_MS else ""
        flag += "  <-- max" if r["max_ms"] > WORST_MS else ""
        print(
            f"{r['explorer']:28s} {r['control']:12s} {r['values']:6d} "
            f"{r['median_ms']:9.1f} {r['max_ms']:7.1f} {r['cpu_median_ms']:7.1f}{flag}"
        )
    print(f"\n{'explorer':28s} {'build ms':>8s} {'first redraw ms':>15s}")
    for f in firsts:
        print(f"{f['explorer']:28s} {f['build_ms']:8.1f} {f['first_ms']:15.1f}")
    over_median = sum(r["median_ms"] > MEDIAN_MS for r in rows)
    over_worst = sum(r["max_ms"] > WORST_MS for r in rows)
    medians = [r["median_ms"] for r in rows]
    print(
        f"\n{len(rows)} controls on {len(firsts)} explorers: "
        f"median of medians {statistics.median(medians):.1f} ms, "
        f"medians {min(medians):.1f}-{max(medians):.1f} ms, "
        f"slowest redraw {max(r['max_ms'] for r in rows):.1f} ms, "
        f"slowest first redraw {max(f['first_ms'] for f in firsts):.1f} ms"
    )
    print(
        f"{over_median} of {len(rows)} controls over {MEDIAN_MS:.0f} ms median; "
        f"{over_worst} over {WORST_MS:.0f} ms worst case"
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    result = {"median_ms": MEDIAN_MS, "worst_ms": WORST_MS, "rows": rows}
    args.json.write_text(json.dumps({**result, "explorers": firsts}, indent=2))
    return 1 if over_median or over_worst or not rows else 0


if __name__ == "__main__":
    raise SystemExit(main())
