"""The chat prompt pnd builds around one video or image, with the model's own chat template.

Example:
    >>> from pnd.testing import tiny_model
    >>> _, processor = tiny_model("llava_onevision")
    >>> video_prompt(processor, "Describe the video.").endswith("<|im_start|>assistant\\n")
    True
"""

from __future__ import annotations

import inspect


def video_prompt(processor, instruction: str, modality: str = "video") -> str:
    """The chat prompt for one video (or image) followed by `instruction`, ready for the assistant's answer.

    Args:
        processor: a Hugging Face processor with a chat template.
        instruction: the user's text after the visual input.
        modality: "video" or "image".

    Returns:
        The prompt text, ending with the generation prompt.

    Raises:
        ValueError: for an instruction that holds the processor's placeholder of an image's or a video's tokens
            ("<video>" typed by the user), which the processor would count as one more visual input.
    """
    placeholders = (getattr(processor, f"{kind}_token", None) for kind in ("image", "video"))
    typed = [token for token in placeholders if isinstance(token, str) and token and token in instruction]
    if typed:
        raise ValueError(f"the prompt {instruction!r} holds {typed[0]!r}, the processor's placeholder of an image's or "
                         f"a video's tokens, which it would count as one more {modality}: pnd puts the {modality} "
                         "in the prompt itself. Leave the placeholder out of the text.")
    return processor.apply_chat_template(
        [{"role": "user", "content": [{"type": modality}, {"type": "text", "text": instruction}]}],
        add_generation_prompt=True,
    )


def pixel_values_kwargs(processor) -> dict:
    """The keyword a processor needs to return its pixels as `pixel_values` rather than under a deprecated name
    (Fuyu's returns `image_patches` unless given `return_legacy_image_output=False`); {} for the others.

    Example:
        >>> pixel_values_kwargs(object())
        {}
    """
    calls = (cls.__dict__["__call__"] for cls in type(processor).__mro__ if "__call__" in cls.__dict__)
    legacy = any("return_legacy_image_output" in inspect.signature(call).parameters for call in calls)
    return {"return_legacy_image_output": False} if legacy else {}


def images_for(processor, images: list[list]) -> list:
    """`images` (one list per prompt) as `processor` takes them: a flat list where each prompt has one image and the
    processor refuses nested lists (GOT-OCR 2.0's, unless called with `multi_page=True`), else as given.

    Example:
        >>> images_for(object(), [["a"], ["b"]])
        [['a'], ['b']]
    """
    flat = getattr(processor, "multi_page", None) is False and all(len(group) == 1 for group in images)
    return [group[0] for group in images] if flat else images
