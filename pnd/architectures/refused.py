"""The image-text-to-text model types pnd refuses, each with the reason (`pnd models --all`, `architecture_for`).

Example:
    >>> REFUSED["mistral4"]
    'text-only: the image-text-to-text mapping names a causal LM with no vision tower'
"""

_ENCODER_DECODER = "encoder-decoder (the text decoder cross-attends to the image: no visual span in the prompt to hide)"
_CROSS_ATTENTION = "the image reaches the text through cross-attention or prepended features, not through tokens of the " \
                   "prompt that a prior could hide"
_NOT_TEXT = "not a text generator for images or video"


_PENDING = "language model has layer types pnd does not handle yet"


def _layers(types: str) -> str:
    return f"{_PENDING} ({types}): see the new-layer-types work"


_NOT_YET = "not yet supported"  # a family pnd could serve, whose mechanism it lacks (the reason names it)


def pending(reason: str) -> bool:
    """Whether a refusal is work left to pnd (a layer type or a mechanism not handled yet), not a structural
    reason.

    Example:
        >>> pending(REFUSED["florence2"])
        False
    """
    return reason.startswith((_PENDING, _NOT_YET))


REFUSED: dict[str, str] = {
    **dict.fromkeys(("florence2", "pix2struct", "pp_formulanet", "t5gemma2", "udop", "vision-encoder-decoder"),
                    _ENCODER_DECODER),
    **dict.fromkeys(("mllama", "idefics", "blip", "git"), _CROSS_ATTENTION),
    "evolla": f"{_NOT_TEXT} (protein sequences to text)",
    "pi0": f"{_NOT_TEXT} (robot actions)",
    "shieldgemma2": f"{_NOT_TEXT}: a policy classifier (yes/no probabilities per policy); its processor writes one "
                    "prompt per policy from its own template and drops the text it is given, so there is no prompt to "
                    "decode from (for text generation use a Gemma 3 checkpoint: gemma3)",
    "mistral4": "text-only: the image-text-to-text mapping names a causal LM with no vision tower",
    "diffusion_gemma": "block-diffusion decoder: it does not generate left to right, so there is no next-token prior",
    "unlimited_ocr": _layers("reference_sliding_attention: transformers' mask for it shifts the prompt's masked slots "
                             "by the window's offset once the window of generated tokens slides, so a prior hiding the "
                             "visual slots through the attention mask would hide other slots"),
    "kosmos-2.5": f"{_NOT_YET}: its generate drops the position ids it is given (`prepare_inputs_for_generation` pops "
                  "them: Kosmos-2.5 derives its sinusoidal positions inside from the padding tokens and the cache "
                  "length), while pnd's paired prefill and decoding steps read them; its image features do fill tokens "
                  "of the prompt (`image_embeds_position_mask`)",
}
