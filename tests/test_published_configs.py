"""Every real-model number the book and the library quote, pinned to the models'
published configurations (tests/data/published_configs.json: each value copied from a
named config.json or params.json).

A pin names a sentence or a line of a chapter by a regular expression whose groups are
the quoted numbers, and says which published value each group must equal. A pin whose
text is no longer in its chapter fails too, so an edit of the sentence comes here.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

import transformer_lib as tl

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = json.loads(
    (ROOT / "tests" / "data" / "published_configs.json").read_text(encoding="utf-8")
)["files"]


def pub(file: str, key: str):
    """One published value: ``key`` of ``file`` (a config.json or params.json)."""
    return PUBLISHED[file]["values"][key]


def gpt2_d_ff(file: str) -> int:
    """GPT-2's config.json leaves ``n_inner`` null, meaning 4 * n_embd."""
    n_inner = pub(file, "n_inner")
    return 4 * pub(file, "n_embd") if n_inner is None else n_inner


def meta_ffn_dim(params: str) -> int:
    """The FFN width Meta's reference code derives from params.json (FeedForward in
    llama/model.py): 2/3 of 4 dim, times ffn_dim_multiplier, rounded up to
    multiple_of."""
    values = PUBLISHED[params]["values"]
    hidden = int(2 * 4 * values["dim"] / 3)
    if "ffn_dim_multiplier" in values:
        hidden = int(values["ffn_dim_multiplier"] * hidden)
    m = values["multiple_of"]
    return m * math.ceil(hidden / m)


def ratio(file: str) -> float:
    return pub(file, "intermediate_size") / pub(file, "hidden_size")


def number(text: str) -> float:
    """A number as the book prints it: 50,257 or 50257 or 10^4 or 5 \\cdot 10^5."""
    text = text.replace(",", "").replace("{", "").replace("}", "").replace("\\,", "")
    m = re.fullmatch(r"(?:([\d.]+)\s*\\cdot\s*)?10\^(-?\d+)", text.strip())
    if m:
        return float(m.group(1) or 1) * 10 ** int(m.group(2))
    return float(text)


def chapter_text(name: str) -> str:
    nb = json.loads((ROOT / "book" / f"{name}.ipynb").read_text(encoding="utf-8"))
    text = "\n".join("".join(c["source"]) for c in nb["cells"])
    return re.sub(r"\s+", " ", text)  # one space for every line break of the prose


L2_7, L2_70 = "Llama-2-7b-hf/config.json", "Llama-2-70b-hf/config.json"
L3_8, L3_70 = "Meta-Llama-3-8B/config.json", "Meta-Llama-3-70B/config.json"
L31_405 = "Llama-3.1-405B/config.json"
GPT2, GPT2M, BERT = (
    "gpt2/config.json",
    "gpt2-medium/config.json",
    "bert-base-uncased/config.json",
)

# (chapter, pattern, {group: published value}), matched with every run of white space
# made one space
PINS = [
    (
        "06_feed_forward",
        r"GPT-2 small and BERT-base have \$d_\{\\text\{model\}\} = (?P<d>\d+)\$, \$h = "
        r"(?P<h>\d+)\$ heads, \$d_\{ff\} = (?P<ff>\d+)\$ and (?P<n>\d+) layers",
        {
            "d": [pub(GPT2, "n_embd"), pub(BERT, "hidden_size")],
            "h": [pub(GPT2, "n_head"), pub(BERT, "num_attention_heads")],
            "ff": [gpt2_d_ff(GPT2), pub(BERT, "intermediate_size")],
            "n": [pub(GPT2, "n_layer"), pub(BERT, "num_hidden_layers")],
        },
    ),
    (
        "07_add_and_norm",
        r"BERT uses \$\\varepsilon = (?P<eps>10\^\{-12\})\$",
        {"eps": pub(BERT, "layer_norm_eps")},
    ),
    (
        "09_encoder",
        r"BERT-base has (?P<n>\d+) layers with \$d_\{\\text\{model\}\} = (?P<d>\d+)\$, "
        r"(?P<h>\d+) heads,\s+\$d_\{\\text\{ff\}\} = (?P<ff>\d+)\$",
        {
            "n": pub(BERT, "num_hidden_layers"),
            "d": pub(BERT, "hidden_size"),
            "h": pub(BERT, "num_attention_heads"),
            "ff": pub(BERT, "intermediate_size"),
        },
    ),
    (
        "09_encoder",
        r"\((?P<V>[\d,]+) word pieces, (?P<T>\d+) positions",
        {"V": pub(BERT, "vocab_size"), "T": pub(BERT, "max_position_embeddings")},
    ),
    (
        "10_decoder",
        r"sizes GPT-2 small \((?P<n>\d+) blocks, "
        r"\$d_\{\\text\{model\}\} = (?P<d>\d+)\$, \$d_\{\\text\{ff\}\} = (?P<ff>\d+)\$,"
        r"\s+(?P<V>[\d,]+) tokens, (?P<T>[\d,]+) positions",
        {
            "n": pub(GPT2, "n_layer"),
            "d": pub(GPT2, "n_embd"),
            "ff": gpt2_d_ff(GPT2),
            "V": pub(GPT2, "vocab_size"),
            "T": pub(GPT2, "n_positions"),
        },
    ),
    (
        "10_decoder",
        r"embeddings = (?P<V>\d+) \* (?P<d>\d+) \+ (?P<T>\d+) \* \d+",
        {
            "V": pub(GPT2, "vocab_size"),
            "d": pub(GPT2, "n_embd"),
            "T": pub(GPT2, "n_positions"),
        },
    ),
    (
        "14_decoder_only",
        r"For GPT-2 small \(\$V = (?P<V>\d+)\$, \$d = (?P<d>\d+)\$, "
        r"\$T_\{\\max\} = (?P<T>\d+)\$, \$N = (?P<n>\d+)\$, "
        r"\$d_\{ff\} = (?P<ff>\d+)\$\)",
        {
            "V": pub(GPT2, "vocab_size"),
            "d": pub(GPT2, "n_embd"),
            "T": pub(GPT2, "n_positions"),
            "n": pub(GPT2, "n_layer"),
            "ff": gpt2_d_ff(GPT2),
        },
    ),
    (
        "14_decoder_only",
        r"GPT-2 medium has \$d = (?P<d>\d+)\$, (?P<n>\d+) blocks of (?P<h>\d+) heads, "
        r"\$d_\{ff\} = (?P<ff>\d+)\$, (?P<T>\d+) positions",
        {
            "d": pub(GPT2M, "n_embd"),
            "n": pub(GPT2M, "n_layer"),
            "h": pub(GPT2M, "n_head"),
            "ff": gpt2_d_ff(GPT2M),
            "T": pub(GPT2M, "n_positions"),
        },
    ),
    (
        "16_modern_block",
        r"vocab_size=(?P<V>\d+), d_model=(?P<d>\d+), n_heads=(?P<h>\d+), "
        r"n_layers=(?P<n>\d+), d_ff=(?P<ff>\d+), max_len=(?P<T>\d+) ?\) "
        r"# the sizes of Llama 2 7B",
        {
            "V": pub(L2_7, "vocab_size"),
            "d": pub(L2_7, "hidden_size"),
            "h": pub(L2_7, "num_attention_heads"),
            "n": pub(L2_7, "num_hidden_layers"),
            "ff": pub(L2_7, "intermediate_size"),
            "T": pub(L2_7, "max_position_embeddings"),
        },
    ),
    (
        "16_modern_block",
        r"for \$d = (?P<d>\d+)\$,\s+\$\\tfrac83 \\cdot \d+ = [\d.]+\$ becomes "
        r"\$\d+ \\cdot (?P<m>\d+) = (?P<ff>\d+)\$, "
        r"the `intermediate_size` of\s+Llama 2 7B",
        {
            "d": pub(L2_7, "hidden_size"),
            "m": pub("Llama-2-7b/params.json", "multiple_of"),
            "ff": pub(L2_7, "intermediate_size"),
        },
    ),
    (
        "16_modern_block",
        r"== (?P<ff>\d+) # Llama 2 7B's d_ff",
        {"ff": pub(L2_7, "intermediate_size")},
    ),
    (
        "16_modern_block",
        r"Llama 3's 8B model, with the same \$d\$, has an\s+`intermediate_size` of "
        r"(?P<ff>\d+), \$(?P<r>[\d.]+)\\, d\$",
        {"ff": pub(L3_8, "intermediate_size"), "r": ratio(L3_8)},
    ),
    (
        "16_modern_block",
        r"Llama 3's \$b = (?P<b>5 \\cdot 10\^5)\$",
        {"b": pub(L3_8, "rope_theta")},
    ),
    (
        "16_modern_block",
        r"only 70B was released: (?P<h>\d+) query heads,\s+(?P<kv>\d+) K/V heads\); "
        r"Llama 3 uses it in every size, with (?P<kv3>\d+) K/V heads",
        {
            "h": pub(L2_70, "num_attention_heads"),
            "kv": pub(L2_70, "num_key_value_heads"),
            "kv3": [
                pub(f, "num_key_value_heads")
                for f in (L3_8, L3_70, L31_405, "Llama-3.2-1B/config.json")
            ],
        },
    ),
    (
        "16_modern_block",
        r"For a model of Llama 3 8B's shape, (?P<n>\d+)\s+layers of (?P<h>\d+) query "
        r"heads with \$d_k = (?P<dk>\d+)\$, one (?P<T>\d+)-token sequence",
        {
            "n": pub(L3_8, "num_hidden_layers"),
            "h": pub(L3_8, "num_attention_heads"),
            "dk": pub(L3_8, "hidden_size") // pub(L3_8, "num_attention_heads"),
            "T": pub(L3_8, "max_position_embeddings"),
        },
    ),
    (
        "16_modern_block",
        r"Llama 3 8B has a vocabulary of (?P<V>[\d,]+) tokens, \$d = (?P<d>\d+)\$, "
        r"(?P<n>\d+) layers of (?P<h>\d+) query heads and\s+(?P<kv>\d+) K/V heads, "
        r"SwiGLU with "
        r"\$d_\{ff\} = (?P<ff>\d+)\$",
        {
            "V": pub(L3_8, "vocab_size"),
            "d": pub(L3_8, "hidden_size"),
            "n": pub(L3_8, "num_hidden_layers"),
            "h": pub(L3_8, "num_attention_heads"),
            "kv": pub(L3_8, "num_key_value_heads"),
            "ff": pub(L3_8, "intermediate_size"),
        },
    ),
    (
        "16_modern_block",
        r"GPTConfig.llama\(vocab_size=(?P<V>\d+), d_model=(?P<d>\d+), "
        r"n_heads=(?P<h>\d+), n_kv_heads=(?P<kv>\d+),\s+n_layers=(?P<n>\d+), "
        r"d_ff=(?P<ff>\d+), max_len=(?P<T>\d+)\)",
        {
            "V": pub(L3_8, "vocab_size"),
            "d": pub(L3_8, "hidden_size"),
            "h": pub(L3_8, "num_attention_heads"),
            "kv": pub(L3_8, "num_key_value_heads"),
            "n": pub(L3_8, "num_hidden_layers"),
            "ff": pub(L3_8, "intermediate_size"),
            "T": pub(L3_8, "max_position_embeddings"),
        },
    ),
    (
        "18_attention_across_processes",
        r"as with Llama 3 70B's (?P<kv>\d+) K/V heads",
        {"kv": pub(L3_70, "num_key_value_heads")},
    ),
]


@pytest.mark.parametrize(
    "chapter,pattern,expected",
    PINS,
    ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(PINS)],
)
def test_the_book_quotes_the_published_configs(chapter, pattern, expected):
    found = re.search(pattern, chapter_text(chapter))
    assert found, f"{chapter}: the pinned text is gone (update this pin): {pattern}"
    for group, values in expected.items():
        for value in values if isinstance(values, list) else [values]:
            quoted = number(found.group(group))
            assert quoted == pytest.approx(value, rel=1e-12), (
                f"{chapter} quotes {group} = {found.group(group)}, published {value}"
            )


def test_the_tables_of_chapter_16():
    """The d_ff and K/V-head claims of chapter 16's opening table and of section 16.2,
    against every published Llama configuration."""
    text = chapter_text("16_modern_block")
    row = re.search(r"\| feed-forward \|.*\|\s*\{ref\}`modern-swiglu` \|", text).group(
        0
    )
    # 8/3 d, rounded up to a multiple of 256: LLaMA and Llama 2 7B and 13B
    for f in ("llama-7b/config.json", L2_7, "Llama-2-13b-hf/config.json"):
        assert 8 / 3 < ratio(f) < 8 / 3 + 256 / pub(f, "hidden_size"), f
    assert "LLaMA and Llama 2 7B and 13B" in row
    # 3.5 d: Llama 2 70B and Llama 3 8B and 70B; 3.25 d: Llama 3.1 405B
    assert {ratio(f) for f in (L2_70, L3_8, L3_70)} == {3.5} and ratio(L31_405) == 3.25
    assert "3.5\\, d" in row and "3.25\\, d" in row and "405B" in row
    # K/V heads: one per query head in Llama 2 7B, 13B; 8 in Llama 2 70B and Llama 3
    for f in (L2_7, "Llama-2-13b-hf/config.json"):
        assert pub(f, "num_key_value_heads") == pub(f, "num_attention_heads")
    for f in (L2_70, L3_8, L3_70, L31_405):
        assert pub(f, "num_key_value_heads") == 8 < pub(f, "num_attention_heads")
    # tied output matrix in Llama 3.2 1B and 3B only
    assert pub("Llama-3.2-1B/config.json", "tie_word_embeddings")
    assert pub("Llama-3.2-3B/config.json", "tie_word_embeddings")
    assert not pub(L2_7, "tie_word_embeddings") and not pub(L3_8, "tie_word_embeddings")


@pytest.mark.parametrize(
    "params,config",
    [
        ("LLaMA-7B/params.json", "llama-7b/config.json"),
        ("Llama-2-7b/params.json", L2_7),
        ("Llama-2-70b/params.json", L2_70),
        ("Meta-Llama-3-8B/params.json", L3_8),
        ("Meta-Llama-3-70B/params.json", L3_70),
        ("Llama-3.1-405B/params.json", L31_405),
    ],
)
def test_the_two_published_files_of_a_model_agree(params, config):
    """Meta's params.json and the transformers config.json of one model: the same
    sizes and eps, and the FFN width that Meta's code derives from params.json."""
    assert pub(config, "intermediate_size") == meta_ffn_dim(params)
    assert pub(config, "hidden_size") == pub(params, "dim")
    assert pub(config, "num_hidden_layers") == pub(params, "n_layers")
    assert pub(config, "num_attention_heads") == pub(params, "n_heads")
    assert pub(config, "rms_norm_eps") == pub(params, "norm_eps")
    kv = PUBLISHED[params]["values"].get("n_kv_heads", pub(params, "n_heads"))
    assert PUBLISHED[config]["values"].get("num_key_value_heads", kv) == kv


def test_every_value_names_its_source():
    for name, entry in PUBLISHED.items():
        assert name.endswith(("/config.json", "/params.json")), name
        assert entry["source"] and entry["values"], name
        assert name.split("/")[-1] in entry["source"], name


def test_the_library_configs_are_the_published_ones():
    gpt2 = tl.GPTConfig.gpt2_small()
    assert (gpt2.vocab_size, gpt2.d_model, gpt2.n_heads, gpt2.n_layers) == (
        pub(GPT2, "vocab_size"),
        pub(GPT2, "n_embd"),
        pub(GPT2, "n_head"),
        pub(GPT2, "n_layer"),
    )
    assert (gpt2.d_ff, gpt2.max_len) == (gpt2_d_ff(GPT2), pub(GPT2, "n_positions"))
    assert gpt2.norm_eps == pub(GPT2, "layer_norm_epsilon")
    assert (
        gpt2.activation == "gelu_tanh"
        and pub(GPT2, "activation_function") == "gelu_new"
    )
    # GPTConfig.llama's defaults: Llama 2 and Llama 3 (LLaMA-1 used 1e-6)
    llama = tl.GPTConfig.llama(
        vocab_size=8, d_model=8, n_heads=2, n_layers=1, d_ff=8, max_len=8
    )
    for f in (L2_7, L2_70, L3_8, L3_70, L31_405):
        assert llama.norm_eps == pub(f, "rms_norm_eps"), f
    assert pub("llama-7b/config.json", "rms_norm_eps") == 1e-6 != llama.norm_eps
    assert (
        "1e-5" in tl.GPTConfig.llama.__doc__ and "LLaMA-1" in tl.GPTConfig.llama.__doc__
    )
    assert llama.rope_base == 10000.0 == 1e4  # Llama 2's; Llama 3 passes rope_base=5e5
    assert pub(L3_8, "rope_theta") == 5e5
