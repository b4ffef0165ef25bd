"""The first name of :mod:`transformer_lib.demos.reversal`, kept so that ``tl.tasks.*``
works as before."""

from .demos.reversal import (
    BOS_ID,
    FIRST_SYMBOL,
    PAD_ID,
    antidiagonal_fraction,
    is_test_sequence,
    random_model,
    reversal_accuracy,
    reversal_batch,
    reversal_config,
    token_labels,
    train_reversal,
)

__all__ = [
    "BOS_ID",
    "FIRST_SYMBOL",
    "PAD_ID",
    "antidiagonal_fraction",
    "is_test_sequence",
    "random_model",
    "reversal_accuracy",
    "reversal_batch",
    "reversal_config",
    "token_labels",
    "train_reversal",
]
