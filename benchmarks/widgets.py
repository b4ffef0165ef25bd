"""Redraw time of every live control in the book (target: median < 100 ms per control).

Each chapter registers its interactive figures in ``transformer_lib.viz.chNN_*.EXPLORERS``. For every
explorer and every control, this moves that control through all of its values (the others at their
defaults) and times ``Explorer.update`` -- exactly what the live widget calls on a change.
Run: `make bench` or `python benchmarks/widgets.py`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from transformer_lib.viz import all_explorers

TARGET_MS = 100.0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument(
        "--repeats", type=int, default=3, help="passes over each control's values"
    )
    p.add_argument("--json", type=Path, default=Path("benchmarks/results/widgets.json"))
    args = p.parse_args()

    rows = []
    print(
        f"{'explorer':42s} {'control':14s} {'values':>6s} {'median ms':>10s} {'max ms':>8s}"
    )
    for name, factory in all_explorers().items():
        explorer = factory()
        explorer.update()  # warm-up: first draw pays for font loading etc.
        for control, options in explorer.controls.items():
            times = []
            for _ in range(args.repeats):
                for value in options:
                    t0 = time.perf_counter()
                    explorer.update(**{control: value})
                    times.append((time.perf_counter() - t0) * 1e3)
            med = statistics.median(times)
            rows.append(
                {
                    "explorer": name,
                    "control": control,
                    "values": len(options),
                    "median_ms": med,
                    "max_ms": max(times),
                }
            )
            flag = "" if med < TARGET_MS else "  <-- over target"
            print(
                f"{name:42s} {control:14s} {len(options):6d} {med:10.1f} {max(times):8.1f}{flag}"
            )
    slow = [r for r in rows if r["median_ms"] >= TARGET_MS]
    print(
        f"{len(rows)} controls on {len({r['explorer'] for r in rows})} explorers; {len(slow)} over {TARGET_MS:.0f} ms median"
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"target_ms": TARGET_MS, "rows": rows}, indent=2))
    return 1 if slow or not rows else 0


if __name__ == "__main__":
    raise SystemExit(main())
