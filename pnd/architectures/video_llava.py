"""Video-LLaVA: the processor expands `<image>` / `<video>` into placeholder tokens only (one block per frame,
CLS slot included), so the prior hides the placeholders. Its pixel inputs are `pixel_values_images` (or
`pixel_values` with `return_legacy_image_output=False`) and `pixel_values_videos`.
"""

from .registry import Architecture, register

VIDEO_LLAVA = register(
    Architecture(
        name="Video-LLaVA",
        model_types=("video_llava",),
        pixel_keys=("pixel_values", "pixel_values_images", "pixel_values_videos"),
    )
)
