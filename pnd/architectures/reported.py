"""The generic expansion finder: the visual expansion as the processor itself reports it.

transformers' processors build a prompt by replacing each image or video placeholder with its whole expansion
(`ProcessorMixin.get_text_with_replacements`: placeholders, per-frame timestamps, labels, delimiters, separators) and
can report the character span of every replacement (`return_text_replacement_offsets=True`). The tokens holding a
character of a replacement are the expansion the prior hides (docs/design.md §1): no family needs expansion code of its
own, only a registration with `reported=True`.

Token ids carry no trace of those spans, so `pnd.attach(model, processor)` makes the processor report them on every call
and remember each prompt's expansion, keyed by a digest of its token ids (padding aside); the paired forward looks the
prompt up. A prompt the bound processor did not build (built before `attach`, by hand, or changed afterwards) gets an
error that says how to build it, never a guess.

Example:
    >>> import torch

from ..attachment import attachment_of
    >>> from pnd.testing import tiny_model, tiny_inputs
    >>> model, processor = tiny_model("internvl")  # binds the processor, as pnd.attach(model, processor) does
    >>> inputs = tiny_inputs(processor, "internvl")
    >>> mask = recalled_expansion(processor, inputs["input_ids"], inputs["attention_mask"], "InternVL")
    >>> processor.tokenizer.decode(inputs["input_ids"][0][mask[0]])[:16]
    'Frame1: <img><IM'
"""

from __future__ import annotations

import functools
import hashlib
import threading
import weakref
from collections import OrderedDict

import numpy as np
import torch

from ..attachment import attachment_of

_ASKED = ("return_text_replacement_offsets", "return_offsets_mapping")
_ADDED = ("text_replacement_offsets", "offset_mapping")
REMEMBERED_PROMPTS = 4096  # per processor, least recently used forgotten first


class ExpansionRecord:
    """The expansions of the prompts one processor built: token-id digest -> mask of the attended tokens."""

    def __init__(self):
        self._masks: OrderedDict[bytes, bytes] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def digest(ids: list[int]) -> bytes:
        return hashlib.blake2b(np.asarray(ids, dtype=np.int64).tobytes(), digest_size=16).digest()

    def remember(self, ids: list[int], mask: list[bool]) -> None:
        key, value = self.digest(ids), np.packbits(np.asarray(mask, dtype=bool)).tobytes()
        with self._lock:
            self._masks[key] = value
            self._masks.move_to_end(key)
            while len(self._masks) > REMEMBERED_PROMPTS:
                self._masks.popitem(last=False)

    def recall(self, ids: list[int]) -> torch.Tensor | None:
        """The mask remembered for exactly these ids, or None."""
        with self._lock:
            packed = self._masks.get(self.digest(ids))
        if packed is None:
            return None
        return torch.from_numpy(np.unpackbits(np.frombuffer(packed, dtype=np.uint8), count=len(ids)).astype(bool))


_RECORDS: weakref.WeakKeyDictionary[object, ExpansionRecord] = weakref.WeakKeyDictionary()
_CALL = threading.local()  # the replacements of the processor call under way in this thread


def replaced_tokens(offsets, replacements, attended) -> list[bool]:
    """Per token, whether it holds a character of one of `replacements` (each with its `new_span` in the text).

    A token that merges template text with inserted text exists only through the insertion and counts; zero-width
    tokens (padding, added special tokens) count only strictly inside a span.

    Example:
        >>> replaced_tokens([(0, 3), (3, 5), (5, 9), (9, 9)], [{"new_span": (4, 6)}], [True] * 4)
        [False, True, True, False]
    """
    hidden = []
    for (start, end), kept in zip(offsets, attended):
        spans = (r["new_span"] for r in replacements)
        hidden.append(bool(kept) and any((start < b and end > a) if end > start else a < start < b for a, b in spans))
    return hidden


def _record_call(processor, call, args, kwargs):
    """Call the processor asking for its replacement and token offsets, remember each prompt's expansion, and
    return what the caller asked for."""
    asked = {key: kwargs.get(key) for key in _ASKED}
    _CALL.replacements = None
    try:
        outputs = call(*args, **{**kwargs, **dict.fromkeys(_ASKED, True)})
    except (NotImplementedError, TypeError):  # no offsets (a slow tokenizer, an older processor): nothing to remember
        return call(*args, **kwargs)
    if "text_replacement_offsets" not in outputs and _CALL.replacements is not None:  # a `__call__` that drops them
        outputs["text_replacement_offsets"] = _CALL.replacements
    if all(key in outputs for key in _ADDED) and "input_ids" in outputs:
        record = _RECORDS.setdefault(processor, ExpansionRecord())
        ids, offsets, masks = outputs["input_ids"], outputs["offset_mapping"], outputs.get("attention_mask", None)
        for row, replacements in enumerate(outputs["text_replacement_offsets"]):
            row_ids = [int(i) for i in ids[row]]
            attended = [True] * len(row_ids) if masks is None else [bool(m) for m in masks[row]]
            hidden = replaced_tokens([tuple(int(c) for c in pair) for pair in offsets[row]], replacements, attended)
            record.remember([i for i, a in zip(row_ids, attended) if a], [h for h, a in zip(hidden, attended) if a])
    for key, added in zip(_ASKED, _ADDED):
        if not asked[key]:
            outputs.pop(added, None)
    return outputs


def _restore(cls: type, state: dict):
    """An instance of `cls` with `state` (unpickling a reporting processor)."""
    restored = cls.__new__(cls)
    restored.__dict__.update(state)
    return restored


@functools.cache
def _reporting_class(cls: type) -> type:
    """`cls` whose calls remember their prompts' expansions (same name, so saving it writes the same class)."""

    def __call__(self, *args, **kwargs):
        return _record_call(self, super(reporting, self).__call__, args, kwargs)

    def get_text_with_replacements(self, *args, **kwargs):  # kept for a `__call__` that discards them (Nemotron-H)
        text, _CALL.replacements = super(reporting, self).get_text_with_replacements(*args, **kwargs)
        return text, _CALL.replacements

    def __reduce_ex__(self, protocol):  # pickled and copied as the original class, which reports nothing
        return _restore, (cls, dict(self.__dict__))

    reporting = type(cls.__name__, (cls,), {"__call__": __call__, "__reduce_ex__": __reduce_ex__, "_pnd_reports": True,
                                            "get_text_with_replacements": get_text_with_replacements,
                                            "__module__": cls.__module__, "__qualname__": cls.__qualname__})
    return reporting


def report_expansions(processor) -> None:
    """Make `processor` remember the expansion of every prompt it builds from now on (idempotent)."""
    if not getattr(type(processor), "_pnd_reports", False):
        processor.__class__ = _reporting_class(type(processor))


def recalled_expansion(processor, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                       family: str, placeholders: torch.Tensor | None = None) -> torch.Tensor:
    """Mask (batch, L) of the expansion `processor` remembered for each prompt row.

    A row with no placeholder (`placeholders`, the rows' placeholder mask) and no record has no expansion.

    Raises:
        ValueError: for a row with placeholders that the processor did not build since it was bound.
    """
    record = _RECORDS.get(processor)
    pad = getattr(getattr(processor, "tokenizer", None), "pad_token_id", None)
    mask = torch.zeros_like(input_ids, dtype=torch.bool)
    unknown = []
    for row, ids in enumerate(input_ids.tolist()):
        kept = [True] * len(ids) if attention_mask is None else [bool(a) for a in attention_mask[row].tolist()]
        start = next((i for i, t in enumerate(ids) if t != pad), len(ids))
        for candidate in (kept, [k and i >= start for i, k in enumerate(kept)]):  # as given, then without leading pads
            found = None if record is None else record.recall([t for t, k in zip(ids, candidate) if k])
            if found is not None:
                mask[row, torch.tensor(candidate, device=mask.device)] = found.to(mask.device)
                break
        else:
            if placeholders is None or bool(placeholders[row].any()):
                unknown.append(row)
    if unknown:
        raise ValueError(
            f"Prompt row(s) {unknown} were not built by the processor bound with pnd.attach(model, processor) (or were "
            f"changed afterwards), so the extent of their {family} visual expansion (the timestamps, labels and "
            "delimiters the processor writes) is unknown. Build the inputs with that processor after pnd.attach: "
            "processor(text=..., videos=...) or processor.apply_chat_template(..., tokenize=True, return_dict=True), "
            "and pass its input_ids unchanged."
        )
    return mask


def bind_processor(model, processor) -> None:
    """Remember `processor` as the one that builds `model`'s inputs, and make it report its expansions."""
    report_expansions(processor)
    attachment_of(model, create=True).processor = processor


def bound_processor(model, why: str):
    """The processor `bind_processor` bound to `model`; without one, a ValueError that starts with `why` (what the
    family's expansion needs the processor for) and says how to bind it."""
    processor = getattr(attachment_of(model), "processor", None)
    if processor is None:
        raise ValueError(f"{why}, so pnd needs the processor: call pnd.attach(model, processor) with the processor that "
                         "builds the inputs.")
    return processor
