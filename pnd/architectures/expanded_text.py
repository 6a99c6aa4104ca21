"""The visual expansion of families whose processor writes text around the placeholders that no delimiter token
bounds (InternVL's `FrameN:` labels, SmolVLM's intro sentence and `Frame from MM:SS:`, VideoLLaMA3's `Time t.ts:`).

Token ids alone do not say where such text starts, so the expansion is read from the processor: the prompt's tokens
are decoded back to the text the processor tokenized (checked by encoding it again: the ids must be that text's
tokenization), the family's pattern (written from the processor's own replacement code, built from its tokens) finds
each expansion in it, and every token holding a character of an expansion is hidden: a token that merged the
template's text with the expansion's (SmolVLM's " You" after "User:") exists only through the expansion. A
placeholder outside every expansion found is an error, never a guess.

The processor is bound to the model by `pnd.attach(model, processor)` (and by `pnd.CaptionScorer`).

Example:
    >>> import re
    >>> from pnd.testing import tiny_tokenizer
    >>> tokenizer = tiny_tokenizer(["<v>"])
    >>> ids = tokenizer(["the cat <v><v> sat"], return_tensors="pt").input_ids
    >>> tokens_in_matches(tokenizer, ids, re.compile("cat (<v>)+"), "Demo").int().tolist()
    [[0, 1, 1, 1, 1, 0]]
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .registry import Architecture


def tokens_in_matches(tokenizer, input_ids: torch.Tensor, pattern: re.Pattern, family: str) -> torch.Tensor:
    """Mask (batch, L) of the tokens of `input_ids` holding a character of a match of `pattern` in their text.

    Raises:
        ValueError: when a row is not the tokenization of its own text (ids not built by the processor).
    """
    if not tokenizer.is_fast:
        raise ValueError(f"pnd reads the {family} visual expansion with a fast tokenizer (offsets); load the processor "
                         "with use_fast=True.")
    mask = torch.zeros_like(input_ids, dtype=torch.bool)
    for row, ids in enumerate(input_ids.tolist()):
        text = tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        if encoded.input_ids != ids:
            raise ValueError(
                f"Prompt row {row} is not the tokenization of its own text, so the extent of its {family} visual "
                "expansion cannot be read from the processor. Pass the processor's input_ids unchanged."
            )
        starts, ends = torch.tensor(encoded.offset_mapping, dtype=torch.long).reshape(-1, 2).unbind(-1)
        for match in pattern.finditer(text):
            begin, end = match.span()
            overlaps = (starts < end) & (ends > begin)
            empty_inside = (starts == ends) & (starts >= begin) & (starts < end)  # trimmed whitespace tokens
            mask[row] |= (overlaps | empty_inside).to(mask.device)
    return mask


def bind_processor(model, processor) -> None:
    """Remember `processor` as the one that builds `model`'s inputs (the expansion is read with it)."""
    model._pnd_processor = processor


def bound_processor(model, why: str):
    """The processor `bind_processor` bound to `model`; without one, a ValueError that starts with `why` (what the
    family's expansion needs the processor for) and says how to bind it."""
    processor = getattr(model, "_pnd_processor", None)
    if processor is None:
        raise ValueError(f"{why}, so pnd needs the processor: call pnd.attach(model, processor) with the processor that "
                         "builds the inputs.")
    return processor


@dataclass(frozen=True)
class TextExpandedArchitecture(Architecture):
    """A family whose expansion is found by `pattern(processor)` in the prompt's text (module docstring)."""

    pattern: Callable[[object], re.Pattern] | None = None
    # how to build a prompt whose expansion pnd can find (the end of the error for a placeholder outside every match)
    prompt_fix: str = ("Build the inputs with the processor bound by pnd.attach(model, processor), from a chat prompt "
                       "with {'type': 'video'} or {'type': 'image'} parts.")

    def expansion(self, model, input_ids: torch.Tensor) -> torch.Tensor:
        processor = bound_processor(model, f"{self.name}'s processor writes text around the visual tokens (frame "
                                           "labels, timestamps) that the token ids alone do not bound")
        mask = tokens_in_matches(processor.tokenizer, input_ids, self.pattern(processor), self.name)
        self.check_covered(model.config, input_ids, mask, f"every {self.name} expansion pnd recognizes",
                           self.prompt_fix)
        return mask

    def expansion_mask(self, config, input_ids: torch.Tensor) -> torch.Tensor:
        raise ValueError(f"{self.name}'s visual expansion is read with the processor: use expansion(model, input_ids) "
                         "after pnd.attach(model, processor).")
