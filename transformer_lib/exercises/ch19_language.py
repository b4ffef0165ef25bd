"""The language chapter's checkers: one BPE merge step (``ch19_bpe``), bits per
character from the logits (``ch19_bits``) and a head's induction score
(``ch19_induction``).

These checkers are ready for the chapter on the two language models (issue 29); they
join ``transformer_lib.exercises.__all__`` with the chapter cells that call them
(tests/test_exercises.py requires a calling cell for every exported checker), and
tests/test_language_exercises.py runs their catalogue meanwhile. Every name of the three
modules is importable from here too.
"""

from __future__ import annotations

from .ch19_bits import (
    BITS_MISTAKES,
    BitsTrial,
    bits_in_nats,
    bits_per_token,
    bits_with_sign_flipped,
    bits_without_softmax,
    check_bits_per_char,
    reference_bits_per_char,
)
from .ch19_bpe import (
    MERGE_MISTAKES,
    MergeTrial,
    check_bpe_merge_step,
    merge_step_across_words,
    merge_step_ignores_counts,
    merge_step_merges_first_only,
    merge_step_no_overlaps,
    merge_step_ties_largest,
    reference_bpe_merge_step,
)
from .ch19_induction import (
    SCORE_MISTAKES,
    ScoreTrial,
    check_induction_score,
    induction_all_heads,
    induction_on_the_token_itself,
    induction_previous_token,
    induction_summed,
    reference_induction_score,
)

CHECKERS = [check_bpe_merge_step, check_bits_per_char, check_induction_score]

__all__ = [
    "reference_bpe_merge_step",
    "MergeTrial",
    "merge_step_ties_largest",
    "merge_step_across_words",
    "merge_step_no_overlaps",
    "merge_step_ignores_counts",
    "merge_step_merges_first_only",
    "MERGE_MISTAKES",
    "check_bpe_merge_step",
    "reference_bits_per_char",
    "BitsTrial",
    "bits_in_nats",
    "bits_per_token",
    "bits_without_softmax",
    "bits_with_sign_flipped",
    "BITS_MISTAKES",
    "check_bits_per_char",
    "reference_induction_score",
    "ScoreTrial",
    "induction_on_the_token_itself",
    "induction_previous_token",
    "induction_summed",
    "induction_all_heads",
    "SCORE_MISTAKES",
    "check_induction_score",
    "CHECKERS",
]
