"""transformer_lib.parallel on real processes: ring attention equals PyTorch's attention
over the whole sequence, and the tensor-parallel attention, feed-forward and GPT equal
the unsplit modules, forward and backward, in float64, on gloo process groups of 2, 3
and 4 local ranks (3 with uneven and empty shards). Each test starts its ranks once and
checks many cases there.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

import transformer_lib as tl
from transformer_lib import parallel
from transformer_lib.costs import ring_attention_bytes_sent

# process groups on gloo and a torchrun script: not in make test-fast
pytestmark = pytest.mark.slow


F64 = torch.float64


def _whole(seed: int, B: int, h: int, h_kv: int, T: int, d: int):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, h, T, d, generator=g, dtype=F64)
    k = torch.randn(B, h_kv, T, d, generator=g, dtype=F64)
    v = torch.randn(B, h_kv, T, d, generator=g, dtype=F64)
    return q, k, v


RING_CASES = [
    # (B, h, h_kv, T, d, causal)
    (2, 4, 4, 12, 8, False),
    (2, 4, 4, 12, 8, True),
    (1, 6, 2, 13, 4, True),  # GQA, uneven shards
    (1, 4, 1, 7, 8, False),  # MQA, uneven shards
    (1, 2, 2, 2, 4, True),  # fewer positions than ranks on 3 or 4 ranks: empty shards
]


def _ring_worker(rank: int, world: int) -> list[dict]:
    out = []
    for i, (B, h, h_kv, T, d, causal) in enumerate(RING_CASES):
        q, k, v = _whole(i, B, h, h_kv, T, d)
        ref = F.scaled_dot_product_attention(
            q, k, v, is_causal=causal, enable_gqa=h_kv < h
        )
        shard = [torch.tensor_split(t, world, dim=2)[rank] for t in (q, k, v)]
        stats: dict = {}
        got = parallel.ring_attention(*shard, causal=causal, stats=stats)
        want = torch.tensor_split(ref, world, dim=2)[rank]
        out.append(
            dict(
                err=(got - want).abs().max().item() if got.numel() else 0.0,
                shape_ok=got.shape == want.shape,
                **stats,
            )
        )
    return out


@pytest.mark.parametrize("world", [2, 3])
def test_ring_attention_equals_torch_attention_over_the_whole_sequence(world):
    results = parallel.run_ranks(_ring_worker, world)
    for i, (B, _, h_kv, T, d, causal) in enumerate(RING_CASES):
        lengths = [len(x) for x in torch.tensor_split(torch.arange(T), world)]
        expected_bytes = ring_attention_bytes_sent(lengths, B, h_kv, d, F64)
        for rank, per_rank in enumerate(results):
            r = per_rank[i]
            assert r["shape_ok"], (world, rank, RING_CASES[i])
            assert r["err"] < 1e-12, (world, rank, RING_CASES[i], r["err"])
            assert r["shard_lengths"] == lengths
            assert r["bytes_sent"] == expected_bytes[rank], (world, rank, i)
            assert r["blocks_computed"] + r["blocks_skipped"] == world
            if causal and all(lengths):
                # rank r sees the shards 0..r: the causal imbalance
                assert r["blocks_computed"] == rank + 1, (world, rank, i)
            elif all(lengths):
                assert r["blocks_computed"] == world


def _tp_worker(rank: int, world: int) -> dict:
    torch.manual_seed(0)
    errors: dict[str, float] = {}
    # attention, MHA and GQA, with and without bias, with a causal mask
    for name, h, h_kv, bias in [
        ("mha", 4, 4, True),
        ("gqa-split", 8, 4, False),
        ("gqa-replicated", 4, 1, True),
    ]:
        if h_kv % world and world % h_kv:
            continue
        mha = tl.MultiHeadAttention(16, h, h_kv, bias=bias).to(F64)
        x = torch.randn(2, 5, 16, dtype=F64, requires_grad=True)
        mask = tl.causal_mask(5)
        want = mha(x, x, x, mask)[0]
        part = parallel.shard_multi_head_attention(mha, rank, world)
        x2 = x.detach().clone().requires_grad_(True)
        got = part(x2, mask)
        errors[f"attn-{name}"] = (got - want).abs().max().item()
        # backward: the input's gradient is whole on every rank; W_Q's rows are the
        # unsplit gradient's rows of this rank's heads
        g = torch.randn_like(want)
        want.backward(g)
        got.backward(g)
        errors[f"attn-{name}-dx"] = (x2.grad - x.grad).abs().max().item()
        rows = slice(part.q_heads.start * mha.d_k, part.q_heads.stop * mha.d_k)
        errors[f"attn-{name}-dWq"] = (
            (part.q_proj.weight.grad - mha.q_proj.weight.grad[rows]).abs().max().item()
        )
        if bias:
            errors[f"attn-{name}-dbo"] = (
                (part.o_bias.grad - mha.o_proj.bias.grad).abs().max().item()
            )
    # the feed-forward network, ReLU and gated SiLU
    for name, kw in [("relu", {}), ("swiglu", dict(activation="silu", gated=True))]:
        ffn = tl.FeedForward(16, 24, **kw).to(F64)
        x = torch.randn(2, 5, 16, dtype=F64, requires_grad=True)
        part = parallel.shard_feed_forward(ffn, rank, world)
        x2 = x.detach().clone().requires_grad_(True)
        want, got = ffn(x), part(x2)
        errors[f"ffn-{name}"] = (got - want).abs().max().item()
        g = torch.randn_like(want)
        want.backward(g)
        got.backward(g)
        errors[f"ffn-{name}-dx"] = (x2.grad - x.grad).abs().max().item()
    # whole models: GPT-2-like and Llama-like (RoPE, GQA, RMSNorm, SwiGLU)
    for name, cfg in [
        ("gpt2", tl.GPTConfig(vocab_size=11, d_model=16, n_heads=4, n_layers=2,
                              d_ff=32, max_len=16)),
        ("llama", tl.GPTConfig.llama(vocab_size=11, d_model=16, n_heads=4,
                                     n_kv_heads=2, n_layers=2, d_ff=24, max_len=16)),
    ]:  # fmt: skip
        if cfg.n_kv_heads % world and world % cfg.n_kv_heads:
            continue
        model = tl.GPT(cfg).to(F64).eval()
        idx = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(1))
        want = model(idx)
        got = parallel.shard_gpt(model, rank, world)(idx)
        want = want[0] if isinstance(want, tuple) else want
        got = got[0] if isinstance(got, tuple) else got
        errors[f"gpt-{name}"] = (got - want).abs().max().item()
    return errors


@pytest.mark.parametrize("world", [2])
def test_tensor_parallel_modules_equal_the_unsplit_ones(world):
    results = parallel.run_ranks(_tp_worker, world)
    names = set(results[0])
    # GQA both ways: K/V heads split (8 over 4), and one K/V head replicated (MQA)
    assert {
        "attn-mha", "attn-gqa-split", "attn-gqa-replicated",
        "ffn-relu", "ffn-swiglu", "gpt-gpt2", "gpt-llama",
    } <= names  # fmt: skip
    for rank, errors in enumerate(results):
        bad = {k: e for k, e in errors.items() if not e < 1e-12}
        assert not bad, f"rank {rank} of {world}: {bad}"


def test_bad_splits_are_refused_with_the_sizes_named():
    mha = tl.MultiHeadAttention(24, 6, 3)
    with pytest.raises(ValueError, match="6 query heads"):
        parallel.shard_multi_head_attention(mha, 0, 4)
    with pytest.raises(ValueError, match="h_kv = 3 K/V heads over 2 ranks"):
        parallel.shard_multi_head_attention(mha, 0, 2)  # 6 % 2 == 0, but 3 and 2
    with pytest.raises(ValueError, match="rank 3 is not in 0..2"):
        parallel.shard_multi_head_attention(mha, 3, 3)
    with pytest.raises(ValueError, match="d_ff = 10 hidden units"):
        parallel.shard_feed_forward(tl.FeedForward(8, 10), 0, 4)


def test_ring_attention_refuses_bad_shapes_and_a_missing_group():
    q = torch.randn(1, 4, 3, 8)
    with pytest.raises(ValueError, match=r"h_kv = 3 K/V heads must divide h = 4"):
        parallel.ring_attention(q, torch.randn(1, 3, 3, 8), torch.randn(1, 3, 3, 8))
    with pytest.raises(ValueError, match=r"T_r"):
        parallel.ring_attention(q, torch.randn(1, 4, 5, 8), torch.randn(1, 4, 5, 8))
    with pytest.raises(ValueError, match=r"got q \(4, 3, 8\)"):
        parallel.ring_attention(q[0], q[0], q[0])
    with pytest.raises(RuntimeError, match="init_process_group"):
        parallel.ring_attention(q, q, q)


def test_data_parallel_gradient_is_the_whole_batch_gradient_and_training_follows():
    """DistributedDataParallel on 2 ranks, each with half the batch: its all-reduced
    gradient equals one process's gradient of the whole batch, and 20 steps of AdamW
    by the book's training loop stay on the one-process trajectory."""
    from transformer_lib.demos import data_parallel

    results = parallel.run_ranks(_ddp_worker, 2)
    grads = [g for g, _ in results]
    whole = data_parallel.full_batch_gradient(0, 32)
    assert set(grads[0]) == set(whole)
    for rank_grads in grads:
        for name, g in whole.items():
            torch.testing.assert_close(rank_grads[name], g, rtol=1e-5, atol=1e-7)
    histories = [h for _, h in results]
    alone = data_parallel.rank_train(0, 1, 0, 20, 32, 3, 3e-3, F64)  # one process
    # each rank's loss is the mean over its half; their mean is the whole batch's
    mean_loss = torch.tensor([h["loss"] for h in histories], dtype=F64).mean(0)
    torch.testing.assert_close(mean_loss, torch.tensor(alone["loss"], dtype=F64))
    for h in histories:
        for name, w in alone["state_dict"].items():
            torch.testing.assert_close(h["state_dict"][name], w, rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="a batch of 33 does not split evenly over 2"):
        data_parallel.rank_gradient(0, 2, 0, 33)


def _ddp_worker(rank: int, world: int) -> tuple[dict, dict]:
    """The gradient of one step, then 20 steps of training in float64 (AdamW divides
    by sqrt(v), which turns float32's rounding of tiny gradients into visible
    differences within a few steps)."""
    from transformer_lib.demos import data_parallel

    return (
        data_parallel.rank_gradient(rank, world, 0, 32),
        data_parallel.rank_train(rank, world, 0, 20, 32, 3, 3e-3, F64),
    )


def test_measured_bytes_of_an_all_reduce_match_the_ring_formula():
    results = parallel.run_ranks(_all_reduce_bytes_worker, 3)
    from transformer_lib.costs import all_reduce_bytes_sent

    for nbytes, measured in results[0]:
        formula = all_reduce_bytes_sent(nbytes, 3)
        # gloo's message headers: a few hundred bytes per call
        assert formula <= measured <= formula + 2048, (nbytes, measured, formula)


def _all_reduce_bytes_worker(rank: int, world: int) -> list[tuple[int, int]]:
    import torch.distributed as dist

    out = []
    for n in (30_000, 300_000):
        x = torch.ones(n, dtype=F64)
        dist.barrier()
        _, sent = parallel.count_bytes_sent(dist.all_reduce, x)
        out.append((n * 8, sent))
    return out


def test_the_torchrun_script_runs_the_same_checks():
    """The command the chapter gives a learner, as a learner types it."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    torchrun = Path(sys.executable).with_name("torchrun")
    done = subprocess.run(
        [str(torchrun), "--standalone", "--nproc_per_node", "2",
         "scripts/attention_across_processes.py"],
        cwd=root, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # the two ranks share torchrun's stdout: look for each rank's report anywhere in it
    ranks = re.findall(r"rank (\d) of 2: ring attention error", done.stdout)
    assert sorted(ranks) == ["0", "1"], done.stdout


def test_tensor_parallel_bytes_match_the_formula():
    """A tensor-parallel GPT's forward pass sends what eq. tp-bytes says, plus gloo's
    message headers (under 1 %), on 2 ranks; its logits equal the whole model's."""
    from transformer_lib.demos.across_processes import rank_tensor_parallel

    for r in parallel.run_ranks(rank_tensor_parallel, 2, None, 4, 128):
        assert r["error"] < 1e-12
        assert r["bytes_formula"] <= r["bytes_measured"] <= 1.01 * r["bytes_formula"]


def _dtensor_ffn_worker(rank: int, world: int) -> list[tuple[float, float]]:
    """The library's tensor-parallel FFN against PyTorch's own, ``parallelize_module``
    with ColwiseParallel (W_1, W_up) and RowwiseParallel (W_2) on a CPU DeviceMesh."""
    import copy

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    mesh = init_device_mesh("cpu", (world,))
    out = []
    for gated in (False, True):
        torch.manual_seed(0)
        ffn = tl.FeedForward(
            16, 32, activation="silu" if gated else "relu", gated=gated
        )
        ffn = ffn.to(F64)
        x = torch.randn(2, 5, 16, dtype=F64)
        plan = {"linear1": ColwiseParallel(), "linear2": RowwiseParallel()}
        if gated:
            plan["linear_up"] = ColwiseParallel()
        theirs = parallelize_module(copy.deepcopy(ffn), mesh, plan)
        ours = parallel.shard_feed_forward(ffn, rank, world)
        with torch.no_grad():
            got = ours(x)
            out.append(
                (
                    (got - theirs(x)).abs().max().item(),
                    (got - ffn(x)).abs().max().item(),
                )
            )
    return out


def test_tensor_parallel_ffn_equals_pytorch_parallelize_module():
    for per_rank in parallel.run_ranks(_dtensor_ffn_worker, 2):
        for vs_torch, vs_whole in per_rank:
            assert vs_torch < 1e-12 and vs_whole < 1e-12, (vs_torch, vs_whole)
