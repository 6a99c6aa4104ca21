"""The chat prompt pnd builds around one video or image, with the model's own chat template.

Example:
    >>> from pnd.testing import tiny_model
    >>> _, processor = tiny_model("llava_onevision")
    >>> video_prompt(processor, "Describe the video.").endswith("<|im_start|>assistant\\n")
    True
"""

from __future__ import annotations


def video_prompt(processor, instruction: str, modality: str = "video") -> str:
    """The chat prompt for one video (or image) followed by `instruction`, ready for the assistant's answer.

    Args:
        processor: a Hugging Face processor with a chat template.
        instruction: the user's text after the visual input.
        modality: "video" or "image".

    Returns:
        The prompt text, ending with the generation prompt.
    """
    return processor.apply_chat_template(
        [{"role": "user", "content": [{"type": modality}, {"type": "text", "text": instruction}]}],
        add_generation_prompt=True,
    )
