"""VideoLLaMA3 (`video_llama_3`): the processor expands an image into `<|image_pad|>` tokens, and a video into
`Time 0.0s:` + that frame's `<|video_pad|>` tokens (those its token compression kept), one such group per frame joined
by `,`. The timestamps are text that no delimiter bounds: the expansion is what the processor reports replacing
(`reported`), timestamps, commas and placeholders.
"""

from .registry import Architecture, register

VIDEO_LLAMA_3 = register(
    Architecture(
        name="VideoLLaMA3",
        model_types=("video_llama_3",),
        pixel_keys=("pixel_values", "pixel_values_videos"),
        reported=True,
    )
)
