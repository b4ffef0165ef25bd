"""One way to generate, for both model families (chapters 11, 12, 14 and 15).

A model supplies a *step*: the tokens so far (B, t) -> the logits of the last position
(B, V), with or without a KV cache. :func:`decode_loop` turns steps into tokens,

    y_t = argmax_v z_t[v]                   (eq. greedy)
    y_t ~ softmax(filter(z_t / tau))        (eq. sampling-probs), with ``do_sample``

and :class:`Generates` gives a model ``generate_steps`` and ``generate`` with one set of
keywords. With ``eos_id`` the rows stop independently: a row keeps its end-of-sequence
token, then ``pad_id`` fills it (its logits zero), and the loop stops once every row
has ended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

from .sampling import check_sampling_args, sample_next

# the tokens so far (B, t) -> the logits of the last position (B, V)
Step = Callable[[torch.Tensor], torch.Tensor]


def decode_loop(
    step: Step,
    prompt: torch.Tensor,
    max_new_tokens: int,
    *,
    eos_id: int | None = None,
    pad_id: int = 0,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield (next token (B,), its logits (B, V)) for at most ``max_new_tokens`` steps,
    starting from ``prompt`` (B, T).

    Greedy (eq. greedy) unless ``do_sample``, which draws from
    :func:`~transformer_lib.sample_next` with ``generator``. A row that has produced
    ``eos_id`` yields ``pad_id`` and zero logits from the next step on, and is fed
    ``eos_id`` (``pad_id`` need not be a token id).
    """
    if do_sample:
        check_sampling_args(temperature, top_k, top_p)
    tokens = prompt  # (B, t): everything fed so far
    ended = torch.zeros(prompt.size(0), dtype=torch.bool, device=prompt.device)
    for _ in range(max_new_tokens):
        logits = step(tokens)  # (B, V)
        if do_sample:
            options = dict(temperature=temperature, top_k=top_k, top_p=top_p)
            next_token = sample_next(logits, **options, generator=generator)
        else:
            next_token = logits.argmax(dim=-1)  # (B,)   (eq. greedy)
        fed = next_token
        if eos_id is not None:
            # rows that ended at an earlier step: padding, and nothing predicted
            fed = next_token.masked_fill(ended, eos_id)
            next_token = next_token.masked_fill(ended, pad_id)
            logits = logits.masked_fill(ended[:, None], 0.0)
            ended = ended | (fed == eos_id)
        yield next_token, logits
        if eos_id is not None and bool(ended.all()):
            return
        tokens = torch.cat([tokens, fed[:, None]], dim=1)  # (B, t + 1)


class Generates:
    """``generate_steps`` and ``generate`` for a model with a ``cfg`` (its
    ``vocab_size`` and ``pad_id``) and a ``decoding_step``: ``(prompt,
    max_new_tokens, use_cache, **inputs) -> (step, first tokens (B, t))``."""

    cfg: object
    decoding_step: Callable[..., tuple[Step, torch.Tensor]]

    @torch.no_grad()
    def generate_steps(
        self,
        prompt: torch.Tensor,
        max_new_tokens: int,
        *,
        use_cache: bool = True,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        eos_id: int | None = None,
        pad_id: int | None = None,
        generator: torch.Generator | None = None,
        **inputs,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """:func:`decode_loop` over the model's step: yields (next token (B,), its
        logits (B, V)). ``inputs`` are the model's other inputs (``src_mask``)."""
        V = self.cfg.vocab_size
        if eos_id is not None and not 0 <= eos_id < V:
            raise ValueError(
                f"eos_id={eos_id} is not a token id in [0, vocab_size={V})"
            )
        step, first = self.decoding_step(prompt, max_new_tokens, use_cache, **inputs)
        yield from decode_loop(
            step,
            first,
            max_new_tokens,
            eos_id=eos_id,
            pad_id=self._pad_id(eos_id, pad_id),
            do_sample=do_sample,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            generator=generator,
        )

    @torch.no_grad()
    def generate(
        self,
        prompt: torch.Tensor,
        max_new_tokens: int,
        *,
        use_cache: bool = True,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        eos_id: int | None = None,
        pad_id: int | None = None,
        generator: torch.Generator | None = None,
        return_logits: bool = False,
        **inputs,
    ):
        """The new tokens (B, max_new_tokens), or ``(tokens, logits (B,
        max_new_tokens, V))`` with ``return_logits``: :meth:`generate_steps`, stacked.

        Greedy (eq. greedy) unless ``do_sample`` (``temperature``, ``top_k``,
        ``top_p``, ``generator``, as :func:`~transformer_lib.sample_next`). With
        ``use_cache`` the prompt is fed once and then one token per step against a KV
        cache; without it every step reruns the whole sequence: the same tokens. A row
        that produces ``eos_id`` keeps it, then ``pad_id`` fills it (default: the
        config's ``pad_id``, else ``eos_id``). Steps skipped once every row has ended
        are padding too, so the result is the same as if decoding had gone on. The
        train/eval mode is left alone: call ``model.eval()`` first if it has dropout.
        """
        steps = list(
            self.generate_steps(
                prompt,
                max_new_tokens,
                use_cache=use_cache,
                do_sample=do_sample,
                temperature=temperature,
                top_k=top_k,
                top_p=top_p,
                eos_id=eos_id,
                pad_id=pad_id,
                generator=generator,
                **inputs,
            )
        )
        B, V, n = prompt.size(0), self.cfg.vocab_size, max_new_tokens - len(steps)
        # (B, max_new_tokens)
        tokens = torch.cat(
            [
                prompt.new_zeros((B, 0)),
                *(t[:, None] for t, _ in steps),
                prompt.new_full((B, n), self._pad_id(eos_id, pad_id)),
            ],
            dim=1,
        )
        if not return_logits:
            return tokens
        dtype = steps[0][1].dtype if steps else torch.get_default_dtype()
        logits = torch.zeros(B, max_new_tokens, V, dtype=dtype, device=prompt.device)
        if steps:  # (B, steps, V)
            logits[:, : len(steps)] = torch.stack([lg for _, lg in steps], dim=1)
        return tokens, logits

    # -- the checks both models make on their inputs ---------------------------------
    def _check_tokens(self, name: str, ids: torch.Tensor) -> tuple[int, int]:
        """``ids`` (B, T) integer token ids in [0, vocab_size); returns (B, T)."""
        if ids.dim() != 2:
            raise ValueError(f"{name} must have shape (B, T), got {tuple(ids.shape)}")
        if ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise TypeError(
                f"{name} must hold integer token ids, got dtype {ids.dtype}"
            )
        V = self.cfg.vocab_size
        if ids.numel() and (ids.min() < 0 or ids.max() >= V):
            raise ValueError(
                f"token ids must lie in [0, vocab_size={V}), "
                f"got ids from {int(ids.min())} to {int(ids.max())}"
            )
        return tuple(ids.shape)

    def _check_positions(self, n: int, what: str) -> None:
        """``what`` needs ``n`` positions: at most the config's max_len."""
        if n > self.cfg.max_len:
            raise ValueError(
                f"{what} needs {n} positions, more than max_len={self.cfg.max_len}"
            )

    def _check_new_tokens(self, max_new_tokens: int) -> None:
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")

    def _pad_id(self, eos_id: int | None, pad_id: int | None) -> int:
        """pad_id, else the config's pad_id, else eos_id (0 when nothing ends)."""
        for candidate in (pad_id, self.cfg.pad_id, eos_id):
            if candidate is not None:
                return candidate
        return 0
