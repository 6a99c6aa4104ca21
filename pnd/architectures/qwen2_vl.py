"""Qwen2-VL and Qwen2.5-VL: visual tokens are the expanded `<|image_pad|>` / `<|video_pad|>` tokens.

Positions are 3-D M-RoPE indices; `generate` passes them explicitly (4 rows: text + t/h/w), and pnd
gives the prior rows exactly the same ones. `<|vision_start|>` / `<|vision_end|>` come from the chat
template, not from the processor's expansion, and stay visible to the prior.
"""

from .registry import Architecture, register

QWEN2_VL = register(
    Architecture(
        name="Qwen2-VL / Qwen2.5-VL",
        model_types=("qwen2_vl", "qwen2_5_vl"),
        pixel_keys=("pixel_values", "pixel_values_videos"),
    )
)
