"""`PriorNormalized`: subtract alpha * log P(t) from the model's log-probabilities at every step.

    s_k(w) = log_softmax(logits_cond)[w] - alpha * log_softmax(logits_prior)[w]      (docs/design.md §1)
    combine="contrastive" (VCD, ICD): (1 + alpha) * log_softmax(logits_cond)[w] - alpha * log_softmax(logits_prior)[w]

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

import copy
import functools
import inspect
import math

import torch
from transformers import LogitsProcessor

from ..validation import PRIOR_MODES, check_alpha_and_prior, checked_plausibility, real_number
from .contrast import check_noise_step
from .generation import Generation, running_generation, trace_step

COMBINES = ("prior", "contrastive")
CONTRAST_PRIORS = ("inputs", "noise")  # priors from another input run through the whole model (`contrast.py`)


class PairedProcessor(LogitsProcessor):
    """A logits processor that reads the prior logits of an attached model's paired forward (`pnd.attach`): one per
    `generate` call. Subclasses set `prior` (the prior mode) and `needs_prior` (False: plain decoding, no prior rows).
    Only settings live on the processor: the state of a call is its `Generation` (docs/design.md §3.9)."""

    prior: str = "masked"
    interventions: tuple = ()  # changes inside the model on one side of the pair (`pnd.interventions`)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__call__" in cls.__dict__:
            cls.__call__ = _SignedCall(cls.__call__)

    @property
    def needs_prior(self) -> bool:
        return True

    def running(self) -> Generation:
        """The running `generate` call's state, or the error that says how to use the processor."""
        generation = running_generation()
        if generation is None or generation.normalizer is not self:
            name = type(self).__name__
            raise RuntimeError(
                f"{name} needs the prior pass of an attached model: call pnd.attach(model) once, then "
                f"model.generate(..., logits_processor=[{name}(...)])."
            )
        return generation

    def without_cut(self) -> PairedProcessor:
        """A copy of this processor without its plausibility cut, for scoring given tokens (lmms-eval's
        `loglikelihood`): a choice the cut drops would get an infinite loss, as would every other it drops."""
        uncut = copy.copy(self)
        if getattr(uncut, "plausibility", None) is not None:
            uncut.plausibility = None
        return uncut

    @staticmethod
    def log_probs(generation: Generation, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log p_c, log p_prior) of this step in fp32 for the fp32 scores `x` generate hands the processor: log p_c
        normalized over the model's own logits (greedy/sampling receive raw logits, beam search log-probabilities)."""
        cond_log_z, log_prior = generation.pop()
        log_prior = log_prior.to(x.device)
        if log_prior.shape != x.shape:
            raise RuntimeError(f"pnd: prior logits {tuple(log_prior.shape)} do not match scores {tuple(x.shape)}.")
        log_cond = x if generation.scores_are_logprobs else x - cond_log_z.to(x.device)
        trace_step(log_cond, log_prior)
        return log_cond, log_prior


class _SignedCall:
    """A processor class's `__call__`, bound with its signature ready. Each step, transformers' `LogitsProcessorList`
    reads `inspect.signature(processor.__call__)`, which it rebuilds for a bound method (about 28 µs of a tiny model's
    step, measured in place) and returns as is for a callable that carries one (about 12 µs).

    Example:
        >>> import pnd
        >>> inspect.signature(pnd.PriorNormalized(0.5).__call__)
        <Signature (input_ids: 'torch.LongTensor', scores: 'torch.FloatTensor') -> 'torch.FloatTensor'>
    """

    def __init__(self, function):
        self.function = function
        self.signature = inspect.signature(functools.partial(function, None))

    def __get__(self, processor, owner=None):
        if processor is None:
            return self.function
        bound = functools.partial(self.function, processor)
        bound.__signature__ = self.signature
        return bound


class PriorNormalized(PairedProcessor):
    """Prior-normalized decoding for vision-language models (BLiM's Candidate Prior Normalization).

    Args:
        alpha: weight of the prior in [0, 1]; 0 leaves the scores untouched (plain decoding).
        prior: how the visual condition is removed. "masked" (default, BLiM): visual tokens masked out of
            attention, every other token keeps its position; no pixels, no vision tower. "text": visual
            tokens dropped and positions renumbered (the prompt as if it had no image). "blank": the
            vision tower sees uniform frames (all-zero pixel inputs after the processor's normalization,
            i.e. mean-colour frames) in place of the real ones; it measures what "some video" implies.
            "inputs": the model on another input, `generate(..., prior_inputs=...)` (the processor's outputs for
            another prompt, with or without pixels: ICD's `pnd.icd_inputs`), decoding the same tokens. "noise":
            the same inputs with `pnd.vcd_noise`'d pixels (VCD). Both run the vision tower on the contrast input.
        plausibility: optional beta in (0, 1]; tokens whose conditioned probability is below beta times
            the most likely token's are set to -inf first (VCD's adaptive plausibility constraint).
        combine: "prior" (default, BLiM): `log p_c - alpha * log p_prior`; "contrastive" (VCD, ICD):
            `(1 + alpha) * log p_c - alpha * log p_prior`, which ranks tokens as "prior" does at alpha / (1 + alpha)
            (greedy, beam search; sampling at temperature 1 / (1 + alpha)): docs/methods.md.
        noise_step, seed: prior="noise" only: `pnd.vcd_noise(pixels, noise_step, seed)`.

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

    def __init__(self, alpha: float, *, prior: str = "masked", plausibility: float | None = None,
                 combine: str = "prior", noise_step: int = 500, seed: int = 0):
        check_alpha_and_prior(alpha, prior, (*PRIOR_MODES, *CONTRAST_PRIORS))
        beta = checked_plausibility(plausibility)
        if combine not in COMBINES:
            raise ValueError(f"combine must be one of {', '.join(map(repr, COMBINES))}, got {combine!r}.")
        if prior == "noise":
            check_noise_step(noise_step, seed)
        self.alpha = real_number(alpha)
        self.prior = prior
        self.plausibility = beta
        self.combine = combine
        self.noise_step, self.seed = noise_step, seed

    @property
    def needs_prior(self) -> bool:
        return self.alpha > 0  # alpha=0 is plain generate, for every argument

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        generation = self.running()
        if not self.alpha > 0:  # plain generate, for every argument (the plausibility cut belongs to the method)
            return scores
        x = scores.float()
        log_cond, log_prior = self.log_probs(generation, x)
        if self.combine == "contrastive":
            log_cond = (1 + self.alpha) * log_cond
        out = log_cond.sub(log_prior, alpha=self.alpha)  # -inf scores stay -inf: the prior is floored, finite
        if self.plausibility is not None:
            cutoff = x.amax(dim=-1, keepdim=True) + math.log(self.plausibility)
            out = out.masked_fill(x < cutoff, -math.inf)
        return out

    def __repr__(self) -> str:
        extra = "" if self.combine == "prior" else f", combine={self.combine!r}"
        if self.prior == "noise":
            extra += f", noise_step={self.noise_step}, seed={self.seed}"
        return f"PriorNormalized(alpha={self.alpha}, prior={self.prior!r}, plausibility={self.plausibility}{extra})"
