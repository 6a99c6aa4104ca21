"""Qwen3-VL (dense and MoE): the processor expands a video into per-frame `<t seconds>` timestamps, each followed
by `<|vision_start|>` + that frame's `<|video_pad|>` tokens + `<|vision_end|>`, all inside the
`<|vision_start|>…<|vision_end|>` pair that the chat template wrote; an image into `<|image_pad|>` tokens.

The prior hides everything strictly inside the template's outermost pair (timestamps and inner delimiters
included: they carry the video's length and frame count); the template's own pair stays visible, as for Qwen2-VL.
Deepstack adds visual features to the hidden states at the placeholder slots only, which the prior never sees.
"""

import torch

from .delimited import inside_outermost_blocks
from .qwen2_vl import MRoPEArchitecture
from .registry import register


class Qwen3VLArchitecture(MRoPEArchitecture):
    def expansion_mask(self, config, input_ids: torch.Tensor) -> torch.Tensor:
        """Tokens strictly inside each outermost `<|vision_start|>…<|vision_end|>` block; a placeholder outside
        every block is an error (its expansion's extent is unknown)."""
        inside = inside_outermost_blocks(input_ids, config.vision_start_token_id, config.vision_end_token_id)
        stray = self.placeholder_mask(config, input_ids) & ~inside
        if stray.any():
            rows = stray.any(-1).nonzero().flatten().tolist()
            raise ValueError(
                f"Prompt row(s) {rows} hold image/video tokens outside a <|vision_start|>…<|vision_end|> block, so "
                "the extent of their expansion cannot be determined. Build the prompt with the processor's chat "
                "template (a {'type': 'video'} or {'type': 'image'} content part)."
            )
        return inside


QWEN3_VL = register(
    Qwen3VLArchitecture(
        name="Qwen3-VL / Qwen3-VL-MoE",
        model_types=("qwen3_vl", "qwen3_vl_moe"),
        pixel_keys=("pixel_values", "pixel_values_videos"),
        token_inputs=("mm_token_type_ids",),
    )
)
