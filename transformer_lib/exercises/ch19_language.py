"""The language chapter: one BPE merge step and bits per character from the logits.

Its third checker, a head's induction score, is in :mod:`.ch19_heads`. Chapter 19
(book/19_language.ipynb) calls the three; tests/test_language_exercises.py checks each
against a second correct answer.
"""

from __future__ import annotations

import math
from collections import Counter
from functools import cached_property

import torch

from .harness import Checker, Mistake, Trial, gen, randn
from .language import N_, _

# --------------------------------------------------------------------------------------
# bpe_merge_step(words, counts, new_id) -> (pair, new_words)
# --------------------------------------------------------------------------------------


def _pair_counts(words, counts):
    """Adjacent pairs inside each word, times the word's count, overlaps included."""
    c: Counter = Counter()
    for w, n in zip(words, counts, strict=True):
        for p in zip(w, w[1:], strict=False):
            c[p] += n
    return c


def _best(c: Counter, smallest=True):
    top = max(c.values())
    tied = [p for p, n in c.items() if n == top]
    return min(tied) if smallest else max(tied)


def _merge(w, pair, new_id):
    out, i = [], 0
    while i < len(w):
        if i + 1 < len(w) and (w[i], w[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(w[i])
            i += 1
    return out


def reference_bpe_merge_step(words, counts, new_id):
    """The most frequent adjacent pair inside the words (each occurrence times the
    word's count, overlapping occurrences included; ties: the smallest (left, right)),
    merged into ``new_id`` in every word, left to right."""
    pair = _best(_pair_counts(words, counts))
    return pair, [_merge(w, pair, new_id) for w in words]


def _non_overlapping_counts(words, counts):
    c: Counter = Counter()
    for w, n in zip(words, counts, strict=True):
        i = 0
        while i < len(w) - 1:
            p = (w[i], w[i + 1])
            c[p] += n
            i += 2 if i + 2 < len(w) and w[i + 2] == w[i + 1] == w[i] else 1
    return c


class MergeTrial(Trial):
    def __init__(self, inputs: str, words, counts, new_id) -> None:
        super().__init__(inputs, ([list(w) for w in words], list(counts), new_id))
        self.words, self.counts, self.new_id = words, counts, new_id

    @cached_property
    def want(self):
        return reference_bpe_merge_step(self.words, self.counts, self.new_id)

    @cached_property
    def well_formed(self) -> bool:
        g = self.got
        return (
            isinstance(g, tuple)
            and len(g) == 2
            and isinstance(g[1], list)
            and len(tuple(g[0])) == 2
        )

    @cached_property
    def got_pair(self):
        return tuple(int(x) for x in self.got[0])

    @cached_property
    def correct(self) -> bool:
        return self.well_formed and (self.got_pair, self.got[1]) == (
            self.want[0],
            [list(w) for w in self.want[1]],
        )

    @cached_property
    def counts_by_pair(self) -> Counter:
        return _pair_counts(self.words, self.counts)

    @cached_property
    def want_count(self) -> int:
        return self.counts_by_pair[self.want[0]]

    @cached_property
    def got_count(self) -> int:
        return self.counts_by_pair.get(self.got_pair, 0)

    @cached_property
    def across(self):
        """The best pair when the words are run together into one sequence."""
        flat = [t for w in self.words for t in w]
        return _best(_pair_counts([flat], [1]))


def _merge_trials() -> list[MergeTrial]:
    g = torch.Generator().manual_seed(19)
    rand = [torch.randint(0, 4, (int(n),), generator=g).tolist() for n in (5, 3, 6, 2)]
    return [
        MergeTrial(
            "words [[1, 2, 1, 2], [3, 4]], counts [1, 2] (" + _("a tie") + ")",
            [[1, 2, 1, 2], [3, 4]],
            [1, 2],
            9,
        ),
        MergeTrial(
            "words [[5, 5, 5], [1, 2]], counts [1, 1] ("
            + _("5 5 5 holds the pair twice")
            + ")",
            [[5, 5, 5], [1, 2]],
            [1, 1],
            9,
        ),
        MergeTrial(
            "words [[3], [4], [3], [4], [1, 2]], counts [1] * 5 ("
            + _("one-symbol words")
            + ")",
            [[3], [4], [3], [4], [1, 2]],
            [1] * 5,
            9,
        ),
        MergeTrial(
            "words [[1, 2], [3, 4]], counts [1, 3]", [[1, 2], [3, 4]], [1, 3], 9
        ),
        MergeTrial(f"words {rand}, counts [3, 1, 2, 2]", rand, [3, 1, 2, 2], 4),
    ]


# Known mistakes, each as a learner would write it


def merge_step_ties_largest(words, counts, new_id):
    c: Counter = Counter()
    for w, n in zip(words, counts, strict=True):
        for p in zip(w, w[1:], strict=False):
            c[p] += n
    top = max(c.values())
    pair = max(p for p in c if c[p] == top)  # the largest pair on a tie
    return pair, [_merge(w, pair, new_id) for w in words]


def merge_step_across_words(words, counts, new_id):
    flat = [t for w in words for t in w]  # the words run together
    c = Counter(zip(flat, flat[1:], strict=False))
    top = max(c.values())
    pair = min(p for p in c if c[p] == top)
    return pair, [_merge(w, pair, new_id) for w in words]


def merge_step_no_overlaps(words, counts, new_id):
    c: Counter = Counter()
    for w, n in zip(words, counts, strict=True):
        i = 0
        while i < len(w) - 1:
            c[(w[i], w[i + 1])] += n
            # a run like 5 5 5 is counted as if merged: once
            i += 2 if i + 2 < len(w) and w[i] == w[i + 1] == w[i + 2] else 1
    top = max(c.values())
    pair = min(p for p in c if c[p] == top)
    return pair, [_merge(w, pair, new_id) for w in words]


def merge_step_ignores_counts(words, counts, new_id):
    c: Counter = Counter()
    for w in words:
        c.update(zip(w, w[1:], strict=False))  # each word once, whatever its count
    top = max(c.values())
    pair = min(p for p in c if c[p] == top)
    return pair, [_merge(w, pair, new_id) for w in words]


def merge_step_merges_first_only(words, counts, new_id):
    pair, _ = reference_bpe_merge_step(words, counts, new_id)
    out = []
    for w in words:
        w = list(w)
        for i in range(len(w) - 1):
            if (w[i], w[i + 1]) == pair:
                w[i : i + 2] = [new_id]  # only the first occurrence of each word
                break
        out.append(w)
    return pair, out


MERGE_MISTAKES = [
    Mistake(
        None,
        lambda t: not t.well_formed,
        N_(
            "for {inputs}, return a tuple (pair, new_words): the merged pair (left,"
            " right) and the list of words after the merge"
        ),
    ),
    Mistake(
        merge_step_ties_largest,
        lambda t: t.got_count == t.want_count and t.got_pair > t.want[0],
        N_(
            "for {inputs}, you merged {got_pair}; {want[0]} has the same count and wins"
            " the tie: on equal counts the smaller (left id, right id) is merged, as"
            " tokenizers' BpeTrainer does"
        ),
    ),
    Mistake(
        merge_step_across_words,
        lambda t: t.got_pair == t.across != t.want[0] and t.got_count == 0,
        N_(
            "for {inputs}, you merged {got_pair}, a pair that occurs only across two"
            " words: count the pairs inside each word, never from the end of one word"
            " to the start of the next"
        ),
    ),
    Mistake(
        merge_step_no_overlaps,
        lambda t: (
            t.got_pair != t.want[0]
            and t.got_pair == _best(_non_overlapping_counts(t.words, t.counts))
        ),
        N_(
            "for {inputs}, you merged {got_pair}, but {want[0]} occurs {want_count}"
            " times: overlapping occurrences count (5 5 5 holds (5, 5) twice), though"
            " the merge then makes only one"
        ),
    ),
    Mistake(
        merge_step_ignores_counts,
        lambda t: (
            t.got_pair != t.want[0]
            and t.got_pair == _best(_pair_counts(t.words, [1] * len(t.words)))
        ),
        N_(
            "for {inputs}, you merged {got_pair}: each pair counts as often as its word"
            " occurs (times counts[i]), not once per distinct word"
        ),
    ),
    Mistake(
        merge_step_merges_first_only,
        lambda t: t.got_pair == t.want[0],
        N_(
            "for {inputs}, the pair {got_pair} is right, but the words after the merge"
            " are not {want[1]}: replace every occurrence in every word, left to right"
        ),
    ),
    Mistake(
        None,
        lambda t: True,
        N_(
            "for {inputs}, you merged {got_pair} ({got_count} occurrences); expected"
            " {want[0]} ({want_count})"
        ),
    ),
]

check_bpe_merge_step = Checker(
    "check_bpe_merge_step",
    "Check ``candidate(words, counts, new_id) -> (pair, new_words)``, one BPE merge.",
    _merge_trials,
    MERGE_MISTAKES,
    N_(
        "{n} merge steps agree, with a tie, a run of one symbol, one-symbol words and"
        " counts."
    ),
)


# --------------------------------------------------------------------------------------
# bits_per_char(logits, targets, n_chars) -> float
# --------------------------------------------------------------------------------------


def reference_bits_per_char(logits, targets, n_chars):
    """-(1/n_chars) sum_t log2 softmax(logits_t)[targets_t]: the bits to write the
    text's tokens under the model, per character of the text."""
    logp = torch.log_softmax(logits.double(), dim=-1)  # (T, V)
    nll = -logp.gather(-1, targets[:, None]).sum()  # nats
    return float(nll / math.log(2) / n_chars)


class BitsTrial(Trial):
    atol, rtol = 1e-4, 1e-4

    def __init__(self, inputs: str, logits, targets, n_chars) -> None:
        super().__init__(inputs, (logits, targets, n_chars))
        self.logits, self.targets, self.n_chars = logits, targets, n_chars

    @cached_property
    def want(self) -> float:
        return reference_bits_per_char(self.logits, self.targets, self.n_chars)

    @cached_property
    def number(self) -> bool:
        g = self.got
        return isinstance(g, (int, float)) or (
            isinstance(g, torch.Tensor) and g.numel() == 1
        )

    @cached_property
    def value(self) -> float:
        return float(self.got)

    @cached_property
    def correct(self) -> bool:
        return self.number and math.isclose(self.value, self.want, rel_tol=1e-4)

    def near(self, x: float) -> bool:
        return math.isclose(self.value, x, rel_tol=1e-4)

    @cached_property
    def n_tokens(self) -> int:
        return len(self.targets)


def _bits_trials() -> list[BitsTrial]:
    g = gen(190)
    return [
        BitsTrial("logits (6, 5), 6 tokens of 14 characters", randn(g, 6, 5, scale=2.0),
                  torch.randint(0, 5, (6,), generator=g), 14),
        BitsTrial("logits (8, 30), 8 tokens of 8 characters (one per character)",
                  randn(g, 8, 30), torch.randint(0, 30, (8,), generator=g), 8),
        BitsTrial("logits (4, 7) shifted by +5 (softmax does not see a shift)",
                  randn(g, 4, 7) + 5.0, torch.randint(0, 7, (4,), generator=g), 11),
    ]  # fmt: skip


def bits_in_nats(logits, targets, n_chars):
    logp = torch.log_softmax(logits, dim=-1)
    return float(-logp.gather(-1, targets[:, None]).sum() / n_chars)  # nats


def bits_per_token(logits, targets, n_chars):
    logp = torch.log_softmax(logits, dim=-1)
    return float(-logp.gather(-1, targets[:, None]).mean() / math.log(2))


def bits_without_softmax(logits, targets, n_chars):
    picked = logits.gather(-1, targets[:, None])  # the raw logit, not a probability
    return float(-picked.sum() / math.log(2) / n_chars)


def bits_with_sign_flipped(logits, targets, n_chars):
    logp = torch.log_softmax(logits, dim=-1)
    return float(logp.gather(-1, targets[:, None]).sum() / math.log(2) / n_chars)


def _nats(t):
    return t.want * math.log(2)


BITS_MISTAKES = [
    Mistake(
        None,
        lambda t: not t.number,
        N_(
            "for {inputs}, return one number (a float or a 0-dim tensor), the bits per"
            " character of the whole text"
        ),
    ),
    Mistake(
        bits_in_nats,
        lambda t: t.near(_nats(t)),
        N_(
            "for {inputs}, you returned {value:.4f}, the nats per character: log is the"
            " natural logarithm; divide by ln 2 (or use log2) for bits"
        ),
    ),
    Mistake(
        bits_per_token,
        lambda t: t.near(t.want * t.n_chars / t.n_tokens),
        N_(
            "for {inputs}, you returned {value:.4f}, the bits per token: divide the"
            " total by the number of characters, n_chars, so that tokenizers can be"
            " compared"
        ),
    ),
    Mistake(
        bits_with_sign_flipped,
        lambda t: t.near(-t.want),
        N_(
            "for {inputs}, you returned {value:.4f} < 0: bits are -log2 p, and a"
            " probability below 1 has a negative log"
        ),
    ),
    Mistake(
        bits_without_softmax,
        lambda t: t.near(
            float(-t.logits.gather(-1, t.targets[:, None]).sum() / math.log(2))
            / t.n_chars
        ),
        N_(
            "for {inputs}, you used the raw logits as log-probabilities: take"
            " log_softmax over the vocabulary first"
        ),
    ),
    Mistake(
        None,
        lambda t: True,
        N_(
            "for {inputs}, you returned {value:.4f} bits per character; expected"
            " {want:.4f}"
        ),
    ),
]

check_bits_per_char = Checker(
    "check_bits_per_char",
    "Check ``candidate(logits, targets, n_chars)``, bits per character.",
    _bits_trials,
    BITS_MISTAKES,
    N_("{n} texts agree, with one token per character and shifted logits."),
)


# the third checker of the chapter, the induction score, is in .ch19_heads
from .ch19_heads import check_induction_score  # noqa: E402

CHECKERS = [check_bpe_merge_step, check_bits_per_char, check_induction_score]
