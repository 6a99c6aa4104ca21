"""Inkling 2 and Inkling: a ViT whose features fill `<|unused_200054|>` placeholders (the processor writes one per image
token, nothing else: a reported replacement; Inkling's audio placeholders too), and a language model of hybrid layers,
each an attention with short convolutions on its keys and values and after it and after the MLP, its cache layer
holding both (`HybridState`).

The attention has no rotary embedding: its relative position bias (`Inkling2RelativeLogits`, a learned profile by
backward distance up to `rel_extent`) and, in `hybrid_sliding` layers, its window are its sense of order, and both
count cache slots (`arange + get_query_offset`), not position ids. The prior (docs/design.md §1) needs the convolutions
on the kept tokens alone, and the bias and window by the distances the tokens have in the conditioned prompt. pnd's
prior rows keep the conditioned prompt's layout (the kept tokens in their slots, the visual slots masked), where slots
are positions up to a row's constant, so the decoding steps run transformers' own layer; the prior's own prefill call
runs the kept tokens side by side, their convolutions seeing them only, and there `prepare` makes each relative bias
read the tokens' position ids instead of their slots (`pnd._compat.repairs.kept_positions`, set by that call only), and keep
each sliding layer's keys fewer than `sliding_window` positions back. Outside that call the bias is transformers' own,
so `alpha=0` and the conditioned rows are untouched. `prior="text"` is refused (renumbered positions would no longer
match the slots of the decoding steps). Inkling's full layers also scale their queries by the log of their slot from
`log_scaling_n_floor` on (off by default): a prompt that long is refused, the prior's call giving the slots side by
side. Inkling's audio inputs are refused at alpha > 0 (`pnd.decoding.paired`), as every family's.

Example:
    >>> from pnd.testing import tiny_model
    >>> model, _ = tiny_model("inkling2")
    >>> INKLING2.prepare(model)
    >>> all("forward" in vars(bias) for bias, _, _ in _relative_biases(model))
    True
"""

from __future__ import annotations

import torch

from .._compat.repairs import given_kept_positions
from .registry import Architecture, register, unwrap, wrap


def _relative_biases(model) -> list[tuple]:
    """(relative bias module, its attention's sliding window or None, the slot from which its queries are scaled by the
    log of their slot or None) of every hybrid layer of `model`. Inkling's full layers scale queries from
    `log_scaling_n_floor` on, by their cache slot; Inkling 2's scale them by their position id (`position_ids`)."""
    return [(module.rel_logits_proj, module.sliding_window,
             None if type(module).__name__ != "InklingAttention" or module.is_sliding else
             module.config.log_scaling_n_floor) for module in model.modules() if hasattr(module, "rel_logits_proj")]


def _bias_by_positions(bias, window: int | None, floor: int | None, forward, relative_states: torch.Tensor,
                       query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
    """`Inkling2RelativeLogits.forward` (transformers 5.23; Inkling's is the same) with the distances of the position
    ids `kept_positions` gives (per row), where it gives them; keys `window` or more positions back get the dtype's
    minimum (blocked). Where the layer scales its queries from slot `floor` on (Inkling's), a prompt reaching it is
    refused: the prior's call would scale them by the slots of the kept tokens side by side. Elsewhere: the module's
    own `forward`."""
    given = given_kept_positions()
    if given is None:
        return forward(relative_states, query_positions, key_positions)
    queries, keys = given
    if floor is not None and int(queries.max()) + 1 >= floor:
        raise ValueError(f"pnd does not support prompts of {int(queries.max()) + 1} tokens on this Inkling model: its "
                         f"full layers scale queries by the log of their cache slot from log_scaling_n_floor ({floor}) "
                         "on, which the prior's own call, on the kept tokens side by side, cannot give. Use prompts "
                         "shorter than that, or plain generate.")
    if queries.shape[-1] != len(query_positions) or keys.shape[-1] != len(key_positions):
        raise RuntimeError(f"pnd: the prior's call has {len(query_positions)} queries and {len(key_positions)} keys, "
                           f"its position ids {queries.shape[-1]} and {keys.shape[-1]}.")
    rel_logits = (relative_states @ bias.proj).transpose(1, 2)  # (batch, heads, queries, rel_extent)
    distance = (queries[:, :, None] - keys[:, None, :]).to(rel_logits.device)[:, None]  # (batch, 1, queries, keys)
    index = distance.clamp(0, bias.rel_extent - 1).expand(-1, rel_logits.shape[1], -1, -1)
    position_bias = rel_logits.gather(-1, index).masked_fill((distance < 0) | (distance >= bias.rel_extent), 0.0)
    if window is not None:
        position_bias = position_bias.masked_fill(distance >= window, torch.finfo(position_bias.dtype).min)
    return position_bias


class InklingArchitecture(Architecture):
    """Inkling 2: the relative biases read the prior's position ids in its own prefill call (`_bias_by_positions`)."""

    def prepare(self, model) -> None:
        for bias, window, floor in _relative_biases(model):
            wrap(bias, "forward", _bias_by_positions, bias, window, floor)

    def unprepare(self, model) -> None:
        for bias, _, _ in _relative_biases(model):
            unwrap(bias, "forward")


INKLING2 = register(InklingArchitecture(name="Inkling 2", model_types=("inkling2",), pixel_keys=("pixel_values",),
                                        reported=True))
INKLING = register(InklingArchitecture(name="Inkling", model_types=("inkling_mm_model",), pixel_keys=("pixel_values",),
                                       reported=True))
