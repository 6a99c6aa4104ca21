"""The attention interventions of PAI and ONLY (docs/methods.md), on the newest query of the rows they act on.

    AmplifyVisualAttention (PAI): in layers [start, end), the newest query's pre-softmax attention logits A on the
        visual placeholder tokens' keys become A + alpha * |A|; the conditioned rows.
    DeactivateHeads (ONLY): at one layer, each head's text-to-visual entropy ratio (TVER) is read from the newest
        query's attention weights; heads below the layer's mean TVER output zero for every query of the call; the
        contrast rows.

Example:
    >>> import torch
    >>> w = torch.tensor([[0.5, 0.5, 0.0, 0.0]])
    >>> sink_suppressed_entropy(w, torch.ones_like(w, dtype=torch.bool))  # two equal weights: log 2
    tensor([0.6931])
"""

from __future__ import annotations

import torch

from .engine import AttentionIntervention, AttentionSite


class AmplifyVisualAttention(AttentionIntervention):
    """PAI's attention intervention: `A + alpha * |A|` on the newest query's logits at the visual keys."""

    rows, name = "conditioned", "PAI"

    def __init__(self, alpha: float, start_layer: int, end_layer: int):
        self.alpha, self.start_layer, self.end_layer = alpha, start_layer, end_layer

    @property
    def where(self) -> str:
        return f"start_layer={self.start_layer}, end_layer={self.end_layer}"

    def layers(self, n_layers: int) -> range:
        return range(self.start_layer, min(self.end_layer, n_layers))

    def apply(self, site: AttentionSite, output: torch.Tensor) -> torch.Tensor:
        logits = site.newest_scores()
        logits = site.masked(logits.addcmul(logits.abs(), site.visual, value=self.alpha))
        newest = site.attend(logits)
        return newest if output.shape[1] == 1 else torch.cat([output[:, :-1], newest], dim=1)


class DeactivateHeads(AttentionIntervention):
    """ONLY's intervention: the heads whose TVER is below the layer's mean, read from the newest query, output 0."""

    rows, name = "contrast", "ONLY"

    def __init__(self, layer: int):
        self.layer = layer

    @property
    def where(self) -> str:
        return f"layer={self.layer}"

    def layers(self, n_layers: int) -> range:
        return range(self.layer, self.layer + 1) if self.layer < n_layers else range(0)

    def apply(self, site: AttentionSite, output: torch.Tensor) -> torch.Tensor:
        logits, seen = site.newest_logits()
        weights = site.weights(logits)[:, :, 0]  # (rows, heads, k)
        seen, visual = seen[:, :, 0], site.visual[:, :, 0]  # (rows, 1, k)
        text_entropy, visual_entropy = sink_suppressed_entropy(weights, torch.stack([seen & ~visual, seen & visual]))
        tver = text_entropy / visual_entropy.clamp_min(1e-12)
        tver = torch.nan_to_num(tver, nan=0.0, posinf=0.0, neginf=0.0)
        kept = tver >= tver.mean(dim=-1, keepdim=True)  # (rows, heads)
        return output * kept[:, None, :, None].to(output.dtype)


def sink_suppressed_entropy(weights: torch.Tensor, within: torch.Tensor) -> torch.Tensor:
    """ONLY's entropy of the attention `weights` (..., k) restricted to the keys `within` (bool, broadcast with
    `weights`: several sets at once): entries above the set's mean plus its standard deviation (attention sinks) set
    to 0, the rest renormalized."""
    count = within.sum(-1, keepdim=True).clamp_min(1)
    inside = weights.masked_fill(~within, 0)
    mean = inside.sum(-1, keepdim=True) / count
    std = ((inside - mean).masked_fill(~within, 0).square().sum(-1, keepdim=True) / count).sqrt()
    kept = inside.masked_fill(inside > mean + std, 0)
    probs = kept / kept.sum(-1, keepdim=True).clamp_min(1e-12)
    return -(probs * probs.clamp_min(1e-12).log()).sum(-1)
