"""The decoder-only training demos: the addition task's encoding, split and loss mask,
its exact-match evaluation, and the causal-LM training loop (seeded, learning,
thread-safe)."""

from __future__ import annotations

import math
import time

import pytest
import torch
import torch.nn.functional as F

import transformer_lib as tl
from transformer_lib.demos import addition as ad
from transformer_lib.demos.lm import train_lm
from transformer_lib.demos.training import train, warmup_cosine
from transformer_lib.measure import Stopwatch

# tiny models: one torch thread (the fixture is in tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")


def test_encoding_writes_numbers_units_first():
    seq = ad.encode(torch.tensor([47]), torch.tensor([985]), 3)[0]
    # 047 + 985 = 1032: every number least significant digit first
    assert ad.token_labels(seq) == list("740+589=2301")
    assert seq.shape == (ad.seq_len(3),) and ad.prompt_len(3) == 8
    assert ad.decode_answer(seq[None, 8:]).item() == 1032


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_answers_decode_to_the_sums(n):
    g = torch.Generator().manual_seed(n)
    a, b = ad.sample_problems(500, n, g, split=None)
    assert a.max() < 10**n and b.max() < 10**n and a.min() >= 0
    tokens = ad.encode(a, b, n)
    assert torch.equal(ad.decode_answer(tokens[:, ad.prompt_len(n) :]), a + b)
    assert (tokens[:, n] == ad.PLUS_ID).all() and (tokens[:, 2 * n + 1] == 11).all()
    carries = ((a % 10) + (b % 10) >= 10).float().mean()
    assert 0.3 < carries < 0.6  # carries are common, the task needs them


def test_splits_are_disjoint_and_test_is_a_tenth():
    g = torch.Generator().manual_seed(0)
    a, b = ad.sample_problems(20_000, 3, g, split=None)
    frac = ad.is_test_problem(a, b).float().mean().item()
    assert 0.09 < frac < 0.11
    ta, tb = ad.sample_problems(3000, 3, g, split="train")
    assert not ad.is_test_problem(ta, tb).any()
    ea, eb = ad.sample_problems(3000, 3, g, split="test")
    assert ad.is_test_problem(ea, eb).all() and ea.shape == (3000,)
    with pytest.raises(ValueError, match="'valid'"):
        ad.sample_problems(4, 3, g, split="valid")


def test_batch_masks_only_the_answer():
    tokens, mask = ad.addition_batch(16, torch.Generator().manual_seed(1), n_digits=2)
    assert tokens.shape == mask.shape == (16, 9)
    assert mask[:, 6:].all() and not mask[:, :6].any()


class _Oracle:
    """A stand-in model whose greedy answers are right except where a == bad_a."""

    training = False

    def __init__(self, bad_a: int):
        self.bad_a = bad_a

    def eval(self):
        return self

    def train(self, mode=True):
        return self

    def generate(self, prompt, n):
        a = ad.decode_answer(prompt[:, :3])  # operands are written units first too
        b = ad.decode_answer(prompt[:, 4:7])
        out = ad.encode(a, b, 3)[:, 8:].clone()
        wrong = a == self.bad_a
        out[wrong, n - 1] = (out[wrong, n - 1] + 1) % 10  # one wrong digit
        return out


def test_exact_match_counts_whole_answers():
    g = torch.Generator().manual_seed(2)
    a, b = ad.sample_problems(40, 3, g, split="test")
    assert ad.addition_accuracy(_Oracle(-1), a, b, 3, batch_size=7) == 1.0
    assert ad.addition_accuracy(_Oracle(int(a[9])), a, b, 3, batch_size=7) == 39 / 40


def test_warmup_cosine_schedule():
    lrs = [warmup_cosine(s, 100, 1e-3, 10) for s in range(100)]
    assert lrs[0] == pytest.approx(1e-4) and lrs[9] == pytest.approx(1e-3)
    assert max(lrs) == pytest.approx(1e-3) and lrs[-1] == pytest.approx(1e-4, rel=1e-2)
    assert all(x >= y for x, y in zip(lrs[9:], lrs[10:], strict=False))


def test_train_lm_learns_is_seeded_and_restores_threads_and_rng():
    cfg = ad.addition_config(1, d_model=16, d_ff=32, n_layers=1)

    def batch_fn(B, gen):
        return ad.addition_batch(B, gen, n_digits=1, split=None)

    torch.set_num_threads(1)
    state = torch.get_rng_state()
    m1, h1 = train_lm(cfg, batch_fn, steps=40, batch_size=16, lr=1e-2, num_threads=1)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.get_num_threads() == 1
    m2, h2 = train_lm(cfg, batch_fn, steps=40, batch_size=16, lr=1e-2)
    assert h1["loss"] == h2["loss"]  # same seed, same run
    for p1, p2 in zip(m1.parameters(), m2.parameters(), strict=True):
        assert torch.equal(p1, p2)
    first, last = sum(h1["loss"][:5]) / 5, sum(h1["loss"][-5:]) / 5
    assert last < 0.8 * first  # it learns
    assert h1["steps"] == 40 and h1["cpu_seconds"] > 0 and not m1.training
    _, h3 = train_lm(cfg, batch_fn, steps=3, batch_size=16, lr=1e-2, seed=1)
    assert h3["loss"] != h1["loss"][:3]


def test_train_lm_checks_its_arguments_and_stops_on_time():
    cfg = ad.addition_config(1, d_model=16, d_ff=32, n_layers=1)

    def batch_fn(B, gen):
        return ad.addition_batch(B, gen, n_digits=1)

    with pytest.raises(ValueError, match="steps >= 1.*got 0"):
        train_lm(cfg, batch_fn, steps=0)
    _, h = train_lm(cfg, batch_fn, steps=10_000, batch_size=4, max_seconds=0.0)
    assert h["steps"] == 1
    model = tl.GPT(cfg)
    seen = []
    out, _ = train_lm(
        model, batch_fn, steps=4, callback=lambda s, m: seen.append(s), callback_every=2
    )
    assert out is model and seen == [2, 4]


def test_the_demos_training_loop_is_the_plain_loop():
    """train() takes the same steps as the loop written out with torch.optim."""
    X = torch.randn(32, 3, generator=torch.Generator().manual_seed(0))
    y = X @ torch.tensor([1.0, -2.0, 0.5])
    lr_at = lambda step: 0.1 / (step + 1)  # noqa: E731

    def fresh():
        torch.manual_seed(1)
        model = torch.nn.Linear(3, 1)
        return model, torch.optim.SGD(model.parameters(), lr=0.1)

    model, opt = fresh()
    losses = []
    for step in range(20):
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        loss = F.mse_loss(model(X).squeeze(-1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    ours, opt2 = fresh()

    def loss_fn(step):
        return F.mse_loss(ours(X).squeeze(-1), y), {"step": step}

    h = train(ours, loss_fn, opt2, steps=20, lr_at=lr_at, num_threads=None)
    assert h["loss"] == losses and h["lr"] == [lr_at(s) for s in range(20)]
    assert h["step"] == list(range(20)) and h["steps"] == 20
    assert h["seconds"] >= 0 and h["cpu_seconds"] >= 0 and not ours.training
    for a, b in zip(model.parameters(), ours.parameters(), strict=True):
        assert torch.equal(a, b)


def test_one_schedule_family_for_both_demos():
    """floor=0 is the reversal task's cosine to zero, floor=0.1 the LM's."""
    steps, lr, warmup = 300, 3e-3, 60
    for s in range(warmup, steps):
        to_zero = lr * 0.5 * (1 + math.cos(math.pi * (s - warmup) / (steps - warmup)))
        assert warmup_cosine(s, steps, lr, warmup, floor=0.0) == pytest.approx(to_zero)
        assert warmup_cosine(s, steps, lr, warmup) == pytest.approx(
            0.1 * lr + 0.9 * to_zero
        )


def test_stopwatch_reads_wall_and_cpu_time_like_the_time_module():
    w0, c0 = time.perf_counter(), time.process_time()
    with Stopwatch() as clock:
        time.sleep(0.05)  # wall-clock time, no CPU time
        sum(i * i for i in range(100_000))  # CPU time
    w1, c1 = time.perf_counter(), time.process_time()
    assert 0.05 <= clock.wall <= w1 - w0
    assert 0 < clock.cpu <= c1 - c0 and clock.cpu < clock.wall
    frozen = clock.wall, clock.cpu
    time.sleep(0.01)
    assert (clock.wall, clock.cpu) == frozen  # frozen when the block ended
    running = Stopwatch()
    time.sleep(0.01)
    wall, cpu = running.lap()
    assert wall >= 0.01 and cpu >= 0 and running.wall < wall  # a new lap started
