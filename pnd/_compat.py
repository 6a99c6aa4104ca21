"""Every private transformers API pnd relies on, in one place, with the versions it was checked against.

A transformers upgrade that renames one of these breaks only this module, and `tests/test_compat.py`
(which checks that each one exists with the arguments pnd passes) says which.

Example:
    >>> from pnd._compat import TRANSFORMERS_CHECKED
    >>> TRANSFORMERS_CHECKED
    '>=5.23,<5.24'
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from contextvars import ContextVar
from typing import NamedTuple

import torch
from transformers import AttentionInterface, DynamicCache, StaticCache
from transformers.cache_utils import (
    DynamicIndexedLayer,
    DynamicLayer,
    DynamicSlidingWindowLayer,
    LinearAttentionAndFullAttentionLayer,
    LinearAttentionAndSlidingWindowAttentionLayer,
    LinearAttentionCacheLayerMixin,
    get_layer_types_and_kwargs,
)
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

TRANSFORMERS_CHECKED = ">=5.23,<5.24"  # the releases these calls were read and tested against

__all__ = ["TRANSFORMERS_CHECKED", "HybridState", "IndexedState", "RecurrentState", "attention_implementation",
           "cache_from_layers", "cache_layer_types", "copy_prompt_length", "compiles_decoding", "encode_visual_inputs",
           "generation_config", "given_kept_positions", "has_recurrent_layers", "indexer_keys", "kept_positions",
           "layer_states", "map_slots", "map_states", "mask_indexer_keys", "padding_also",
           "position_ids_for_generation", "reference_window_masks", "register_sdpa_attention", "repair_video_features",
           "sdpa_attention_forward", "set_attention_implementation", "set_layer_state", "shifted_window_mask",
           "unmask_indexer_keys"]


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


def _video_features_as_tuple(model, pixel_values_videos, **kwargs):  # generate passes what this signature names
    outputs = type(model).get_video_features(model, pixel_values_videos, **kwargs)
    outputs.pooler_output = tuple(outputs.pooler_output)
    return outputs


def repair_video_features(model) -> None:
    """Make `model.get_video_features` return its pooled features as a tuple (idempotent).

    transformers 5.23's Nemotron-H Omni `forward` does `torch.cat(video_outputs.pooler_output)` on the one tensor
    that its `get_video_features` returns, so every call with a video fails, plain `generate` included. The repair is
    an instance attribute (a `functools.partial`, so the model still copies and pickles); a fixed release returns a
    tuple already, which the repair leaves as it is.
    """
    if "get_video_features" not in vars(model):
        model.get_video_features = functools.partial(_video_features_as_tuple, model)


def padding_also(key: str) -> dict:
    """The methods of a tokenizer subclass whose `pad` also pads `key` (0 on the side it pads `input_ids`, as for
    `attention_mask`): `tokenizer.pad` pads the keys it knows in `_pad`, one example at a time, and leaves others as
    they are."""

    def _pad(self, encoded_inputs, **kwargs):
        extra = encoded_inputs.pop(key, None)
        padded = super(type(self), self)._pad(encoded_inputs, **kwargs)
        if extra is not None:
            zeros = [0] * (len(padded[self.model_input_names[0]]) - len(extra))
            left = (kwargs.get("padding_side") or self.padding_side) == "left"
            padded[key] = zeros + list(extra) if left else list(extra) + zeros
        return padded

    return {"_pad": _pad}


def compiles_decoding(model, config) -> bool:
    """Whether `generate` with generation config `config` would run its decoding steps through a compiled forward, given
    a static cache (`_valid_auto_compile_criteria`: a CUDA-like device, or `compile_config` on any device)."""
    static = StaticCache(config=model.config.get_text_config(decoder=True), max_cache_len=1)
    return model._valid_auto_compile_criteria({"past_key_values": static}, config)


class RecurrentState(NamedTuple):
    """What a recurrent cache layer (transformers' `LinearAttentionLayer`: Gated DeltaNet, KDA, Mamba-2, short
    convolutions) holds for its rows, per state index (Qwen4 keeps three): the last inputs of each causal convolution
    and each recurrent state, any of them possibly None. Unlike keys and values they have no sequence axis: they sum
    up every token the layer has seen."""

    conv: tuple
    recurrent: tuple


class IndexedState(NamedTuple):
    """What an indexed (sparse) attention layer (`DynamicIndexedLayer`; MiniMax-M3's `MiniMaxM3VLSparseCacheLayer`)
    holds for its rows: keys and values, the indexer's keys, and the indexer's position ids if the model stores them
    there (Qwen4). Every tensor is laid out as
    keys are, (batch, 1 or heads, slots, dim), so that slot operations treat all alike."""

    keys: torch.Tensor
    values: torch.Tensor
    indexer_keys: torch.Tensor | None  # (batch, 1, slots, dim): the layer's (batch, slots, dim)
    indexer_positions: torch.Tensor | None  # (batch, dims, slots, 1): the layer's (dims, batch, slots)


class HybridState(NamedTuple):
    """What a cache layer of convolutions and attention in one (transformers' `LinearAttentionAndFullAttentionLayer`,
    `LinearAttentionAndSlidingWindowAttentionLayer`: Inkling's hybrid layers) holds for its rows: keys and values per
    slot, and its convolutions' states (a `RecurrentState`: no sequence axis)."""

    keys: torch.Tensor
    values: torch.Tensor
    recurrent: RecurrentState


def cache_layer_types(config) -> list[str]:
    """The layer type of each cache layer of a (text) config, as transformers' caches read it
    (`get_layer_types_and_kwargs`: inferred where `layer_types` is absent; MoE/MLP blocks and KV-sharing layers
    are "dummy")."""
    return list(get_layer_types_and_kwargs(config)[0])


def has_recurrent_layers(config) -> bool:
    """Whether the (text) config's cache has recurrent layers (`LinearAttentionCacheLayerMixin`), e.g. Qwen3.5, LFM2."""
    return any(isinstance(layer, LinearAttentionCacheLayerMixin) for layer in DynamicCache(config=config).layers)


def layer_states(cache) -> list:
    """Per layer of `cache`: (keys, values) for an attention layer (None, None for one without a cache of its own), an
    `IndexedState` for an indexed one, a `RecurrentState` for a recurrent one."""
    states = []
    for layer in cache.layers:
        if isinstance(layer, LinearAttentionCacheLayerMixin):
            indices = range(layer.number_of_states)
            recurrent = RecurrentState(tuple(layer.conv_states[i] for i in indices),
                                       tuple(layer.recurrent_states[i] for i in indices))
            states.append(HybridState(layer.keys, layer.values, recurrent) if hasattr(layer, "keys") else recurrent)
        elif _slot_indexed(layer):
            states.append(IndexedState(layer.keys, layer.values, layer.idx_keys, None))
        elif _reference_window(layer) and layer.prefill_keys is not None:  # the prompt's part, then the window's
            states.append((torch.cat([layer.prefill_keys, layer.keys], 2), torch.cat([layer.prefill_values, layer.values], 2)))
        elif isinstance(layer, DynamicIndexedLayer):
            positions = layer.indexer_position_ids
            states.append(IndexedState(
                layer.keys, layer.values, None if layer.indexer_keys is None else layer.indexer_keys[:, None],
                None if positions is None else positions.transpose(0, 1)[..., None]))
        else:
            states.append((layer.keys, layer.values))
    return states


def set_layer_state(layer, state) -> None:
    """Make cache layer `layer` hold `state` (as `layer_states` gives it), in place of its rows."""
    if isinstance(state, HybridState):
        layer.keys, layer.values = state.keys, state.values
        set_layer_state(layer, state.recurrent)
    elif isinstance(state, RecurrentState):
        for index, (conv, recurrent) in enumerate(zip(*state)):
            layer.conv_states[index], layer.recurrent_states[index] = conv, recurrent
    elif isinstance(state, IndexedState) and _slot_indexed(layer):
        layer.keys, layer.values, layer.idx_keys = state.keys, state.values, state.indexer_keys
    elif isinstance(state, IndexedState):
        layer.keys, layer.values = state.keys, state.values
        layer.indexer_keys = None if state.indexer_keys is None else state.indexer_keys[:, 0]
        layer.indexer_position_ids = _indexer_position_ids(state)
    elif _reference_window(layer):
        keys, values = state
        if layer.prefill_length is None:  # still prefilling: every slot is the prompt's
            layer.prefill_length = layer.prefill_cumulative_length = keys.shape[2]
        prompt = layer.prefill_length
        layer.prefill_keys, layer.keys = keys[:, :, :prompt], keys[:, :, prompt:]
        layer.prefill_values, layer.values = values[:, :, :prompt], values[:, :, prompt:]
    else:
        layer.keys, layer.values = state


def _reference_window(layer) -> bool:
    """Whether `layer` is Unlimited-OCR's reference sliding-window layer
    (`UnlimitedOcrDynamicReferenceSlidingWindowLayer`): the prompt's keys and values (`prefill_keys`, its first
    `prefill_length` slots) apart from a sliding window of the generated tokens' (`keys`)."""
    return isinstance(layer, DynamicSlidingWindowLayer) and hasattr(layer, "prefill_keys")


def copy_prompt_length(source, target) -> None:
    """Give the layers of cache `target` (made by `cache_from_layers` from `source`'s states) `source`'s count of tokens
    seen (sliding-window layers) and split of prompt and window slots (Unlimited-OCR's layers)."""
    for mine, theirs in zip(source.layers, target.layers):
        if hasattr(mine, "cumulative_length"):
            theirs.cumulative_length = mine.cumulative_length
        if _reference_window(mine) and mine.prefill_length is not None and theirs.prefill_keys is not None:
            keys, values = (torch.cat([theirs.prefill_keys, theirs.keys], 2),
                            torch.cat([theirs.prefill_values, theirs.values], 2))
            theirs.prefill_length = theirs.prefill_cumulative_length = mine.prefill_length
            set_layer_state(theirs, (keys, values))


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

    layer = next((layer for layer in cache.layers if _reference_window(layer)), None)
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


def _slot_indexed(layer) -> bool:
    """Whether `layer` is MiniMax-M3's sparse cache layer (`MiniMaxM3VLSparseCacheLayer`): keys, values and the
    indexer's keys `idx_keys`, already laid out as keys are, (batch, 1, slots, dim)."""
    return isinstance(layer, DynamicLayer) and hasattr(layer, "idx_keys")


def _indexer_position_ids(state: IndexedState) -> torch.Tensor | None:
    """The (dims, batch, slots) indexer position ids of an indexed layer holding `state`."""
    positions = state.indexer_positions
    return None if positions is None else positions[..., 0].transpose(0, 1)


def map_states(function, *states):
    """`function` applied tensor by tensor across `states` of one layer (all of one kind, as `layer_states` gives
    them), e.g. a row selection; a None tensor stays None. Per-slot tensors all have their slots on axis 2."""
    first = states[0]
    if first is None or isinstance(first, torch.Tensor):
        return None if first is None else function(*states)
    mapped = [map_states(function, *parts) for parts in zip(*states)]
    return type(first)(*mapped) if hasattr(first, "_fields") else tuple(mapped)


def map_slots(function, state):
    """`function` applied to the per-slot tensors of one layer's state (as `layer_states` gives it), e.g. a selection
    of slots; recurrent states, which have no sequence axis, stay as they are.

    Example:
        >>> slots, conv = torch.zeros(1, 1, 5, 2), RecurrentState((torch.zeros(1, 2, 4),), (None,))
        >>> cut = map_slots(lambda t: t[:, :, -3:], HybridState(slots, slots, conv))
        >>> tuple(cut.keys.shape), cut.recurrent is conv
        ((1, 1, 3, 2), True)
    """
    if isinstance(state, RecurrentState):
        return state
    if isinstance(state, HybridState):
        return HybridState(function(state.keys), function(state.values), state.recurrent)
    return map_states(function, state)


def cache_from_layers(config, layers=None, keep_all: bool = False, whole_prompt: bool = False) -> DynamicCache:
    """A DynamicCache for the text config `config` holding copies of per-layer states (as `layer_states` gives them).

    Unlimited-OCR's reference sliding-window layers take every slot as the prompt's, and so do they the next call's
    tokens (`copy_prompt_length` restores another cache's split of prompt and window), unless `whole_prompt`: the
    states are a whole prompt, and the next call's tokens are generated ones, in the window (a caption scored after it).

    A recurrent layer's states are copied in through the layer's own update methods, which the model's next forward
    then updates in place. Without a config, every layer is a full-attention layer that keeps all its slots.
    """
    cache = DynamicCache(config=config)
    if keep_all:  # sliding-window layers that keep every slot (recurrent layers stay)
        cache.layers = [_keeping_every_slot(layer) for layer in cache.layers]
    if config is None:  # layers made as they are filled
        for index, (keys, values) in enumerate(layers or []):
            cache.update(keys, values, index)
        return cache
    for layer, state in zip(cache.layers, layers or []):
        if isinstance(state, HybridState):  # keys and values, then the convolutions' states
            layer.update(state.keys, state.values)
            state = state.recurrent
        if isinstance(state, RecurrentState):
            for index, (conv, recurrent) in enumerate(zip(*state)):
                if conv is not None:  # a fresh layer takes it as a prefill's: kernel = its last axis
                    layer.update_conv_state(conv, state_idx=index)
                if recurrent is not None:
                    layer.update_recurrent_state(recurrent, state_idx=index)
        elif state[0] is not None:
            layer.update(*state[:2])
            if _reference_window(layer) and not whole_prompt:  # still prefilling: the next call's are the prompt's
                layer.prefill_length = None
            if isinstance(state, IndexedState) and _slot_indexed(layer):
                if state.indexer_keys is not None:
                    layer.update_index(state.indexer_keys)
            elif isinstance(state, IndexedState):
                if state.indexer_keys is not None:
                    layer.update_indexer(state.indexer_keys[:, 0])
                layer.indexer_position_ids = _indexer_position_ids(state)
    return cache


def _keeping_every_slot(layer):
    """A cache layer like `layer` (fresh) that keeps every slot: a sliding-window layer's full-attention twin."""
    if type(layer) is DynamicSlidingWindowLayer:
        return DynamicLayer()
    if type(layer) is LinearAttentionAndSlidingWindowAttentionLayer:
        return LinearAttentionAndFullAttentionLayer(number_of_states=layer.number_of_states)
    return layer


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


_INDEXER_KEYS: ContextVar[torch.Tensor] = ContextVar("pnd_indexer_keys")  # (rows, slots) 0/1: the keys an indexer
# may choose among in this thread's forward; unset: the model's own indexer


@contextmanager
def indexer_keys(keys: torch.Tensor):
    """Within this context (this thread's), MiniMax-M3's indexers (once `mask_indexer_keys` was called on the model)
    choose among the keys that `keys` (rows, slots: the forward's 2D attention mask) marks, as its attention sees
    them; outside it, and in code torch.compile traces, they run as transformers wrote them."""
    token = _INDEXER_KEYS.set(keys)  # read as bool by the patched indexers only: nothing per step for other models
    try:
        yield
    finally:
        _INDEXER_KEYS.reset(token)


_KEPT_POSITIONS: ContextVar[tuple] = ContextVar("pnd_kept_positions")  # (queries, keys) position ids (rows, tokens)
# of this thread's language-model call on the prior's kept tokens side by side; unset: slots count as positions


@contextmanager
def kept_positions(queries: torch.Tensor, keys: torch.Tensor):
    """Within this context (this thread's), the language-model call runs the prior's kept tokens side by side: its
    queries are at position ids `queries` (rows, tokens), its keys (cached ones, then the call's) at `keys`. A layer
    that reads distances from cache slots (Inkling's relative position bias, once `pnd.architectures.inkling` patched
    it) reads them from these instead; outside it, and in code torch.compile traces, layers run as transformers wrote
    them."""
    token = _KEPT_POSITIONS.set((queries, keys))
    try:
        yield
    finally:
        _KEPT_POSITIONS.reset(token)


def given_kept_positions() -> tuple | None:
    """The (queries, keys) position ids `kept_positions` gives this thread's call, or None."""
    return None if torch.compiler.is_compiling() else _KEPT_POSITIONS.get(None)


def _indexers(model) -> list:
    return [module for module in model.modules() if type(module).__name__ == "MiniMaxM3VLIndexer"]


def mask_indexer_keys(model) -> None:
    """Make each MiniMax-M3 indexer of `model` honour `indexer_keys` (idempotent; `unmask_indexer_keys` undoes it).

    transformers' `MiniMaxM3VLIndexer.forward` scores every cache slot up to the query's position: a masked slot's key
    (a visual token the prior hides) would still win a block of the top-k. Its forward is repeated here with one change,
    the scores of keys outside `indexer_keys` set to -inf before the blocks are pooled (the TODO of transformers 5.23's
    indexer, step 3). An instance attribute, so other models and plain calls are untouched.
    """
    for indexer in _indexers(model):
        if "forward" not in vars(indexer):
            indexer.forward = functools.partial(_masked_indexer_forward, indexer)


def unmask_indexer_keys(model) -> None:
    """Undo `mask_indexer_keys`."""
    for indexer in _indexers(model):
        vars(indexer).pop("forward", None)


def _masked_indexer_forward(indexer, hidden_states, position_embeddings, past_key_values, position_ids):
    """`MiniMaxM3VLIndexer.forward` (transformers 5.23), its scores restricted to `indexer_keys`."""
    keys = None if torch.compiler.is_compiling() else _INDEXER_KEYS.get(None)
    if keys is None:
        return type(indexer).forward(indexer, hidden_states, position_embeddings, past_key_values, position_ids)
    from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import apply_rotary_pos_emb

    batch, q_len, _ = hidden_states.shape
    idx_q = indexer.q_norm(indexer.q_proj(hidden_states).view(batch, q_len, -1, indexer.head_dim)).transpose(1, 2)
    idx_k = indexer.k_norm(indexer.k_proj(hidden_states).view(batch, q_len, 1, indexer.head_dim)).transpose(1, 2)
    cos, sin = position_embeddings
    idx_q, idx_k = apply_rotary_pos_emb(idx_q, idx_k, cos[..., : indexer.head_dim], sin[..., : indexer.head_dim])
    if past_key_values is not None:
        idx_k = past_key_values.layers[indexer.layer_idx].update_index(idx_k)
    k_len = idx_k.shape[2]
    if keys.shape != (batch, k_len):
        raise RuntimeError(f"pnd: the indexer's key mask has shape {tuple(keys.shape)}, its keys {(batch, k_len)}.")
    num_key_blocks = -(-k_len // indexer.block_size)
    pad = num_key_blocks * indexer.block_size - k_len
    scores = torch.matmul(idx_q.float(), idx_k.float().transpose(-1, -2))
    k_positions = torch.arange(k_len, device=idx_q.device)
    token_future = k_positions[None, None, None, :] > position_ids[:, None, :, None]
    hidden = ~keys.to(idx_q.device, torch.bool)[:, None, None, :]  # the one change: keys the attention does not see
    scores = scores.masked_fill(token_future | hidden, float("-inf"))
    if pad:
        scores = torch.nn.functional.pad(scores, (0, pad), value=float("-inf"))
    block_scores = scores.view(batch, indexer.num_heads, q_len, num_key_blocks, indexer.block_size).amax(dim=-1)
    q_block = position_ids // indexer.block_size
    if indexer.local_blocks > 0:
        local = torch.arange(indexer.local_blocks, device=idx_q.device)
        local_idx = (q_block[..., None] - local.view(1, 1, -1)).clamp(min=0)
        local_idx = local_idx.unsqueeze(1).expand(-1, indexer.num_heads, -1, -1)
        block_scores.scatter_(-1, local_idx, float("inf"))
    topk_scores, topk_indices = block_scores.topk(min(indexer.topk_blocks, num_key_blocks), dim=-1)
    return topk_indices.masked_fill(topk_scores == float("-inf"), -1)


def accept_4d_masks(decoder, undo: bool = False) -> None:
    """Make Kosmos-2's text decoder take a 4-D attention mask (boolean, True attending, or additive) as given, as other
    decoders do (idempotent; `undo=True` restores it). transformers 5.23's `_prepare_decoder_attention_mask` takes 2-D
    masks only, and `CaptionScorer` packs captions after a prompt with a 4-D one.

    Example:
        >>> from pnd.testing import tiny_model
        >>> decoder = tiny_model("kosmos-2")[0].text_model.model
        >>> accept_4d_masks(decoder); accept_4d_masks(decoder, undo=True)
    """
    name = "_prepare_decoder_attention_mask"
    if undo or name in vars(decoder):
        if undo:
            vars(decoder).pop(name, None)
        return
    prepare_mask = getattr(decoder, name)

    @functools.wraps(prepare_mask)
    def repaired(attention_mask, input_shape, inputs_embeds, past_key_values_length):
        if attention_mask is None or attention_mask.ndim != 4:
            return prepare_mask(attention_mask, input_shape, inputs_embeds, past_key_values_length)
        if attention_mask.dtype != torch.bool:
            return attention_mask.to(inputs_embeds.dtype)
        blocked = torch.finfo(inputs_embeds.dtype).min
        return torch.zeros(attention_mask.shape, dtype=inputs_embeds.dtype,
                           device=inputs_embeds.device).masked_fill(~attention_mask, blocked)

    setattr(decoder, name, repaired)


def pending_video_durations(processor) -> list:
    """The durations HyperCLOVA X Vision V2's processor will write for the `<|video_duration|>` tokens of the text it
    expands next (transformers 5.23 keeps them on a private attribute)."""
    return list(processor._pending_video_durations)
