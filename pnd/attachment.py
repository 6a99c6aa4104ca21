"""Everything pnd keeps on a model is one `Attachment`, at `model._pnd`: `pnd.detach` removes it whole.

`pnd.attach` fills in the methods it replaced; binding a processor (`pnd.attach(model, processor)`, or a
`CaptionScorer`) fills in `processor`. Other modules read and write it through these functions only.

Example:
    >>> from pnd.testing import tiny_model
    >>> model, processor = tiny_model("llava")
    >>> attachment_of(model) is None, attachment_of(model, create=True).attached
    (False, False)
    >>> remove_attachment(model); attachment_of(model) is None
    True
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

_ATTRIBUTE = "_pnd"


@dataclass
class Attachment:
    """What pnd put on one model (per `generate` call state lives elsewhere: `pnd.decoding.generation`)."""

    processor: Any = None  # the processor that builds the model's inputs (its expansions are read with it)
    architecture: Any = None  # the model's `pnd.architectures.Architecture`, once attached
    forward: Callable | None = None  # the model's own forward and generate, which the attached ones call
    generate: Callable | None = None
    generate_batch: Callable | None = None  # the model's own continuous batching, which the attached one calls
    replaced: dict = field(default_factory=dict)  # instance attributes attach shadowed (accelerate's hook), to restore
    added: tuple[str, ...] = ()  # instance attributes attach added (its forward and generate, a family's repair)
    prefill: str = "auto"  # one of pnd.decoding.paired.PREFILL_STRATEGIES
    running: list = field(default_factory=list)  # a token per generate call in flight (threads): detach refuses
    static_cache_len: int = 0  # the longest static cache so far: later ones are as long (generate's own rule), so
    # that a shorter prompt reuses the compiled decoding step

    def __deepcopy__(self, memo) -> Attachment:
        """The attachment of a copied model (`copy.deepcopy(model)`): the same processor, which builds the inputs of
        both; the methods attach replaced and added, bound to the copy (`memo` maps the model to its copy)."""
        memo[id(self.processor)] = self.processor
        return Attachment(**{f.name: copy.deepcopy(getattr(self, f.name), memo) for f in fields(self)
                             if f.name != "running"})  # no call of the original runs on the copy

    @property
    def attached(self) -> bool:
        return self.forward is not None


def attachment_of(model, create: bool = False) -> Attachment | None:
    """The model's `Attachment`; None if it has none, unless `create`, which gives it an empty one."""
    attachment = vars(model).get(_ATTRIBUTE)
    if attachment is None and create:
        attachment = Attachment()
        setattr(model, _ATTRIBUTE, attachment)
    return attachment


def is_attached(model) -> bool:
    """Whether `pnd.attach(model)` was called (and not undone by `pnd.detach`)."""
    attachment = attachment_of(model)
    return attachment is not None and attachment.attached


def remove_attachment(model) -> None:
    """Take the model's `Attachment` off it (nothing if it has none)."""
    vars(model).pop(_ATTRIBUTE, None)
