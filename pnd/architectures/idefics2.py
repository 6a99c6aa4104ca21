"""Idefics2: its processor's own `__call__` writes the expansion (processing_idefics2.py), not
`get_text_with_replacements`, so it reports no replacements; pnd rewrites the prompt as it does and reports the spans
(`OWN_REPLACEMENTS`), and the family is then served like every `reported` one.

Per `<image>` the processor writes `<fake_token_around_image>` + `<image>` x image_seq_len + `<fake_token_around_image>`
(five such blocks with image splitting), merges adjacent fake tokens into one, then puts a space after every fake
token that a character other than whitespace or `<` follows. The expansion is each run of blocks and, where the
processor put it, that space: a word after an image (`<image>Describe`) becomes `<fake_token_around_image> Describe`,
and the token ` Describe` that the space merges into exists only through the insertion, so it counts
(docs/design.md §1) and the prior does not see it.

Example:
    >>> from types import SimpleNamespace
    >>> p = SimpleNamespace(fake_image_token="<f>", image_token="<i>", image_seq_len=2,
    ...                     image_processor=SimpleNamespace(do_image_splitting=False))
    >>> text, [spans] = written(p, ["A:<i>Hi"])
    >>> text[0], [text[0][a:b] for a, b in (r["new_span"] for r in spans)]
    ('A:<f><i><i><f> Hi', ['<f><i><i><f> '])
"""

from __future__ import annotations

import re

from .registry import Architecture, register
from .reported import OWN_REPLACEMENTS


def written(processor, texts: list[str]) -> tuple[list[str], list[list[dict]]]:
    """The prompts Idefics2's processor builds from `texts`, and per prompt the spans of what it wrote."""
    fake, image = processor.fake_image_token, processor.image_token
    block = f"{fake}{image * processor.image_seq_len}{fake}" * (5 if processor.image_processor.do_image_splitting else 1)
    runs = re.compile(rf"(?:{re.escape(fake)}(?:{re.escape(image)})+)+{re.escape(fake)}")
    spaced = re.compile(rf"{re.escape(fake)}(?=[^\s<])")  # where the processor puts a space
    built, spans = [], []
    for text in texts:
        merged = text.replace(image, block).replace(f"{fake}{fake}", fake)
        inserted = [m.end() for m in spaced.finditer(merged)]  # in `merged`; each shifts what follows by one
        shift = lambda at: sum(i <= at for i in inserted)  # noqa: E731
        spans.append([{"new_span": (m.start() + shift(m.start()), m.end() + shift(m.end()))}
                      for m in runs.finditer(merged)])
        built.append(spaced.sub(f"{fake} ", merged))
    return built, spans


def _reported(processor, args, kwargs) -> list[list[dict]]:
    """`OWN_REPLACEMENTS`' entry: the spans of a call `processor(images, text, ...)`."""
    text = kwargs.get("text", args[1] if len(args) > 1 else None)
    return written(processor, [text] if isinstance(text, str) else list(text or []))[1]


OWN_REPLACEMENTS["Idefics2Processor"] = _reported
IDEFICS2 = register(Architecture(name="Idefics2", model_types=("idefics2",), pixel_keys=("pixel_values",),
                                 reported=True))
