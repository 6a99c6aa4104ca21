"""The image-text-to-text model types pnd refuses, each with the reason (`pnd models --all`, `architecture_for`).

Example:
    >>> REFUSED["mistral4"]
    'text-only: the image-text-to-text mapping names a causal LM with no vision tower'
"""

_ENCODER_DECODER = "encoder-decoder (the text decoder cross-attends to the image: no visual span in the prompt to hide)"
_CROSS_ATTENTION = "the image reaches the text through cross-attention or prepended features, not through tokens of the " \
                   "prompt that a prior could hide"
_NOT_TEXT = "not a text generator for images or video"
_TEXT_ONLY = "text-only"
_NOT_LEFT_TO_RIGHT = "block-diffusion decoder"
# the reasons a model type can have no prior at all; any other refusal would be work left to pnd
STRUCTURAL = (_ENCODER_DECODER, _CROSS_ATTENTION, _NOT_TEXT, _TEXT_ONLY, _NOT_LEFT_TO_RIGHT)


def structural(reason: str) -> bool:
    """Whether a refusal is for a structural reason (the model has no visual span of the prompt to hide, or no
    left-to-right next-token prior), rather than work left to pnd.

    Example:
        >>> structural(REFUSED["florence2"]), structural("not yet supported: its generate drops the position ids")
        (True, False)
    """
    return reason.startswith(STRUCTURAL)


REFUSED: dict[str, str] = {
    **dict.fromkeys(("florence2", "pix2struct", "pp_formulanet", "t5gemma2", "udop", "vision-encoder-decoder"),
                    _ENCODER_DECODER),
    **dict.fromkeys(("mllama", "idefics", "blip", "git"), _CROSS_ATTENTION),
    "evolla": f"{_NOT_TEXT} (protein sequences to text)",
    "pi0": f"{_NOT_TEXT} (robot actions)",
    "shieldgemma2": f"{_NOT_TEXT}: a policy classifier (yes/no probabilities per policy); its processor writes one "
                    "prompt per policy from its own template and drops the text it is given, so there is no prompt to "
                    "decode from (for text generation use a Gemma 3 checkpoint: gemma3)",
    "mistral4": f"{_TEXT_ONLY}: the image-text-to-text mapping names a causal LM with no vision tower",
    "diffusion_gemma": f"{_NOT_LEFT_TO_RIGHT}: it does not generate left to right, so there is no next-token prior",
}
