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

import torch
from transformers import LogitsProcessor

from ..validation import check_alpha_and_prior, real_number
from .generation import running_generation

_FLOOR = -1e30  # a prior log-probability of -inf would turn into +inf: keep it finite


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
        generation = running_generation()
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
