"""The generic expansion finder: the visual expansion as the processor itself reports it.

transformers' processors build a prompt by replacing each image or video placeholder with its whole expansion
(`ProcessorMixin.get_text_with_replacements`: placeholders, per-frame timestamps, labels, delimiters, separators) and
can report the character span of every replacement (`return_text_replacement_offsets=True`). The tokens holding a
character of a replacement are the expansion the prior hides (docs/design.md §1): no family needs expansion code of its
own, only a registration with `reported=True`.

Token ids carry no trace of those spans, so the expansion travels with the inputs: `pnd.attach(model, processor)`
makes the processor report the spans on every call and add one more output, `visual_expansion_mask` (`EXPANSION_KEY`:
1 on each token of the expansion, shaped like `input_ids`). Whatever keeps the processor's outputs keeps it (DataLoader
workers, `datasets`, pickling, `torch.save`, `.to(device)`, row slices, `tokenizer.pad`, which pads it with 0); pnd's
entry points take it out of the inputs (`carried_expansions`) and the model never sees it. As a fallback for inputs
passed without it, the bound processor also remembers the last `REMEMBERED_PROMPTS` prompts it built in this process,
keyed by a digest of their token ids. A prompt with neither gets an error that names the possible causes and the fix,
never a guess.

Example:
    >>> import torch
    >>> import pnd
    >>> from pnd.testing import tiny_model, tiny_inputs
    >>> model, processor = tiny_model("internvl")
    >>> inputs = tiny_inputs(processor, "internvl")
    >>> mask = recalled_expansion(processor, inputs["input_ids"], inputs["attention_mask"], "InternVL")
    >>> processor.tokenizer.decode(inputs["input_ids"][0][mask[0]])[:16]
    'Frame1: <img><IM'
    >>> _ = pnd.attach(model, processor)
    >>> inputs = tiny_inputs(processor, "internvl")
    >>> torch.equal(inputs[EXPANSION_KEY].bool(), mask)
    True
    >>> pnd.detach(model)
"""

from __future__ import annotations

import functools
import hashlib
import threading
import weakref
from collections import OrderedDict, UserList
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
import torch

from .._compat.generation import padding_also
from ..attachment import attachment_of

_ASKED = ("return_text_replacement_offsets", "return_offsets_mapping")
_ADDED = ("text_replacement_offsets", "offset_mapping")
EXPANSION_KEY = "visual_expansion_mask"  # the output a carrying processor adds: 1 on the expansion's tokens
REMEMBERED_PROMPTS = 4096  # the fallback record, per processor, least recently used forgotten first


class ExpansionRecord:
    """Expansions of prompts: token-id digest -> mask of the attended tokens; `limit` prompts at most (None: all)."""

    def __init__(self, limit: int | None = REMEMBERED_PROMPTS):
        self._masks: OrderedDict[bytes, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._limit = limit

    @staticmethod
    def digest(ids: list[int]) -> bytes:
        return hashlib.blake2b(np.asarray(ids, dtype=np.int64).tobytes(), digest_size=16).digest()

    def remember(self, ids: list[int], mask: list[bool]) -> None:
        key, value = self.digest(ids), np.packbits(np.asarray(mask, dtype=bool)).tobytes()
        with self._lock:
            self._masks[key] = value
            self._masks.move_to_end(key)
            while self._limit is not None and len(self._masks) > self._limit:
                self._masks.popitem(last=False)

    def recall(self, ids: list[int]) -> torch.Tensor | None:
        """The mask remembered for exactly these ids, or None."""
        with self._lock:
            packed = self._masks.get(self.digest(ids))
        if packed is None:
            return None
        return torch.from_numpy(np.unpackbits(np.frombuffer(packed, dtype=np.uint8), count=len(ids)).astype(bool))


# processors whose own `__call__` writes the expansion (not `get_text_with_replacements`): class name -> a function
# (processor, the call's args, kwargs) -> per prompt, the replacements it wrote, each {"new_span": (start, end)}
OWN_REPLACEMENTS: dict = {}
# processors whose `get_text_with_replacements` writes text it does not report before making its replacements: class
# name -> a function (processor, the prompts it is given) -> per prompt, the (start, end) spans of what it writes, in
# the text its replacements are then made in (HyperCLOVAX Vision V2's video durations)
WRITTEN_UNREPORTED: dict = {}
_RECORDS: weakref.WeakKeyDictionary[object, ExpansionRecord] = weakref.WeakKeyDictionary()
_CALL = threading.local()  # the replacements of the processor call under way in this thread
_CARRIERS: weakref.WeakKeyDictionary[object, weakref.WeakSet] = weakref.WeakKeyDictionary()  # -> attached models
_COPIES: weakref.WeakSet = weakref.WeakSet()  # processors unpickled or copied from one that carried
_GIVEN: ContextVar[ExpansionRecord | None] = ContextVar("pnd_given_expansions", default=None)


def carries(processor) -> bool:
    """Whether `processor`'s outputs carry `EXPANSION_KEY`: it is bound to an attached model, or is a copy (pickled,
    e.g. into a worker) of one that was."""
    return bool(_CARRIERS.get(processor)) or processor in _COPIES


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


def _like(ids, rows: list[list[bool]]):
    """`rows` (0/1 per token) in the form of `ids`: a tensor, a NumPy array or lists."""
    if torch.is_tensor(ids):
        return torch.tensor(rows, dtype=torch.long, device=ids.device).reshape(ids.shape)
    if isinstance(ids, np.ndarray):
        return np.asarray(rows, dtype=np.int64).reshape(ids.shape)
    return [[int(h) for h in row] for row in rows]


def _record_call(processor, call, args, kwargs):
    """Call the processor asking for its replacement and token offsets, remember each prompt's expansion, add it as
    `EXPANSION_KEY` where the processor carries it, and return what the caller asked for."""
    asked = {key: kwargs.get(key) for key in _ASKED}
    _CALL.replacements = None
    try:
        outputs = call(*args, **{**kwargs, **dict.fromkeys(_ASKED, True)})
    except (NotImplementedError, TypeError):  # no offsets (a slow tokenizer, an older processor): nothing to remember
        return call(*args, **kwargs)
    if "text_replacement_offsets" not in outputs and _CALL.replacements is not None:  # a `__call__` that drops them
        outputs["text_replacement_offsets"] = _CALL.replacements
    own = OWN_REPLACEMENTS.get(type(processor).__name__)
    if "text_replacement_offsets" not in outputs and own is not None:  # a `__call__` that replaces by itself
        outputs["text_replacement_offsets"] = own(processor, args, kwargs)
    if all(key in outputs for key in _ADDED) and "input_ids" in outputs:
        record = _RECORDS.setdefault(processor, ExpansionRecord())
        ids, offsets, masks = outputs["input_ids"], outputs["offset_mapping"], outputs.get("attention_mask", None)
        rows = []
        for row, replacements in enumerate(outputs["text_replacement_offsets"]):
            row_ids = [int(i) for i in ids[row]]
            attended = [True] * len(row_ids) if masks is None else [bool(m) for m in masks[row]]
            hidden = replaced_tokens([tuple(int(c) for c in pair) for pair in offsets[row]], replacements, attended)
            record.remember([i for i, a in zip(row_ids, attended) if a], [h for h, a in zip(hidden, attended) if a])
            rows.append(hidden)
        if carries(processor):
            outputs[EXPANSION_KEY] = _like(ids, rows)
    if isinstance(outputs.get("text_replacement_offsets"), _Unconverted):
        outputs["text_replacement_offsets"] = outputs["text_replacement_offsets"].data
    for key, added in zip(_ASKED, _ADDED):
        if not asked[key]:
            outputs.pop(added, None)
    return outputs


class _Unconverted(UserList):
    """A processor's replacement offsets on their way to pnd: no list, so that `BatchFeature` never makes a tensor of
    them (InternVL's, Idefics3's, PaliGemma's calls try, and fail, where the first row has none: text beside an image)."""


def _rebuilt(rebuild, args, role: str | None):
    """What pickle's `rebuild(*args)` gives, made a processor that carries, or a tokenizer that pads, again (`role`)."""
    restored = rebuild(*args)
    if role is not None:
        restored.__class__ = _pnd_class(type(restored), role)
    if role == "processor":
        _COPIES.add(restored)
    return restored


def _moved(span: tuple[int, int], replacements: list[dict]) -> tuple[int, int]:
    """`span` of a text, in the text after `replacements` (each with its `span` before and `new_span` after) were made.

    Example:
        >>> _moved((10, 12), [{"span": (2, 4), "new_span": (2, 7)}, {"span": (20, 21), "new_span": (23, 30)}])
        (13, 15)
    """
    shift = sum((r["new_span"][1] - r["new_span"][0]) - (r["span"][1] - r["span"][0])
                for r in replacements if r["span"][1] <= span[0])
    return span[0] + shift, span[1] + shift


@functools.cache
def _pnd_class(cls: type, role: str) -> type:
    """`cls` with pnd's methods (same name, so saving it writes the same class): a processor whose calls report their
    prompts' expansions (`role` "processor"), or a tokenizer whose `pad` pads `EXPANSION_KEY` ("tokenizer")."""

    def __call__(self, *args, **kwargs):
        return _record_call(self, super(subclass, self).__call__, args, kwargs)

    def get_text_with_replacements(self, *args, **kwargs):  # kept for a `__call__` that discards them (Nemotron-H)
        unreported = WRITTEN_UNREPORTED.get(cls.__name__)
        written = unreported(self, args[0] if args else kwargs["text"]) if unreported is not None else None
        text, _CALL.replacements = super(subclass, self).get_text_with_replacements(*args, **kwargs)
        if written is not None:
            _CALL.replacements = [[*row, *({"new_span": _moved(span, row)} for span in spans)]
                                  for row, spans in zip(_CALL.replacements, written)]
        return text, _Unconverted(_CALL.replacements)

    def __reduce_ex__(self, protocol):  # pickled as the original class; a copy of a carrying processor carries too
        rebuild, args, *rest = cls.__reduce_ex__(self, protocol)
        keep = role if role == "tokenizer" or carries(self) else None
        return (_rebuilt, (rebuild, tuple(cls if a is subclass else a for a in args), keep), *rest)

    methods = padding_also(EXPANSION_KEY) if role == "tokenizer" else {"__call__": __call__, "_pnd_reports": True,
                                                          "get_text_with_replacements": get_text_with_replacements}
    subclass = type(cls.__name__, (cls,), {**methods, "__reduce_ex__": __reduce_ex__, "_pnd_role": role,
                                           "__module__": cls.__module__, "__qualname__": cls.__qualname__})
    return subclass


def report_expansions(processor) -> None:
    """Make `processor` remember the expansion of every prompt it builds from now on (idempotent)."""
    if not getattr(type(processor), "_pnd_reports", False):
        processor.__class__ = _pnd_class(type(processor), "processor")


def carried_expansions(inputs: dict, input_ids=None, attention_mask=None) -> ExpansionRecord | None:
    """Take `EXPANSION_KEY` out of `inputs` (processor outputs, or the keyword arguments of a call given them): a
    record of each row's expansion keyed by its attended token ids (`input_ids`, `attention_mask`: where they are not
    in `inputs`); None without it."""
    carried = inputs.pop(EXPANSION_KEY, None)
    input_ids = inputs.get("input_ids") if input_ids is None else input_ids
    attention_mask = inputs.get("attention_mask") if attention_mask is None else attention_mask
    if carried is None or input_ids is None:
        return None
    carried, input_ids = torch.as_tensor(carried, device="cpu"), torch.as_tensor(input_ids, device="cpu")  # read once
    if carried.shape != input_ids.shape:
        raise ValueError(f"{EXPANSION_KEY} has shape {tuple(carried.shape)} but input_ids {tuple(input_ids.shape)}: "
                         f"slice, pad and concatenate {EXPANSION_KEY} with input_ids, as attention_mask is "
                         f"(tokenizer.pad pads it with 0), or pass the processor's outputs unchanged.")
    record = ExpansionRecord(limit=None)
    for row, ids in enumerate(input_ids.tolist()):
        kept = [True] * len(ids) if attention_mask is None else [bool(a) for a in attention_mask[row].tolist()]
        hidden = carried[row].tolist()
        record.remember([t for t, k in zip(ids, kept) if k], [bool(h) for h, k in zip(hidden, kept) if k])
    return record


@contextmanager
def expansions_given(record: ExpansionRecord | None) -> Iterator[None]:
    """Within the block (this context only), the expansions `record` holds are found first (`recalled_expansion`)."""
    if record is None:
        yield
        return
    token = _GIVEN.set(record)
    try:
        yield
    finally:
        _GIVEN.reset(token)


def given_expansions() -> ExpansionRecord | None:
    """The record `expansions_given` set for the call under way in this context, if any."""
    return _GIVEN.get()


def recalled_expansion(processor, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                       family: str, placeholders: torch.Tensor | None = None) -> torch.Tensor:
    """Mask (batch, L) of each prompt row's expansion: the one its inputs carried (`expansions_given`), else the one
    `processor` (None: no processor) remembered building.

    A row with no placeholder (`placeholders`, the rows' placeholder mask) and no expansion known has none.

    Raises:
        ValueError: for a row with placeholders whose expansion is not known, or has placeholders outside it.
    """
    records = [r for r in (_GIVEN.get(), None if processor is None else _RECORDS.get(processor)) if r is not None]
    pad = getattr(getattr(processor, "tokenizer", None), "pad_token_id", None)
    mask = torch.zeros_like(input_ids, dtype=torch.bool)
    unknown = []
    for row, ids in enumerate(input_ids.tolist()):
        kept = [True] * len(ids) if attention_mask is None else [bool(a) for a in attention_mask[row].tolist()]
        start = next((i for i, t in enumerate(ids) if t != pad), len(ids))
        candidates = (kept, [k and i >= start for i, k in enumerate(kept)])  # as given, then without leading pads
        found = next(((c, f) for c in candidates for r in records
                      if (f := r.recall([t for t, k in zip(ids, c) if k])) is not None), None)
        if found is not None:
            mask[row, torch.tensor(found[0], device=mask.device)] = found[1].to(mask.device)
        elif placeholders is None or bool(placeholders[row].any()):
            unknown.append(row)
    if unknown:
        raise ValueError(_unknown_expansion(unknown, family, processor))
    if placeholders is not None and bool((placeholders & ~mask).any()):
        rows = (placeholders & ~mask).any(-1).nonzero().flatten().tolist()
        raise ValueError(f"Prompt row(s) {rows} hold image/video tokens outside the {family} visual expansion given "
                         f"with them ({EXPANSION_KEY}): their input_ids were changed after the processor built them. "
                         "Pass the processor's outputs unchanged.")
    return mask


def _unknown_expansion(rows: list[int], family: str, processor) -> str:
    """Why the expansion of prompt `rows` is unknown (every possible cause, none guessed), and the fix."""
    bound = ("no processor is bound to the model" if processor is None else
             f"the bound processor did not build them in this process (among its last {REMEMBERED_PROMPTS} prompts)")
    return (f"The {family} visual expansion of prompt row(s) {rows} (the placeholders and the timestamps, labels and "
            f"delimiters the processor writes around them) is unknown: the inputs carry no {EXPANSION_KEY} for them, "
            f"and {bound}. Either no processor bound with pnd.attach(model, processor) built them (they were built "
            f"before attach, by another processor, or by hand), or {EXPANSION_KEY} was left behind (built in another "
            "process or saved without it, or the inputs passed key by key), or their input_ids were changed after "
            "building. Build the inputs with that processor after pnd.attach(model, processor): processor(text=..., "
            "videos=...) or processor.apply_chat_template(..., tokenize=True, return_dict=True), and pass its outputs "
            f"whole and unchanged ({EXPANSION_KEY} with them).")


def bind_processor(model, processor) -> None:
    """Remember `processor` as the one that builds `model`'s inputs, and make it report its expansions; while `model`
    is attached and its family reads what the processor reports (`Architecture.reads_reported`), the processor's
    outputs carry them (`EXPANSION_KEY`) and its tokenizer pads them. Families with a token-id rule get no extra
    output: their inputs stay as transformers builds them, to edit freely."""
    report_expansions(processor)
    attachment = attachment_of(model, create=True)
    if attachment.processor is not processor:
        release_processor(model)
    attachment.processor = processor
    if attachment.attached and getattr(attachment.architecture, "reads_reported", False):
        _CARRIERS.setdefault(processor, weakref.WeakSet()).add(model)
        tokenizer = getattr(processor, "tokenizer", None)
        if tokenizer is not None and getattr(type(tokenizer), "_pnd_role", None) != "tokenizer":
            tokenizer.__class__ = _pnd_class(type(tokenizer), "tokenizer")


def release_processor(model) -> None:
    """The processor bound to `model` no longer carries expansions for it (`pnd.detach`)."""
    processor = getattr(attachment_of(model), "processor", None)
    if processor is not None and processor in _CARRIERS:
        _CARRIERS[processor].discard(model)


def bound_processor(model, why: str, required: bool = True):
    """The processor `bind_processor` bound to `model`; without one, None if not `required`, else a ValueError that
    starts with `why` (what the family's expansion needs the processor for) and says how to bind it."""
    processor = getattr(attachment_of(model), "processor", None)
    if processor is None and required:
        raise ValueError(f"{why}, so pnd needs the processor: call pnd.attach(model, processor) with the processor that "
                         "builds the inputs.")
    return processor
