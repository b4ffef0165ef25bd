"""Train the book's two language models and write them beside their logs:

    book/_static/live/lm_zh.safetensors   the Chinese character model (fortunes-zh)
    book/_static/live/lm_en.safetensors   the English byte-level BPE model (fortunes)
    book/_static/live/lm_zh.log.json      the loss of every one of the first 50 steps,
    book/_static/live/lm_en.log.json      then every 10th; times; held-out bits per
                                          character against unigram and bigram baselines

Deterministic from each recipe's seed (transformer_lib/demos/language.py): the same
corpus gives the same weights, so after a change of the library's state-dict names the
files are written again by running this again. One torch thread per model (on a busy
2-core machine two threads wait on each other; see demos.training.train). Run as
``make language-models`` or ``python scripts/train_language_models.py [lm_zh] [lm_en]``
(several names: one process each, side by side).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import torch

import transformer_lib as tl
from transformer_lib.demos import language

OUT = Path(__file__).resolve().parent.parent / "book" / "_static" / "live"
FIRST_STEPS = 50  # logged one by one: tests/test_language_models.py re-runs them
EVERY = 10


def run(name: str) -> dict:
    recipe = language.RECIPES[name]
    t0 = time.perf_counter()
    prep = language.prepare(recipe)
    prep_seconds = time.perf_counter() - t0
    model, history = language.train_language_model(prep, num_threads=1)
    losses = history["loss"]
    logged = {
        str(s): losses[s]
        for s in range(len(losses))
        if s < FIRST_STEPS or (s + 1) % EVERY == 0
    }
    path = tl.export_model(
        model,
        OUT / f"{name}.safetensors",
        tokenizer=prep.tokenizer,
        dtype=torch.float16,
    )
    # the file's model (float16 weights, computed in float32) on the held-out split
    reloaded = tl.load_exported(path)
    n_chars = len(language.SEPARATOR.join(prep.held_out)) - 1  # after the first
    V = len(prep.tokenizer)
    bits = {
        "model": language.model_bits(reloaded, prep.held_ids),
        "unigram": language.ngram_bits(prep.train_ids, prep.held_ids, V, 1),
        "bigram": language.ngram_bits(prep.train_ids, prep.held_ids, V, 2),
    }
    n_tokens = prep.held_ids.numel() - 1
    log = {
        "name": name,
        "recipe": {k: getattr(recipe, k) for k in recipe.__dataclass_fields__},
        "config": tl.read_metadata(path)["config"],
        "parameters": sum(p.numel() for p in model.parameters()),
        "torch": torch.__version__,
        "steps": history["steps"],
        "train_seconds": history["seconds"],
        "train_cpu_seconds": history["cpu_seconds"],
        "prepare_seconds": prep_seconds,
        "train_passages": len(prep.train),
        "held_out_passages": len(prep.held_out),
        "train_tokens": prep.train_ids.numel(),
        "held_out_tokens": prep.held_ids.numel(),
        "held_out_chars": n_chars,
        "bits_per_char": {k: v / n_chars for k, v in bits.items()},
        "bits_per_token": {k: v / n_tokens for k, v in bits.items()},
        "loss": logged,
        "file_bytes": path.stat().st_size,
    }
    (OUT / f"{name}.log.json").write_text(json.dumps(log, indent=1) + "\n")
    print(
        f"{name}: {history['steps']} steps in {history['seconds']:.0f} s; "
        + ", ".join(f"{k} {v:.3f}" for k, v in log["bits_per_char"].items())
        + f" bits/char; {path} {log['file_bytes']} bytes; "
        f"perplexity/token {math.pow(2, log['bits_per_token']['model']):.1f}"
    )
    return log


def main(names: list[str]) -> None:
    names = names or list(language.RECIPES)
    unknown = [n for n in names if n not in language.RECIPES]
    if unknown:
        raise SystemExit(
            f"unknown model {unknown}; choose from {list(language.RECIPES)}"
        )
    if len(names) == 1:
        run(names[0])
        return
    procs = [subprocess.Popen([sys.executable, __file__, n]) for n in names]
    codes = [p.wait() for p in procs]
    if any(codes):
        raise SystemExit(
            f"training failed: exit codes {dict(zip(names, codes, strict=True))}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
