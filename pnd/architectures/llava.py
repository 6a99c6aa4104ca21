"""LLaVA family: LLaVA-1.5, LLaVA-NeXT, LLaVA-NeXT-Video, LLaVA-OneVision.

Visual tokens are the expanded `<image>` / `<video>` placeholders (newline slots included: the
processor expands them as the same placeholder token).
"""

from .registry import Architecture, register

LLAVA = register(
    Architecture(
        name="LLaVA (1.5, NeXT, NeXT-Video, OneVision)",
        model_types=("llava", "llava_next", "llava_next_video", "llava_onevision"),
        pixel_keys=("pixel_values", "pixel_values_videos"),
    )
)
