"""Tiny random-weight models of the real supported architectures, built offline from configs.

For tests (pnd's and yours), benchmarks, docstring examples and the quickstart: no hub, no downloads.

Example:
    >>> from pnd.testing import tiny_model
    >>> model, processor = tiny_model("llava_onevision")
    >>> model.config.model_type
    'llava_onevision'
"""

from __future__ import annotations

import importlib

import torch

from ..architectures.reported import bind_processor
from ..io.prompts import images_for, pixel_values_kwargs, video_prompt
from .builders.qwen3_vl import qwen3_vl_processor_parts
from .parts import (
    QWEN_VISION_TOKENS,
    TINY_CLIP,
    chat_template,
    sharpen_attention,
    tiny_llama_text,
    tiny_tokenizer,
    vision_token_ids,
)

__all__ = ["FINDER_IMAGE_ARCHITECTURES", "FINDER_VIDEO_ARCHITECTURES", "ONE_VIDEO_PER_CALL", "QWEN_VISION_TOKENS",
           "TINY_ARCHITECTURES", "VIDEO_ARCHITECTURES", "TINY_CLIP", "tiny_llama_text", "chat_template", "left_padded",
           "on_device", "qwen3_vl_processor_parts", "random_video", "sharpen_attention", "tiny_inputs", "tiny_model",
           "tiny_tokenizer", "vision_token_ids"]

# the first families, one builder module per family in pnd/testing/builders (model type -> module, where they differ:
# a module that builds several model types takes the model type)
CORE_ARCHITECTURES = ("llava_onevision", "qwen2_vl", "qwen2_5_vl", "llava", "qwen3_vl", "qwen3_vl_moe", "qwen3_5",
                      "qwen3_5_moe", "glm4v", "glm4v_moe", "video_llava", "perception_lm", "gemma3", "molmo2",
                      "internvl", "smolvlm", "video_llama_3", "minicpmv4_6", "minicpmv4_7", "lfm2_vl")
_SHARED_BUILDERS = {"qwen2_5_vl": "qwen2_vl", "qwen3_vl_moe": "qwen3_vl", "qwen3_5": "qwen3_vl",
                    "qwen3_5_moe": "qwen3_vl", "glm4v_moe": "glm4v", "minicpmv4_6": "minicpmv",
                    "minicpmv4_7": "minicpmv", "minicpm_ocr": "minicpmv", "glmga": "glm46v",
                    "vipllava": "llava"}
# families added through the generic expansion finder: builders in pnd/testing/builders/<model type>.py
FINDER_VIDEO_ARCHITECTURES = ("gemma4", "gemma4_unified", "glm46v", "cosmos3_edge", "cosmos3_omni", "cohere_compass",
                              "ernie4_5_vl_moe", "qwen3_omni_moe_thinker", "kimi_k25", "muse_glimmer", "lfm3_vl",
                              "minicpm_ocr", "qwen4_exp", "nemotron_h_omni", "glm5_next", "instructblipvideo",
                              "glm_ocr", "qwen2_5_omni_thinker", "exaone4_5", "glmga", "muse_spark",
                              "hyperclovax_vision_v2", "dots3_note")
FINDER_IMAGE_ARCHITECTURES = ("mistral3", "idefics3", "step3p7", "hunyuan_vl", "granite4_vision", "llama4",
                              "instructblip", "blip-2", "paligemma", "gemma3n", "cohere2_vision", "aya_vision",
                              "fast_vlm", "lighton_ocr", "granite_docling", "aria", "ovis2", "paddleocr_vl",
                              "deepseek_vl", "deepseek_vl_hybrid", "qianfan_ocr", "pp_chart2table", "chameleon",
                              "idefics2", "emu3", "janus", "vipllava", "fuyu",
                              "deepseek_ocr2", "got_ocr2", "mistral_large4", "kosmos-2", "kosmos-2.5",
                              "unlimited_ocr", "inkling2", "inkling_mm_model")
ONE_VIDEO_PER_CALL = ("nemotron_h_omni",)  # processors that take one video per call: `tiny_inputs` batches by hand
# processors that write a per-token input as if no row were padded (Kosmos-2.5's `image_embeds_position_mask`):
# `tiny_inputs` batches one prompt per call by hand, as `left_padded` aligns each row's
UNPADDED_TOKEN_INPUTS = ("kosmos-2.5",)
TINY_ARCHITECTURES = (*CORE_ARCHITECTURES, *FINDER_VIDEO_ARCHITECTURES, *FINDER_IMAGE_ARCHITECTURES)
VIDEO_ARCHITECTURES = ("llava_onevision", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "glm4v", "glm4v_moe", "video_llava",
                       "perception_lm", "qwen3_5", "qwen3_5_moe", "internvl", "smolvlm", "video_llama_3", "minicpmv4_6",
                       "minicpmv4_7", *FINDER_VIDEO_ARCHITECTURES)


def tiny_model(model_type: str, seed: int = 0, sharpen: float = 4.0, **text):
    """A tiny random-weight model of a real architecture and its processor, built offline.

    Args:
        model_type: one of `TINY_ARCHITECTURES`.
        seed: the weights' seed.
        sharpen: attention (q/k), short-convolution (LFM2) and output weights are scaled by this, so that a position
            or masking bug changes the generated tokens (at random init attention is nearly uniform).
        **text: overrides of the language model's config, for "llava_onevision" (e.g. hidden_size=512).

    Returns:
        (model, processor); the processor is bound to the model, as `pnd.attach(model, processor)` binds it.

    Example:
        >>> from pnd.testing import tiny_model
        >>> model, processor = tiny_model("qwen2_vl")
        >>> model.config.model_type
        'qwen2_vl'
    """
    module = f"pnd.testing.builders.{_SHARED_BUILDERS.get(model_type, model_type).replace('.', '_')}"  # kosmos-2.5
    try:
        build = importlib.import_module(module).build
    except ModuleNotFoundError as error:
        if error.name != module:
            raise
        raise ValueError(f"tiny_model builds no {model_type!r} model; it builds: {', '.join(TINY_ARCHITECTURES)}."
                         ) from None
    shared = {"model_type": model_type} if model_type in _SHARED_BUILDERS else {}
    model, processor = build(seed, **shared, **text)
    sharpen_attention(model, sharpen)
    bind_processor(model, processor)  # as pnd.attach(model, processor) does
    return model, processor


def on_device(model, device="cpu", dtype=torch.float32):
    """`model` on `device`, its floating weights and buffers in `dtype` (`model.to(dtype)` would make complex buffers
    real: Llama 4's rotary frequencies).

    Example:
        >>> model = on_device(tiny_model("llava")[0], "cpu", torch.bfloat16)
        >>> model.dtype
        torch.bfloat16
    """
    model.to(device)
    for parameter in model.parameters():
        if parameter.is_floating_point():
            parameter.data = parameter.data.to(dtype)
    for module in model.modules():
        for name, buffer in module.named_buffers(recurse=False):
            if buffer.is_floating_point():
                setattr(module, name, buffer.to(dtype))
    return model


def random_video(seed: int, frames: int = 4, size: int = 56) -> torch.Tensor:
    """A (frames, 3, size, size) uint8 video of random pixels, the same for the same seed.

    Example:
        >>> random_video(0, frames=2).shape
        torch.Size([2, 3, 56, 56])
    """
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (frames, 3, size, size), dtype=torch.uint8, generator=generator)


def tiny_inputs(processor, model_type: str, prompts=("Describe the video.",), seed: int = 0, image: bool = False):
    """Processor outputs for one visual input per prompt, ready for `model.generate(**inputs)`.

    Args:
        processor, model_type: from `tiny_model`.
        prompts: one chat prompt is built per instruction (batched with left padding).
        seed: the first random video's seed (one more per prompt).
        image: an image instead of a video (always for LLaVA-1.5, which takes no video).

    Returns:
        The processor's BatchFeature.

    Example:
        >>> from pnd.testing import tiny_model, tiny_inputs
        >>> _, processor = tiny_model("llava_onevision")
        >>> tiny_inputs(processor, "llava_onevision", prompts=("a", "b c"))["input_ids"].shape[0]
        2
    """
    kind = "image" if image or model_type not in VIDEO_ARCHITECTURES else "video"
    texts = [video_prompt(processor, prompt, kind) for prompt in prompts]
    visuals = [random_video(seed + i, frames=4 if kind == "video" else 1) for i in range(len(prompts))]
    if kind == "image" and model_type in UNPADDED_TOKEN_INPUTS:
        return left_padded([processor(text=[t], images=[v[0]], return_tensors="pt") for t, v in zip(texts, visuals)],
                           processor.tokenizer.pad_token_id)
    if kind == "image":
        images = images_for(processor, [[v[0]] for v in visuals])  # one per prompt
        return processor(text=texts, images=images, return_tensors="pt", padding=True, **pixel_values_kwargs(processor))
    if model_type in ONE_VIDEO_PER_CALL:
        return left_padded([processor(text=[t], videos=[v], return_tensors="pt") for t, v in zip(texts, visuals)],
                           processor.tokenizer.pad_token_id)
    return processor(text=texts, videos=visuals, return_tensors="pt", padding=True)


def left_padded(rows: list, pad_token_id: int):
    """One batch of single-prompt processor outputs: token inputs left-padded, the rest (pixels) concatenated, as a user
    batches a processor that takes one video per call (Nemotron-H Omni), or writes a per-token input as if unpadded
    (Kosmos-2.5): every per-token tensor is left-padded (input ids with `pad_token_id`, the others with 0).

    Example:
        >>> from transformers import BatchFeature
        >>> rows = [BatchFeature({"input_ids": torch.tensor([[5, 6]]), "attention_mask": torch.tensor([[1, 1]])}),
        ...         BatchFeature({"input_ids": torch.tensor([[7]]), "attention_mask": torch.tensor([[1]])})]
        >>> left_padded(rows, 0)["input_ids"].tolist()
        [[5, 6], [0, 7]]
    """
    from transformers import BatchFeature

    width = max(row["input_ids"].shape[1] for row in rows)

    def pad(row, key, value):
        return torch.nn.functional.pad(row[key], (width - row[key].shape[1], 0), value=value)

    def per_token(key):  # the attention mask, what a processor bound to an attached model adds (EXPANSION_KEY), ...
        return torch.is_tensor(rows[0][key]) and rows[0][key].shape == rows[0]["input_ids"].shape

    batch = {"input_ids": torch.cat([pad(row, "input_ids", pad_token_id) for row in rows])}
    for key in rows[0].keys() - batch.keys():
        batch[key] = torch.cat([pad(row, key, 0) if per_token(key) else row[key] for row in rows])
    return BatchFeature(batch)
