"""`M3ID` (Favero et al., CVPR 2024): mutual-information decoding on the paired engine (docs/methods.md).

    w_t = exp(lambda * t) - 1          t = 1 at the first generated token of this generate call
    s_t(w) = log p_c(w) + w_t * (log p_c(w) - log p_u(w))     where max_w p_c(w) < gate, else log p_c(w)

`p_u` is the prior rows' distribution: the prompt without its visual input (prior="text", M3ID's unconditioned
model; "masked" keeps the text's positions; "inputs" takes any unconditioned prompt, `generate(..., prior_inputs=...)`,
e.g. mitigv's: the text re-tokenized without `<image>` and the whitespace after it).

Example:
    >>> import pnd
    >>> from pnd.testing import tiny_model, tiny_inputs
    >>> model, processor = tiny_model("llava_onevision")
    >>> out = pnd.attach(model).generate(**tiny_inputs(processor, "llava_onevision"), max_new_tokens=3,
    ...                                  do_sample=False, logits_processor=[pnd.M3ID()])
    >>> pnd.M3ID()
    M3ID(forgetting_rate=0.02, gate=0.3, prior='text')
"""

from __future__ import annotations

import math

import torch

from ..validation import real_number
from .logits_processor import PairedProcessor

M3ID_PRIORS = ("text", "masked", "inputs")


class M3ID(PairedProcessor):
    """M3ID's logits processor: `model.generate(..., logits_processor=[pnd.M3ID()])` on an attached model.

    Args:
        forgetting_rate: lambda >= 0 (M3ID's default 0.02); 0 is plain decoding.
        gate: the correction applies to a row only while its most likely token's conditioned probability is below
            `gate`, in (0, 1] (M3ID's 0.3); 1 applies it at every step.
        prior: "text" (default, the prompt without the visual input), "masked" (pnd's prior) or "inputs" (another
            prompt, `generate(..., prior_inputs=...)`: the processor's outputs for it, as for ICD).

    `t` counts the steps of this `generate` call, the same for every row and beam.
    """

    def __init__(self, forgetting_rate: float = 0.02, gate: float = 0.3, prior: str = "text"):
        rate, threshold = real_number(forgetting_rate), real_number(gate)
        if rate is None or not math.isfinite(rate) or rate < 0:
            raise ValueError(f"forgetting_rate must be a finite number >= 0 (M3ID's default: 0.02), got "
                             f"{forgetting_rate!r}.")
        if threshold is None or not 0 < threshold <= 1:
            raise ValueError(f"gate must be a number in (0, 1] (M3ID's default: 0.3), got {gate!r}.")
        if prior not in M3ID_PRIORS:
            raise ValueError(f"M3ID's prior must be one of {', '.join(map(repr, M3ID_PRIORS))}, got {prior!r}.")
        self.forgetting_rate, self.gate, self.prior = rate, threshold, prior

    @property
    def needs_prior(self) -> bool:
        return self.forgetting_rate > 0  # 0: plain generate

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        generation = self.running()
        x = scores.float()
        if not self.needs_prior:
            return x
        generation.steps += 1
        weight = math.expm1(self.forgetting_rate * generation.steps)
        log_cond, log_prior = self.log_probs(generation, x)
        gated = log_cond.amax(dim=-1, keepdim=True) < math.log(self.gate)
        out = torch.where(gated, log_cond + weight * (log_cond - log_prior), log_cond)
        return out.masked_fill(torch.isneginf(x), -math.inf)

    def __repr__(self) -> str:
        return f"M3ID(forgetting_rate={self.forgetting_rate}, gate={self.gate}, prior={self.prior!r})"
