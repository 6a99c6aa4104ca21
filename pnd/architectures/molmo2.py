"""Molmo2: the processor replaces the template's `<|image|>` with a low-resolution view
`<low_res_im_start>` + rows of `<im_patch>` (each closed by `<im_col>`) + `<im_end>` and a high-resolution one
`<im_start>…<im_end>`; `<|video|>` with each frame's `t.t` timestamp text + `<frame_start>` + `<im_patch>` tokens +
`<frame_end>`.

For an image the prior hides each view block, its ends included: every token of the replacement is a special token
inside such a block. For a video the first frame's timestamp is plain text written right after the template's text,
so its extent cannot be told from the token ids: video prompts are refused with an error. The visual blocks attend
bidirectionally in the conditioned pass (`mm_token_type_ids`), so the prior's prefill runs as a call of its own.

Example:
    >>> import torch
    >>> from transformers import Molmo2Config
    >>> config = Molmo2Config(image_start_token_id=3, low_res_image_start_token_id=4, image_end_token_id=5,
    ...                       image_patch_id=6, frame_start_token_id=7, frame_end_token_id=8)
    >>> MOLMO2.expansion_mask(config, torch.tensor([[9, 4, 6, 1, 5, 3, 6, 5, 9]]))
    tensor([[False,  True,  True,  True,  True,  True,  True,  True, False]])
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .delimited import inside_outermost_blocks
from .registry import Architecture, register


@dataclass(frozen=True)
class Molmo2Architecture(Architecture):
    """Molmo2's expansion for images: every `<low_res_im_start>`/`<im_start>` … `<im_end>` block, ends included."""

    def expansion_mask(self, config, input_ids: torch.Tensor) -> torch.Tensor:
        """The image view blocks with their ends.

        Raises:
            ValueError: for a video prompt (its first timestamp cannot be delimited), blocks that do not pair up, or
                an image token outside a block.
        """
        if (input_ids == config.frame_start_token_id).any():
            rows = (input_ids == config.frame_start_token_id).any(-1).nonzero().flatten().tolist()
            raise ValueError(
                f"Prompt row(s) {rows} hold a Molmo2 video: the processor writes each frame's timestamp as plain text "
                "(`0.0 <frame_start>…`), and the first one cannot be told apart from the template's text by token "
                "ids, so the extent of the video's expansion cannot be determined. pnd supports Molmo2 images; "
                "pass the video's frames as images, or use another family for video."
            )
        start, end = config.image_start_token_id, config.image_end_token_id
        views = torch.where(input_ids == config.low_res_image_start_token_id, start, input_ids)
        blocks = inside_outermost_blocks(views, start, end) | (views == start) | (views == end)
        self.check_covered(config, input_ids, blocks, "a Molmo2 image block (<im_start>…<im_end>)",
                           "Build the prompt with Molmo2's processor (an {'type': 'image'} part of the chat template) "
                           "and do not truncate it.")
        return blocks


MOLMO2 = register(
    Molmo2Architecture(
        name="Molmo2",
        model_types=("molmo2",),
        pixel_keys=("pixel_values", "pixel_values_videos"),
        token_inputs=("mm_token_type_ids",),  # 1 on visual tokens: one bidirectional block
        causal_prompt=False,
    )
)
