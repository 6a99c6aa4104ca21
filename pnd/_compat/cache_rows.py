"""Cache rows (transformers 5.23's cache layers): what each kind of layer holds for its rows (`layer_states`), written
back (`set_layer_state`), mapped (`map_states`, `map_slots`) and copied into a fresh cache (`cache_from_layers`).

Example:
    >>> state = RecurrentState((torch.zeros(2, 3, 4),), (None,))
    >>> map_states(lambda t: t[:1], state).conv[0].shape[0]
    1
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from transformers import DynamicCache
from transformers.cache_utils import (
    DynamicIndexedLayer,
    DynamicLayer,
    DynamicSlidingWindowLayer,
    LinearAttentionAndFullAttentionLayer,
    LinearAttentionAndSlidingWindowAttentionLayer,
    LinearAttentionCacheLayerMixin,
    get_layer_types_and_kwargs,
)


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
        elif is_reference_window(layer) and layer.prefill_keys is not None:  # the prompt's part, then the window's
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
    elif is_reference_window(layer):
        keys, values = state
        if layer.prefill_length is None:  # still prefilling: every slot is the prompt's
            layer.prefill_length = layer.prefill_cumulative_length = keys.shape[2]
        prompt = layer.prefill_length
        layer.prefill_keys, layer.keys = keys[:, :, :prompt], keys[:, :, prompt:]
        layer.prefill_values, layer.values = values[:, :, :prompt], values[:, :, prompt:]
    else:
        layer.keys, layer.values = state


def is_reference_window(layer) -> bool:
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
        if is_reference_window(mine) and mine.prefill_length is not None and theirs.prefill_keys is not None:
            keys, values = (torch.cat([theirs.prefill_keys, theirs.keys], 2),
                            torch.cat([theirs.prefill_values, theirs.values], 2))
            theirs.prefill_length = theirs.prefill_cumulative_length = mine.prefill_length
            set_layer_state(theirs, (keys, values))


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
            if is_reference_window(layer) and not whole_prompt:  # still prefilling: the next call's are the prompt's
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
