"""A trained model as one ``.safetensors`` file: its weights under its own
``state_dict`` names, its config (and vocabulary) in the file's metadata.

The file is safetensors' own format, written by ``safetensors.torch.save_model`` (a
matrix shared by two names, the GPT's tied E and W_out, is stored once, and the metadata
says under which name), so that

    config = json.loads(safe_open(path, "pt").metadata()["config"])
    safetensors.torch.load_model(tl.GPT(tl.GPTConfig(**config)), path)

loads it back; :func:`load_exported` does exactly this. The book's site reads the same
file in the reader's browser (``book/_static/tl-live.js``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import torch
import torch.nn as nn
from safetensors import safe_open
from safetensors.torch import load_model, save_model

from .configs import GPTConfig, TransformerConfig
from .gpt import GPT
from .model import Transformer
from .tokens import BPETokenizer, CharTokenizer, tokenizer_from_json

# the "kind" written in the metadata -> the model class and its config class
KINDS = {"gpt": (GPT, GPTConfig), "transformer": (Transformer, TransformerConfig)}
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def export_model(
    model: GPT | Transformer,
    path: str | Path,
    *,
    vocab: list[str] | None = None,
    dtype: torch.dtype | None = None,
    tokenizer: CharTokenizer | BPETokenizer | None = None,
) -> Path:
    """Write ``model`` to ``path`` as safetensors: tensors named as in its
    ``state_dict``, a tied matrix once; metadata "kind" ("gpt" or "transformer"),
    "config" (the config's fields as JSON), "tensors" (every ``state_dict`` name with
    its shape, as JSON: what a reader checks a file against) and, when given, "vocab"
    (the token strings, index = id, as JSON).

    ``dtype`` (float32, float16 or bfloat16) stores the weights in that type (half the
    bytes in 16 bits); None keeps the model's. The model itself is not changed.
    ``tokenizer`` (a language model's) is written as the metadata "tokenizer" (its
    ``to_json()``, read back by :func:`load_tokenizer`); its token strings are the
    "vocab" when ``vocab`` is not given. Returns the path.
    """
    kinds = [k for k, (cls, _) in KINDS.items() if isinstance(model, cls)]
    if not kinds:
        raise TypeError(
            f"export_model takes a tl.GPT or a tl.Transformer, "
            f"got {type(model).__name__}"
        )
    cfg = model.cfg
    metadata = {
        "kind": kinds[0],
        "config": json.dumps(dataclasses.asdict(cfg)),
        "tensors": json.dumps(
            {k: list(v.shape) for k, v in model.state_dict().items()}
        ),
    }
    if tokenizer is not None:
        if len(tokenizer) != cfg.vocab_size:
            raise ValueError(
                f"the tokenizer has {len(tokenizer)} tokens, the model's vocab_size is "
                f"{cfg.vocab_size}"
            )
        metadata["tokenizer"] = tokenizer.to_json()
        vocab = tokenizer.tokens if vocab is None else vocab
    if vocab is not None:
        vocab = [str(t) for t in vocab]
        if len(vocab) != cfg.vocab_size:
            raise ValueError(
                f"vocab has {len(vocab)} tokens, the model's vocab_size is "
                f"{cfg.vocab_size}"
            )
        metadata["vocab"] = json.dumps(vocab, ensure_ascii=False)
    if dtype is not None and dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype}")
    if dtype is not None and dtype != next(model.parameters()).dtype:
        model = copy.deepcopy(model).to(dtype)  # .to keeps a tied matrix shared
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_model(model, str(path), metadata=metadata)
    path.chmod(0o644)  # a file to publish: readable by all, as any written file
    return path


def read_metadata(path: str | Path) -> dict:
    """The metadata of an exported file, decoded: {"kind", "config" (a dict),
    "vocab" (a list or None), "tensors" (name -> shape, or None in a file written
    before export_model wrote them)}."""
    with safe_open(str(path), "pt") as f:
        meta = f.metadata() or {}
    if "kind" not in meta or "config" not in meta:
        raise ValueError(
            f"{path} has no 'kind' and 'config' in its metadata: "
            "not written by export_model"
        )
    if meta["kind"] not in KINDS:
        raise ValueError(
            f"{path}: kind must be one of {sorted(KINDS)}, got {meta['kind']!r}"
        )
    vocab = json.loads(meta["vocab"]) if "vocab" in meta else None
    tensors = json.loads(meta["tensors"]) if "tensors" in meta else None
    return {
        "kind": meta["kind"],
        "config": json.loads(meta["config"]),
        "vocab": vocab,
        "tensors": tensors,
    }


def load_exported(path: str | Path, dtype: torch.dtype = torch.float32) -> nn.Module:
    """The model of a file written by :func:`export_model`, built from its config and
    loaded with ``safetensors.torch.load_model``, in ``dtype``, in eval mode."""
    meta = read_metadata(path)
    model_cls, config_cls = KINDS[meta["kind"]]
    model = model_cls(config_cls(**meta["config"])).to(dtype)
    load_model(model, str(path))
    return model.eval()


def load_tokenizer(path: str | Path) -> CharTokenizer | BPETokenizer:
    """The tokenizer stored in a file written by :func:`export_model` with
    ``tokenizer=`` (a ``CharTokenizer`` or a ``BPETokenizer``)."""
    with safe_open(str(path), "pt") as f:
        meta = f.metadata() or {}
    if "tokenizer" not in meta:
        raise ValueError(
            f"{path} has no 'tokenizer' in its metadata: it was exported without one"
        )
    return tokenizer_from_json(meta["tokenizer"])
