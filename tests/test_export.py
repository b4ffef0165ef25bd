"""transformer_lib.export: a model written as safetensors loads back, through
safetensors' own ``load_model``, into a model built from the config in the file."""

from __future__ import annotations

import json

import pytest
import safetensors.torch
import torch
from safetensors import safe_open

import transformer_lib as tl

GPTS = {
    "gpt2-tied": tl.GPTConfig(
        vocab_size=12, d_model=16, n_heads=4, n_layers=2, d_ff=32, max_len=10
    ),
    "llama-gqa": tl.GPTConfig.llama(
        vocab_size=20, d_model=16, n_heads=4, n_kv_heads=2, n_layers=2, d_ff=24,
        max_len=8,
    ),
    "sinusoidal-untied": tl.GPTConfig(
        vocab_size=9, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=6,
        positions="sinusoidal", tie_embeddings=False, attn_bias=False,
    ),
}  # fmt: skip
TRANSFORMERS = {
    "post-ln": tl.TransformerConfig(
        vocab_size=12, d_model=16, n_heads=4, n_layers=2, d_ff=32, max_len=10
    ),
    "pre-ln-gqa": tl.TransformerConfig(
        vocab_size=12, d_model=16, n_heads=4, n_kv_heads=1, n_layers=1, d_ff=32,
        max_len=10, norm_first=True, activation="gelu",
    ),
}  # fmt: skip


def _random(model: torch.nn.Module) -> torch.nn.Module:
    """Every parameter random (norms and biases too), so that nothing loads by luck."""
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()
    return model.eval()


def _metadata(path) -> dict:
    with safe_open(str(path), "pt") as f:
        return f.metadata()


@pytest.mark.parametrize("name", GPTS)
def test_gpt_loads_back_with_safetensors_load_model(tmp_path, name):
    torch.manual_seed(0)
    model = _random(tl.GPT(GPTS[name]))
    vocab = [f"t{i}" for i in range(model.cfg.vocab_size)]
    path = tl.export_model(model, tmp_path / "m.safetensors", vocab=vocab)
    meta = _metadata(path)
    assert meta["kind"] == "gpt" and json.loads(meta["vocab"]) == vocab
    config = json.loads(meta["config"])
    again = tl.GPT(tl.GPTConfig(**config))
    missing, unexpected = safetensors.torch.load_model(again, path)
    assert not missing and not unexpected
    for key, value in model.state_dict().items():
        torch.testing.assert_close(again.state_dict()[key], value, rtol=0, atol=0)
    idx = torch.randint(0, model.cfg.vocab_size, (2, model.cfg.max_len))
    torch.testing.assert_close(again.eval()(idx), model(idx), rtol=0, atol=0)


def test_tied_matrix_is_stored_once(tmp_path):
    model = _random(tl.GPT(GPTS["gpt2-tied"]))
    path = tl.export_model(model, tmp_path / "m.safetensors")
    with safe_open(str(path), "pt") as f:
        names = set(f.keys())
    assert set(model.state_dict()) - names == {"tok_emb.weight"}
    assert _metadata(path)["tok_emb.weight"] == "lm_head.weight"
    again = tl.load_exported(path)
    assert again.lm_head.weight is again.tok_emb.weight  # tied again


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_transformer_loads_back(tmp_path, name):
    torch.manual_seed(1)
    model = _random(tl.Transformer(TRANSFORMERS[name]))
    path = tl.export_model(model, tmp_path / "m.safetensors")
    meta = tl.read_metadata(path)
    assert meta["kind"] == "transformer" and meta["vocab"] is None
    again = tl.Transformer(tl.TransformerConfig(**meta["config"]))
    safetensors.torch.load_model(again, path)
    src, tgt = torch.randint(2, 12, (2, 7)), torch.randint(1, 12, (2, 5))
    torch.testing.assert_close(again.eval()(src, tgt), model(src, tgt), rtol=0, atol=0)


def test_float16_export_holds_the_rounded_weights(tmp_path):
    model = _random(tl.GPT(GPTS["llama-gqa"]))
    path = tl.export_model(model, tmp_path / "m.safetensors", dtype=torch.float16)
    with safe_open(str(path), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float16}
    assert next(model.parameters()).dtype == torch.float32  # the model is untouched
    again = tl.load_exported(path)
    for key, value in model.state_dict().items():
        torch.testing.assert_close(
            again.state_dict()[key], value.half().float(), rtol=0, atol=0
        )


def test_bad_calls_are_named(tmp_path):
    model = tl.GPT(GPTS["gpt2-tied"])
    with pytest.raises(ValueError, match="vocab has 3 tokens.*vocab_size is 12"):
        tl.export_model(model, tmp_path / "a.safetensors", vocab=["a", "b", "c"])
    with pytest.raises(ValueError, match="dtype must be one of"):
        tl.export_model(model, tmp_path / "a.safetensors", dtype=torch.int8)
    with pytest.raises(TypeError, match="tl.GPT or a tl.Transformer, got Linear"):
        tl.export_model(torch.nn.Linear(2, 2), tmp_path / "a.safetensors")
    plain = tmp_path / "plain.safetensors"
    safetensors.torch.save_model(torch.nn.Linear(2, 2), str(plain))
    with pytest.raises(ValueError, match="no 'kind' and 'config'"):
        tl.load_exported(plain)
