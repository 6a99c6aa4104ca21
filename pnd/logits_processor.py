"""`PriorNormalized`: subtract alpha * log P(t) from the model's log-probabilities at every step.

    s_k(w) = log_softmax(logits_cond)[w] - alpha * log_softmax(logits_prior)[w]      (docs/design.md §1)

The prior logits come from the paired forward that `pnd.attach(model)` installs.

Example:
    >>> import pnd
    >>> from pnd.testing import tiny_model, tiny_inputs
    >>> model, processor = tiny_model("qwen2_vl")
    >>> _ = pnd.attach(model)
    >>> out = model.generate(**tiny_inputs(processor, "qwen2_vl"), max_new_tokens=4, do_sample=False,
    ...                      logits_processor=[pnd.PriorNormalized(alpha=0.5, plausibility=0.1)])
"""

from __future__ import annotations

import math
import numbers
from contextvars import ContextVar

import numpy as np
import torch
from transformers import LogitsProcessor

_MODES = ("masked", "text", "blank")
_FLOOR = -1e30  # a prior log-probability of -inf would turn into +inf: keep it finite
# The `pnd.paired.Generation` of the attached model's `generate` call running in this context (thread), if any:
# per-call state lives there, never on the model or on a processor object (docs/design.md §3.9).
RUNNING_GENERATION: ContextVar = ContextVar("pnd_running_generation", default=None)


def real_number(value) -> float | None:
    """`value` as a float if it is a real number (Python, numpy, or a 0-dim torch tensor), else None (bools too).

    Example:
        >>> import numpy as np
        >>> real_number(np.float32(0.5)), real_number(torch.tensor(1)), real_number(True), real_number("0.5")
        (0.5, 1.0, None, None)
    """
    if torch.is_tensor(value):
        if value.ndim != 0 or value.dtype == torch.bool or value.is_complex():
            return None
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return None
    return float(value)


def check_alpha_and_prior(alpha, prior: str, modes: tuple[str, ...] = _MODES) -> None:
    """Raise a ValueError naming the problem if alpha is not a finite number in [0, 1] or prior not in modes."""
    value = real_number(alpha)
    if value is None or not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"alpha must be a finite number in [0, 1], got {alpha!r}. Typical values: 0.5 for "
                         "generation, 0.8-1.0 for retrieval.")
    if prior not in modes:
        raise ValueError(f"prior must be one of {', '.join(map(repr, modes))}, got {prior!r}.")


class PriorNormalized(LogitsProcessor):
    """Prior-normalized decoding for vision-language models (BLiM's Candidate Prior Normalization).

    Args:
        alpha: weight of the prior in [0, 1]; 0 leaves the scores untouched (plain decoding).
        prior: how the visual condition is removed. "masked" (default, BLiM): visual tokens masked out of
            attention, every other token keeps its position; no pixels, no vision tower. "text": visual
            tokens dropped and positions renumbered (the prompt as if it had no image). "blank": the
            vision tower sees uniform frames (all-zero pixel inputs after the processor's normalization,
            i.e. mean-colour frames) in place of the real ones; it measures what "some video" implies.
        plausibility: optional beta in (0, 1]; tokens whose conditioned probability is below beta times
            the most likely token's are set to -inf first (VCD's adaptive plausibility constraint).

    The output is `log P(w | v) - alpha * log P(w)` with the conditioned distribution normalized over
    the model's own logits (greedy/sampling receive raw logits, beam search log-probabilities): tokens
    that an earlier processor set to -inf stay at -inf and are not renormalized away, as in plain beam
    search.

    Example:
        >>> import pnd
        >>> from pnd.testing import tiny_model, tiny_inputs
        >>> model, processor = tiny_model("llava_onevision")
        >>> out = pnd.attach(model).generate(**tiny_inputs(processor, "llava_onevision"), max_new_tokens=3,
        ...                                  num_beams=2, logits_processor=[pnd.PriorNormalized(alpha=0.5)])
        >>> pnd.PriorNormalized(0.5)
        PriorNormalized(alpha=0.5, prior='masked', plausibility=None)
    """

    def __init__(self, alpha: float, *, prior: str = "masked", plausibility: float | None = None):
        check_alpha_and_prior(alpha, prior)
        beta = real_number(plausibility)
        if plausibility is not None and (beta is None or not 0 < beta <= 1):
            raise ValueError(f"plausibility must be None or a number in (0, 1], got {plausibility!r}.")
        self.alpha = real_number(alpha)
        self.prior = prior
        self.plausibility = beta

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        generation = RUNNING_GENERATION.get()
        if generation is None or generation.normalizer is not self:
            raise RuntimeError(
                "PriorNormalized needs the prior pass of an attached model: call pnd.attach(model) once, then "
                "model.generate(..., logits_processor=[PriorNormalized(alpha)])."
            )
        x = scores.float()
        out = x
        if self.alpha > 0:
            cond_log_z, prior = generation.pop()
            prior = prior.to(x.device, torch.float32)
            if prior.shape != x.shape:
                raise RuntimeError(f"pnd: prior logits {tuple(prior.shape)} do not match scores {tuple(x.shape)}.")
            log_prior = torch.log_softmax(prior, dim=-1).clamp(min=_FLOOR)
            log_cond = x if generation.scores_are_logprobs else x - cond_log_z.to(x.device)
            out = (log_cond - self.alpha * log_prior).masked_fill(torch.isneginf(x), -math.inf)
        if self.plausibility is not None:
            cutoff = x.amax(dim=-1, keepdim=True) + math.log(self.plausibility)
            out = out.masked_fill(x < cutoff, -math.inf)
        return out

    def __repr__(self) -> str:
        return f"PriorNormalized(alpha={self.alpha}, prior={self.prior!r}, plausibility={self.plausibility})"
