"""A KV-cache holding the conditioned rows and the prior rows of one generation, moved together.

Rows `[0, n)` are the conditioned pass, rows `[n, 2n)` the prior pass of the same sequences. Beam
reordering, batch expansion and selection apply the same row operation to both halves, so the prior can
never go stale (the bug of VCD, PAI and transformers' CFG processor, docs/design.md §5).

Example:
    >>> cache = PairedCache()
    >>> cache.is_paired
    False
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from ._compat import cache_from_layers
from .prior import PriorPrefill


class PairedCache(DynamicCache):
    """A DynamicCache whose rows are [conditioned rows; prior rows] once `add_prior` was called."""

    prior_attends: torch.Tensor | None = None  # (n, prompt_len) bool, prompt slots the prior rows see
    prior_position_offset: torch.Tensor | None = None  # prior positions = cond positions - offset

    @property
    def is_paired(self) -> bool:
        return self.prior_attends is not None

    def add_prior(self, prior: PriorPrefill) -> None:
        """Append the prior rows (one copy, at prefill) below the conditioned rows already cached."""
        for layer, (keys, values) in zip(self.layers, prior.layers):
            kept = layer.keys.shape[2]  # a sliding-window layer keeps the last slots of the prompt only
            layer.keys = torch.cat([layer.keys, keys[:, :, -kept:].to(layer.keys.dtype)], dim=0)
            layer.values = torch.cat([layer.values, values[:, :, -kept:].to(layer.values.dtype)], dim=0)
        self.prior_attends = prior.attends
        self.prior_position_offset = prior.position_offset

    def conditioned(self, config) -> DynamicCache:
        """A DynamicCache of the conditioned rows alone (what `generate` returns to the user), for text config
        `config`; the cache itself as is while it holds no prior rows."""
        if not self.is_paired:
            return self
        n = self.prior_attends.shape[0]
        conditioned = cache_from_layers(config, [(layer.keys[:n], layer.values[:n]) for layer in self.layers])
        for mine, theirs in zip(self.layers, conditioned.layers):  # a sliding-window layer's count of tokens seen
            if hasattr(mine, "cumulative_length"):
                theirs.cumulative_length = mine.cumulative_length
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
        super().batch_select_indices(self._both_halves(indices))
        self.prior_attends = self.prior_attends[indices]
        self.prior_position_offset = self.prior_position_offset[..., indices]

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.is_paired:
            raise NotImplementedError("pnd: expanding a paired cache after prefill is not supported.")
        super().batch_repeat_interleave(repeats)
