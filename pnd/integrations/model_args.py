"""Checks of pnd's lmms-eval model_args when the model is built: a setting that every document would fail on is
refused there, naming the model_arg and the fix, instead of failing each document (and an lmms-eval run that exits 0).

Example:
    >>> from pnd.decoding.methods import method
    >>> check_method("PndHf", method("cpn"), method("cpn").processor(prior="inputs"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: PndHf: model_args prior=inputs needs a contrast prompt for each document, ...
"""

from __future__ import annotations

from ..architectures import architecture_for
from ..architectures.layers import check_text_prior
from ..decoding.contrast import CONTRASTS
from ..decoding.logits_processor import PairedProcessor
from ..decoding.methods import Method
from ..decoding.packed import use_split_attention
from ..decoding.steps import EMBEDDED_PROMPT
from ..interventions.engine import AttentionIntervention, reach
from ..io.loading import check_device


def check_device_arg(name: str, device: str) -> None:
    """`pnd.io.loading.check_device`, its message naming the model's class and where lmms-eval takes the device."""
    try:
        check_device(device)
    except ValueError as error:
        raise ValueError(f"{name}: {error} (lmms-eval takes it as its --device or as the model_arg device=...)") \
            from None


def check_method(name: str, method: Method, normalizer: PairedProcessor) -> None:
    """Refuse, before the model loads, a prior the lmms-eval models cannot feed: prior=inputs needs each document's
    contrast prompt, which they build for ICD only."""
    if normalizer.needs_prior and normalizer.prior == "inputs" and method.contrast is None:
        raise ValueError(f"{name}: model_args prior=inputs needs a contrast prompt for each document, which pnd's "
                         "lmms-eval models build for method=icd only: use method=icd (its instruction=... sets the "
                         "contrast), or prior=masked, text, blank or noise.")


def check_on_model(name: str, model, method: Method, normalizer: PairedProcessor) -> None:
    """Refuse what `normalizer` cannot do on the loaded (attached) `model` whatever the document: a prior that needs
    the vision tower on a Q-Former family's embedded prompt, prior='text' on layers it cannot run on (Gemma 3's sliding
    window), an attention intervention (PAI, ONLY) on layers the model lacks or on attention pnd cannot reach. Nothing
    for the plain model (a method at its neutral setting)."""
    if not normalizer.needs_prior:
        return
    where = f"{name}: model_args method={method.name} ({normalizer!r})"
    if normalizer.prior == "text":
        try:
            check_text_prior(model.config.get_text_config(decoder=True))
        except ValueError as error:
            raise ValueError(f"{where}: {error} (model_args prior=masked)") from None
    if architecture_for(model).embeds_prompt and normalizer.prior in ("blank", *CONTRASTS):
        raise ValueError(f"{where} cannot run on {model.config.model_type}. {EMBEDDED_PROMPT} Here: method=cpn with "
                         "prior=masked or text.")
    attention = [i for i in normalizer.interventions if isinstance(i, AttentionIntervention)]
    if attention:
        use_split_attention(model, always=True)  # as generate does first (idempotent): where the interventions act
        try:
            reach(model, attention)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
