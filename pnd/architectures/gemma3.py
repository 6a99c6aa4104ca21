"""Gemma 3: the chat template writes `<start_of_image>` for an image; the processor replaces it with
`\\n\\n<start_of_image>` + `<image_soft_token>` x mm_tokens_per_image + `<end_of_image>\\n\\n`. Gemma 3's processor
takes images only (no video processor).

The prior hides the whole replacement: each `<start_of_image>…<end_of_image>` block, its ends included, and the
token on each side that holds the processor's `\\n\\n` (Gemma's tokenizer writes a run of newlines as one token, so a
newline the template wrote next to the image may share that token and is hidden with it). The image block attends
bidirectionally in the conditioned pass (`token_type_ids`), which the packed prefill's causal split would drop, so
the prior's prefill runs as a call of its own (`causal_prompt=False`); the language model's sliding-window layers
keep only the window in the cache, which `PairedCache.add_prior` follows. Pan-and-scan crops (off by default) add a
sentence the processor writes around the crops ("Here is the original image …"), which the prior would see: not
supported.

Example:
    >>> import torch
    >>> from transformers import Gemma3Config
    >>> config = Gemma3Config(boi_token_index=3, eoi_token_index=4, image_token_index=5)
    >>> GEMMA3.expansion_mask(config, torch.tensor([[9, 8, 8, 3, 5, 5, 4, 8, 8, 9]]))
    tensor([[False, False,  True,  True,  True,  True,  True,  True, False, False]])
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .delimited import blocks_with_ends
from .registry import Architecture, register


@dataclass(frozen=True)
class Gemma3Architecture(Architecture):
    """Gemma 3's expansion: `<start_of_image>…<end_of_image>` blocks plus the newline token on each side."""

    def expansion_mask(self, config, input_ids: torch.Tensor) -> torch.Tensor:
        """Each image block with its ends and one token on each side.

        Raises:
            ValueError: when the blocks do not pair up, an image token lies outside a block, or a block touches
                an end of the prompt (the processor's newlines are missing).
        """
        starts, ends = input_ids == config.boi_token_id, input_ids == config.eoi_token_id
        blocks = blocks_with_ends(input_ids, config.boi_token_id, config.eoi_token_id)
        stray = self.placeholder_mask(config, input_ids) & ~blocks
        touching = starts[:, 0] | ends[:, -1]
        if stray.any() or touching.any():
            rows = (stray.any(-1) | touching).nonzero().flatten().tolist()
            raise ValueError(
                f"Prompt row(s) {rows} hold an image token outside a <start_of_image>…<end_of_image> block, or a "
                "block without the processor's newlines around it, so the extent of the image's expansion cannot "
                "be determined. Build the prompt with Gemma 3's processor (an {'type': 'image'} part of the chat "
                "template) and do not truncate it."
            )
        before = torch.nn.functional.pad(starts[:, 1:], (0, 1))  # the token before each <start_of_image>
        after = torch.nn.functional.pad(ends[:, :-1], (1, 0))  # the token after each <end_of_image>
        return blocks | before | after


GEMMA3 = register(
    Gemma3Architecture(
        name="Gemma 3",
        model_types=("gemma3",),
        hides="each <start_of_image>…<end_of_image> block with its ends and the newlines around it",
        pixel_keys=("pixel_values",),
        token_inputs=("token_type_ids",),  # 1 on image tokens: the bidirectional blocks
        causal_prompt=False,
    )
)
