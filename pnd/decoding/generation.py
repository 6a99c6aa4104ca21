"""The state of one `generate` call of an attached model with a `PriorNormalized` processor.

The paired forward (`pnd.decoding.steps`) records each step's prior logits in it; the processor
(`pnd.decoding.logits_processor`) takes them out. It lives in a context variable for the call's duration only
(docs/design.md §3.9), so concurrent calls in other threads never see it.

Example:
    >>> running_generation() is None  # outside an attached model's generate call
    True
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from ..attachment import Attachment

PRIOR_FLOOR = -1e30  # a prior log-probability of -inf would turn into +inf: keep it finite

if TYPE_CHECKING:
    from .logits_processor import PairedProcessor


@dataclass
class Generation:
    """State of one `generate` call with a PriorNormalized (or another `PairedProcessor`) processor."""

    attachment: Attachment
    normalizer: PairedProcessor
    scores_are_logprobs: bool  # beam search hands processors log-probabilities, greedy/sampling raw logits
    blank_outputs: dict | None = None  # vision-tower outputs of blank frames, for prior="blank"
    # where generate compiles a static cache's decoding steps: the model's compiled call, which pairs the step's
    # inputs itself (`steps.PAIRED_STEP`)
    decode_forward: Callable | None = None
    conversation: tuple | None = None  # continuing a returned cache: the whole (input_ids, attention_mask, position_ids)
    contrast: dict | None = None  # prior="inputs"/"noise": the contrast inputs, one row per prompt (`contrast.py`)
    # the prompt's token ids, for a family whose generate hands its language model's generate `inputs_embeds` (the
    # Q-Former families): the first forward then gets no token ids, and the prior's prefill reads them here
    input_ids: torch.Tensor | None = None
    reached: dict = field(default_factory=dict)  # the attention its processor's interventions act in (`pnd.interventions`)
    visual: torch.Tensor | None = None  # (rows, prompt length) bool: the prompt's placeholder tokens, where they act
    steering: torch.Tensor | None = None  # (rows, layers, hidden): VISTA's addition to each layer's output
    hooks: list = field(default_factory=list)  # forward hooks of this call, removed when it ends
    whole_masks: bool = False  # a dynamic cache's decoding steps give the model its 4D mask (`steps._decode_step`)
    steps: int = 0  # decoding steps the processor has scored in this call (M3ID's t)
    pending: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)

    def record(self, logits: torch.Tensor, n: int) -> None:
        """Keep what the processor needs from this forward's next-token `logits` (`prior_terms`)."""
        self.pending.append(prior_terms(logits, n))

    def pop(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The last recorded step's (log Z of the conditioned logits, prior log-probabilities), taken out."""
        if not self.pending:
            raise RuntimeError(
                "PriorNormalized found no prior logits for this step: this decoding mode bypasses the paired "
                "forward (assisted/speculative decoding, or a custom_generate loop that calls the model without "
                "generate's cache, is not supported). Decode with generate's own loops (greedy, beam search, sampling)."
            )
        return self.pending.pop()


def prior_terms(logits: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """What the processor needs from a forward's next-token `logits` (rows [0, n) conditioned, [n, 2n) prior, if any):
    log Z of the conditioned rows and the prior's log-probabilities (floored, finite), in fp32 from one log-softmax of
    both.

    Example:
        >>> log_z, log_prior = prior_terms(torch.tensor([[0.0, 0.0], [0.0, float("-inf")]]), 1)
        >>> log_z.exp(), log_prior.exp()  # Z = e^0 + e^0; the prior's -inf floored to a finite log-probability
        (tensor([[2.]]), tensor([[1., 0.]]))
    """
    logits = logits.float()
    log_probs = torch.log_softmax(logits, dim=-1)
    # log Z = max - max(log_softmax): the same sum as logsumexp's, in one pass fewer
    log_z = logits[:n].amax(dim=-1, keepdim=True) - log_probs[:n].amax(dim=-1, keepdim=True)
    return log_z, log_probs[n:].clamp(min=PRIOR_FLOOR) if logits.shape[0] > n else None


_RUNNING: ContextVar[Generation | None] = ContextVar("pnd_running_generation", default=None)
_TRACE: ContextVar[list | None] = ContextVar("pnd_traced_steps", default=None)


def running_generation() -> Generation | None:
    """The `Generation` of the attached model's `generate` call running in this context (thread), if any."""
    return _RUNNING.get()


@contextmanager
def running(generation: Generation) -> Iterator[Generation]:
    """Make `generation` the running one within this block (this context only)."""
    token = _RUNNING.set(generation)
    try:
        yield generation
    finally:
        _RUNNING.reset(token)
        for hook in generation.hooks:
            hook.remove()


@contextmanager
def traced_steps() -> Iterator[list[tuple[torch.Tensor, torch.Tensor | None]]]:
    """Within the block (this context only), every step a paired processor scores appends its fp32
    (log p_c, log p_prior) to the list yielded: what the method combined (`pnd explain --method`); log p_prior is
    None for a method with no second distribution at decoding (VISTA).

    Example:
        >>> with traced_steps() as steps:
        ...     pass  # model.generate(..., logits_processor=[pnd.M3ID()])
        >>> steps
        []
    """
    steps: list[tuple[torch.Tensor, torch.Tensor | None]] = []
    token = _TRACE.set(steps)
    try:
        yield steps
    finally:
        _TRACE.reset(token)


def trace_step(log_cond: torch.Tensor, log_prior: torch.Tensor | None) -> None:
    """Record one step's log-probabilities where `traced_steps` asks for them (`log_prior` None: the method's steps
    have no second distribution): copies, since a compiled step's outputs (CUDA graphs) and generate's scores are
    buffers that later steps may overwrite."""
    steps = _TRACE.get()
    if steps is not None:
        steps.append((log_cond.clone(), None if log_prior is None else log_prior.clone()))
