"""Load a supported model and its processor from a Hugging Face id or a local folder.

Example:
    >>> from pnd.io.loading import load_model
    >>> model, processor = load_model("llava-hf/llava-onevision-qwen2-0.5b-ov-hf")  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..architectures import architecture_for, supported_model_types
from ..architectures.layers import layer_plan
from ..architectures.refused import REFUSED
from ..extras import require


def check_model_source(name_or_path: str) -> None:
    """Resolve a model name or folder to its config, without loading weights: a ValueError of one line naming it and
    what pnd expected, before a command loads or writes anything.

    A name that exists on disk, is absolute, starts with `.` or `~`, or has more than one `/` is a folder; another
    name is a Hugging Face id (its config is fetched, or read from the local cache).

    Example:
        >>> check_model_source("/no/such/folder")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: --model /no/such/folder: no such folder; pass a folder saved with save_pretrained or ...
    """
    from transformers import AutoConfig

    path = Path(name_or_path).expanduser()
    local = path.exists() or path.is_absolute() or name_or_path.startswith((".", "~")) or name_or_path.count("/") > 1
    if local and not path.is_dir():
        what = "is a file, not a model folder" if path.exists() else "no such folder"
        raise ValueError(f"--model {name_or_path}: {what}; pass a folder saved with save_pretrained or a Hugging Face "
                         "id.")
    try:
        config = AutoConfig.from_pretrained(str(path) if local else name_or_path)
    except (OSError, ValueError) as error:
        reason = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
        raise ValueError(f"--model {name_or_path}: no model config could be read ({reason}).") from None
    if config.model_type not in supported_model_types():
        why = REFUSED.get(config.model_type, "not an image or video-text-to-text model pnd supports")
        raise ValueError(f"--model {name_or_path} is a {config.model_type!r} model ({why}); pnd needs an image or "
                         "video-text-to-text model of a type `pnd models` lists.")
    layer_plan(config.get_text_config(decoder=True))  # a layer type pnd has no rule for: refused by name


def check_device(device: str) -> None:
    """A ValueError of one line if `device` is not a torch device this machine has, before anything loads.

    Example:
        >>> check_device("cpu")
        >>> check_device("gpu")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: --device gpu: not a device name; pass cpu, cuda, cuda:1, mps, ...
    """
    try:
        parsed = torch.device(device)
    except RuntimeError:
        raise ValueError(f"--device {device}: not a device name; pass cpu, cuda, cuda:1, mps, ...") from None
    if parsed.type == "cuda" and (parsed.index or 0) >= torch.cuda.device_count():
        raise ValueError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s) that torch "
                         f"can use (torch {torch.__version__}); pass --device cpu or another device.")
    if parsed.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"--device {device}: MPS is not available on this machine; pass --device cpu.")


DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def torch_dtype(name: str):
    """"auto", or the torch dtype `name` names ("bfloat16", "float16", "float32"; also bf16, fp16, fp32).

    Example:
        >>> torch_dtype("bf16")
        torch.bfloat16
    """
    if name == "auto":
        return name
    dtype = getattr(torch, DTYPE_ALIASES.get(name, name), None) if isinstance(name, str) else None
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype {name!r} is not a dtype name: pass auto (the checkpoint's), bfloat16 (or bf16), "
                         "float16 (fp16) or float32 (fp32).")
    return dtype


def load_model(name_or_path: str, device: str = "cpu", dtype: str = "auto", load_in_4bit: bool = False,
               load_in_8bit: bool = False, attn_implementation: str | None = None, device_map: str | None = None):
    """Load a supported model and its processor, ready for generation.

    Args:
        name_or_path: a Hugging Face id or a local folder saved with `save_pretrained`.
        device: where to move the model (ignored with `device_map`).
        dtype: "auto" (the checkpoint's) or a torch dtype name such as "bfloat16" (`torch_dtype`).
        load_in_4bit, load_in_8bit: quantize with bitsandbytes (`pnd[quant]`).
        attn_implementation: e.g. "sdpa", "eager", "flash_attention_2".
        device_map: e.g. "auto": place the model with accelerate instead of moving it to `device`.

    Returns:
        (model in eval mode, processor). An unsupported architecture is a ValueError.

    Example:
        >>> from pnd.io.loading import load_model
        >>> model, processor = load_model("llava-hf/llava-onevision-qwen2-0.5b-ov-hf")  # doctest: +SKIP
    """
    from transformers import AutoModelForImageTextToText, AutoProcessor, BitsAndBytesConfig

    if load_in_4bit and load_in_8bit:
        raise ValueError("Choose one of load_in_4bit and load_in_8bit.")
    kwargs = {"dtype": torch_dtype(dtype)}
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
    processor = AutoProcessor.from_pretrained(name_or_path)
    if getattr(processor, "chat_template", None) is None and hasattr(processor, "tokenizer"):
        # Chameleon's processor takes no chat_template argument, so loading drops the saved one; its tokenizer reads
        # the same chat_template.jinja
        processor.chat_template = getattr(processor.tokenizer, "chat_template", None)
    return model.eval(), processor
