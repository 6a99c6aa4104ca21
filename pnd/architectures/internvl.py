"""InternVL 3 / 3.5 (`internvl`): the processor expands an image into `<img>` + `<IMG_CONTEXT>` tokens + `</img>`, and a
video into `Frame1: <img>…</img>\\nFrame2: <img>…</img>…` (video frames use the image tokens). The frame labels are text
that no delimiter bounds, so the expansion is read with the processor (`expanded_text`); the prior hides labels,
delimiters and placeholders. The processor cannot batch videos with different frame counts.

Example:
    >>> from pnd.testing import tiny_model
    >>> _, processor = tiny_model("internvl")
    >>> bool(expansion_pattern(processor).fullmatch("Frame1: <img><IMG_CONTEXT></img>\\nFrame2: <img><IMG_CONTEXT></img>"))
    True
"""

from __future__ import annotations

import re

from .expanded_text import TextExpandedArchitecture
from .registry import register


def expansion_pattern(processor) -> re.Pattern:
    """A video's labelled frames (`InternVLProcessor.replace_video_token`), or one image's block."""
    block = f"{re.escape(processor.start_image_token)}(?:{re.escape(processor.image_token)})+" \
            f"{re.escape(processor.end_image_token)}"
    return re.compile(rf"Frame1: {block}(?:\nFrame\d+: {block})*|{block}")


INTERNVL = register(
    TextExpandedArchitecture(
        name="InternVL",
        model_types=("internvl",),
        pixel_keys=("pixel_values",),
        pattern=expansion_pattern,
        same_frame_counts=True,
    )
)
