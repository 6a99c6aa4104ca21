"""EXAONE 4.5 (`exaone4_5`): Qwen2-VL's processor, `<|image_pad|>` / `<|video_pad|>` tokens only (inside the template's
`<|vision_start|>…<|vision_end|>` pair), plain 1-D positions, and an EXAONE 4 language model of sliding-window layers
with RoPE and global layers without.

Its `prepare_inputs_for_generation` drops the position ids `generate` made (the model then counts them from the cache,
padding included), and pnd's paired prefill reads them: `Exaone4_5Architecture.prepare` gives the model one that
passes the positions the model itself would count (0, 1, ... over the whole sequence, left padding included), so
decoding with pnd at alpha=0 is bit-identical to the family's own `generate`. HyperCLOVA X Vision V2 has the same
(`hyperclovax_vision_v2.py`).

Example:
    >>> EXAONE4_5.model_types
    ('exaone4_5',)
"""

import torch

from .registry import Architecture, register, unwrap, wrap


def _exaone4_5_inputs(prepare_inputs, input_ids, **kwargs):
    """EXAONE 4.5's model inputs (`prepare_inputs`, the model's own) with the position ids its forward would count
    (`arange` over the whole sequence, left padding included) instead of None, for a caller that reads them (pnd's
    paired prefill)."""
    inputs = prepare_inputs(input_ids, **kwargs)
    new = inputs.get("input_ids")
    new = new if new is not None else inputs["inputs_embeds"]
    if inputs.get("position_ids") is None:
        total = max(input_ids.shape[1], new.shape[1])  # `input_ids` holds the whole sequence so far
        positions = torch.arange(total - new.shape[1], total, device=new.device)
        inputs["position_ids"] = positions.unsqueeze(0).expand(new.shape[0], -1)
    return inputs


class Exaone4_5Architecture(Architecture):
    """EXAONE 4.5 and HyperCLOVAX Vision V2: their `prepare_inputs_for_generation` passes no position ids; pnd gives
    the model one that passes the model's own (`_exaone4_5_inputs`), a repair that `pnd.detach` takes back."""

    def prepare(self, model) -> None:
        wrap(model, "prepare_inputs_for_generation", _exaone4_5_inputs)

    def unprepare(self, model) -> None:
        unwrap(model, "prepare_inputs_for_generation")


EXAONE4_5 = register(Exaone4_5Architecture(name="EXAONE 4.5", model_types=("exaone4_5",),
                                           pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
