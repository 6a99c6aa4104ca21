"""GLM-4.1V / GLM-4.5V / GLM-4.6V (`glm4v`, `glm4v_moe`, `glm46v`): the chat template writes
`<|begin_of_image|><|image|><|end_of_image|>`
and `<|begin_of_video|><|video|><|end_of_video|>`; the processor expands a video into per-frame
`<|begin_of_image|>` + `<|image|>` tokens + `<|end_of_image|>` + an integer timestamp (video frames use the image
token), an image into `<|image|>` tokens.

The prior hides everything strictly inside the template's outermost image and video pairs. Video with beam search
crashes inside transformers itself (plain `generate` included), independently of pnd.
"""

from .delimited import DelimitedArchitecture
from .registry import register

GLM4V = register(
    DelimitedArchitecture(
        name="GLM-4.1V / GLM-4.5V / GLM-4.6V",
        model_types=("glm4v", "glm4v_moe", "glm46v"),
        pixel_keys=("pixel_values", "pixel_values_videos"),
        token_inputs=("mm_token_type_ids",),
        delimiters=(("image_start_token_id", "image_end_token_id"), ("video_start_token_id", "video_end_token_id")),
    )
)
