"""A KV-cache holding the conditioned rows and the prior rows of one generation, moved together.

Rows `[0, n)` are the conditioned pass, rows `[n, 2n)` the prior pass of the same sequences. Beam
reordering, batch expansion and selection apply the same row operation to both halves, so the prior can
never go stale (the bug of VCD, PAI and transformers' CFG processor, docs/design.md §5). Every layer's rows
move together: an attention layer's keys and values, a recurrent layer's states (Qwen3.5's Gated DeltaNet,
LFM2's short convolutions).

Example:
    >>> cache = PairedCache()
    >>> cache.is_paired
    False
"""

from __future__ import annotations

import torch
from transformers import DynamicCache, StaticCache, StaticLayer

from .._compat.cache_rows import (
    RecurrentState,
    cache_from_layers,
    copy_prompt_length,
    layer_states,
    map_slots,
    map_states,
    set_layer_state,
)
from .prior import PriorPrefill


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`allowed` (bool) as SDPA's additive mask in `dtype`: 0 where a query may attend, -inf elsewhere (log 1, log 0).
    SDPA turns a bool mask into this in every layer it runs; a decoding step's mask given so, no layer converts it.

    Example:
        >>> additive_mask(torch.tensor([True, False]), torch.bfloat16)
        tensor([0., -inf], dtype=torch.bfloat16)
    """
    return allowed.to(dtype).log()


def is_empty(cache) -> bool:
    """No cache, or a DynamicCache or StaticCache that holds no token yet (a new one given to generate to fill)."""
    return cache is None or isinstance(cache, (DynamicCache, StaticCache)) and int(cache.get_seq_length()) == 0


class PairedCache(DynamicCache):
    """A DynamicCache whose rows are [conditioned rows; prior rows] once `add_prior` was called."""

    prior_attends: torch.Tensor | None = None  # (n, prompt_len) bool, prompt slots the prior rows see
    prior_position_offset: torch.Tensor | None = None  # prior positions = cond positions - offset

    @property
    def is_paired(self) -> bool:
        return self.prior_attends is not None

    def add_prior(self, prior: PriorPrefill) -> None:
        """Append the prior rows (one copy, at prefill) below the conditioned rows already cached."""
        for layer, conditioned, extra in zip(self.layers, layer_states(self), prior.layers):
            if not isinstance(extra, RecurrentState) and conditioned[0] is not None:  # a sliding-window layer keeps
                kept = conditioned[0].shape[2]  # the last slots of the prompt only
                extra = map_slots(lambda t: t[:, :, -kept:], extra)
            set_layer_state(layer, map_states(lambda a, b: torch.cat([a, b.to(a.dtype)]), conditioned, extra))
        self.prior_attends = prior.attends
        self.prior_position_offset = prior.position_offset

    def conditioned(self, config) -> DynamicCache:
        """A DynamicCache of the conditioned rows alone (what `generate` returns to the user), for text config
        `config`; the cache itself as is while it holds no prior rows."""
        if not self.is_paired:
            return self
        n = self.prior_attends.shape[0]
        conditioned = cache_from_layers(config, [map_states(lambda t: t[:n], state) for state in layer_states(self)])
        copy_prompt_length(self, conditioned)  # a sliding-window layer's count of tokens seen, Unlimited-OCR's prompt
        return conditioned

    def _both_halves(self, index: torch.Tensor) -> torch.Tensor:
        n = self.prior_attends.shape[0]
        return torch.cat([index, index + n])

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        if not self.is_paired:
            return super().reorder_cache(beam_idx)
        super().reorder_cache(self._both_halves(beam_idx.to(self.prior_attends.device)))
        self.prior_attends = self.prior_attends[beam_idx]
        self.prior_position_offset = self.prior_position_offset[..., beam_idx]

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if not self.is_paired:
            return super().batch_select_indices(indices)
        rows = self._both_halves(indices)
        for layer, state in zip(self.layers, layer_states(self)):  # transformers' recurrent layers have no such method
            set_layer_state(layer, map_states(lambda t: t[rows.to(t.device)], state))
        self.prior_attends = self.prior_attends[indices]
        self.prior_position_offset = self.prior_position_offset[..., indices]

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.is_paired:
            raise NotImplementedError("pnd: expanding a paired cache after prefill is not supported.")
        super().batch_repeat_interleave(repeats)


class PairedStaticCache(StaticCache):
    """A StaticCache of 2n rows, [conditioned rows; prior rows], of fixed length: the decoding steps run on fixed
    shapes, as `torch.compile` needs (`generate(..., cache_implementation="static")`).

    The prefill runs into a `PairedCache` whose rows `pair` copies in. Until then the cache tells `generate` it is not
    compileable, so that the first forward gets the plain (n, L) attention mask the prior's prefill reads. Where pnd
    builds the decoding steps' masks itself (`own_step_masks`: an SDPA model) it stays so, and `generate` builds none
    (pnd calls the model's compiled call itself where generate compiles the steps).

    Args:
        config: the model's text config; every layer must be a full-attention layer.
        max_cache_len: the tokens each row can hold (prompt and generated tokens).

    Example:
        >>> from pnd.testing import tiny_model
        >>> config = tiny_model("llava_onevision")[0].config.get_text_config(decoder=True)
        >>> PairedStaticCache(config, max_cache_len=64).is_compileable
        False
    """

    prior_position_offset: torch.Tensor | None = None  # prior positions = cond positions - offset
    attention_mask: torch.Tensor | None = None  # (2n, max_cache_len) 2D mask of every decoding step (the prompt's
    # length appears in no attribute that the compiled decoding step reads: a shorter prompt reuses its graph)
    prior_prompt: torch.Tensor | None = None  # (n, 1, 1, max_cache_len) bool: the prompt slots the prior rows see
    prompt_slots: torch.Tensor | None = None  # (1, 1, 1, max_cache_len) bool: the prompt's slots
    slots: torch.Tensor | None = None  # (max_cache_len,) the slots' indices
    # the decoding steps of a model whose every layer reads one 4D mask (SDPA over the whole context): pnd builds
    # each step's mask from `attention_mask` (`step_mask`, traced in a compiled step), in place of generate's
    own_step_masks: bool = False

    def __init__(self, config, max_cache_len: int):
        super().__init__(config=config, max_cache_len=max_cache_len)
        others = sorted({type(layer).__name__ for layer in self.layers if type(layer) is not StaticLayer})
        if others:
            raise ValueError(f"pnd's static cache holds full-attention layers only; this model also has {others}. "
                             "Use the default dynamic cache (drop cache_implementation='static').")

    @property
    def is_paired(self) -> bool:
        return self.attention_mask is not None

    @property
    def is_compileable(self) -> bool:
        return self.is_paired and not self.own_step_masks and super().is_compileable

    def pair(self, prefill: PairedCache, attention_mask: torch.Tensor) -> None:
        """Copy the rows of a paired prefill cache in, once, with the prompt's (n, L) attention mask."""
        for layer, source in zip(self.layers, prefill.layers):
            layer.update(source.keys, source.values)
        n, length = attention_mask.shape
        cond = attention_mask.new_ones(n, self.get_max_length())  # later slots: the causal mask hides unwritten ones
        cond[:, :length] = attention_mask
        prior = cond.clone()
        prior[:, :length] = prefill.prior_attends.to(prior.dtype)  # a contrast prompt has a mask of its own
        self.attention_mask = torch.cat([cond, prior])
        self.prior_position_offset = prefill.prior_position_offset
        self.slots = torch.arange(cond.shape[1], device=cond.device)
        self.prompt_slots = self.slots[None, None, None] < length
        self.prior_prompt = (prior.bool() & self.prompt_slots[0, 0])[:, None, None]

    def step_mask(self, conditioned):
        """The attention mask of a decoding step, [conditioned rows; prior rows], from the one `generate` built for
        the conditioned rows (4D, or a dict of them by layer type): the prior rows see their own prompt slots and,
        after the prompt, what the conditioned rows see. The model then builds no mask of its own. Any other mask:
        the fixed 2D one (`attention_mask`). With `own_step_masks`, pnd's own 4D mask of the same slots, in place of
        the one `generate` would have built.

        Example:
            >>> from pnd.testing import tiny_model
            >>> config = tiny_model("llava_onevision")[0].config.get_text_config(decoder=True)
            >>> cache, prefill = PairedStaticCache(config, max_cache_len=4), PairedCache()
            >>> _ = prefill.update(torch.zeros(2, 1, 2, 4), torch.zeros(2, 1, 2, 4), 0)  # layer 0: 2 rows, 2 slots
            >>> prefill.prior_attends = torch.tensor([[False, True]])
            >>> cache.pair(prefill, torch.ones(1, 2, dtype=torch.long))
            >>> cache.step_mask(torch.tensor([True, True, True, False]).view(1, 1, 1, 4)).view(2, 4)
            tensor([[ True,  True,  True, False],
                    [False,  True,  True, False]])
            >>> cache.own_step_masks = True  # slots 0 and 1 written: the step writes slot 2
            >>> cache.step_mask(None).view(2, 4)  # additive (0 where a row attends), in the cache's dtype
            tensor([[0., 0., 0., -inf],
                    [-inf, 0., 0., -inf]])
        """
        if self.own_step_masks:  # each row's attended slots up to the new token's (the slots written so far)
            allowed = self.attention_mask.logical_and(self.slots <= self.layers[0].cumulative_length)[:, None, None]
            return additive_mask(allowed, self.layers[0].keys.dtype)
        masks = conditioned if isinstance(conditioned, dict) else {None: conditioned}
        slots = self.prompt_slots.shape[-1]
        if not all(torch.is_tensor(m) and m.dtype == torch.bool and m.shape[1:] == (1, 1, slots) for m in masks.values()):
            return self.attention_mask  # the model builds the mask (a float one: eager attention)
        paired = {kind: torch.cat([m, torch.where(self.prompt_slots, self.prior_prompt, m)]) for kind, m in masks.items()}
        return paired if isinstance(conditioned, dict) else paired[None]

    def conditioned(self, config) -> StaticCache:
        """A StaticCache of the conditioned rows alone (what `generate` returns to the user), for text config `config`."""
        if not self.is_paired:
            return self
        n, length = self.attention_mask.shape[0] // 2, int(self.get_seq_length())
        cache = StaticCache(config=config, max_cache_len=self.get_max_length())
        for target, layer in zip(cache.layers, self.layers):
            target.update(layer.keys[:n, :, :length], layer.values[:n, :, :length])
        return cache

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        if not self.is_paired:
            return super().reorder_cache(beam_idx)
        beam_idx = beam_idx.to(self.attention_mask.device)
        both = torch.cat([beam_idx, beam_idx + self.attention_mask.shape[0] // 2])
        super().reorder_cache(both)
        self.attention_mask = self.attention_mask[both]
        self.prior_prompt = self.prior_prompt[beam_idx]
        self.prior_position_offset = self.prior_position_offset[..., beam_idx]


class SteeredStaticCache(StaticCache):
    """generate's StaticCache for VISTA (`generate(..., cache_implementation="static")`): it holds the conditioned
    rows alone, which every decoding step runs steered (the prior rows serve the prefill's steering vectors only, as on
    a dynamic cache), so that a step costs one row, not two. Its type routes the model's calls to pnd. It tells
    `generate` it is not compileable: the prefill reads the plain (n, L) attention mask, and VISTA's steps run eagerly.

    Example:
        >>> from pnd.testing import tiny_model
        >>> config = tiny_model("llava_onevision")[0].config.get_text_config(decoder=True)
        >>> cache = SteeredStaticCache(config=config, max_cache_len=64)
        >>> cache.is_paired, cache.is_compileable
        (False, False)
    """

    is_paired = False
    is_compileable = False
