"""Coverage: every image-text-to-text model type of the installed transformers, supported or refused with the reason.

`pnd models --all` prints it. A model type the installed transformers maps to image-text-to-text that is neither
registered nor listed in `REFUSED` has no row of its own: the test suite fails on it, so a transformers upgrade shows
what it added.

Example:
    >>> rows = dict(coverage())
    >>> rows["qwen3_vl"].startswith("supported: video and image")
    True
    >>> rows["florence2"]
    'refused: encoder-decoder (the text decoder cross-attends to the image: no visual span in the prompt to hide)'
"""

from __future__ import annotations

import functools

from .registry import _REGISTRY, Architecture

_ENCODER_DECODER = "encoder-decoder (the text decoder cross-attends to the image: no visual span in the prompt to hide)"
_CROSS_ATTENTION = "the image reaches the text through cross-attention or prepended features, not through tokens of the " \
                   "prompt that a prior could hide"
_NOT_TEXT = "not a text generator for images or video"


def _layers(types: str) -> str:
    return f"language model has layer types pnd does not handle yet ({types}): see the new-layer-types work"


_UNTESTED = ("not yet tested with pnd: no tiny-model brute-force tests (the generic expansion finder may already "
             "cover it)")


REFUSED: dict[str, str] = {
    **dict.fromkeys(("florence2", "pix2struct", "pp_formulanet", "t5gemma2", "udop", "vision-encoder-decoder"),
                    _ENCODER_DECODER),
    **dict.fromkeys(("mllama", "idefics", "blip", "git"), _CROSS_ATTENTION),
    "evolla": f"{_NOT_TEXT} (protein sequences to text)",
    "pi0": f"{_NOT_TEXT} (robot actions)",
    "mistral4": "text-only: the image-text-to-text mapping names a causal LM with no vision tower",
    "diffusion_gemma": "block-diffusion decoder: it does not generate left to right, so there is no next-token prior",
    "glm5_next": _layers("KDA linear attention, indexed sparse attention"),
    "qwen4_exp": _layers("indexed sparse attention beside Gated DeltaNet"),
    "nemotron_h_omni": _layers("Mamba-2"),
    "dots3_note": _layers("indexed sparse attention"),
    "mistral_large4": _layers("indexed sparse attention"),
    "minimax_m3_vl": _layers("sparse attention"),
    "inkling2": _layers("hybrid, hybrid_sliding"),
    "inkling_mm_model": _layers("hybrid, hybrid_sliding"),
    "unlimited_ocr": _layers("reference_sliding_attention"),
    "llama4": _layers("chunked attention: fixed chunks of the sequence, which a compacted prior prefill would shift"),
    **dict.fromkeys((
        "aria", "aya_vision", "blip-2", "chameleon", "cohere2_vision", "deepseek_ocr2", "deepseek_vl",
        "deepseek_vl_hybrid", "emu3", "exaone4_5", "fast_vlm", "fuyu", "gemma3n", "glm_ocr", "glmga", "got_ocr2",
        "granite_docling", "hyperclovax_vision_v2", "idefics2", "instructblip", "instructblipvideo", "janus",
        "kosmos-2", "kosmos-2.5", "lighton_ocr", "muse_spark", "ovis2", "paddleocr_vl", "paligemma", "pp_chart2table",
        "qianfan_ocr", "qwen2_5_omni_thinker", "shieldgemma2", "vipllava",
    ), _UNTESTED),
}


def image_text_to_text_types() -> list[str]:
    """The model types the installed transformers maps to image-text-to-text (`AutoModelForImageTextToText`)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    return sorted(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)


def takes_video(model_type: str) -> bool:
    """Whether the processor class transformers maps `model_type` to has a video processor."""
    import transformers
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

    processor = getattr(transformers, PROCESSOR_MAPPING_NAMES.get(model_type) or "", None)
    return processor is not None and "video_processor" in processor.get_attributes()


@functools.cache
def prefill_path(architecture: Architecture, model_type: str) -> str:
    """How the prior's prefill runs with the family's default config (docs/design.md §4)."""
    from transformers import AutoConfig

    text = AutoConfig.for_model(model_type).get_text_config(decoder=True)
    recurrent = {"linear_attention", "conv"} & set(getattr(text, "layer_types", None) or ())
    if recurrent:
        return "own call on the kept tokens (recurrent layers)"
    if not architecture.causal_prompt:
        return "own call (bidirectional visual blocks)"
    return "packed into the conditioned prefill"


def status(model_type: str) -> str:
    """One model type's row: supported (inputs, what the prior hides, prefill path), or refused and why."""
    if model_type in _REGISTRY:
        architecture = _REGISTRY[model_type]
        inputs = "video and image" if takes_video(model_type) else "image"
        return (f"supported: {inputs}; {architecture.name}; hides {architecture.hidden()}; prior prefill "
                f"{prefill_path(architecture, model_type)}")
    if model_type in REFUSED:
        return f"refused: {REFUSED[model_type]}"
    return "unreviewed: pnd has no row for this model type yet"


def coverage() -> list[tuple[str, str]]:
    """(model type, status) for every image-text-to-text model type of the installed transformers and every
    supported one."""
    return [(t, status(t)) for t in sorted(set(image_text_to_text_types()) | set(_REGISTRY))]
