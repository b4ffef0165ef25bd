"""The live panel on a kernel (transformer_lib/viz/live_panel.py): the text read as
the page reads it, the refusals, and every attention's intermediates against the
models' own weights and PyTorch's attention."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import transformer_lib as tl
from transformer_lib.demos import addition, reversal
from transformer_lib.viz import live
from transformer_lib.viz.live_panel import (
    WORDS,
    InputRefused,
    LivePanel,
    attention_trace,
    panel_html,
    parse_addition,
    parse_reversal,
)


def test_addition_is_read_as_the_model_was_trained():
    a, b, tokens = parse_addition(" 347 + 85 = ", 3)
    full = addition.encode(torch.tensor([347]), torch.tensor([85]), 3)[0]
    assert (a, b) == ("347", "85")
    assert tokens == full[: addition.prompt_len(3)].tolist()


@pytest.mark.parametrize(
    "text, key",
    [
        ("347+85", "err_no_equals"),
        ("1000+1=", "err_digits"),
        ("1+1=2", "err_after_equals"),
        ("1-1=", "err_char"),
        ("1+1+1=", "err_no_plus"),
        ("+1=", "err_no_plus"),
        ("  ", "err_empty"),
    ],
)
def test_addition_refusals_name_the_problem(text, key):
    with pytest.raises(InputRefused) as err:
        parse_addition(text, 3)
    assert err.value.key == key


def test_reversal_reading_and_refusals():
    vocab = reversal.token_labels(range(12))
    assert parse_reversal("c a h", vocab, None) == parse_reversal("CAH", vocab, None)
    assert parse_reversal("cah", vocab, None) == [4, 2, 9]
    for text, key in [("cah", "err_length_exact"), ("abcdefgz", "err_char")]:
        with pytest.raises(InputRefused) as err:
            parse_reversal(text, vocab, 8)
        assert err.value.key == key


def test_trace_of_the_encoder_decoder_matches_its_weights_and_pytorch():
    model = reversal.random_model(seed=3)
    src, tgt = torch.randint(2, 12, (1, 8)), torch.randint(1, 12, (1, 8))
    logits, seen = attention_trace(model, src, tgt)
    _, w = model(src, tgt, need_weights=True)
    L = model.cfg.n_layers
    torch.testing.assert_close(logits, model(src, tgt)[0])
    assert len(seen) == 3 * L
    for i in range(L):
        torch.testing.assert_close(seen[i]["weights"], w["encoder"][i][0])
        torch.testing.assert_close(seen[L + 2 * i]["weights"], w["decoder_self"][i][0])
        torch.testing.assert_close(seen[L + 2 * i + 1]["weights"], w["cross"][i][0])
    for a in seen:
        # the chain: q·k, scaled, masked, softmax, weighted sum, as PyTorch computes it
        q, k, v, mask = a["q"], a["k"], a["v"], a["mask"]
        torch.testing.assert_close(a["scores"], q @ k.transpose(-2, -1))
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        torch.testing.assert_close(a["out"], want)
        s = (a["scores"] * a["scale"]).masked_fill(~mask, float("-inf"))
        torch.testing.assert_close(a["weights"], torch.softmax(s, -1))
    causal = torch.ones(8, 8, dtype=torch.bool).tril()
    assert torch.equal(seen[L]["mask"], causal)  # the decoder's first self-attention


def test_trace_of_the_gpt_and_its_answer():
    torch.manual_seed(0)
    model = tl.GPT(addition.addition_config(3)).eval()
    panel = LivePanel(model, "addition")
    run = panel.run("347+85=", temperature=0.5)
    prompt = torch.tensor([parse_addition("347+85=", 3)[2]])
    assert run["answer"] == model.generate(prompt, 4)[0].tolist()
    for step, p in enumerate(run["steps"]):
        logits = model(torch.tensor([run["tokens"][: 8 + step]]))[0, -1]
        torch.testing.assert_close(p, torch.softmax(logits, -1))
    _, seen, _, _ = run["kinds"]["self"]
    _, w = model(torch.tensor([run["tokens"]]), need_weights=True)
    for a, want in zip(seen, w, strict=True):
        torch.testing.assert_close(a["weights"], want[0])
    assert len(run["sampled"]) == 10
    html = panel.render("347+85=")
    assert "347 + 85 =" in html and html.count("<figure") == 8


def test_render_gives_the_message_not_a_picture():
    panel = LivePanel(reversal.random_model(), "reversal", length=8)
    html = panel.render("abc")
    assert "exactly 8 symbols" in html and "<figure" not in html


def test_words_are_in_the_markup_and_translated_on_a_kernel():
    markup = panel_html("addition")
    assert all(f'data-key="{key}"' in markup for key in WORDS)
    live.use_words({WORDS["run"]: "运行"})
    try:
        widget = LivePanel(reversal.random_model(), "reversal", length=8).widget()
        button = widget.children[1].children[1]
        assert button.description == "运行"
    finally:
        live.use_words({})


def test_unknown_panel_is_refused():
    with pytest.raises(ValueError, match="no live panel"):
        panel_html("translation")
