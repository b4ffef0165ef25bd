"""The live panel on a kernel (transformer_lib/viz/live_panel.py): the anywidget whose
front end is the site's own panel script, and the kernel's answers to it, every
attention's intermediates against the models' own weights and PyTorch's attention."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import transformer_lib as tl
from transformer_lib.demos import addition, reversal
from transformer_lib.viz import live
from transformer_lib.viz.live_panel import (
    WORDS,
    LivePanel,
    attention_trace,
    page_trace,
    panel_html,
)

ROOT = Path(__file__).resolve().parent.parent


def _chain_is_pytorchs(a: dict) -> None:
    """One attention of the page's Trace: q·k, scaled, masked, softmax, weighted sum,
    as PyTorch computes them."""
    q, k, v = (torch.tensor(a[n]) for n in ("q", "k", "v"))
    mask = torch.tensor(a["mask"])
    torch.testing.assert_close(torch.tensor(a["scores"]), q @ k.transpose(-2, -1))
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(torch.tensor(a["out"]), want)
    s = (torch.tensor(a["scores"]) * a["scale"]).masked_fill(~mask, float("-inf"))
    torch.testing.assert_close(torch.tensor(a["weights"]), torch.softmax(s, -1))


def test_trace_of_the_encoder_decoder_matches_its_weights_and_pytorch():
    model = reversal.random_model(seed=3)
    src, tgt = torch.randint(2, 12, (8,)).tolist(), torch.randint(1, 12, (8,)).tolist()
    t = page_trace(model, src, tgt)
    logits, w = model(torch.tensor([src]), torch.tensor([tgt]), need_weights=True)
    torch.testing.assert_close(torch.tensor(t["logits"]), logits[0])
    L = model.cfg.n_layers
    assert len(t["encoder"]) == len(t["decoder"]) == L
    for i in range(L):
        got = t["encoder"][i]["self"], t["decoder"][i]["self"], t["decoder"][i]["cross"]
        want = w["encoder"][i], w["decoder_self"][i], w["cross"][i]
        for a, maps in zip(got, want, strict=True):
            torch.testing.assert_close(torch.tensor(a["weights"]), maps[0])
            _chain_is_pytorchs(a)
    causal = torch.ones(8, 8, dtype=torch.bool).tril()
    assert torch.equal(torch.tensor(t["decoder"][0]["self"]["mask"]), causal)
    assert all(all(row) for row in t["encoder"][0]["self"]["mask"])  # no mask: all


def test_trace_of_a_gqa_rope_gpt_and_its_logits():
    torch.manual_seed(0)
    cfg = tl.GPTConfig.llama(
        vocab_size=9,
        d_model=16,
        n_heads=4,
        n_kv_heads=2,
        n_layers=3,
        d_ff=24,
        max_len=8,
    )
    model = tl.GPT(cfg).eval()
    panel = LivePanel(model, "addition")
    ids = [1, 2, 3, 4, 5, 6]
    logits = panel.answer("logits", [ids])
    t = panel.answer("trace", [ids])
    _, w = model(torch.tensor([ids]), need_weights=True)
    torch.testing.assert_close(torch.tensor(logits), model(torch.tensor([ids]))[0])
    assert len(t["layers"]) == 3
    for layer, maps in zip(t["layers"], w, strict=True):
        a = layer["self"]
        assert torch.tensor(a["k"]).shape == (4, 6, 4)  # K repeated to h heads
        torch.testing.assert_close(torch.tensor(a["weights"]), maps[0])
        _chain_is_pytorchs(a)


def test_the_trace_goes_through_trace_and_leaves_no_hook():
    model = tl.GPT(addition.addition_config(2)).eval()
    _, traces = attention_trace(model, torch.tensor([[1, 2, 10, 3, 4, 11]]))
    assert len(traces) == 2 and {"X", "Z_attn", "self_attn"} <= set(traces[0])
    assert all(not m._forward_pre_hooks for m in model.modules())


def test_the_kernel_answers_the_page_and_names_a_bad_request():
    panel = LivePanel(reversal.random_model(), "reversal", length=8)
    sent = []
    panel.send = sent.append  # what would go to the page
    panel._answer(panel, {"id": 1, "op": "logits", "args": [[2, 3, 4], [1, 4]]}, [])
    panel._answer(panel, {"id": 2, "op": "logits", "args": [[2, 99], [1]]}, [])
    panel._answer(panel, {"id": 3, "op": "nonsense", "args": [[2]]}, [])
    panel._answer(panel, {"id": 4, "op": "trace", "args": "abc"}, [])
    assert sent[0]["id"] == 1 and len(sent[0]["result"]) == 2  # (T_tgt, V)
    assert len(sent[0]["result"][0]) == 12
    assert sent[1]["id"] == 2 and "vocab_size=12" in sent[1]["error"]
    assert "nonsense" in sent[2]["error"] and "token ids" in sent[3]["error"]


def test_the_widget_is_the_sites_script_and_stylesheet():
    site = ROOT / "book" / "_static"
    assert str(LivePanel._esm) == (site / "tl-live-panels.js").read_text()
    assert str(LivePanel._css) == (site / "tl-site.css").read_text()
    panel = LivePanel(tl.GPT(addition.addition_config(3)), "addition")
    assert panel.meta["kind"] == "gpt" and panel.meta["config"]["max_len"] == 12
    bundle = panel._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert 'class="tl-live-panel"' in bundle["text/html"]


def test_words_are_in_the_markup_and_translated_on_a_kernel():
    markup = panel_html("addition")
    assert all(f'data-key="{key}"' in markup for key in WORDS)
    live.use_words({WORDS["run"]: "运行"})
    try:
        panel = LivePanel(reversal.random_model(), "reversal", length=8)
        assert panel.words["run"] == "运行" and panel.words["layer"] == "Layer"
    finally:
        live.use_words({})


def test_unknown_panel_and_wrong_vocab_are_refused():
    with pytest.raises(ValueError, match="no live panel"):
        panel_html("translation")
    with pytest.raises(ValueError, match="vocab has 3 tokens.*vocab_size is 12"):
        LivePanel(reversal.random_model(), "reversal", vocab=["a", "b", "c"])
