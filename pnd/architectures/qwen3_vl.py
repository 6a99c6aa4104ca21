"""Qwen3-VL (dense and MoE), and the families that write its format (Cosmos 3 Omni, Cohere Compass): the processor
expands a video into per-frame `<t seconds>` timestamps, each followed by `<|vision_start|>` + that frame's
`<|video_pad|>` tokens + `<|vision_end|>`, all inside the `<|vision_start|>…<|vision_end|>` pair that the chat template
wrote; an image into `<|image_pad|>` tokens.

The prior hides everything strictly inside the template's outermost pair (timestamps and inner delimiters
included: they carry the video's length and frame count); the template's own pair stays visible, as for Qwen2-VL.
Deepstack adds visual features to the hidden states at the placeholder slots only, which the prior never sees.
"""

from .delimited import DelimitedArchitecture
from .registry import register

QWEN3_VL = register(
    DelimitedArchitecture(
        name="Qwen3-VL / Qwen3-VL-MoE / Cosmos 3 Omni / Cohere Compass",
        model_types=("qwen3_vl", "qwen3_vl_moe", "cosmos3_omni", "cohere_compass"),
        pixel_keys=("pixel_values", "pixel_values_videos"),
        token_inputs=("mm_token_type_ids",),
        delimiters=(("vision_start_token_id", "vision_end_token_id"),),
    )
)
