"""InternVL 3 / 3.5 (`internvl`): the processor expands an image into `<img>` + `<IMG_CONTEXT>` tokens + `</img>`, and a
video into `Frame1: <img>…</img>\\nFrame2: <img>…</img>…` (video frames use the image tokens). The frame labels are text
that no delimiter bounds: the expansion is what the processor reports replacing (`reported`), labels, delimiters and
placeholders. The processor cannot batch videos with different frame counts.
"""

from .registry import Architecture, register

INTERNVL = register(
    Architecture(
        name="InternVL",
        model_types=("internvl",),
        pixel_keys=("pixel_values",),
        reported=True,
        same_frame_counts=True,
    )
)
