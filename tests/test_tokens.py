"""transformer_lib.tokens against Hugging Face `tokenizers` (BpeTrainer and ByteLevel):
merge for merge and id for id, on random text (hypothesis) and on the book's English
corpus; the rules that make them agree; the round trip on any Unicode string.

Unicode: the pre-tokenizer's pattern runs on the `regex` package (\\p{L}, \\p{N}), while
`tokenizers` runs its own engine with its own Unicode tables. They can agree only on
characters both classify alike, so the random text is drawn from the characters that
this Python's `unicodedata` (Unicode 14.0) knows as assigned; newer characters may be
classified differently and are kept out of the equality tests (not out of the round
trip, which holds for any string).
"""

from __future__ import annotations

import json
import unicodedata

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

import transformer_lib as tl
from transformer_lib import tokens
from transformer_lib.demos import corpora


def hf_train(texts: list[str], vocab_size: int):
    """The reference: BpeTrainer with ByteLevel(add_prefix_space=False,
    use_regex=True), the 256 byte symbols as initial alphabet, no special tokens."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator(texts, trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [
        tuple(m) if isinstance(m, list) else tuple(m.split(" "))
        for m in model["merges"]
    ]
    return tok, model["vocab"], merges


def assert_same(texts: list[str], vocab_size: int, probe: list[str] = ()) -> None:
    ours = tl.train_bpe(texts, vocab_size)
    ref, vocab, merges = hf_train(texts, vocab_size)
    assert ours.merges == merges
    assert ours.vocab == vocab
    for s in [*texts, *probe]:
        assert ours.encode(s) == ref.encode(s).ids, s


def known(c: str) -> bool:
    """Assigned in Unicode 14 (this Python's tables), not a surrogate."""
    return unicodedata.category(c) not in ("Cn", "Cs")


# a few letters (so that pairs repeat and merges happen), spaces, digits and apostrophes
# (GPT-2's contractions), plus any assigned character now and then
SMALL = st.sampled_from(list("aabbcd  '0 1\n\tsé中文"))
ANY_KNOWN = st.characters(codec="utf-8").filter(known)
TEXT = st.text(st.one_of(SMALL, SMALL, SMALL, ANY_KNOWN), max_size=40)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TEXT, min_size=1, max_size=8), st.integers(256, 330))
def test_train_bpe_equals_tokenizers_on_random_text(texts, vocab_size):
    assert_same(texts, vocab_size)


def test_train_bpe_equals_tokenizers_on_the_english_corpus():
    """The book's corpus (a tenth of it, to keep the test short) at the English model's
    vocabulary size, and the encoding of held-out passages."""
    train, held = corpora.corpus("en")
    assert_same(train[::10], 1024, probe=held[:100])


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_round_trip_any_unicode(s):
    """decode(encode(s)) == s for any string of code points (surrogates aside, which
    UTF-8 cannot hold), newer characters included."""
    s = s.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    assert BPE.decode(BPE.encode(s)) == s


BPE = tl.train_bpe(
    ["the cat sat on the mat, and the dog's 12 bones were 345 bones.\n"] * 3
    + ["床前明月光，疑是地上霜。", "naïve café — déjà vu"],
    320,
)


def test_byte_symbols_in_code_point_order():
    """Ids 0-255 are the byte symbols sorted by the code point of the character each
    stands for (not by byte value): '!' (byte 33) is id 0, and byte 0 (U+0100) comes
    after every printable Latin-1 byte."""
    table = tokens.bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256
    order = sorted(table.values())
    assert [BPE.vocab[c] for c in order] == list(range(256))
    assert BPE.vocab["!"] == 0 and BPE.vocab[table[0]] == 188
    _, vocab, _ = hf_train(["x"], 256)
    assert {c: vocab[c] for c in order} == {c: i for i, c in enumerate(order)}


def test_overlapping_pairs_count_twice():
    """In "bbb" the pair (b, b) occurs twice; counted once it would tie with (a, c) and
    lose on ids."""
    ours = tl.train_bpe(["bbb", "ac"], 257)
    assert ours.merges == [("b", "b")]
    assert_same(["bbb", "ac"], 257)


def test_ties_go_to_the_smaller_ids_not_the_smaller_strings():
    """After ("a", "b") -> "ab" (id 256), ("ab", "c") and ("b", "d") both occur once:
    by ids (66, 67) < (256, 66) the second wins, though "ab" < "b" as strings."""
    texts = ["abc", "ab", "ab", "bd"]
    ours = tl.train_bpe(texts, 258)
    assert ours.merges == [("a", "b"), ("b", "d")]
    assert_same(texts, 258)


def test_no_merge_across_words():
    """Words are merged inside only: after many merges of "ab ab ab ...", no token ends
    in the space symbol (Ġ) or holds it past its first character."""
    tok = tl.train_bpe(["ab " * 50], 270)
    space = tokens.bytes_to_unicode()[ord(" ")]
    assert any(space in t for t in tok.vocab)  # "Ġab" was learnt
    assert all(space not in t[1:] for t in tok.vocab)


def test_the_pattern_is_gpt2s_on_the_regex_package():
    """The engine: `regex` (the standard `re` has no \\p{L}); its split is the
    reference's on a sentence with contractions, numbers, punctuation and spaces."""
    assert isinstance(tokens._SPLIT, regex.Pattern)
    s = "It's 2024;  they'll say   ‘hi’ 你好!\n\n"
    table = tokens.bytes_to_unicode()
    ours = [
        "".join(table[b] for b in w.encode())
        for w in regex.findall(tokens.GPT2_PATTERN, s)
    ]
    ref = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    assert ours == [w for w, _ in ref.pre_tokenize_str(s)]
    assert unicodedata.unidata_version.startswith("14.")


def test_char_tokenizer_unknown_and_round_trip():
    tok = tl.CharTokenizer.train(["春眠不觉晓", "处处闻啼鸟"])
    assert tok.tokens[0] == "<unk>" and len(tok) == 10
    assert tok.decode(tok.encode("春眠处处")) == "春眠处处"
    assert tok.encode("夜来风雨声") == [0] * 5
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([10])


def test_bad_input_named():
    with pytest.raises(ValueError, match="at least 256"):
        tl.train_bpe(["abc"], 100)
    with pytest.raises(ValueError, match="outside the vocabulary 0..319"):
        BPE.decode([320])
    with pytest.raises(ValueError, match="unknown tokenizer type 'wordpiece'"):
        tokens.tokenizer_from_json('{"type": "wordpiece"}')


def test_export_carries_the_tokenizer(tmp_path):
    cfg = tl.GPTConfig(vocab_size=len(BPE), d_model=16, n_heads=2, n_layers=1, d_ff=32,
                       max_len=8)  # fmt: skip
    path = tl.export_model(tl.GPT(cfg), tmp_path / "m.safetensors", tokenizer=BPE)
    back = tl.load_tokenizer(path)
    assert back.merges == BPE.merges and back.vocab == BPE.vocab
    assert tl.read_metadata(path)["vocab"] == BPE.tokens
    s = "the cat's 12 naïve 明月"
    assert back.encode(s) == BPE.encode(s)
    plain = tl.export_model(tl.GPT(cfg), tmp_path / "n.safetensors")
    with pytest.raises(ValueError, match="no 'tokenizer'"):
        tl.load_tokenizer(plain)
    small = tl.CharTokenizer(["a"])
    with pytest.raises(ValueError, match="the tokenizer has 2 tokens"):
        tl.export_model(tl.GPT(cfg), tmp_path / "o.safetensors", tokenizer=small)
