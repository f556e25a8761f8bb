"""A small causal language model from transformers whose attention runs on the shared-prefix op.

    model = build_lm(LMConfig(), vocab_size=15)          # a LlamaForCausalLM, random init
    logits = packed_logits(model, ids, layout)           # (T, V): every group's prompt once
    logits = replicated_logits(model, ids, layout)       # (T, V): the same, one padded row per response

`register_attention()` adds the op to transformers' `AttentionInterface` under the name
`ATTENTION` (and a mask function that builds no mask: the layout is the mask), so any HF causal LM
built with `attn_implementation=ATTENTION` runs packed batches. A packed batch is one row of T
tokens, `[prompt_0 | response_00 | response_01 | ... | prompt_1 | ...]`, whose position ids are those
of the replicated sequences (a response token at P + t), and the `SharedPrefixLayout` travels as the
`shared_prefix_layout` keyword of the forward call down to each attention layer. Without that
keyword the layer falls back to SDPA with the mask transformers built, so the same model also
generates with a KV cache and padding as any HF model does (the mask interface builds SDPA's mask then).

Checkpoints are transformers' own `save_pretrained` directory (config.json + model.safetensors)
with the task's tokenizer.json and `lm.json` (the LMConfig and task settings) beside them: no pickle.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from wmsuite.cuda_ops import SharedPrefixLayout, shared_prefix_attention

ATTENTION = "wmsuite_shared_prefix"
FAMILIES = ("llama", "qwen2")
_registered = False


def _transformers():
    try:
        import transformers
    except ImportError as err:
        raise ImportError("the language-model side needs the lm extra: pip install 'wmsuite[lm]'") from err
    return transformers


@dataclass
class LMConfig:
    family: str = "llama"
    """transformers model class: 'llama' (LlamaForCausalLM) or 'qwen2' (Qwen2ForCausalLM)."""
    hidden: int = 128
    """Hidden size."""
    layers: int = 2
    """Decoder layers."""
    heads: int = 4
    """Query heads."""
    kv_heads: int = 2
    """Key/value heads (grouped-query attention when fewer than heads)."""
    mlp: int = 256
    """Intermediate size of each MLP."""
    max_positions: int = 64
    """Longest prompt + response the rotary embedding is set up for."""

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, got {self.family!r}")
        if self.heads % self.kv_heads or self.hidden % self.heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads}) and divide "
                             f"hidden ({self.hidden})")


def _shared_prefix_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                           shared_prefix_layout: SharedPrefixLayout | None = None, **kwargs):
    """transformers attention function: q (B, Hq, L, D), k/v (B, Hkv, L, D) -> (B, L, Hq, D), None."""
    if shared_prefix_layout is None:  # an ordinary padded batch (generation): SDPA with transformers' mask
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling,
                                      dropout=dropout, **kwargs)
    if query.shape[0] != 1:
        raise ValueError(f"a packed batch is one row of tokens, got batch size {query.shape[0]}")
    if dropout:
        raise ValueError("the shared-prefix op has no attention dropout; build the model with attention_dropout=0")
    q, k, v = (x[0].transpose(0, 1) for x in (query, key, value))  # (T, H, D)
    out = shared_prefix_attention(q, k, v, shared_prefix_layout, scale=scaling)  # (T, Hq, D)
    return out.unsqueeze(0), None


def _mask(*args, **kwargs):
    """SDPA's mask, for padded batches (generation). Packed calls hand transformers a prepared 4D
    placeholder instead (`_NO_MASK`), which it passes through untouched: the layout is their mask, and
    no (T, T) mask is ever built."""
    from transformers.masking_utils import sdpa_mask

    return sdpa_mask(*args, **kwargs)


_NO_MASK = torch.ones(1, 1, 1, 1, dtype=torch.bool)  # a "prepared" 4D mask transformers returns as-is


def register_attention() -> None:
    """Register the op with transformers' attention and mask interfaces (idempotent)."""
    global _registered
    if _registered:
        return
    _transformers()
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(ATTENTION, _shared_prefix_forward)
    AttentionMaskInterface.register(ATTENTION, _mask)
    _registered = True


def build_lm(cfg: LMConfig, vocab_size: int, pad_id: int = 0, bos_id: int = 1, eos_id: int = 2,
             seed: int | None = None):
    """A randomly initialised causal LM of `cfg` with the shared-prefix attention registered."""
    tf = _transformers()
    register_attention()
    kwargs = dict(vocab_size=vocab_size, hidden_size=cfg.hidden, intermediate_size=cfg.mlp,
                  num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads, num_key_value_heads=cfg.kv_heads,
                  max_position_embeddings=cfg.max_positions, pad_token_id=pad_id, bos_token_id=bos_id,
                  eos_token_id=eos_id, tie_word_embeddings=False, attention_dropout=0.0)
    config_cls, model_cls = {"llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
                             "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM)}[cfg.family]
    config = config_cls(**kwargs)
    config._attn_implementation = ATTENTION
    if seed is not None:
        torch.manual_seed(seed)
    return model_cls(config)


def packed_logits(model, ids: torch.Tensor, layout: SharedPrefixLayout) -> torch.Tensor:
    """Logits of a packed batch through the shared-prefix op. ids: (T,) -> (T, V)."""
    pos = layout.position_ids(ids.device)
    return model(input_ids=ids[None], position_ids=pos[None], attention_mask=_NO_MASK, shared_prefix_layout=layout,
                 use_cache=False).logits[0]


def replicated_logits(model, ids: torch.Tensor, layout: SharedPrefixLayout) -> torch.Tensor:
    """The same logits from the replicated batch (every response after its own copy of the prompt,
    right-padded, SDPA with transformers' mask), taken back to the packed order. ids: (T,) -> (T, V).
    The oracle of `packed_logits` and the baseline of `wmsuite bench grpo`."""
    rows = layout.unpack(ids)  # (S, L_max)
    valid = layout.replicated_valid(ids.device)
    logits = model(input_ids=rows, attention_mask=valid.long(), use_cache=False).logits  # (S, L_max, V)
    return layout.pack(logits)


def save_lm(model, path: str | Path, extra: dict[str, Any], tokenizer: Any = None) -> None:
    """transformers' safetensors checkpoint plus `lm.json` (`extra`: LMConfig, task settings) and the
    tokenizer's tokenizer.json, written beside and renamed into place."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    model.save_pretrained(tmp, safe_serialization=True)
    (tmp / "lm.json").write_text(json.dumps(extra, indent=2))
    if tokenizer is not None:
        tokenizer.save(str(tmp / "tokenizer.json"))
    old = path.with_name(path.name + ".old")
    if path.exists():
        path.rename(old)  # the previous checkpoint stays whole until the new one is in place
    tmp.rename(path)
    shutil.rmtree(old, ignore_errors=True)


def load_lm(path: str | Path):
    """(model, lm.json contents) of a checkpoint written by `save_lm` (safetensors; nothing unpickled)."""
    tf = _transformers()
    register_attention()
    path = Path(path)
    if not (path / "lm.json").exists():
        raise FileNotFoundError(f"{path} is not a language-model checkpoint (no lm.json); train one with "
                                "`wmsuite train-lm`")
    extra = json.loads((path / "lm.json").read_text())
    model = tf.AutoModelForCausalLM.from_pretrained(path, attn_implementation=ATTENTION, use_safetensors=True)
    return model, extra
