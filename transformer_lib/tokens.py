"""Tokens: text to ids and back. A character tokenizer with an unknown token (the
Chinese model's) and byte-level BPE (the English model's).

Byte-level BPE, as GPT-2 and Hugging Face ``tokenizers`` do it:

1. the text is cut into words by GPT-2's pattern (letters with one leading space,
   numbers, punctuation runs, spaces), written with the third-party ``regex`` package,
   which knows ``\\p{L}`` and ``\\p{N}`` (the standard library's ``re`` does not);
2. each word's UTF-8 bytes are written as 256 printable characters
   (:func:`bytes_to_unicode`: a byte that is a printable Latin-1 character stands for
   itself, the others are moved to U+0100 and up), so that any text, in any script, is
   a string over a 256-symbol alphabet and nothing is unknown;
3. training starts with those 256 symbols, numbered 0-255 in the code-point order of
   their characters, and repeats one step: count every adjacent pair of symbols in every
   word, times the word's frequency (overlapping pairs count: "aaa" holds ('a', 'a')
   twice), merge the most frequent pair into a new symbol everywhere (left to right,
   never across two words), until the vocabulary has ``vocab_size`` symbols. On equal
   counts the pair with the smaller (left id, right id) wins: ids, not strings.

:func:`train_bpe` follows ``tokenizers``' ``BpeTrainer`` step for step (its counts are
kept up to date merge by merge, in a heap, never recounted), and the tests check that
both give the same merges and ids. ``encode`` applies the merges to each word in the
order they were learnt.
"""

from __future__ import annotations

import functools
import heapq
import json
from collections import Counter
from collections.abc import Iterable

import regex

# GPT-2's pre-tokenizer pattern, the one `tokenizers`' ByteLevel(use_regex=True) uses
GPT2_PATTERN = (
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
)
_SPLIT = regex.compile(GPT2_PATTERN)


@functools.cache
def bytes_to_unicode() -> dict[int, str]:
    """The byte -> character map of byte-level BPE: the printable bytes ``!``..``~``,
    ``¡``..``¬`` and ``®``..``ÿ`` stand for themselves; the other 68 (controls, space,
    soft hyphen) become U+0100, U+0101, ... in byte order. Every character printable,
    none a space, so a merge is written as two words on a line."""
    kept = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1)]
    kept += range(0xAE, 0xFF + 1)
    table = {b: chr(b) for b in kept}
    moved = [b for b in range(256) if b not in table]
    table.update({b: chr(256 + i) for i, b in enumerate(moved)})
    return dict(sorted(table.items()))


@functools.cache
def _unicode_to_bytes() -> dict[str, int]:
    return {c: b for b, c in bytes_to_unicode().items()}


def pre_tokenize(text: str) -> list[str]:
    """The words of ``text`` (GPT-2's pattern), each written in the byte alphabet."""
    table = bytes_to_unicode()
    return [
        "".join(table[b] for b in word.encode("utf-8")) for word in _SPLIT.findall(text)
    ]


class CharTokenizer:
    """One token per character. ``vocab`` lists the known characters; id 0 is the
    unknown token ``unk``, which any other character becomes."""

    kind = "char"

    def __init__(self, chars: Iterable[str], unk: str = "<unk>"):
        chars = list(chars)
        bad = [c for c in chars if len(c) != 1]
        if bad:
            raise ValueError(
                f"a character tokenizer takes single characters, got {bad[:5]}"
            )
        if len(set(chars)) != len(chars):
            raise ValueError("the characters of a CharTokenizer must be distinct")
        self.unk = unk
        self.tokens = [unk, *chars]  # index = id
        self.vocab = {t: i for i, t in enumerate(self.tokens)}

    @classmethod
    def train(cls, texts: Iterable[str], unk: str = "<unk>") -> CharTokenizer:
        """The characters of ``texts``, in code-point order."""
        seen = set()
        for t in texts:
            seen.update(t)
        return cls(sorted(seen), unk=unk)

    def encode(self, text: str) -> list[int]:
        return [self.vocab.get(c, 0) for c in text]

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self._token(i) for i in ids)

    def _token(self, i: int) -> str:
        if not 0 <= i < len(self.tokens):
            raise ValueError(
                f"token id {i} is outside the vocabulary 0..{len(self) - 1}"
            )
        return self.tokens[i]

    def __len__(self) -> int:
        return len(self.tokens)

    def to_json(self) -> str:
        return json.dumps(
            {"type": "char", "unk": self.unk, "chars": self.tokens[1:]},
            ensure_ascii=False,
        )


class BPETokenizer:
    """Byte-level BPE: ``merges`` (pairs of token strings in the byte alphabet, in the
    order learnt) and ``vocab`` (token string -> id)."""

    kind = "bpe"

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]]):
        self.vocab = dict(vocab)
        self.merges = [tuple(m) for m in merges]
        self.tokens = [""] * (max(self.vocab.values()) + 1)
        for t, i in self.vocab.items():
            self.tokens[i] = t
        missing = [c for c in bytes_to_unicode().values() if c not in self.vocab]
        if missing:
            raise ValueError(
                "a byte-level vocabulary holds all 256 byte symbols; "
                f"missing {missing[:5]}"
            )
        for a, b in self.merges:
            if a not in self.vocab or b not in self.vocab or a + b not in self.vocab:
                raise ValueError(f"merge ({a!r}, {b!r}) uses a token not in the vocab")
        # a pair's rank is the first time it was merged (a pair may repeat)
        self.ranks: dict[tuple[str, str], int] = {}
        for r, m in enumerate(self.merges):
            self.ranks.setdefault(m, r)
        self._cache: dict[str, list[int]] = {}

    def __len__(self) -> int:
        return len(self.tokens)

    def encode_word(self, word: str) -> list[int]:
        """One pre-tokenized word (in the byte alphabet) to ids: merge the pair of
        lowest rank, every occurrence left to right, until no learnt pair is left."""
        if word in self._cache:
            return self._cache[word]
        parts = list(word)
        while len(parts) > 1:
            pairs = {(a, b) for a, b in zip(parts, parts[1:], strict=False)}
            best = min(pairs, key=lambda p: self.ranks.get(p, len(self.merges)))
            if best not in self.ranks:
                break
            merged, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == best:
                    merged.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        ids = [self.vocab[p] for p in parts]
        if len(self._cache) < 100_000:
            self._cache[word] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        return [i for w in pre_tokenize(text) for i in self.encode_word(w)]

    def token_bytes(self, i: int) -> bytes:
        if not 0 <= i < len(self.tokens):
            raise ValueError(
                f"token id {i} is outside the vocabulary 0..{len(self) - 1}"
            )
        back = _unicode_to_bytes()
        return bytes(back[c] for c in self.tokens[i])

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``; bytes that do not form UTF-8 (a token cut inside a
        character) become U+FFFD."""
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", "replace")

    def to_json(self) -> str:
        return json.dumps(
            {"type": "bpe", "vocab": self.vocab, "merges": self.merges},
            ensure_ascii=False,
        )


def tokenizer_from_json(text: str) -> CharTokenizer | BPETokenizer:
    """The tokenizer written by ``to_json``."""
    d = json.loads(text)
    if d.get("type") == "char":
        return CharTokenizer(d["chars"], unk=d["unk"])
    if d.get("type") == "bpe":
        return BPETokenizer(d["vocab"], [tuple(m) for m in d["merges"]])
    raise ValueError(
        f"unknown tokenizer type {d.get('type')!r}: expected 'char' or 'bpe'"
    )


def _merge_word(word: list[int], a: int, b: int, new: int) -> list[tuple[tuple, int]]:
    """Merge (a, b) into ``new`` in ``word``, in place, left to right, and return the
    changes of the word's pair counts: -1 for a pair that is gone, +1 for a new one."""
    changes = []
    i = 0
    while i < len(word) - 1:
        if word[i] == a and word[i + 1] == b:
            if i > 0:
                changes.append(((word[i - 1], a), -1))
                changes.append(((word[i - 1], new), 1))
            word[i : i + 2] = [new]
            if i < len(word) - 1:
                changes.append(((b, word[i + 1]), -1))
                changes.append(((new, word[i + 1]), 1))
        i += 1
    return changes


def train_bpe(texts: Iterable[str], vocab_size: int) -> BPETokenizer:
    """Byte-level BPE learnt from ``texts`` until the vocabulary has ``vocab_size``
    tokens (or no pair is left): the 256 byte symbols, then one token per merge.

    The counts are those of the distinct words times their frequency, updated after
    each merge only where the merged pair occurred, with the pairs in a heap that is
    corrected lazily (a popped pair whose count has changed goes back with its new
    count): the algorithm of ``tokenizers``' ``BpeTrainer``, whose merges and ids it
    reproduces."""
    if vocab_size < 256:
        raise ValueError(
            f"vocab_size must be at least 256 (the byte symbols), got {vocab_size}"
        )
    word_counts: Counter[str] = Counter()
    for text in texts:
        word_counts.update(pre_tokenize(text))
    tokens = sorted(bytes_to_unicode().values())  # code-point order
    vocab = {t: i for i, t in enumerate(tokens)}
    words = [[vocab[c] for c in w] for w in word_counts]
    counts = list(word_counts.values())

    pair_counts: Counter[tuple[int, int]] = Counter()
    where: dict[tuple[int, int], set[int]] = {}
    for wi, word in enumerate(words):
        for p in zip(word, word[1:], strict=False):
            pair_counts[p] += counts[wi]
            where.setdefault(p, set()).add(wi)
    # a max-heap on (count, then the smaller pair): entries (-count, pair, seq, words)
    heap, seq = [], 0
    for p, pos in where.items():
        heap.append((-pair_counts[p], p, seq, pos))
        seq += 1
    heapq.heapify(heap)

    merges: list[tuple[str, str]] = []
    while len(vocab) < vocab_size and heap:
        neg, pair, _, pos = heapq.heappop(heap)
        if -neg != pair_counts[pair]:  # stale: back with its count of now
            heapq.heappush(heap, (-pair_counts[pair], pair, seq, pos))
            seq += 1
            continue
        if -neg < 1:
            break
        a, b = pair
        new_token = tokens[a] + tokens[b]
        new = vocab.get(new_token, len(tokens))
        if new_token not in vocab:
            tokens.append(new_token)
            vocab[new_token] = new
        merges.append((tokens[a], tokens[b]))
        where = {}
        for wi in pos:
            for p, change in _merge_word(words[wi], a, b, new):
                pair_counts[p] += change * counts[wi]
                if change > 0:
                    where.setdefault(p, set()).add(wi)
        for p, wpos in where.items():
            if pair_counts[p] > 0:
                heapq.heappush(heap, (-pair_counts[p], p, seq, wpos))
                seq += 1
    return BPETokenizer(vocab, merges)
