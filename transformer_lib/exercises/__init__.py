"""Checkers for the book's implementation exercises (chapters 3-19).

Each ``check_<name>(candidate)`` runs the learner's function on several seeded inputs,
edge cases included, and compares it with the library's own ``tl.<name>``:

    from transformer_lib.exercises import check_softmax
    check_softmax(my_softmax)

On success it prints one line and returns None. On failure it raises ``AssertionError``
with a message in the learner's terms that names the input and, where the checker
recognises it, the likely mistake. A candidate that still raises ``NotImplementedError``
counts as "not attempted yet": the checker prints a hint and returns, so a notebook with
the exercise stubs in place still runs.

Layout: one module per chapter (``ch03_softmax``, ``ch04_masks``, ... named as the
chapter's notebook), or per exercise where a chapter has several (``ch08_rope``,
``ch16_rope_half``, ``ch19_bpe``), ``harness`` for what they share (``Checker``,
``Mistake``, ``Trial`` and the seeded inputs ``gen``, ``randn``) and ``compare`` for how
tensors are compared and said in messages (``close``, ``first_mismatch``, ``shape``,
...). A chapter module imports what it uses from those two, by name. In a chapter
module each checker is

* a ``Trial`` subclass: one input (described in ``inputs``, passed as
  ``args``/``kwargs``), the library's answer ``want``, and the fields that the mistakes
  read (``cached_property``);
* a function ``_<name>_trials()`` that builds the seeded inputs;
* ``<NAME>_MISTAKES``, the table of known mistakes, one :class:`~.harness.Mistake` per
  row: ``(example, detect, message)``. ``example`` is a wrong function written as a
  learner would write it, ``detect(trial)`` says whether a wrong result shows that
  mistake, and ``message`` is what the learner reads, a template over the trial's
  fields. The checker reads the table from the top and answers with the first row that
  detects; the table ends with a catch-all (``Mistake.mismatch``), so it has an answer
  for every wrong result;
* ``check_<name> = Checker(name, doc, trials, mistakes, passed)``.

To add a mistake: write the learner's wrong function above the table and add a row in
the place where it should be tried (after the rows that should win over it).
tests/test_exercises.py runs every row's example through its checker and requires that
this very row answers, so the new row is tested with no new test. A row that an earlier
row always answers first has no example; ``detect`` may use any field of the trial, and
a new field is one more ``cached_property``.

To add a checker (a new chapter's exercise): copy the smallest chapter module that
returns the same kind of result (``ch05_multi_head`` for one tensor), change the trials,
the reference and the table, import the checker below and add it to ``__all__``.
tests/test_exercises.py then requires a correct answer for it in its ``CORRECT`` list
and a chapter cell that calls it.
"""

from .ch03_attention import check_scaled_dot_product_attention
from .ch03_softmax import check_softmax
from .ch04_masks import check_causal_mask, check_padding_mask
from .ch05_multi_head import check_multi_head_attention, check_repeat_kv
from .ch07_add_and_norm import check_layer_norm
from .ch08_positional_encoding import check_sinusoidal_positional_encoding
from .ch08_rope import check_apply_rope
from .ch12_kv_cache import check_kv_cache_step
from .ch13_flash_attention import check_online_attention
from .ch14_decoder_only import check_causal_lm_loss
from .ch15_sampling import check_top_k_filter, check_top_p_filter
from .ch16_modern_block import check_rms_norm
from .ch16_rope_half import check_apply_rope_half
from .ch17_length_extrapolation import check_alibi_bias
from .ch18_attention_across_processes import check_ring_step
from .ch18_tensor_parallel import check_tensor_parallel_attention
from .ch19_bits import check_bits_per_char
from .ch19_bpe import check_bpe_merge_step
from .ch19_induction import check_induction_score

__all__ = [
    "check_softmax",
    "check_scaled_dot_product_attention",
    "check_causal_mask",
    "check_padding_mask",
    "check_layer_norm",
    "check_sinusoidal_positional_encoding",
    "check_apply_rope",
    "check_repeat_kv",
    "check_multi_head_attention",
    "check_kv_cache_step",
    "check_online_attention",
    "check_causal_lm_loss",
    "check_top_k_filter",
    "check_top_p_filter",
    "check_rms_norm",
    "check_apply_rope_half",
    "check_alibi_bias",
    "check_ring_step",
    "check_tensor_parallel_attention",
    "check_bpe_merge_step",
    "check_bits_per_char",
    "check_induction_score",
]
