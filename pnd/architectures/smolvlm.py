"""SmolVLM / SmolVLM2 (`smolvlm`): the processor expands a video into an intro sentence with its frame count and
duration ("You are provided the following series of four frames from a 0:00:04 [H:MM:SS] video.\\n"), then per frame
"\\nFrame from MM:SS:" + `<fake_token_around_image><global-img>` + `<image>` tokens + `<fake_token_around_image>`, then
"\\n\\n"; an image into one such block, or per tile `<fake_token_around_image><row_R_col_C>` + `<image>` tokens (a "\\n"
after each row) and a global block. None of that text is bounded by a delimiter token, so the expansion is read with
the processor (`expanded_text`); the prior hides all of it.

Its language model is `model.model.text_model`. It drops all-zero frames as padding, so the "blank" prior fills
frames with black (-1 after normalization) instead, and keeps all-zero (padding) frames as they are.

Example:
    >>> from pnd.testing import tiny_model
    >>> _, processor = tiny_model("smolvlm")
    >>> intro = "You are provided the following series of one frames from a 0:00:01 [H:MM:SS] video.\\n"
    >>> frame = "\\nFrame from 00:00:<fake_token_around_image><global-img><image><fake_token_around_image>"
    >>> bool(expansion_pattern(processor).fullmatch(intro + frame + "\\n\\n"))
    True
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from .expanded_text import TextExpandedArchitecture
from .registry import register


def expansion_pattern(processor) -> re.Pattern:
    """A video (`SmolVLMProcessor.replace_video_token`), a tiled image or a single image (`get_image_prompt_string`)."""
    fake, image = re.escape(processor.fake_image_token), f"(?:{re.escape(processor.image_token)})+"
    single = f"{fake}{re.escape(processor.global_image_token)}{image}{fake}"
    video = (r"You are provided the following series of [^\n]+? frames from a [^\n]+? \[H:MM:SS\] video\.\n"
             rf"(?:\nFrame from \d+:\d\d:{single})+\n\n")
    tiled = rf"(?:(?:{fake}<row_\d+_col_\d+>{image})+\n)+\n{single}"
    return re.compile(f"{video}|{tiled}|{single}")


@dataclass(frozen=True)
class SmolVLMArchitecture(TextExpandedArchitecture):
    def language_model(self, model):
        return model.model.text_model

    def blank_pixels(self, pixels: torch.Tensor) -> torch.Tensor:
        padding = (pixels == 0).flatten(-3).all(-1)[..., None, None, None]  # all-zero frames: the model drops them
        return torch.full_like(pixels, -1.0).where(~padding, 0)


SMOLVLM = register(
    SmolVLMArchitecture(
        name="SmolVLM",
        model_types=("smolvlm",),
        pixel_keys=("pixel_values",),
        pattern=expansion_pattern,
    )
)
