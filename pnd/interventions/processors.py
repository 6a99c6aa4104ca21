"""`PAI`, `ONLY` and `VISTA`: logits processors whose method also changes one side of pnd's pair inside the model
(docs/methods.md).

    PAI  (Liu et al., ECCV 2024)   conditioned rows: image attention amplified (`AmplifyVisualAttention`);
                                   prior rows: the prompt without its visual input (prior="text");
                                   s = gamma * (log p_img - log p_text) + log p_text, then the plausibility cut beta
    ONLY (Wan et al., ICCV 2025)   contrast rows: the same inputs, low-TVER heads of one layer off (`DeactivateHeads`);
                                   s = log p + alpha1 * log p~ where sum |p - p~| < gamma, else
                                   (1 + alpha2) log p - alpha2 log p~
    VISTA (Li & Shi, ICML 2025)    conditioned rows: a steering vector added to each layer's output
                                   (`SteerLayerOutputs`); prior rows (prior="text") give the vectors in the prefill;
                                   s = log p of the steered model

Example:
    >>> import pnd
    >>> from pnd.testing import tiny_model, tiny_inputs
    >>> model, processor = tiny_model("llava_onevision")
    >>> out = pnd.attach(model).generate(**tiny_inputs(processor, "llava_onevision"), max_new_tokens=3,
    ...                                  do_sample=False, logits_processor=[pnd.ONLY()])
    >>> pnd.PAI(start_layer=0)
    PAI(alpha=0.2, gamma=1.1, beta=0.1, start_layer=0, end_layer=32)
"""

from __future__ import annotations

import copy
import math

import torch

from ..decoding.generation import trace_step
from ..decoding.logits_processor import PairedProcessor
from ..validation import real_number
from .attention import AmplifyVisualAttention, DeactivateHeads
from .steering import SteerLayerOutputs


def _number(name: str, value, low: float, high: float = math.inf, default=None, low_open: bool = False) -> float:
    """`value` as a float in [low, high] ((low, high] with `low_open`), or a ValueError with the value and range."""
    number = real_number(value)
    if number is None or not math.isfinite(number) or number < low or number > high or (low_open and number == low):
        bounds = f"{'(' if low_open else '['}{low}, {high}{']' if high < math.inf else ')'}"
        raise ValueError(f"{name} must be a finite number in {bounds}{'' if default is None else f' (the paper: {default})'}"
                         f", got {value!r}.")
    return number


def _text_prior(method: str, prior: str) -> str:
    """`prior`, the prompt without its visual input that `method` reads: "text" or "masked"."""
    if prior not in ("text", "masked"):
        raise ValueError(f"{method}'s prior must be 'text' or 'masked', got {prior!r}.")
    return prior


def _layer(name: str, value, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}.")
    return value


class PAI(PairedProcessor):
    """PAI (Paying More Attention to Image, Liu et al., ECCV 2024) on an attached model:
    `model.generate(..., logits_processor=[pnd.PAI()])`.

    Args:
        alpha: attention amplification >= 0 on the visual tokens, in the conditioned rows (PAI's 0.2); 0: none.
        gamma: guidance >= 1 against the text-only prompt (PAI's 1.1); 1: none.
        beta: plausibility cut in [0, 1] on the with-image distribution, where gamma != 1 (PAI's 0.1); 0: none.
        start_layer, end_layer: the language-model layers [start_layer, end_layer) amplified (PAI's 2 and 32;
            end_layer is clipped to the model's layers, a start_layer it does not have is refused).
        prior: the text-only pass: "text" (default: the visual tokens dropped, positions renumbered, as PAI's
            prompt without the image) or "masked" (pnd's prior: the visual tokens masked out, positions kept; for
            sliding-window models such as Gemma 3, where "text" is refused).

    alpha=0 with gamma=1 is plain `generate`.
    """

    def __init__(self, alpha: float = 0.2, gamma: float = 1.1, beta: float = 0.1, start_layer: int = 2,
                 end_layer: int = 32, prior: str = "text"):
        self.alpha = _number("alpha", alpha, 0, default=0.2)
        self.gamma = _number("gamma", gamma, 1, default=1.1)
        self.beta = _number("beta", beta, 0, 1, default=0.1)
        self.start_layer = _layer("start_layer", start_layer)
        self.end_layer = _layer("end_layer", end_layer, self.start_layer + 1)
        self.prior = _text_prior("PAI", prior)
        self.interventions = (AmplifyVisualAttention(self.alpha, self.start_layer, self.end_layer),) if self.alpha else ()

    @property
    def needs_prior(self) -> bool:
        return self.alpha > 0 or self.gamma != 1

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        generation = self.running()
        x = scores.float()
        if not self.needs_prior:
            return x
        log_img, log_text = self.log_probs(generation, x)
        if self.gamma == 1:  # the amplification alone
            return log_img.masked_fill(torch.isneginf(x), -math.inf)
        out = self.gamma * (log_img - log_text) + log_text
        if self.beta > 0:
            out = out.masked_fill(x < x.amax(dim=-1, keepdim=True) + math.log(self.beta), -math.inf)
        return out.masked_fill(torch.isneginf(x), -math.inf)

    def without_cut(self) -> PAI:
        """A copy without the plausibility cut `beta` (`PairedProcessor.without_cut`)."""
        uncut = copy.copy(self)
        uncut.beta = 0.0
        return uncut

    def __repr__(self) -> str:
        extra = "" if self.prior == "text" else f", prior={self.prior!r}"
        return (f"PAI(alpha={self.alpha}, gamma={self.gamma}, beta={self.beta}, start_layer={self.start_layer}, "
                f"end_layer={self.end_layer}{extra})")


class ONLY(PairedProcessor):
    """ONLY (One-Layer Intervention, Wan et al., ICCV 2025) on an attached model:
    `model.generate(..., logits_processor=[pnd.ONLY()])`.

    Args:
        layer: the language-model layer whose low-TVER heads the contrast rows switch off (ONLY's 0).
        alpha1: weight >= 0 of the contrast where the two distributions are close (ONLY's 3).
        alpha2: weight >= 0 against the contrast where they are not (ONLY's 1).
        gamma: the Manhattan distance >= 0 between the two distributions below which they are close (ONLY's 0.2).

    alpha1 = alpha2 = 0 is plain `generate`.
    """

    prior = "same"  # the contrast rows: the conditioned inputs, through the whole model (`pnd.decoding.contrast`)

    def __init__(self, layer: int = 0, alpha1: float = 3.0, alpha2: float = 1.0, gamma: float = 0.2):
        self.layer = _layer("layer", layer)
        self.alpha1 = _number("alpha1", alpha1, 0, default=3.0)
        self.alpha2 = _number("alpha2", alpha2, 0, default=1.0)
        self.gamma = _number("gamma", gamma, 0, default=0.2)
        self.interventions = (DeactivateHeads(self.layer),)

    @property
    def needs_prior(self) -> bool:
        return self.alpha1 > 0 or self.alpha2 > 0

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        generation = self.running()
        x = scores.float()
        if not self.needs_prior:
            return x
        log_p, log_enhanced = self.log_probs(generation, x)
        close = (log_p.exp() - log_enhanced.exp()).abs().sum(dim=-1, keepdim=True) < self.gamma
        out = torch.where(close, log_p + self.alpha1 * log_enhanced, (1 + self.alpha2) * log_p - self.alpha2 * log_enhanced)
        return out.masked_fill(torch.isneginf(x), -math.inf)

    def __repr__(self) -> str:
        return f"ONLY(layer={self.layer}, alpha1={self.alpha1}, alpha2={self.alpha2}, gamma={self.gamma})"


class VISTA(PairedProcessor):
    """VISTA (Visual Information Steering, Li & Shi, ICML 2025; its visual steering vectors, as mitigv implements
    them) on an attached model: `model.generate(..., logits_processor=[pnd.VISTA()])`.

    Args:
        steer_strength: lambda >= 0, the weight of the steering vectors (VISTA's 0.01); 0 is plain `generate`.
        prior: the prompt without its visual input that the vectors subtract: "text" (default, the visual tokens
            dropped, positions renumbered) or "masked" (for sliding-window models such as Gemma 3).

    The scores are the steered model's log-probabilities.
    """

    def __init__(self, steer_strength: float = 0.01, prior: str = "text"):
        self.steer_strength = _number("steer_strength", steer_strength, 0, default=0.01)
        self.prior = _text_prior("VISTA", prior)
        self.interventions = (SteerLayerOutputs(self.steer_strength),) if self.steer_strength else ()

    @property
    def needs_prior(self) -> bool:
        return self.steer_strength > 0

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        generation = self.running()
        x = scores.float()
        if not self.needs_prior:
            return x
        log_z, _ = generation.pop()  # the prior rows served the prefill's vectors only
        log_steered = x if generation.scores_are_logprobs else x - log_z.to(x.device)
        trace_step(log_steered, None)  # no second distribution at decoding
        return log_steered.masked_fill(torch.isneginf(x), -math.inf)

    def __repr__(self) -> str:
        extra = "" if self.prior == "text" else f", prior={self.prior!r}"
        return f"VISTA(steer_strength={self.steer_strength}{extra})"
