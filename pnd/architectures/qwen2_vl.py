"""Qwen2-VL and Qwen2.5-VL: visual tokens are the expanded `<|image_pad|>` / `<|video_pad|>` tokens.

Positions are 3-D M-RoPE indices; `generate` passes them explicitly (4 rows: text + t/h/w), and pnd
gives the prior rows exactly the same ones. `<|vision_start|>` / `<|vision_end|>` come from the chat
template, not from the processor's expansion, and stay visible to the prior.
"""

from .registry import Architecture, register


class MRoPEArchitecture(Architecture):
    """A family with Qwen2-VL's M-RoPE: position ids from `get_rope_index` and the processor's `mm_token_type_ids`."""

    def position_ids(self, model, input_ids, attention_mask, **inputs):
        """As the base class; the model's shared `rope_deltas`, which computing them overwrites, are restored."""
        base = model.model
        saved_rope_deltas = base.rope_deltas
        try:
            return super().position_ids(model, input_ids, attention_mask, **inputs)
        finally:
            base.rope_deltas = saved_rope_deltas


QWEN2_VL = register(
    MRoPEArchitecture(
        name="Qwen2-VL / Qwen2.5-VL",
        model_types=("qwen2_vl", "qwen2_5_vl"),
        pixel_keys=("pixel_values", "pixel_values_videos"),
        token_inputs=("mm_token_type_ids",),
    )
)
