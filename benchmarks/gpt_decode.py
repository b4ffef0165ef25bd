"""Cached greedy decoding of tl.GPT against transformers' GPT2LMHeadModel.generate, with
the same config and the same weights (tl.GPT.from_hf), and tl.GPT's cached against
uncached decoding.

A random-weight GPT-2: GPT-2's vocabulary (50257) and 1024 positions, d_model=256,
4 heads, 4 layers, d_ff=1024; CPU float32, one torch thread; batch 1, a prompt of 16
tokens, 512 new tokens. Each round runs the three generations one after the other
(round-robin), timed in wall-clock time and in the CPU time of this process (which other
jobs on a shared machine do not inflate); the median of the rounds is kept. Targets:
tl.GPT cached at least as fast as transformers (ratio >= 1, CPU time), and the same
tokens. Run: `make bench` or `python benchmarks/gpt_decode.py`; the numbers are written
to benchmarks/results/gpt_decode.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded

import argparse
import json
import statistics
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel

import transformer_lib as tl
from transformer_lib.measure import Stopwatch

CONFIG = dict(
    vocab_size=50257, n_positions=1024, n_embd=256, n_head=4, n_layer=4, n_inner=1024
)
PROMPT, NEW = 16, 512


def timed(fn) -> tuple[torch.Tensor, float, float]:
    """(result, wall-clock seconds, CPU seconds) of fn()."""
    with Stopwatch() as clock:
        out = fn()
    return out, clock.wall, clock.cpu


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--new", type=int, default=NEW)
    p.add_argument(
        "--json", type=Path, default=Path("benchmarks/results/gpt_decode.json")
    )
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    hf_cfg = GPT2Config(**CONFIG, bos_token_id=0, eos_token_id=0)
    hf = GPT2LMHeadModel(hf_cfg).eval()
    hf.generation_config.eos_token_id = None  # always 512 new tokens
    hf.generation_config.pad_token_id = 0
    model = tl.GPT.from_hf(hf).eval()
    prompt = torch.randint(0, CONFIG["vocab_size"], (1, PROMPT))
    mask = torch.ones_like(prompt)
    n = args.new

    runs = {
        "tl_cached": lambda k: model.generate(prompt, k),
        "hf_cached": lambda k: hf.generate(
            prompt, attention_mask=mask, max_new_tokens=k, do_sample=False
        )[:, PROMPT:],
        "tl_uncached": lambda k: model.generate(prompt, k, use_cache=False),
    }
    print(
        f"GPT-2, random weights: d_model={CONFIG['n_embd']} h={CONFIG['n_head']} "
        f"layers={CONFIG['n_layer']} d_ff={CONFIG['n_inner']} "
        f"vocab={CONFIG['vocab_size']}; batch 1, prompt {PROMPT}, {n} new tokens, "
        f"CPU float32, {torch.get_num_threads()} thread(s), {args.rounds} rounds"
    )
    with torch.no_grad():
        for fn in runs.values():  # warm-up: the first call of each shape sets up
            fn(8)
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in runs}
        tokens = {}
        for _ in range(args.rounds):
            for name, fn in runs.items():
                out, wall, cpu = timed(lambda fn=fn: fn(n))
                times[name].append((wall, cpu))
                tokens[name] = out
    med = {
        name: {
            "wall_s": statistics.median(w for w, _ in ts),
            "cpu_s": statistics.median(c for _, c in ts),
        }
        for name, ts in times.items()
    }
    for m in med.values():
        m["tok_per_s_wall"] = n / m["wall_s"]
        m["tok_per_s_cpu"] = n / m["cpu_s"]
    print(f"{'':14s}{'wall s':>9s}{'CPU s':>9s}{'tok/s wall':>12s}{'tok/s CPU':>11s}")
    for name, m in med.items():
        print(
            f"{name:14s}{m['wall_s']:9.2f}{m['cpu_s']:9.2f}"
            f"{m['tok_per_s_wall']:12.0f}{m['tok_per_s_cpu']:11.0f}"
        )
    same = torch.equal(tokens["tl_cached"], tokens["hf_cached"])
    same_uncached = torch.equal(tokens["tl_cached"], tokens["tl_uncached"])
    first_diff = (
        None
        if same
        else int((tokens["tl_cached"] != tokens["hf_cached"]).nonzero()[0, 1])
    )
    ratio_cpu = med["hf_cached"]["cpu_s"] / med["tl_cached"]["cpu_s"]
    ratio_wall = med["hf_cached"]["wall_s"] / med["tl_cached"]["wall_s"]
    speedup_cpu = med["tl_uncached"]["cpu_s"] / med["tl_cached"]["cpu_s"]
    speedup_wall = med["tl_uncached"]["wall_s"] / med["tl_cached"]["wall_s"]
    print(
        f"tl.GPT cached vs transformers generate: {ratio_cpu:.2f}x in CPU time, "
        f"{ratio_wall:.2f}x wall-clock (> 1: tl faster); same {n} tokens: {same}"
        + ("" if same else f" (first difference at new token {first_diff})")
    )
    print(
        f"tl.GPT cached vs uncached: {speedup_cpu:.1f}x in CPU time, "
        f"{speedup_wall:.1f}x wall-clock; same tokens: {same_uncached}"
    )
    ok = ratio_cpu >= 1.0 and same and same_uncached
    print(f"target (tl not slower, same tokens): {'OK' if ok else 'MISSED'}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "config": {
                    **CONFIG,
                    "prompt": PROMPT,
                    "new_tokens": n,
                    "threads": torch.get_num_threads(),
                    "rounds": args.rounds,
                },
                "median": med,
                "tl_vs_hf_cpu": ratio_cpu,
                "tl_vs_hf_wall": ratio_wall,
                "cached_vs_uncached_cpu": speedup_cpu,
                "cached_vs_uncached_wall": speedup_wall,
                "same_tokens_as_hf": same,
                "same_tokens_uncached": same_uncached,
                "target_met": ok,
            },
            indent=2,
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
