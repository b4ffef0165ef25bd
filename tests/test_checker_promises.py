"""What the book says a checker names, the checker names.

Where an exercise or its solution lists the mistakes "the checker names" (or
"recognises"), each listed mistake is written here as the wrong functions of the
checker's own table that make it; each is fed to the checker, which must answer with
that very row (not its generic mismatch). Every clause of the book's list must be
covered by one of these phrases, and every such list in the book must be here, so a
sentence that promises a row the table lacks fails.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from transformer_lib import exercises as ex

ROOT = Path(__file__).resolve().parents[1]

# a list the book gives of the mistakes a checker names: from its opening words to the
# end of the sentence (a full stop before a fence, the end or a capital)
PROMISE = re.compile(
    r"(?:The mistakes the checker names:|The checker names the common mistakes:"
    r"|all of which the checker recognises, are|The checker recognises)"
    r"(?P<list>.*?)\.(?=\s*(?:```|\Z|[A-Z]))",
)

# (chapter, the exercise label in the same cell, checker, {phrase: wrong functions})
PROMISES = [
    (
        "03_softmax",
        "ex-sdpa-own",
        ex.check_scaled_dot_product_attention,
        {
            "dividing by the wrong number": [
                "sdpa_not_scaled",
                "sdpa_scaled_by_d_k",
                "sdpa_multiplied_by_sqrt_d_k",
                "sdpa_scaled_by_sqrt_T",
            ],
            "inverting the mask": ["sdpa_mask_inverted"],
            "masking after the softmax": ["sdpa_mask_after_softmax"],
            "normalising over the wrong axis": ["sdpa_softmax_over_queries"],
        },
    ),
    (
        "08_positional_encoding",
        "ex-pe-own",
        ex.check_sinusoidal_positional_encoding,
        {
            "the exponent $i/d_\\text{model}$": ["pe_exponent_i_over_d"],
            "positions starting at 1": ["pe_positions_from_1"],
            "sines and cosines swapped": ["pe_sin_cos_swapped"],
            "concatenated instead of interleaved": ["pe_concatenated_halves"],
        },
    ),
    (
        "08_positional_encoding",
        "ex-rope-own",
        ex.check_apply_rope,
        {
            "pairs taken from the two halves": ["rope_rotate_half"],
            "the rotated halves concatenated": ["rope_concatenated_halves"],
            "the exponent $i/d$": ["rope_wrong_frequencies"],
            "the same angle for every pair": ["rope_same_angle_every_pair"],
            "the rotation the wrong way": ["rope_opposite_direction"],
            "a sign slip": ["rope_sign_slip"],
            "positions ignored": ["rope_ignores_positions"],
        },
    ),
    (
        "14_decoder_only",
        "ex-lm-loss",
        ex.check_causal_lm_loss,
        {
            "no shift at all": ["lm_loss_no_shift"],
            "the shift the wrong way round": ["lm_loss_shift_backwards"],
            "the mask applied to the predicting": ["lm_loss_mask_on_predictions"],
            "a mean over every position": ["lm_loss_mean_over_all"],
        },
    ),
    (
        "16_modern_block",
        "ex-rms-norm",
        ex.check_rms_norm,
        {
            "subtracting the mean": ["rms_subtracts_mean"],
            "dividing by the standard deviation": ["rms_divides_by_std"],
            "putting $\\epsilon$ outside the square root": ["rms_eps_outside"],
            "averaging over the wrong axis": ["rms_all_axes"],
            "summing instead of averaging": ["rms_sum_not_mean"],
            "forgetting $\\gamma$": ["rms_no_weight"],
        },
    ),
    (
        "16_modern_block",
        "ex-rope-half",
        ex.check_apply_rope_half,
        {
            "the interleaved layout": ["rope_half_interleaved"],
            "`rotate_half` with the sign on the wrong half": [
                "rope_half_swapped_signs"
            ],
            "angles not repeated over both halves": ["rope_half_not_repeated"],
            "the exponent $i/d$": ["rope_half_exponent_i"],
            "an ignored base": ["rope_half_ignores_base"],
        },
    ),
    (
        "17_length_extrapolation",
        "ex-alibi",
        ex.check_alibi_bias,
        {
            "slopes counted from $h = 0$": ["alibi_slopes_from_zero"],
            "a penalty with the wrong sign": ["alibi_positive"],
            "missing causal mask": ["alibi_no_mask"],
            "slopes in the wrong order": ["alibi_slopes_reversed"],
        },
    ),
    (
        "18_attention_across_processes",
        "ex-ring-step",
        ex.check_ring_step,
        {
            "the mask built from positions within the shards": ["ring_step_local_mask"],
            "the two outputs added or averaged": [
                "ring_step_outputs_added",
                "ring_step_outputs_averaged",
            ],
            "$e^{L}$ formed directly": ["ring_step_without_the_max"],
            "the merged log-sum-exp taken as the larger": ["ring_step_lse_is_the_max"],
            "a NaN, when nothing has been merged yet": [
                "ring_step_empty_state_gives_nan"
            ],
        },
    ),
    (
        "18_attention_across_processes",
        "ex-tp-attention",
        ex.check_tensor_parallel_attention,
        {
            "an all-reduce after $W_Q$": ["tp_all_reduce_after_w_q"],
            "no all-reduce": ["tp_no_all_reduce"],
            "$b_O$ added on every rank": ["tp_bias_added_on_every_rank"],
            "K/V heads cut into $P$ parts": ["tp_kv_heads_split_like_the_queries"],
            "rank $r$ taking head": ["tp_replicated_kv_head_by_rank_mod"],
        },
    ),
]


def blocks(chapter: str) -> list[str]:
    """The chapter's markdown, one exercise or solution (or the prose before one) per
    block, with every run of white space made one space."""
    nb = json.loads((ROOT / "book" / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    out = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            text = re.sub(r"\s+", " ", "".join(cell["source"]))
            out += re.split(r"(?=`{3,4}\{(?:exercise|solution)\})", text)
    return out


def label_of(block: str) -> str | None:
    found = re.search(r"(?::label: |\{solution\} )(ex-[\w-]+)", block)
    return found.group(1) if found else None


def promise(chapter: str, label: str) -> str:
    """The list of mistakes in ``label``'s exercise or solution."""
    found = [
        m for b in blocks(chapter) if label_of(b) == label for m in PROMISE.finditer(b)
    ]
    assert len(found) == 1, f"{chapter} {label}: {len(found)} lists of named mistakes"
    return found[0].group("list")


def clauses(text: str) -> list[str]:
    """The list's items: split at semicolons if it has any, else at the commas outside
    brackets."""
    if ";" in text:
        return [c.strip() for c in text.split(";")]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [p.strip() for p in [*parts, text[start:]] if p.strip()]


def test_every_list_of_named_mistakes_in_the_book_is_checked_here():
    listed = {(chapter, label) for chapter, label, _, _ in PROMISES}
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        for block in blocks(path.stem):
            if PROMISE.search(block):
                assert (path.stem, label_of(block)) in listed, (
                    f"{path.stem}: {label_of(block)} lists mistakes its checker names,"
                    " and is not in PROMISES"
                )


@pytest.mark.parametrize(
    "chapter,label,checker,named", PROMISES, ids=[p[1] for p in PROMISES]
)
def test_every_named_mistake_has_its_row(chapter, label, checker, named):
    text = promise(chapter, label)
    for phrase in named:
        assert phrase in text, f"{label}: {phrase!r} is not in: {text}"
    for clause in clauses(text):
        assert any(p in clause for p in named), (
            f"{label}: the book promises {clause!r}, which no phrase here covers"
        )
    rows = {row.example.__name__: row for row in checker.mistakes if row.example}
    for phrase, examples in named.items():
        for name in examples:
            assert name in rows, (
                f"{checker.__name__} has no row for {phrase!r} ({name})"
            )
            with pytest.raises(AssertionError) as info:
                checker(rows[name].example)
            assert getattr(info.value, "mistake", None) is rows[name], (
                f"{label}: {phrase!r} ({name}) got: {info.value}"
            )
