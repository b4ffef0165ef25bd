"""The language chapter's checkers (transformer_lib/exercises/ch19_bpe.py, ch19_bits.py
and ch19_induction.py, re-exported by ch19_language.py): each accepts the reference and
another correct answer, and answers every mistake of its catalogue with that mistake's
own row (that part in tests/test_exercises.py's catalogue, with every exported checker;
chapter 19 calls them)."""

from __future__ import annotations

import math

import pytest
import torch

from transformer_lib.exercises import ch19_induction
from transformer_lib.exercises import ch19_language as ch
from transformer_lib.tokens import _merge_word


@pytest.fixture(autouse=True)
def english(monkeypatch):
    """The checkers speak gettext's language: these tests read their English,
    whatever language a test before them left set."""
    monkeypatch.setenv("LANGUAGE", "en")


def merge_step_with_the_library(words, counts, new_id):
    """The library's own pieces: tokens._merge_word (the trainer's merge) and counts
    kept as BpeTrainer keeps them."""
    counts_by_pair: dict = {}
    for w, n in zip(words, counts, strict=True):
        for p in zip(w, w[1:], strict=False):
            counts_by_pair[p] = counts_by_pair.get(p, 0) + n
    pair = max(counts_by_pair, key=lambda p: (counts_by_pair[p], (-p[0], -p[1])))
    new_words = [list(w) for w in words]
    for w in new_words:
        _merge_word(w, *pair, new_id)
    return pair, new_words


def bits_via_cross_entropy(logits, targets, n_chars):
    nll = torch.nn.functional.cross_entropy(logits, targets, reduction="sum")
    return nll.item() / math.log(2) / n_chars


def induction_via_diagonal(weights, n):
    return weights.diagonal(offset=-(n - 1), dim1=-2, dim2=-1)[:, -n:].mean(-1)


CORRECT = [
    (ch.check_bpe_merge_step, ch.reference_bpe_merge_step),
    (ch.check_bpe_merge_step, merge_step_with_the_library),
    (ch.check_bits_per_char, ch.reference_bits_per_char),
    (ch.check_bits_per_char, bits_via_cross_entropy),
    (ch.check_induction_score, ch19_induction.reference_induction_score),
    (ch.check_induction_score, induction_via_diagonal),
]


@pytest.mark.parametrize(("checker", "fn"), CORRECT, ids=lambda x: x.__name__)
def test_correct_answers_pass(checker, fn, capsys):
    checker(fn)
    assert capsys.readouterr().out.startswith(f"{checker.__name__}: correct")


def test_every_checker_has_mistakes():
    assert all(sum(bool(r.example) for r in c.mistakes) >= 3 for c in ch.CHECKERS)
