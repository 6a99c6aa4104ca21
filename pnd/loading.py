"""Load a supported model and its processor from a Hugging Face id or a local folder.

Example:
    >>> from pnd.loading import load_model
    >>> model, processor = load_model("llava-hf/llava-onevision-qwen2-0.5b-ov-hf")  # doctest: +SKIP
"""

from __future__ import annotations

import torch

from .architectures import architecture_for
from .extras import require


def load_model(name_or_path: str, device: str = "cpu", dtype: str = "auto", load_in_4bit: bool = False,
               load_in_8bit: bool = False, attn_implementation: str | None = None, device_map: str | None = None):
    """Load a supported model and its processor, ready for generation.

    Args:
        name_or_path: a Hugging Face id or a local folder saved with `save_pretrained`.
        device: where to move the model (ignored with `device_map`).
        dtype: "auto" (the checkpoint's) or a torch dtype name such as "bfloat16".
        load_in_4bit, load_in_8bit: quantize with bitsandbytes (`pnd[quant]`).
        attn_implementation: e.g. "sdpa", "eager", "flash_attention_2".
        device_map: e.g. "auto": place the model with accelerate instead of moving it to `device`.

    Returns:
        (model in eval mode, processor). An unsupported architecture is a ValueError.

    Example:
        >>> from pnd.loading import load_model
        >>> model, processor = load_model("llava-hf/llava-onevision-qwen2-0.5b-ov-hf")  # doctest: +SKIP
    """
    from transformers import AutoModelForImageTextToText, AutoProcessor, BitsAndBytesConfig

    if load_in_4bit and load_in_8bit:
        raise ValueError("Choose one of load_in_4bit and load_in_8bit.")
    kwargs = {"dtype": dtype if dtype == "auto" else getattr(torch, dtype)}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    if load_in_4bit or load_in_8bit:
        require("bitsandbytes", "quant")
        kwargs["quantization_config"] = BitsAndBytesConfig(load_in_4bit=load_in_4bit, load_in_8bit=load_in_8bit)
        device_map = device_map or device
    if device_map:
        kwargs["device_map"] = device_map
    model = AutoModelForImageTextToText.from_pretrained(name_or_path, **kwargs)
    if not device_map:
        model = model.to(device)
    architecture_for(model)
    return model.eval(), AutoProcessor.from_pretrained(name_or_path)
