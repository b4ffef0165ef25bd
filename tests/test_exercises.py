"""The exercise checkers: each accepts the library (and other correct answers) and
rejects a catalogue of real mistakes with a message that names the cause.

The catalogue is the checkers' own tables (``checker.mistakes``): every row that has an
example (a wrong function written the way a learner would write it) must be answered by
that very row, so a new row is tested without a new test.
"""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import transformer_lib as tl
from transformer_lib import exercises as ex
from transformer_lib.exercises import ch19_induction
from transformer_lib.exercises import ch19_language as ch19
from transformer_lib.exercises.harness import NOT_ATTEMPTED_HINT

NEG_INF = float("-inf")

CHECKERS = [getattr(ex, name) for name in ex.__all__ if name.startswith("check_")]


@pytest.fixture(autouse=True)
def english(monkeypatch):
    """The checkers speak gettext's language: these tests read their English."""
    monkeypatch.setenv("LANGUAGE", "en")


# --------------------------------------------------------------------------------------
# The catalogue: every known mistake of every checker's table
# --------------------------------------------------------------------------------------

CATALOGUE = [
    (checker, row) for checker in CHECKERS for row in checker.mistakes if row.example
]


@pytest.mark.parametrize(
    ("checker", "row"),
    CATALOGUE,
    ids=[f"{c.__name__}-{row.example.__name__}" for c, row in CATALOGUE],
)
def test_checker_rejects_mistake_and_names_its_cause(checker, row, capsys):
    with pytest.raises(AssertionError) as info:
        checker(row.example)
    message = str(info.value)
    assert message.startswith(f"{checker.__name__}: "), message
    answered = getattr(info.value, "mistake", None)
    assert answered is row, (
        f"{row.example.__name__} should be answered by its own row, got: {message}"
    )
    assert capsys.readouterr().out == "", (
        "a failing checker must not also print a success line"
    )


def test_the_catalogue_covers_every_checker_with_distinct_examples():
    assert len(CATALOGUE) >= 70
    for checker in CHECKERS:
        examples = [row.example for row in checker.mistakes if row.example]
        assert len(examples) == len(set(examples)), checker.__name__
        module = sys.modules[examples[0].__module__]
        assert module.__name__.startswith("transformer_lib.exercises.ch"), module
        assert all(e.__module__ == module.__name__ for e in examples), checker.__name__


def _perturbed(reference, how: str, part: int | None):
    """A candidate returning the library's answer spoiled in one way (in ``part``)."""

    def spoil(t):
        t = t.clone()
        if how == "bump":
            flat = t.view(-1)
            flat[-1:] = ~flat[-1:] if t.dtype == torch.bool else flat[-1:] + 0.37
        elif how == "nan" and t.is_floating_point():
            t.view(-1)[-1:] = float("nan")
        elif how == "unsqueeze":
            t = t.unsqueeze(0)
        elif how == "list":
            return t.tolist()
        return t

    def candidate(*args, **kwargs):
        result = reference(*args, **kwargs)
        if part is None:
            return spoil(result)
        result = list(result)
        result[part] = spoil(result[part])
        return tuple(result)

    return candidate


def ring_step_by_hand(q, k, v, q_start, k_start, out, lse):
    """Ring attention's step written out: the global causal mask, the block's softmax
    and log-sum-exp, and the merge with torch.logaddexp."""
    i = q_start + torch.arange(q.shape[-2])[:, None]
    j = k_start + torch.arange(k.shape[-2])[None, :]
    s = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(j > i, NEG_INF)
    lse_s = torch.logsumexp(s, dim=-1)
    o_s = torch.nan_to_num(torch.softmax(s, dim=-1)) @ v  # a row with no key: 0
    new = torch.logaddexp(lse, lse_s)
    shift = torch.where(torch.isinf(new), torch.zeros_like(new), new)
    w, w_s = torch.exp(lse - shift), torch.exp(lse_s - shift)
    return w[..., None] * out + w_s[..., None] * o_s, new


def rope_half_library(x, positions, base=10000.0):
    return tl.apply_rope(x, positions, base, layout="half")


REFERENCES = {
    "check_softmax": (tl.softmax, [None]),
    "check_scaled_dot_product_attention": (tl.scaled_dot_product_attention, [0, 1]),
    "check_causal_mask": (tl.causal_mask, [None]),
    "check_padding_mask": (tl.padding_mask, [None]),
    "check_repeat_kv": (tl.repeat_kv, [None]),
    "check_multi_head_attention": (tl.multi_head_attention, [None]),
    "check_layer_norm": (tl.layer_norm, [None]),
    "check_sinusoidal_positional_encoding": (tl.sinusoidal_positional_encoding, [None]),
    "check_apply_rope": (tl.apply_rope, [None]),
    "check_kv_cache_step": (tl.cached_attention_step, [0, 1, 2]),
    "check_online_attention": (
        ex.ch13_flash_attention.reference_online_attention,
        [None],
    ),
    "check_causal_lm_loss": (tl.causal_lm_loss, [None]),
    "check_top_k_filter": (tl.top_k_filter, [None]),
    "check_top_p_filter": (tl.top_p_filter, [None]),
    "check_rms_norm": (tl.rms_norm, [None]),
    "check_apply_rope_half": (rope_half_library, [None]),
    "check_alibi_bias": (tl.alibi_bias, [None]),
    "check_ring_step": (ex.ch18_attention_across_processes.reference_ring_step, [0, 1]),
    "check_tensor_parallel_attention": (
        ex.ch18_tensor_parallel.reference_tp_attention,
        [None],
    ),
}
SPOILED = [
    (name, how, part)
    for name, (_, parts) in REFERENCES.items()
    for how in ("bump", "nan", "unsqueeze", "list")
    for part in parts
    if not (how == "nan" and name in ("check_causal_mask", "check_padding_mask"))
]


@pytest.mark.parametrize(("name", "how", "part"), SPOILED)
def test_any_wrong_answer_gets_a_message_from_the_table(name, how, part):
    """The tables end in catch-alls: a result no known mistake explains is named."""
    checker = getattr(ex, name)
    with pytest.raises(AssertionError) as info:
        checker(_perturbed(REFERENCES[name][0], how, part))
    assert str(info.value).startswith(f"{name}: ")
    assert info.value.mistake in checker.mistakes


def test_a_wrong_cache_on_the_first_step_is_a_wrong_value_not_a_misplaced_one():
    with pytest.raises(AssertionError) as info:
        ex.check_kv_cache_step(_perturbed(tl.cached_attention_step, "bump", 1))
    message = str(info.value)
    assert "step 0 of" in message and "your cache_k[" in message, message
    assert "in front" not in message


# --------------------------------------------------------------------------------------
# Correct answers are accepted: the library's own function, and other correct ways
# --------------------------------------------------------------------------------------


def softmax_via_torch(x, dim=-1):
    return torch.softmax(x, dim=dim).nan_to_num(0.0)


def sdpa_via_torch(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, NEG_INF)
    w = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return w @ v, w


def causal_via_tril(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    return torch.ones(T_q, T_k, dtype=torch.bool).tril(diagonal=T_k - T_q)


def padding_via_comparison(lengths, T):
    return (torch.arange(T) < lengths.unsqueeze(-1)).view(len(lengths), 1, 1, T)


def layer_norm_via_torch(x, gamma, beta, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], gamma, beta, eps)


def pe_by_loops(T, d_model):
    pe = torch.zeros(T, d_model)
    for pos in range(T):
        for i in range(0, d_model, 2):
            angle = torch.tensor(pos / 10000 ** (i / d_model), dtype=torch.float64)
            pe[pos, i] = torch.sin(angle)
            if i + 1 < d_model:
                pe[pos, i + 1] = torch.cos(angle)
    return pe


def rope_via_complex(x, positions):
    d = x.size(-1)
    theta = positions[:, None].double() * 10000.0 ** (
        -torch.arange(0, d, 2, dtype=torch.float64) / d
    )
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return (
        torch.view_as_real(z * torch.polar(torch.ones_like(theta), theta))
        .flatten(-2)
        .to(x.dtype)
    )


def repeat_kv_via_repeat_interleave(k, n_rep):
    return k.repeat_interleave(n_rep, dim=1)


def mha_via_library_module(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    m = _module_with_weights(W_q, W_k, W_v, W_o, n_heads)
    with torch.no_grad():
        return m(x_q, x_kv, x_kv, mask, need_weights=False)[0]


def kv_step_own(q_new, k_new, v_new, cache_k, cache_v, rope=False):
    T_past, T_new = cache_k.size(-2), q_new.size(-2)
    if rope:
        pos = torch.arange(T_past, T_past + T_new)
        q_new, k_new = tl.apply_rope(q_new, pos), tl.apply_rope(k_new, pos)
    keys = torch.cat([cache_k, k_new], dim=-2)  # (B, h_kv, T_past + T_new, d_k)
    vals = torch.cat([cache_v, v_new], dim=-2)
    n_rep = q_new.size(1) // keys.size(1)
    mask = torch.ones(T_new, T_past + T_new, dtype=torch.bool).tril(diagonal=T_past)
    out = F.scaled_dot_product_attention(
        q_new,
        keys.repeat_interleave(n_rep, dim=1),
        vals.repeat_interleave(n_rep, dim=1),
        attn_mask=mask,
    )
    return out, keys, vals


def online_attention_normalised_each_step(score_blocks, value_blocks):
    """FlashAttention-1's bookkeeping: o kept divided by l, the old o multiplied by
    l_old e^(m_old - m_new) / l_new; other steps, the same answer."""
    s0, v0 = score_blocks[0], value_blocks[0]
    m = torch.full(s0.shape[:-1], NEG_INF)
    ell, o = torch.zeros_like(m), torch.zeros(s0.shape[:-1] + v0.shape[-1:])
    for s, v in zip(score_blocks, value_blocks, strict=True):
        m_new = torch.maximum(m, s.amax(-1))
        shift = torch.where(torch.isneginf(m_new), 0.0, m_new)
        alpha, p = torch.exp(m - shift), torch.exp(s - shift.unsqueeze(-1))
        ell_new = alpha * ell + p.sum(-1)
        o = (alpha * ell).unsqueeze(-1) * o + p @ v
        o = o / ell_new.clamp_min(1e-30).unsqueeze(-1)
        m, ell = m_new, ell_new
    return o


def lm_loss_by_positions(logits, tokens, loss_mask=None):
    terms = []
    for b in range(tokens.size(0)):
        for t in range(tokens.size(1) - 1):
            if loss_mask is None or loss_mask[b, t + 1]:
                terms.append(F.cross_entropy(logits[b, t], tokens[b, t + 1]))
    return torch.stack(terms).mean()


def _via_warper(warper, logits):
    """A transformers logits warper on (..., V) logits (it takes (B, V))."""
    flat = logits.reshape(-1, logits.size(-1))
    return warper(None, flat).reshape(logits.shape)


def top_k_via_transformers(logits, k):
    from transformers.generation.logits_process import TopKLogitsWarper

    return _via_warper(TopKLogitsWarper(top_k=k), logits)


def top_p_via_transformers(logits, p):
    from transformers.generation.logits_process import TopPLogitsWarper

    return _via_warper(TopPLogitsWarper(top_p=p), logits)


def rms_norm_via_torch(x, weight, eps=1e-6):
    return F.rms_norm(x, x.shape[-1:], weight, eps)


def rope_half_via_transformers(x, positions, base=10000.0):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    d = x.size(-1)
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = positions.double()[:, None] * inv  # (T, d/2)
    cos = torch.cat([angle.cos(), angle.cos()], -1).to(x.dtype)  # (T, d)
    sin = torch.cat([angle.sin(), angle.sin()], -1).to(x.dtype)
    q, _ = apply_rotary_pos_emb(x, x, cos, sin, unsqueeze_dim=0)  # cos: (1, T, d)
    return q.reshape(x.shape)


def alibi_via_bloom(n_heads, T):
    """BLOOM's ALiBi (a bias m_h * j on key j), turned into -m_h (i - j) with the
    causal mask: softmax is unchanged by a constant per row, m_h * i."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    key = build_alibi_tensor(torch.ones(1, T), n_heads, torch.float64)  # (H, 1, T)
    bias = key - key.transpose(1, 2)  # (H, T, T): m_h (j - i)
    return bias.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), NEG_INF)


def _module_with_weights(W_q, W_k, W_v, W_o, n_heads):
    m = tl.MultiHeadAttention(W_q.size(0), n_heads, bias=False)
    with torch.no_grad():
        for proj, W in (
            (m.q_proj, W_q),
            (m.k_proj, W_k),
            (m.v_proj, W_v),
            (m.o_proj, W_o),
        ):
            proj.weight.copy_(W.T)  # nn.Linear computes x @ weight.T
    return m


CORRECT = [
    (ex.check_softmax, tl.softmax),
    (ex.check_softmax, softmax_via_torch),
    (ex.check_scaled_dot_product_attention, tl.scaled_dot_product_attention),
    (ex.check_scaled_dot_product_attention, sdpa_via_torch),
    (ex.check_causal_mask, tl.causal_mask),
    (ex.check_causal_mask, causal_via_tril),
    (ex.check_padding_mask, tl.padding_mask),
    (ex.check_padding_mask, padding_via_comparison),
    (ex.check_layer_norm, tl.layer_norm),
    (ex.check_layer_norm, layer_norm_via_torch),
    (ex.check_sinusoidal_positional_encoding, tl.sinusoidal_positional_encoding),
    (ex.check_sinusoidal_positional_encoding, pe_by_loops),
    (ex.check_apply_rope, tl.apply_rope),
    (ex.check_apply_rope, rope_via_complex),
    (ex.check_repeat_kv, tl.repeat_kv),
    (ex.check_repeat_kv, repeat_kv_via_repeat_interleave),
    (ex.check_multi_head_attention, tl.multi_head_attention),
    (ex.check_multi_head_attention, mha_via_library_module),
    (ex.check_kv_cache_step, tl.cached_attention_step),
    (ex.check_kv_cache_step, kv_step_own),
    (ex.check_online_attention, ex.ch13_flash_attention.reference_online_attention),
    (ex.check_online_attention, online_attention_normalised_each_step),
    (ex.check_causal_lm_loss, tl.causal_lm_loss),
    (ex.check_causal_lm_loss, lm_loss_by_positions),
    (ex.check_top_k_filter, tl.top_k_filter),
    (ex.check_top_k_filter, top_k_via_transformers),
    (ex.check_top_p_filter, tl.top_p_filter),
    (ex.check_top_p_filter, top_p_via_transformers),
    (ex.check_rms_norm, tl.rms_norm),
    (ex.check_rms_norm, rms_norm_via_torch),
    (ex.check_apply_rope_half, rope_half_library),
    (ex.check_apply_rope_half, rope_half_via_transformers),
    (ex.check_alibi_bias, tl.alibi_bias),
    (ex.check_alibi_bias, alibi_via_bloom),
    (ex.check_ring_step, ex.ch18_attention_across_processes.reference_ring_step),
    (ex.check_ring_step, ring_step_by_hand),
    (
        ex.check_tensor_parallel_attention,
        ex.ch18_tensor_parallel.reference_tp_attention,
    ),
    (ex.check_bpe_merge_step, ch19.reference_bpe_merge_step),
    (ex.check_bits_per_char, ch19.reference_bits_per_char),
    (ex.check_induction_score, ch19_induction.reference_induction_score),
]


@pytest.mark.parametrize(
    ("checker", "right"),
    CORRECT,
    ids=[f"{c.__name__}-{r.__name__}" for c, r in CORRECT],
)
def test_checker_accepts_a_correct_answer_and_prints_one_line(checker, right, capsys):
    assert checker(right) is None
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{checker.__name__}: correct"), (
        lines
    )


def test_every_promised_checker_exists_and_is_catalogued():
    required = {
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
        "check_causal_lm_loss",
        "check_top_k_filter",
        "check_top_p_filter",
        "check_rms_norm",
        "check_apply_rope_half",
    }
    assert required <= {c.__name__ for c in CHECKERS}
    assert all(any(row.example for row in c.mistakes) for c in CHECKERS)
    assert {c.__name__ for c in CHECKERS} == {
        c.__name__ for c, _ in CORRECT
    }  # and accepts the library


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.__name__)
def test_a_stub_counts_as_not_attempted(checker, capsys):
    def stub(*args, **kwargs):
        raise NotImplementedError("your code here")

    assert checker(stub) is None
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{checker.__name__}: not attempted yet.", NOT_ATTEMPTED_HINT]


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.__name__)
def test_another_exception_names_the_input_and_the_error(checker):
    def broken(*args, **kwargs):
        raise ValueError("shapes do not line up")

    with pytest.raises(AssertionError) as info:
        checker(broken)
    message = str(info.value)
    assert message.startswith(
        f"{checker.__name__}: your function raised ValueError on "
    )
    assert "shapes do not line up" in message
    assert isinstance(
        info.value.__cause__, ValueError
    )  # the learner's own traceback stays visible


def test_an_exception_names_the_shapes_that_triggered_it():
    def breaks_on_heads(q, k, v, mask=None):
        if q.dim() > 3:
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")
        return tl.scaled_dot_product_attention(q, k, v, mask)

    with pytest.raises(
        AssertionError,
        match=r"raised RuntimeError on q \(2, 3, 5, 4\), k and v \(2, 3, 6, 4\)",
    ):
        ex.check_scaled_dot_product_attention(breaks_on_heads)


def test_passing_the_result_instead_of_the_function_is_explained():
    with pytest.raises(AssertionError, match="pass your function itself"):
        ex.check_softmax(tl.softmax(torch.zeros(3)))


def test_checkers_do_not_modify_the_learners_view_of_inputs():
    """A candidate that writes into its inputs cannot corrupt the reference."""

    def in_place(x, dim=-1):
        out = tl.softmax(x, dim=dim)
        x.zero_()
        return out

    ex.check_softmax(in_place)


# --------------------------------------------------------------------------------------
# The multi-head attention exercise's reference solution is tl.MultiHeadAttention
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("B", "T_q", "T_k", "d_model", "h"),
    [(2, 5, 5, 8, 2), (1, 3, 7, 12, 3), (2, 4, 4, 6, 1)],
)
@pytest.mark.parametrize("masked", [False, True])
def test_reference_mha_matches_the_library_module(B, T_q, T_k, d_model, h, masked):
    g = torch.Generator().manual_seed(B * 100 + T_k)
    x_q, x_kv = (
        torch.randn(B, T_q, d_model, generator=g),
        torch.randn(B, T_k, d_model, generator=g),
    )
    W = [
        torch.randn(d_model, d_model, generator=g) / math.sqrt(d_model)
        for _ in range(4)
    ]
    mask = tl.causal_mask(T_q, T_k) if masked else None
    m = _module_with_weights(*W, h)
    with torch.no_grad():
        want, _ = m(x_q, x_kv, x_kv, mask)
    torch.testing.assert_close(tl.multi_head_attention(x_q, x_kv, *W, h, mask), want)


def test_reference_mha_names_a_weight_of_the_wrong_shape():
    x, W = torch.randn(1, 3, 4), torch.eye(4)
    with pytest.raises(
        ValueError, match=r"W_k must be \(d_model, d_model\), got \(4, 2\)"
    ):
        tl.multi_head_attention(x, x, W, W[:, :2], W, W, 2)


def test_reference_mha_matches_torch():
    torch.manual_seed(0)
    torch_mha = torch.nn.MultiheadAttention(8, 2, bias=False, batch_first=True).eval()
    W_q, W_k, W_v = (w.T for w in torch_mha.in_proj_weight.detach().chunk(3))
    W_o = torch_mha.out_proj.weight.detach().T
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        want, _ = torch_mha(
            x, x, x, attn_mask=~tl.causal_mask(5)
        )  # torch: True = may NOT attend
    torch.testing.assert_close(
        tl.multi_head_attention(x, x, W_q, W_k, W_v, W_o, 2, tl.causal_mask(5)), want
    )


@pytest.mark.parametrize(("n_heads", "T"), [(1, 3), (4, 7), (8, 5), (16, 4)])
def test_reference_alibi_matches_transformers_bloom(n_heads, T):
    torch.testing.assert_close(
        tl.alibi_bias(n_heads, T).double(), alibi_via_bloom(n_heads, T)
    )


@pytest.mark.slow  # a Python process: not in make test-fast
def test_importing_the_checkers_is_quiet_and_needs_no_plotting():
    code = (
        "import sys, transformer_lib.exercises; "
        "assert 'matplotlib' not in sys.modules and 'ipywidgets' not in sys.modules"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""


# --------------------------------------------------------------------------------------
# The book's own solutions pass the checkers their exercises call
# --------------------------------------------------------------------------------------

import json  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

BOOK = Path(__file__).resolve().parents[1] / "book"
CHECK_CALL = re.compile(r"^(check_\w+)\((\w+)\)\s*$", re.M)


def _solution_code(markdown: str) -> list[str]:
    """The code blocks of a markdown cell: fenced python blocks and indented blocks."""
    blocks = [
        m.group(1)
        for m in re.finditer(
            r"^`{3,}(?:python|py|\{code-block\} python|\{code-cell\} ipython3)?[ \t]*\n"
            r"(.*?)^`{3,}[ \t]*$",
            markdown,
            re.S | re.M,
        )
    ]
    indented, current = [], []
    for line in markdown.splitlines() + [""]:
        if line.startswith("    ") or (current and not line.strip()):
            current.append(line[4:])
        else:
            if any(s.strip() for s in current):
                indented.append("\n".join(current))
            current = []
    return blocks + indented


def published_solutions() -> list[tuple[str, str, str, str]]:
    """(notebook, checker, function name, solution code) per chapter checker call."""
    found = []
    for path in sorted(BOOK.glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            source = "".join(cell["source"])
            if cell["cell_type"] != "code":
                continue
            for checker, fn in CHECK_CALL.findall(source):
                solution = next(
                    (
                        "".join(c["source"])
                        for c in cells[i + 1 :]
                        if c["cell_type"] == "markdown"
                        and "{solution}" in "".join(c["source"])
                    ),
                    "",
                )
                code = next(
                    (
                        b
                        for b in _solution_code(solution)
                        if re.search(rf"^def {fn}\(", b, re.M)
                    ),
                    "",
                )
                found.append((path.name, checker, fn, code))
    return found


SOLUTIONS = published_solutions()


@pytest.mark.parametrize(
    ("notebook", "checker", "fn", "code"),
    SOLUTIONS,
    ids=[f"{n}-{c}" for n, c, _, _ in SOLUTIONS],
)
def test_published_solution_passes_its_checker(notebook, checker, fn, code, capsys):
    assert code, (
        f"{notebook}: the solution after the cell calling {checker}({fn}) shows no"
        f" code defining {fn}"
    )
    namespace = {"torch": torch, "nn": torch.nn, "F": F, "math": math, "tl": tl}
    namespace.update(
        {name: getattr(ex, name) for name in ex.__all__}
    )  # a solution may end with its check call
    exec(compile(code, f"<{notebook} solution of {fn}>", "exec"), namespace)  # noqa: S102
    getattr(ex, checker)(namespace[fn])
    out = capsys.readouterr().out
    assert out.startswith(f"{checker}: correct"), (
        f"{notebook}: the published solution of {fn} does not pass: {out}"
    )


def test_every_checker_is_called_by_a_chapter():
    called = {checker for _, checker, _, _ in SOLUTIONS}
    unused = sorted({c.__name__ for c in CHECKERS} - called)
    assert not unused, f"no chapter exercise calls {unused}"


# --------------------------------------------------------------------------------------
# The messages in the learner's language (transformer_lib/exercises/language.py)
# --------------------------------------------------------------------------------------

import string  # noqa: E402

from babel.messages.pofile import read_po  # noqa: E402

from booktools import catalogs  # noqa: E402
from transformer_lib.exercises import harness, language  # noqa: E402

HAN = re.compile(r"[\u3400-\u9fff]")
# three English words in a row, outside code: a sentence left untranslated
ENGLISH_RUN = re.compile(r"(?<![\w.`(])[a-z]{2,} [a-z]{2,} [a-z]{2,}(?![\w(])")


def _fields(text: str) -> list[str]:
    return sorted(f for _, f, _, _ in string.Formatter().parse(text) if f is not None)


def _catalog(lang: str) -> dict:
    path = catalogs.checker_catalog(lang)
    with path.open("rb") as f:
        return {m.id: m for m in read_po(f, locale=lang) if m.id}


@pytest.mark.parametrize("lang", language.LANGUAGES)
def test_every_message_has_both_translations(lang):
    """Every message the code marks is in the catalog, translated, reviewed (not
    fuzzy), with the same {fields}; the catalog holds nothing the code no longer
    says."""
    template = {m.id for m in catalogs.checker_messages() if m.id}
    found = _catalog(lang)
    assert len(template) >= 300
    assert template == set(found), template ^ set(found)
    for msgid, m in found.items():
        assert m.string and not m.fuzzy, (lang, msgid)
        assert _fields(m.string) == _fields(msgid), (lang, msgid, m.string)
        if ENGLISH_RUN.search(re.sub(r"`[^`]*`", "", msgid)):
            assert HAN.search(m.string), (lang, msgid, m.string)


@pytest.mark.parametrize("lang", language.LANGUAGES)
def test_each_compiled_catalog_is_its_po(lang):
    """The committed .mo (what gettext reads) is the .po compiled: `make catalogs`."""
    po = catalogs.checker_catalog(lang)
    assert po.with_suffix(".mo").read_bytes() == catalogs.compiled(po, lang), (
        f"{po.with_suffix('.mo')} is stale: run `make catalogs`"
    )


def _upper_triangle(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    return torch.ones(T_q, T_k, dtype=torch.bool).triu()


@pytest.mark.slow  # a Python process: not in make test-fast
def test_a_checker_run_with_LANGUAGE_zh_TW_explains_a_mistake_in_traditional_chinese():
    code = (
        "import torch\n"
        "from transformer_lib.exercises import check_causal_mask\n"
        "try:\n"
        "    check_causal_mask(lambda T_q, T_k=None: torch.ones(T_q, T_k or T_q,"
        " dtype=torch.bool).triu())\n"
        "except AssertionError as err:\n"
        "    print(err)\n"
        "def stub(T_q, T_k=None):\n"
        "    raise NotImplementedError\n"
        "check_causal_mask(stub)\n"
    )
    env = {**__import__("os").environ, "LANGUAGE": "zh_TW", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
        env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    tw = _catalog("zh_TW")
    row = next(r for r in ex.check_causal_mask.mistakes if r.example is not None
               and "upper triangle" in str(r.message))  # fmt: skip
    said = tw[row.message].string.format(inputs="causal_mask(4), T_q = T_k = 4")
    expected = [
        tw["{name}: {message}"].string.format(name="check_causal_mask", message=said),
        tw["{name}: not attempted yet."].string.format(name="check_causal_mask"),
        tw[harness.NOT_ATTEMPTED_HINT].string,
    ]
    assert done.stdout.splitlines() == expected
    # Traditional, in Taiwan's words: rows are 列, a mask 遮罩, a cell 儲存格
    assert "你的遮罩是上三角" in said and "第 i 列是查詢" in said
    assert "儲存格" in expected[2]
    simplified = set("这为个们说时应键询码头数组对")
    assert not simplified & set(done.stdout), simplified & set(done.stdout)


@pytest.mark.parametrize("lang", language.LANGUAGES)
def test_every_row_is_said_in_the_language(lang):
    """Each catalogued mistake's message, said in ``lang``, is Chinese throughout:
    its inputs, fields and fragments too, not only the row's template."""
    with language.speaking(lang):
        for checker, row in CATALOGUE:
            verdict = checker.verdict(row.example)
            assert verdict.failed and verdict.mistake is row, verdict.text
            assert HAN.search(verdict.text), verdict.text
            left = ENGLISH_RUN.findall(re.sub(r"`[^`]*`", "", verdict.text))
            assert not left, (checker.__name__, left, verdict.text)


def test_the_editions_twins(monkeypatch):
    """In the book's build (``say_also_in``), a check also says its message in each
    edition's language, under the edition's own type (``text/vnd.tl.zh_TW+plain``),
    which the edition's build shows (``booktools.figures.mime_priority_overrides``)."""
    shown = []
    monkeypatch.setattr(
        "IPython.display.display", lambda data, raw: shown.append((data, raw))
    )
    language.say_also_in(["zh_CN", "zh_TW"])
    try:
        ex.check_causal_mask(lambda T_q, T_k=None: (_ for _ in ()).throw(
            NotImplementedError))  # fmt: skip
        with pytest.raises(AssertionError) as info:
            ex.check_causal_mask(_upper_triangle)
    finally:
        language.say_also_in([])
    [(data, raw)] = shown
    assert raw and data["text/plain"].startswith(
        "check_causal_mask: not attempted yet."
    )
    assert sorted(data) == [
        "text/plain", "text/vnd.tl.zh_CN+plain", "text/vnd.tl.zh_TW+plain"
    ]  # fmt: skip
    cn, tw = _catalog("zh_CN"), _catalog("zh_TW")
    for lang, cat in (("zh_CN", cn), ("zh_TW", tw)):
        hint = cat[harness.NOT_ATTEMPTED_HINT].string
        said = data[f"text/vnd.tl.{lang}+plain"]
        assert said.endswith("\n" + hint), said
    assert data["text/vnd.tl.zh_CN+plain"] != data["text/vnd.tl.zh_TW+plain"]
    err = info.value
    assert set(err.editions) == {"zh_CN", "zh_TW"}
    with language.speaking("zh_TW"):
        assert (
            err.editions["zh_TW"] == ex.check_causal_mask.verdict(_upper_triangle).text
        )
    bundle = err._repr_mimebundle_()
    assert bundle["text/plain"] == str(err)
    assert bundle["text/vnd.tl.zh_TW+plain"] == err.editions["zh_TW"]
    # what display(err) shows in a kernel (chapter 0): the message, not the repr
    from IPython.core.interactiveshell import InteractiveShell

    shown, _ = InteractiveShell.instance().display_formatter.format(err)
    assert shown == bundle, shown
    with pytest.raises(ValueError, match="no catalog"):
        language.say_also_in(["fr"])
