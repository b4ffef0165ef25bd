"""The corpora and the two committed language models (book/_static/live/lm_*): the
weights come from the code (the first 50 logged losses are found again), the files
describe themselves (model and tokenizer), and the models beat the n-gram baselines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import transformer_lib as tl
from transformer_lib.demos import corpora, language

LIVE = Path(__file__).resolve().parent.parent / "book" / "_static" / "live"
NAMES = sorted(language.RECIPES)


def log_of(name: str) -> dict:
    return json.loads((LIVE / f"{name}.log.json").read_text())


def test_read_fortunes_strips_colours_and_separators(tmp_path):
    f = tmp_path / "tang.u8"
    f.write_text(
        "\x1b[32m《静夜思》\x1b[m\n床前明月光，  \n%\n\n%\n"
        "\x1b[33m作者\x1b[m\n疑是地上霜。\n"
    )
    assert corpora.read_fortunes(f) == [
        "《静夜思》\n床前明月光，",
        "作者\n疑是地上霜。",
    ]
    with pytest.raises(FileNotFoundError, match="install Debian's fortunes"):
        corpora.read_fortunes(tmp_path / "literature")


def test_filters_drop_tables_and_art():
    assert corpora.is_chinese_prose("床前明月光，疑是地上霜。\n    -- 李白")
    assert not corpora.is_chinese_prose("┌──┬──┐\n│命令│说明│")
    assert not corpora.is_chinese_prose("apt-get install foo  # 安装")
    assert corpora.is_english_prose("To be, or not to be: that is the question.")
    assert not corpora.is_english_prose("  /\\_/\\\n ( o.o )\n  > ^ <")
    assert not corpora.is_english_prose("Title\n==========\nSome words here")


def test_split_is_by_hash_not_position():
    passages = [f"passage {i}" for i in range(2000)]
    train, held = corpora.split(passages)
    assert 150 < len(held) < 250 and len(train) + len(held) == 2000
    # the same passage lands in the same split whatever the order
    _, held_rev = corpora.split(passages[::-1])
    assert set(held_rev) == set(held)


@pytest.mark.parametrize("language_", ["zh", "en"])
def test_corpora_are_large_and_disjoint(language_):
    train, held = corpora.corpus(language_)
    assert not set(train) & set(held)
    assert sum(map(len, train)) > (300_000 if language_ == "zh" else 1_000_000)


@pytest.mark.slow  # 50 training steps per model: not in make test-fast
@pytest.mark.parametrize("name", NAMES)
def test_first_50_steps_reproduce_the_log(name):
    """Re-run the first 50 steps from the seed: the losses are the logged ones, to
    float32's tolerance on another machine (the sums of a matrix product may be
    added in another order, and 50 Adam steps carry such differences along)."""
    log = log_of(name)
    prep = language.prepare(language.RECIPES[name])
    assert log["train_tokens"] == prep.train_ids.numel()
    _, history = language.train_language_model(prep, steps=50, num_threads=1)
    logged = torch.tensor([log["loss"][str(s)] for s in range(50)])
    torch.testing.assert_close(
        torch.tensor(history["loss"]), logged, rtol=2e-3, atol=2e-3
    )


@pytest.mark.parametrize("name", NAMES)
def test_files_describe_themselves(name):
    path = LIVE / f"{name}.safetensors"
    assert path.stat().st_size <= 3 * 2**20
    model = tl.load_exported(path)
    tok = tl.load_tokenizer(path)
    assert model.cfg.vocab_size == len(tok)
    assert model.cfg.positions == "rope" and model.cfg.norm == "rmsnorm"
    text = "床前明月光，疑是地上霜。" if name == "lm_zh" else "The cat sat on the mat."
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    logits = model(torch.tensor([ids]))
    assert logits.shape == (1, len(ids), len(tok)) and torch.isfinite(logits).all()


@pytest.mark.parametrize("name", NAMES)
def test_model_beats_the_baselines(name):
    """The logged held-out bits per character: the model below the smoothed bigram,
    the bigram below the unigram."""
    bpc = log_of(name)["bits_per_char"]
    assert bpc["model"] < bpc["bigram"] < bpc["unigram"]


@pytest.mark.parametrize("name", NAMES)
def test_model_beats_the_bigram_clearly(name):
    """Clearly: at least 10% fewer bits per character than the smoothed bigram."""
    bpc = log_of(name)["bits_per_char"]
    assert bpc["model"] < 0.9 * bpc["bigram"]


def test_bits_per_char_is_pytorchs_cross_entropy_in_bits():
    """eq-bits-per-char: the chapter's bits (language.model_bits, read in overlapping
    windows) and the exercise's reference are F.cross_entropy's summed nats / ln 2, on
    a small random model whose windows all fit, and across window boundaries."""
    import math

    import torch.nn.functional as F

    from transformer_lib.exercises.ch19_bits import reference_bits_per_char

    g = torch.Generator().manual_seed(0)
    cfg = tl.GPTConfig.llama(
        vocab_size=11, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=8
    )
    model = tl.GPT(cfg).eval()
    ids = torch.randint(0, 11, (30,), generator=g)
    with torch.no_grad():
        # one window: the whole sequence, context long enough
        x, y = ids[:8], ids[1:9]
        nats = F.cross_entropy(model(x[None])[0].double(), y, reduction="sum").item()
        assert math.isclose(
            language.model_bits(model, ids[:9]), nats / math.log(2), rel_tol=1e-12
        )
        assert math.isclose(
            reference_bits_per_char(model(x[None])[0], y, 5),
            nats / math.log(2) / 5,
            rel_tol=1e-12,
        )
        # windows of 8 overlapping by one: every token after the first predicted once
        total = sum(
            F.cross_entropy(
                model(ids[s : s + 9][None, :-1])[0].double(),
                ids[s + 1 : s + 9],
                reduction="sum",
            ).item()
            for s in range(0, ids.numel() - 1, 8)
        )
        assert math.isclose(
            language.model_bits(model, ids), total / math.log(2), rel_tol=1e-12
        )
