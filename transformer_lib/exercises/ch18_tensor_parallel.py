"""Chapter 18: the all-reduce of tensor-parallel attention, the second place where
attention across processes goes wrong.

``check_tensor_parallel_attention``: the learner writes
``my_tp_attention(x, mha, rank, world_size, all_reduce)``, this rank's part of
self-attention by ``mha`` (a ``tl.MultiHeadAttention``, GQA allowed) with its heads
split over the ranks (eq. tp-attention); ``all_reduce(t)`` returns the sum of ``t``
over the ranks. Every rank must return the whole ``mha(x, x, x)[0]``. The checker
runs the ranks as threads of one process, joined by a simulated all-reduce.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cached_property

import torch
import torch.nn.functional as F

from ..heads import MultiHeadAttention
from .compare import close
from .harness import Checker, Mistake, Trial, Wrong
from .language import N_, _

NEG_INF = float("-inf")


# --------------------------------------------------------------------------------------


class _SimulatedGroup:
    """P ranks as threads of one process: ``all_reduce(t)`` waits for every rank's
    tensor and returns their sum (a copy per rank), as torch.distributed would."""

    def __init__(self, world_size: int) -> None:
        self.P = world_size
        self.barrier = threading.Barrier(world_size, timeout=10)
        self.parts: dict[int, torch.Tensor] = {}
        self.calls = [0] * world_size

    def all_reduce_for(self, rank: int) -> Callable[[torch.Tensor], torch.Tensor]:
        def all_reduce(t: torch.Tensor) -> torch.Tensor:
            self.calls[rank] += 1
            self.barrier.wait()
            self.parts[rank] = t.detach().clone()
            self.barrier.wait()
            total = sum(self.parts[r] for r in range(self.P))
            self.barrier.wait()
            return total.clone()

        return all_reduce


def run_simulated_ranks(fn: Callable, x, mha, world_size: int) -> list:
    """fn(x, mha, rank, world_size, all_reduce) on every rank, as threads; returns the
    ranks' results (an exception in place of a rank's result if it raised)."""
    group = _SimulatedGroup(world_size)
    results: list = [None] * world_size

    def rank_main(rank: int) -> None:
        try:
            results[rank] = fn(
                x.clone(), mha, rank, world_size, group.all_reduce_for(rank)
            )
        except NotImplementedError as err:
            results[rank] = err
        except Exception as err:  # noqa: BLE001 - reported to the learner
            results[rank] = err
            group.barrier.abort()  # the other ranks must not wait for this one

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world_size)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return results


def _kv_heads(h: int, h_kv: int, rank: int, P: int) -> slice:
    if h_kv % P == 0:
        return slice(rank * h_kv // P, (rank + 1) * h_kv // P)
    if P % h_kv == 0:  # each K/V head replicated on the ranks whose queries read it
        j = (rank * (h // P)) // (h // h_kv)
        return slice(j, j + 1)
    raise ValueError(f"h_kv = {h_kv} K/V heads do not divide among {P} ranks")


def _tp_attention(x, mha, rank, P, all_reduce, *, mode="ok", kv_rule="ok"):
    """A learner's tensor-parallel attention. mode: "ok", "after q" (the all-reduce
    after W_Q, none after W_O), "bias each" (b_O added on every rank before the
    all-reduce), "none" (no all-reduce); kv_rule: "ok", "split" (K/V heads cut like
    the query heads, h_kv / P each, even when P does not divide h_kv), "mod" (the
    replicated K/V head chosen as rank mod h_kv)."""
    h, h_kv, d_k = mha.n_heads, mha.n_kv_heads, mha.d_k
    q_heads = slice(rank * h // P, (rank + 1) * h // P)
    if kv_rule == "split":
        kv = slice(rank * (h_kv // P), (rank + 1) * (h_kv // P))
    elif kv_rule == "mod" and P % h_kv == 0 and h_kv < P:
        kv = slice(rank % h_kv, rank % h_kv + 1)
    else:
        kv = _kv_heads(h, h_kv, rank, P)

    def rows(lin, heads):
        sl = slice(heads.start * d_k, heads.stop * d_k)
        return F.linear(x, lin.weight[sl], lin.bias[sl])

    B, T, _d = x.shape
    q = rows(mha.q_proj, q_heads)
    if mode == "after q":
        q = all_reduce(q)
    q = q.view(B, T, -1, d_k).transpose(1, 2)  # (B, h / P, T, d_k)
    k = rows(mha.k_proj, kv).view(B, T, -1, d_k).transpose(1, 2)
    v = rows(mha.v_proj, kv).view(B, T, -1, d_k).transpose(1, 2)
    heads = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    concat = heads.transpose(1, 2).reshape(B, T, -1)  # (B, T, h / P * d_k)
    cols = slice(q_heads.start * d_k, q_heads.stop * d_k)
    partial = F.linear(concat, mha.o_proj.weight[:, cols])  # (B, T, d_model)
    if mode == "after q" or mode == "none":
        return partial + mha.o_proj.bias
    if mode == "bias each":
        return all_reduce(partial + mha.o_proj.bias)
    return all_reduce(partial) + mha.o_proj.bias


def tp_all_reduce_after_w_q(x, mha, rank, world_size, all_reduce):
    return _tp_attention(x, mha, rank, world_size, all_reduce, mode="after q")


def tp_bias_added_on_every_rank(x, mha, rank, world_size, all_reduce):
    return _tp_attention(x, mha, rank, world_size, all_reduce, mode="bias each")


def tp_no_all_reduce(x, mha, rank, world_size, all_reduce):
    return _tp_attention(x, mha, rank, world_size, all_reduce, mode="none")


def tp_kv_heads_split_like_the_queries(x, mha, rank, world_size, all_reduce):
    return _tp_attention(x, mha, rank, world_size, all_reduce, kv_rule="split")


def tp_replicated_kv_head_by_rank_mod(x, mha, rank, world_size, all_reduce):
    return _tp_attention(x, mha, rank, world_size, all_reduce, kv_rule="mod")


def reference_tp_attention(x, mha, rank, world_size, all_reduce):
    """The exercise's answer."""
    return _tp_attention(x, mha, rank, world_size, all_reduce)


class TPTrial(Trial):
    def __init__(self, h: int, h_kv: int, P: int, seed: int) -> None:
        super().__init__(
            _("h = {h} query heads, h_kv = {h_kv} K/V heads on P = {P} ranks").format(
                h=h, h_kv=h_kv, P=P
            ),
            (),
        )
        self.h, self.h_kv, self.P = h, h_kv, P
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.mha = MultiHeadAttention(4 * h, h, n_kv_heads=h_kv).double().eval()
            self.x = torch.randn(2, 5, 4 * h, dtype=torch.float64)

    def run(self, candidate: Callable) -> None:
        self.candidate = candidate
        results = run_simulated_ranks(candidate, self.x, self.mha, self.P)
        if any(isinstance(r, NotImplementedError) for r in results):
            from .harness import NotAttempted

            raise NotAttempted
        raised = [r for r in results if isinstance(r, Exception)]
        real = [r for r in raised if not isinstance(r, threading.BrokenBarrierError)]
        if real:
            err = real[0]
            hint = (
                _(
                    " (P does not divide h_kv here: replicate each K/V head on the"
                    " P / h_kv ranks whose query heads read it)"
                )
                if self.h_kv < self.P
                else ""
            )
            raise Wrong(
                _("your function raised {kind} on {inputs}: {err}").format(
                    kind=type(err).__name__, inputs=self.inputs, err=err
                )
                + hint
            ) from err
        self.raised = (raised or [None])[0]
        self.got = results

    @cached_property
    def want(self) -> torch.Tensor:
        with torch.no_grad():
            return self.mha(self.x, self.x, self.x)[0]

    @cached_property
    def ranks_ok(self) -> bool:
        return self.raised is None and all(
            isinstance(r, torch.Tensor) and r.shape == self.want.shape for r in self.got
        )

    @cached_property
    def correct(self) -> bool:
        return self.ranks_ok and all(close(r, self.want) for r in self.got)

    def like(self, fn: Callable) -> bool:
        mine = run_simulated_ranks(fn, self.x, self.mha, self.P)
        return self.ranks_ok and all(
            isinstance(m, torch.Tensor) and close(g, m)
            for g, m in zip(self.got, mine, strict=True)
        )

    @property
    def error(self) -> str:
        return f"{type(self.raised).__name__}: {self.raised}"

    @cached_property
    def first_wrong_rank(self) -> int:
        return next(r for r, got in enumerate(self.got) if not close(got, self.want))

    @property
    def got_rank(self) -> torch.Tensor:
        return self.got[self.first_wrong_rank]


def _tp_trials() -> list[TPTrial]:
    return [TPTrial(4, 4, 2, 0), TPTrial(4, 2, 2, 1), TPTrial(8, 2, 4, 2)]


TP_MISTAKES = [
    Mistake(
        tp_kv_heads_split_like_the_queries,
        lambda t: t.h_kv < t.P and t.like(tp_kv_heads_split_like_the_queries),
        N_(
            "for {inputs}, P does not divide h_kv, so the K/V heads cannot be cut into"
            " P"
            " parts (h_kv // P = 0 heads each). Since h_kv divides P, replicate each"
            " K/V"
            " head on the P / h_kv ranks whose query heads read it"
        ),
    ),
    Mistake(
        None,
        lambda t: t.raised is not None,
        N_(
            "for {inputs}, the ranks did not meet in all_reduce ({error}): every rank"
            " must call it the same number of times, once per sublayer"
        ),
    ),
    Mistake(
        None,
        lambda t: not t.ranks_ok,
        N_(
            "for {inputs}, every rank should return the whole output, a tensor of the"
            " shape of x: (B, T, d_model)"
        ),
    ),
    Mistake(
        tp_all_reduce_after_w_q,
        lambda t: t.like(tp_all_reduce_after_w_q),
        N_(
            "for {inputs}, you all-reduced after W_Q: each rank's columns of X W_Q are"
            " different heads, and summing them mixes the heads. X is already on every"
            " rank, so nothing is needed before attention; the ranks' heads meet in the"
            " sum over heads, after W_O, and that is where the one all-reduce goes"
        ),
    ),
    Mistake(
        tp_no_all_reduce,
        lambda t: t.like(tp_no_all_reduce),
        N_(
            "for {inputs}, each rank returned only its own heads' part, sum over its"
            " heads of head_i W_O^i: the residual stream needs the sum over all heads,"
            " so"
            " all-reduce the partial output of W_O"
        ),
    ),
    Mistake(
        tp_bias_added_on_every_rank,
        lambda t: t.like(tp_bias_added_on_every_rank),
        N_(
            "for {inputs}, b_O is counted P times: you added it on every rank before"
            " the"
            " all-reduce, which sums it too. Add it once, after the all-reduce"
        ),
    ),
    Mistake(
        tp_replicated_kv_head_by_rank_mod,
        lambda t: t.h_kv < t.P and t.like(tp_replicated_kv_head_by_rank_mod),
        N_(
            "for {inputs}, a rank holds the wrong K/V head: with each K/V head"
            " replicated,"
            " a rank needs the one its query heads read, (rank h / P) // (h / h_kv),"
            " not rank mod h_kv"
        ),
    ),
    Mistake.mismatch(N_("your output"), attr="got_rank"),
]

check_tensor_parallel_attention = Checker(
    "check_tensor_parallel_attention",
    "Check ``candidate(x, mha, rank, world_size, all_reduce)`` on simulated ranks:"
    " every rank must return ``mha(x, x, x)[0]``.",
    _tp_trials,
    TP_MISTAKES,
    N_(
        "{n} splits give the whole attention on every rank: plain heads, GQA with K/V"
        " heads split, and GQA with K/V heads replicated."
    ),
)
