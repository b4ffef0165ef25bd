"""Multi-digit addition with carries: a task a small GPT must really learn.

A problem with n digits is written as one sequence of 3n + 3 tokens,

    a (n digits) + b (n digits) = c (n + 1 digits), every number least significant first

for example, with n = 3, 047 + 985 = 1032 is ``7 4 0 + 5 8 9 = 2 3 0 1``. Operands are
zero-padded; every number is written backwards, in the order in which a sum is computed
by hand, so that each digit of the sum depends on digits already written (through the
carry) and on the two operand digits of its column, which sit at the same offset in
their numbers. The prompt is the first 2n + 2 tokens; the model must produce the n + 1
answer tokens, and is scored by exact match of all of them under greedy decoding.

Token ids: 0-9 the digits, 10 "+", 11 "=". A fixed hash of (a, b) sends one problem
in ten to a held-out "test" split that training never samples.
"""

from __future__ import annotations

import torch

from ..configs import GPTConfig
from ..gpt import GPT
from ..measure import Stopwatch
from .lm import train_lm

PLUS_ID, EQUALS_ID = 10, 11
VOCAB_SIZE = 12
# a problem is held out when its hash mod 1009 is below 101 (~10 %)
_HASH_MOD, _TEST_BELOW = 1009, 101


def seq_len(n_digits: int) -> int:
    """Tokens of one problem: n + 1 + n + 1 + (n + 1)."""
    return 3 * n_digits + 3


def prompt_len(n_digits: int) -> int:
    """Tokens of the prompt "a+b=": 2n + 2."""
    return 2 * n_digits + 2


def token_labels(ids) -> list[str]:
    """Readable names of token ids: '0'-'9', '+', '='."""
    names = {PLUS_ID: "+", EQUALS_ID: "="}
    return [names.get(int(i), str(int(i))) for i in torch.as_tensor(ids).flatten()]


def is_test_problem(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(B,) operands -> (B,) bool: True for the problems held out of training."""
    a, b = a.long(), b.long()
    return (a * 7919 + b * 104729 + a * b) % _HASH_MOD < _TEST_BELOW


def _digits(x: torch.Tensor, n: int) -> torch.Tensor:
    """(B,) integers -> (B, n) decimal digits, most significant first."""
    powers = 10 ** torch.arange(n - 1, -1, -1, device=x.device)  # (n,)
    return (x[:, None] // powers) % 10


def encode(a: torch.Tensor, b: torch.Tensor, n_digits: int) -> torch.Tensor:
    """Operands (B,) -> full sequences (B, 3n + 3): reversed(a) + reversed(b) =
    reversed(a + b), each number's digits least significant first."""
    B = a.size(0)
    plus = torch.full((B, 1), PLUS_ID, dtype=torch.long, device=a.device)
    equals = torch.full((B, 1), EQUALS_ID, dtype=torch.long, device=a.device)
    answer = _digits(a + b, n_digits + 1).flip(1)  # (B, n + 1), units first
    return torch.cat(
        [
            _digits(a, n_digits).flip(1),
            plus,
            _digits(b, n_digits).flip(1),
            equals,
            answer,
        ],
        dim=1,
    )


def decode_answer(answer: torch.Tensor) -> torch.Tensor:
    """(B, n + 1) answer tokens, units first -> (B,) integers."""
    powers = 10 ** torch.arange(answer.size(1), device=answer.device)  # (n + 1,)
    return (answer.long() * powers).sum(dim=1)


def sample_problems(
    batch_size: int,
    n_digits: int = 3,
    generator: torch.Generator | None = None,
    split: str | None = "train",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random operands (a, b), each (batch_size,) in [0, 10^n), from one split:
    "train", "test" (the held-out tenth) or None (any problem)."""
    if n_digits < 1 or batch_size < 0:
        raise ValueError(
            f"need n_digits >= 1 and batch_size >= 0, "
            f"got n_digits={n_digits}, batch_size={batch_size}"
        )
    if split not in (None, "train", "test"):
        raise ValueError(f"split must be None, 'train' or 'test', got {split!r}")
    rows_a, rows_b, have = [], [], 0
    while have < batch_size or not rows_a:
        n = max(batch_size, 1) * (1 if split != "test" else 12) + 16
        a = torch.randint(0, 10**n_digits, (n,), generator=generator)
        b = torch.randint(0, 10**n_digits, (n,), generator=generator)
        if split is not None:
            keep = is_test_problem(a, b) == (split == "test")
            a, b = a[keep], b[keep]
        rows_a.append(a)
        rows_b.append(b)
        have += a.size(0)
    return torch.cat(rows_a)[:batch_size], torch.cat(rows_b)[:batch_size]


def addition_batch(
    batch_size: int,
    generator: torch.Generator | None = None,
    *,
    n_digits: int = 3,
    split: str | None = "train",
) -> tuple[torch.Tensor, torch.Tensor]:
    """A training batch: (tokens (B, 3n + 3), loss_mask (B, 3n + 3)), the mask True on
    the n + 1 answer tokens only (the operands are random: nothing to learn there)."""
    a, b = sample_problems(batch_size, n_digits, generator, split)
    tokens = encode(a, b, n_digits)
    loss_mask = torch.zeros_like(tokens, dtype=torch.bool)
    loss_mask[:, prompt_len(n_digits) :] = True
    return tokens, loss_mask


def addition_config(n_digits: int = 3, **overrides) -> GPTConfig:
    """The small GPT that learns n-digit addition: 2 blocks, d_model = 48, 4 heads,
    d_ff = 192, learned positions, exactly as many positions as a problem uses, and
    weights initialised with std 1/sqrt(d_model) (GPT-2's 0.02 suits d_model = 768; at
    d_model = 48 it leaves the attention scores near zero for hundreds of steps)."""
    d_model = overrides.get("d_model", 48)
    kw = dict(
        vocab_size=VOCAB_SIZE,
        d_model=d_model,
        n_heads=4,
        n_layers=2,
        d_ff=4 * d_model,
        max_len=seq_len(n_digits),
        init_std=d_model**-0.5,
    )
    return GPTConfig(**{**kw, **overrides})


@torch.no_grad()
def addition_accuracy(
    model: GPT,
    a: torch.Tensor,
    b: torch.Tensor,
    n_digits: int = 3,
    batch_size: int = 1000,
) -> float:
    """Exact match: the fraction of problems (a, b) whose n + 1 answer tokens, decoded
    greedily after the prompt, are all right."""
    was_training = model.training
    model.eval()
    P, right = prompt_len(n_digits), 0
    for i in range(0, a.size(0), batch_size):
        tokens = encode(a[i : i + batch_size], b[i : i + batch_size], n_digits)
        pred = model.generate(tokens[:, :P], n_digits + 1)  # (B, n + 1)
        right += (pred == tokens[:, P:]).all(dim=1).sum().item()
    model.train(was_training)
    return right / max(1, a.size(0))


def train_addition(
    seed: int = 0,
    *,
    n_digits: int = 3,
    steps: int = 700,
    batch_size: int = 64,
    lr: float = 3e-3,
    warmup: int = 100,
    weight_decay: float = 0.1,
    cfg: GPTConfig | None = None,
    n_eval: int = 2000,
    num_threads: int | None = 1,
    max_seconds: float | None = None,
) -> tuple[GPT, dict]:
    """Train :func:`addition_config`'s GPT on the "train" split with
    :func:`~transformer_lib.demos.lm.train_lm`, then measure exact match on
    ``n_eval`` unseen "test" problems.

    Returns (model, history): the history of ``train_lm`` plus "test_accuracy" (exact
    match under greedy decoding), "eval_seconds", and "test_problems" (the operands
    evaluated, (a, b)).
    """
    cfg = cfg or addition_config(n_digits)

    def batch_fn(B: int, gen: torch.Generator):
        return addition_batch(B, gen, n_digits=n_digits, split="train")

    model, history = train_lm(
        cfg,
        batch_fn,
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        warmup=warmup,
        weight_decay=weight_decay,
        seed=seed,
        num_threads=num_threads,
        max_seconds=max_seconds,
    )
    a, b = sample_problems(
        n_eval, n_digits, torch.Generator().manual_seed(10_000 + seed), "test"
    )
    with Stopwatch() as clock:
        history["test_accuracy"] = addition_accuracy(model, a, b, n_digits)
    history["eval_seconds"] = clock.wall
    history["test_problems"] = (a, b)
    return model, history
