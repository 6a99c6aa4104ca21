"""VideoLLaMA3 (`video_llama_3`): the processor expands an image into `<|image_pad|>` tokens, and a video into
`Time 0.0s:` + that frame's `<|video_pad|>` tokens (those its token compression kept), one such group per frame joined
by `,`. The timestamps are text that no delimiter bounds, so the expansion is read with the processor
(`expanded_text`); the prior hides timestamps, commas and placeholders.

Example:
    >>> from pnd.testing import tiny_model
    >>> _, processor = tiny_model("video_llama_3")
    >>> bool(expansion_pattern(processor).fullmatch("Time 0.0s:<|video_pad|>,Time 0.5s:<|video_pad|>"))
    True
"""

from __future__ import annotations

import re

from .expanded_text import TextExpandedArchitecture
from .registry import register


def expansion_pattern(processor) -> re.Pattern:
    """A video's timestamped frames (`VideoLlama3Processor.replace_video_token`; a later frame may have no tokens
    left after compression), or an image's placeholders."""
    video, image = re.escape(processor.video_token), re.escape(processor.image_token)
    return re.compile(rf"Time \d+\.\ds:(?:{video})+(?:,Time \d+\.\ds:(?:{video})*)*|(?:{image})+")


VIDEO_LLAMA_3 = register(
    TextExpandedArchitecture(
        name="VideoLLaMA3",
        model_types=("video_llama_3",),
        pixel_keys=("pixel_values", "pixel_values_videos"),
        pattern=expansion_pattern,
    )
)
