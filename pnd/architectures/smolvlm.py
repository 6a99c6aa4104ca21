"""SmolVLM / SmolVLM2 (`smolvlm`) and Idefics3 (`idefics3`, its parent: the same image blocks, no video).

The processor expands a video into an intro sentence with its frame count and duration ("You are provided the
following series of four frames from a 0:00:04 [H:MM:SS] video.\\n"), then per frame
"\\nFrame from MM:SS:" + `<fake_token_around_image><global-img>` + `<image>` tokens + `<fake_token_around_image>`, then
"\\n\\n"; an image into one such block, or per tile `<fake_token_around_image><row_R_col_C>` + `<image>` tokens (a "\\n"
after each row) and a global block. None of that text is bounded by a delimiter token: the expansion is what the
processor reports replacing (`reported`), and the prior hides all of it.

Their language model is `model.model.text_model`. They drop all-zero frames as padding, so the "blank" prior fills
frames with black (-1 after normalization) instead, and keeps all-zero (padding) frames as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .registry import Architecture, register


@dataclass(frozen=True)
class SmolVLMArchitecture(Architecture):
    """SmolVLM's and Idefics3's blank frames."""

    def blank_pixels(self, pixels: torch.Tensor) -> torch.Tensor:
        padding = (pixels == 0).flatten(-3).all(-1)[..., None, None, None]  # all-zero frames: the model drops them
        return torch.full_like(pixels, -1.0).where(~padding, 0)


SMOLVLM = register(
    SmolVLMArchitecture(
        name="SmolVLM / Idefics3",
        model_types=("smolvlm", "idefics3"),
        pixel_keys=("pixel_values",),
        reported=True,
    )
)
