"""One forward pass of each of the book's trained models in headless Chromium, through
the page's own module (``book/_static/tl-live.js``), and the bytes the live pages add.

Targets: the median forward pass (``model.logits``, what a live panel calls: the
logits as nested arrays) takes at most 20 ms for each model; the module and both
models' weights, as the built site serves them, weigh at most 600 KB. The inputs are
the longest each model takes (max_len tokens; the reversal model's source and target
both). Also printed: the pass that records every intermediate (``model.trace``) and the
90th percentile, which on a shared machine includes the time spent waiting for a core.

Run: ``make bench`` or ``python benchmarks/live_forward.py`` after ``make book``
(exit status 1 when a target is missed). ``--repeats`` sets the passes per model.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import statistics
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(os.environ.get("TL_SITE_DIR", ROOT / "_build" / "html"))
FORWARD_MS = 20.0  # target: median milliseconds of one forward pass
BUDGET_KB = 600.0  # target: the module, the panels' script and both weight files
MODELS = ("reversal", "addition")

TIME_IN_PAGE = """async ([name, repeats]) => {
  const m = await window.tlLive.open(name);
  const c = m.config;
  const ids = (n, lo) =>
    Array.from({length: n}, (_, i) => lo + (i % (c.vocab_size - lo)));
  const args = m.kind === "gpt" ? [ids(c.max_len, 0)]
    : [ids(c.max_len, 2), [c.bos_id, ...ids(c.max_len - 1, 2)]];
  for (let i = 0; i < 20; i++) await m.logits(...args);  // warm the JIT up
  const time = async (f) => {
    const ms = [];
    for (let i = 0; i < repeats; i++) {
      const t0 = performance.now();
      await f(...args);
      ms.push(performance.now() - t0);
    }
    return ms;
  };
  return {logits: await time(m.logits), trace: await time(m.trace),
          tokens: args.map((a) => a.length)};
}"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def page_bytes() -> dict[str, int]:
    static = SITE / "_static"
    files = [static / "tl-live.js", static / "tl-live-panels.js"]
    files += [static / "live" / f"{m}.safetensors" for m in MODELS]
    return {
        f.relative_to(SITE).as_posix(): f.stat().st_size for f in files if f.exists()
    }


def measure(repeats: int) -> dict:
    from playwright.sync_api import sync_playwright

    handler = functools.partial(_Quiet, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path="/usr/bin/chromium", args=["--no-sandbox"]
            )
            page = browser.new_page()
            page.route(
                "**/*",
                lambda r: (
                    r.continue_() if r.request.url.startswith(base) else r.abort()
                ),
            )
            page.goto(f"{base}/javascript.html")
            page.wait_for_function("() => window.tlLive !== undefined")
            out = {m: page.evaluate(TIME_IN_PAGE, [m, repeats]) for m in MODELS}
            browser.close()
    finally:
        httpd.shutdown()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    if not (SITE / "javascript.html").is_file():
        print(f"no built site at {SITE}: run `make book` first")
        return 1
    results, ok = measure(args.repeats), True
    print(f"load average {os.getloadavg()[0]:.1f}; {args.repeats} passes per model")
    print(f"{'model':10s} {'tokens':>8s} {'logits median':>14s} {'p90':>8s} "
          f"{'trace median':>13s}  target <= {FORWARD_MS:.0f} ms")  # fmt: skip
    for name, r in results.items():
        med = statistics.median(r["logits"])
        p90 = statistics.quantiles(r["logits"], n=10)[-1]
        tmed = statistics.median(r["trace"])
        ok &= med <= FORWARD_MS
        tokens = "+".join(map(str, r["tokens"]))
        print(f"{name:10s} {tokens:>8s} {med:11.2f} ms {p90:5.2f} ms {tmed:10.2f} ms"
              f"  {'ok' if med <= FORWARD_MS else 'MISSED'}")  # fmt: skip
    sizes = page_bytes()
    total = sum(sizes.values()) / 1024
    for f, n in sizes.items():
        print(f"{f:40s} {n / 1024:8.1f} KB")
    print(
        f"{'added page weight, in all':40s} {total:8.1f} KB  target <= {BUDGET_KB:.0f}"
    )
    ok &= total <= BUDGET_KB
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
