"""Molmo2: the processor replaces the template's `<|image|>` with a low-resolution view
`<low_res_im_start>` + rows of `<im_patch>` (each closed by `<im_col>`) + `<im_end>` and a high-resolution one
`<im_start>…<im_end>`; `<|video|>` with each frame's `t.t` timestamp text + `<frame_start>` + `<im_patch>` tokens +
`<frame_end>`, frames joined by a space (`Molmo2Processor.get_video_string`).

For an image the prior hides each view block, its ends included: every token of the replacement is a special token
inside such a block, so it is read from the token ids. A video's first timestamp is plain text written right after
the template's text, which no token bounds, so a video prompt's expansion is what the processor reports replacing
(`reported`, after `pnd.attach(model, processor)`): the timestamps, the frame blocks and any image blocks. The visual
blocks attend bidirectionally in the conditioned pass (`mm_token_type_ids`), so the prior's prefill runs as a call of its own.

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

from ..attachment import attachment_of
from .delimited import blocks_with_ends
from .registry import Architecture, register


@dataclass(frozen=True)
class Molmo2Architecture(Architecture):
    """Molmo2's expansion: the image view blocks from the token ids, a video prompt's as the processor reported it."""

    @property
    def reads_reported(self) -> bool:
        return True  # a video prompt's expansion

    def expansion(self, model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The image blocks of a prompt without video, else what the bound processor reported replacing."""
        processor = getattr(attachment_of(model), "processor", None)
        frames_as_images = processor is not None and not processor.use_frame_special_tokens
        if frames_as_images or (input_ids == model.config.frame_start_token_id).any():
            return self.reported_expansion(model, input_ids, attention_mask,
                                           "A Molmo2 video's timestamps are plain text that no token bounds")
        return self.expansion_mask(model.config, input_ids)

    def expansion_mask(self, config, input_ids: torch.Tensor) -> torch.Tensor:
        """The image view blocks with their ends.

        Raises:
            ValueError: for a video prompt (its first timestamp is read with the processor), blocks that do not pair
                up, or an image token outside a block.
        """
        if (input_ids == config.frame_start_token_id).any():
            rows = (input_ids == config.frame_start_token_id).any(-1).nonzero().flatten().tolist()
            raise ValueError(
                f"Prompt row(s) {rows} hold a Molmo2 video: the processor writes each frame's timestamp as plain text "
                "(`0.0 <frame_start>…`), which token ids cannot delimit, so pnd reads the video's expansion with the "
                "processor: call pnd.attach(model, processor) with the processor that builds the inputs."
            )
        start, end = config.image_start_token_id, config.image_end_token_id
        views = torch.where(input_ids == config.low_res_image_start_token_id, start, input_ids)
        blocks = blocks_with_ends(views, start, end)
        self.check_covered(config, input_ids, blocks, "a Molmo2 image block (<im_start>…<im_end>)",
                           "Build the prompt with Molmo2's processor (an {'type': 'image'} part of the chat template) "
                           "and do not truncate it.")
        return blocks


MOLMO2 = register(
    Molmo2Architecture(
        name="Molmo2",
        model_types=("molmo2",),
        hides="image view blocks with their ends; a video as the processor reports it (timestamps, frames)",
        pixel_keys=("pixel_values", "pixel_values_videos"),
        token_inputs=("mm_token_type_ids",),  # 1 on visual tokens: one bidirectional block
        causal_prompt=False,
    )
)
