"""The image-text-to-text model types pnd refuses, each with the reason (`pnd models --all`, `architecture_for`).

Example:
    >>> REFUSED["mistral4"]
    'text-only: the image-text-to-text mapping names a causal LM with no vision tower'
"""

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
    "dots3_note": _layers("indexed sparse attention"),
    "mistral_large4": _layers("indexed sparse attention"),
    "inkling2": _layers("hybrid, hybrid_sliding"),
    "inkling_mm_model": _layers("hybrid, hybrid_sliding"),
    "unlimited_ocr": _layers("reference_sliding_attention"),
    "got_ocr2": "not yet supported: GOT-OCR 2.0's processor refuses one list of images per prompt (nested lists need "
                "multi_page=True, which a saved processor does not keep), the batches pnd's lmms-eval model and "
                "pnd.testing.tiny_inputs build; its expansion itself is placeholders only (`<imgpad>`)",
    "llama4": _layers("chunked attention: fixed chunks of the sequence, which a compacted prior prefill would shift"),
    **dict.fromkeys((
        "blip-2", "chameleon", "deepseek_ocr2", "emu3", "exaone4_5", "fuyu", "gemma3n", "glmga",
        "hyperclovax_vision_v2", "idefics2", "instructblip", "instructblipvideo", "janus", "kosmos-2", "kosmos-2.5",
        "muse_spark", "paligemma", "qwen2_5_omni_thinker", "shieldgemma2", "vipllava",
    ), _UNTESTED),
}
