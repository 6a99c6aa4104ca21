"""Every private transformers API pnd relies on, in one place, with the versions it was checked against.

A transformers upgrade that renames one of these breaks only this module, and `tests/test_compat.py`
(which checks that each one exists with the arguments pnd passes) says which.

Example:
    >>> from pnd._compat import TRANSFORMERS_CHECKED
    >>> TRANSFORMERS_CHECKED
    '>=5.23,<5.24'
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from transformers import AttentionInterface, DynamicCache, StaticCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer, LinearAttentionCacheLayerMixin
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

TRANSFORMERS_CHECKED = ">=5.23,<5.24"  # the releases these calls were read and tested against

__all__ = ["TRANSFORMERS_CHECKED", "RecurrentState", "attention_implementation", "cache_from_layers", "compiled_forward",
           "compiles_decoding", "encode_visual_inputs", "generation_config", "has_recurrent_layers", "layer_states",
           "map_states", "position_ids_for_generation", "register_sdpa_attention", "sdpa_attention_forward",
           "set_attention_implementation", "set_layer_state"]


def generation_config(model, kwargs: dict):
    """The GenerationConfig that `model.generate(**kwargs)` will use (`_prepare_generation_config`)."""
    rest = {k: v for k, v in kwargs.items() if k != "generation_config"}
    config, _ = model._prepare_generation_config(kwargs.get("generation_config"), **rest)
    return config


def position_ids_for_generation(model, input_ids, model_kwargs: dict):
    """The position ids `generate` gives the first forward (`_prepare_position_ids_for_generation`)."""
    return model._prepare_position_ids_for_generation(input_ids, model_kwargs)


def encode_visual_inputs(model, generate_kwargs: dict, expand_size: int = 1):
    """The vision tower's outputs as `generate` computes and expands them before the first forward
    (`_prepare_multimodal_encoder_kwargs_for_generation`, `_expand_multimodal_outputs`)."""
    encoded = model._prepare_multimodal_encoder_kwargs_for_generation(generate_kwargs)["mm_encoder_outputs"]
    if expand_size > 1:
        encoded = model._expand_multimodal_outputs(generate_kwargs["input_ids"], encoded, expand_size=expand_size)
    return encoded


def compiles_decoding(model, config) -> bool:
    """Whether `generate` with generation config `config` would run its decoding steps through a compiled forward, given
    a static cache (`_valid_auto_compile_criteria`: a CUDA-like device, or `compile_config` on any device)."""
    static = StaticCache(config=model.config.get_text_config(decoder=True), max_cache_len=1)
    return model._valid_auto_compile_criteria({"past_key_values": static}, config)


def compiled_forward(model, forward, compile_config):
    """`torch.compile(forward)` with the options `generate` compiles the model with (`compile_config`, else the model's
    default, `_default_compile_config`)."""
    options = (compile_config or model._default_compile_config()).to_dict()
    return torch.compile(forward, **options)


class RecurrentState(NamedTuple):
    """What a recurrent cache layer (transformers' `LinearAttentionLayer`: Gated DeltaNet, short convolutions) holds
    for its rows: the last inputs of its causal convolution and its recurrent state, either possibly None. Unlike
    keys and values they have no sequence axis: they sum up every token the layer has seen."""

    conv: torch.Tensor | None
    recurrent: torch.Tensor | None


def has_recurrent_layers(config) -> bool:
    """Whether the (text) config's cache has recurrent layers (`LinearAttentionCacheLayerMixin`), e.g. Qwen3.5, LFM2."""
    return any(isinstance(layer, LinearAttentionCacheLayerMixin) for layer in DynamicCache(config=config).layers)


def recurrent_layer_types(config) -> set:
    """The `layer_types` of the (text) config's recurrent layers, e.g. LFM2's and LFM3's "conv"."""
    layers = DynamicCache(config=config).layers
    return {kind for kind, layer in zip(config.layer_types, layers)
            if isinstance(layer, LinearAttentionCacheLayerMixin)}


def layer_states(cache) -> list:
    """Per layer of `cache`: (keys, values) for an attention layer, a `RecurrentState` for a recurrent one."""
    states = []
    for layer in cache.layers:
        if not isinstance(layer, LinearAttentionCacheLayerMixin):
            states.append((layer.keys, layer.values))
        elif layer.number_of_states == 1 and not hasattr(layer, "keys"):
            states.append(RecurrentState(layer.conv_states[0], layer.recurrent_states[0]))
        else:
            raise NotImplementedError(f"pnd does not support cache layers of type {type(layer).__name__} (several "
                                      "recurrent states, or recurrent and attention states in one layer).")
    return states


def set_layer_state(layer, state) -> None:
    """Make cache layer `layer` hold `state` (as `layer_states` gives it), in place of its rows."""
    if isinstance(state, RecurrentState):
        layer.conv_states[0], layer.recurrent_states[0] = state
    else:
        layer.keys, layer.values = state


def map_states(function, *states):
    """`function` applied tensor by tensor across `states` of one layer (all (keys, values) or all RecurrentState),
    e.g. a row selection; a None tensor stays None."""
    mapped = [None if parts[0] is None else function(*parts) for parts in zip(*states)]
    return RecurrentState(*mapped) if isinstance(states[0], RecurrentState) else tuple(mapped)


def cache_from_layers(config, layers=None, keep_all: bool = False) -> DynamicCache:
    """A DynamicCache for the text config `config` holding copies of per-layer states (as `layer_states` gives them).

    A recurrent layer's states are copied in through the layer's own update methods, which the model's next forward
    then updates in place. Without a config, every layer is a full-attention layer that keeps all its slots.
    """
    cache = DynamicCache(config=config)
    if keep_all:  # sliding-window layers that keep every slot (recurrent layers stay)
        cache.layers = [DynamicLayer() if type(layer) is DynamicSlidingWindowLayer else layer for layer in cache.layers]
    if config is None:  # layers made as they are filled
        for index, (keys, values) in enumerate(layers or []):
            cache.update(keys, values, index)
        return cache
    for layer, state in zip(cache.layers, layers or []):
        if isinstance(state, RecurrentState):
            if state.conv is not None:
                layer.update_conv_state(state.conv)  # a fresh layer takes it as a prefill's: kernel = its last axis
            if state.recurrent is not None:
                layer.update_recurrent_state(state.recurrent)
        elif state[0] is not None:
            layer.update(*state[:2])
    return cache


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
