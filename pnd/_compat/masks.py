"""Attention implementations and masks (transformers 5.23): a config's implementation read and switched, an SDPA
variant registered with SDPA's masks, and Unlimited-OCR's R-SWA masks read at the prompt's slots.

Example:
    >>> shifted_window_mask(torch.tensor([[0, 1, 1]]), prompt=1, offset=1).tolist()
    [[1, 0, 1]]
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

from .cache_rows import is_reference_window

__all__ = ["attention_implementation", "reference_window_masks", "register_sdpa_attention", "sdpa_attention_forward",
           "set_attention_implementation", "shifted_window_mask"]


def shifted_window_mask(mask: torch.Tensor, prompt: int, offset: int) -> torch.Tensor:
    """The 2-D mask that transformers' mask for Unlimited-OCR's R-SWA layers, reading entry (cache index + `offset`)
    for every key, reads right: the prompt's entries moved `offset` slots right (the first `offset` entries are never
    read), the generated tokens' in place.

    Example:
        >>> shifted_window_mask(torch.tensor([[0, 1, 1, 1, 1, 1, 1]]), prompt=3, offset=2).tolist()
        [[1, 1, 0, 1, 1, 1, 1]]
    """
    return torch.cat([mask.new_ones(mask.shape[0], offset), mask[:, :prompt], mask[:, prompt + offset:]], 1)


def reference_window_masks(config, attention_mask: torch.Tensor, cache, inputs_embeds: torch.Tensor,
                           position_ids: torch.Tensor | None):
    """Unlimited-OCR's text model's masks for a step on `cache` with the 2-D `attention_mask`: once its R-SWA layers'
    window slid, {layer type: mask}, the R-SWA layers' built from `shifted_window_mask` (transformers 5.23 reads the
    prompt's entries `kv_offset` slots too far right), the full-attention layers' from the mask as given; else the 2-D
    mask, which transformers reads right."""
    from transformers.masking_utils import create_causal_mask
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import create_reference_sliding_window_causal_mask

    layer = next((layer for layer in cache.layers if is_reference_window(layer)), None)
    if layer is None or layer.prefill_length is None or layer.prefill_cumulative_length < layer.prefill_length:
        return attention_mask
    offset = layer.get_mask_sizes(inputs_embeds.shape[1])[1]
    if offset == 0:
        return attention_mask
    common = dict(config=config, inputs_embeds=inputs_embeds, past_key_values=cache, position_ids=position_ids)
    shifted = shifted_window_mask(attention_mask, layer.prefill_length, offset)
    window = create_reference_sliding_window_causal_mask(attention_mask=shifted, **common)
    return {"full_attention": create_causal_mask(attention_mask=attention_mask, **common),
            "reference_sliding_attention": window}


def attention_implementation(config) -> str:
    """The attention implementation a (text) config runs (`_attn_implementation`)."""
    return config._attn_implementation


def set_attention_implementation(config, name: str) -> None:
    """Switch a (text) config's attention implementation in place, without reloading (`_attn_implementation`)."""
    config._attn_implementation = name


def register_sdpa_attention(name: str, function) -> None:
    """Register `function` as attention implementation `name`, with SDPA's own attention masks."""
    AttentionInterface.register(name, function)
    AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
