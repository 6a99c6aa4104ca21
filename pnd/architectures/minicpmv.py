"""MiniCPM-V 4.6 and 4.7 (`minicpmv4_6`, `minicpmv4_7`): the language model is Qwen3.5's (hybrid: Gated-DeltaNet
layers around full attention). The processor replaces the template's `<|image_pad|>` with an image id + the whole
image + its slices, `<image_id>N</image_id><image>` + placeholders + `</image>` + per slice `<slice>` + placeholders +
`</slice>`, slice rows joined by a newline (`MiniCPMV4_6Processor.replace_image_token`), and `<|video_pad|>` with the
video's `<image_id>N</image_id>` (4.6 only) + each frame's such block (`replace_video_token`).

The prior hides all of that: every token inside an `<image_id>…</image_id>`, `<image>…</image>` or
`<slice>…</slice>` block, the block's ends, and the newline between a `</slice>` and the next `<slice>` (a slice row
ends; a visual never starts with `<slice>`, so such a gap is always inside one image or frame). The blocks are
special tokens, so the expansion is read from the token ids, exactly; their ids are the processor's (4.6's config names
only the placeholders, 4.7's not the image id's), so pnd needs `pnd.attach(model, processor)`. A placeholder outside
every block, or block ends that do not pair up, is an error. The prior runs the kept tokens alone through every layer,
as for Qwen3.5 (docs/design.md, "The prior"); 4.7 lays its visual tokens out on a canvas (M-RoPE), and the prior keeps
each text token at its position id of the conditioned pass.

Example:
    >>> import torch
    >>> ids = torch.tensor([[9, 1, 8, 2, 3, 7, 4, 5, 7, 6, 0, 5, 7, 6, 0, 9]])
    >>> expansion_tokens(ids, image_id=(1, 2), image=(3, 4), slices=(5, 6)).int().tolist()
    [[0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0]]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .delimited import blocks_with_ends
from .qwen2_vl import MRoPEArchitecture
from .registry import Architecture, register
from .reported import bound_processor


def _nearest(blocks: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """Per token, the id of the last token of `blocks` at or before it (-1 where none)."""
    index = torch.arange(input_ids.shape[-1], device=input_ids.device).expand_as(input_ids)
    last = torch.where(blocks, index, -1).cummax(-1).values
    return torch.where(last >= 0, input_ids.gather(-1, last.clamp(min=0)), -1)


def expansion_tokens(input_ids: torch.Tensor, image_id: tuple[int, int], image: tuple[int, int],
                     slices: tuple[int, int]) -> torch.Tensor:
    """Mask of the `(start, end)` blocks of `input_ids`, ends included, and of the tokens between a slice's end and the
    next slice's start.

    Raises:
        ValueError: when a row's start and end tokens do not pair up (`blocks_with_ends`).
    """
    blocks = torch.zeros_like(input_ids, dtype=torch.bool)
    for start, end in (image_id, image, slices):
        blocks |= blocks_with_ends(input_ids, start, end)
    after_slice = _nearest(blocks, input_ids) == slices[1]
    before_slice = _nearest(blocks.flip(-1), input_ids.flip(-1)).flip(-1) == slices[0]
    return blocks | after_slice & before_slice


@dataclass(frozen=True)
class MiniCPMVArchitecture(Architecture):
    """MiniCPM-V's expansion: `expansion_tokens` with the block ids of the bound processor's tokenizer."""

    def expansion(self, model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        processor = bound_processor(model, f"The ids of {self.name}'s <image_id>, <image> and <slice> delimiter tokens "
                                           "are the processor's, not the model config's")
        ids = processor.tokenizer.convert_tokens_to_ids
        image_id, image, slices = ((ids(getattr(processor, f"{name}_start_token")),
                                    ids(getattr(processor, f"{name}_end_token")))
                                   for name in ("image_id", "image", "slice"))
        mask = expansion_tokens(input_ids, image_id, image, slices)
        self.check_covered(model.config, input_ids, mask, f"a {self.name} <image>…</image> or <slice>…</slice> "
                           "block",
                           "Build the inputs with the processor bound by pnd.attach(model, processor), from a chat "
                           "prompt with {'type': 'video'} or {'type': 'image'} parts, and do not truncate them.")
        return mask

    def expansion_mask(self, config, input_ids: torch.Tensor) -> torch.Tensor:
        raise ValueError(f"{self.name}'s visual expansion is read with the processor's delimiter tokens: use "
                         "expansion(model, input_ids) after pnd.attach(model, processor).")


@dataclass(frozen=True)
class CanvasMiniCPMVArchitecture(MiniCPMVArchitecture, MRoPEArchitecture):
    """MiniCPM-V 4.7: the same expansion, canvas M-RoPE positions from the processor's `mm_token_type_ids`."""


MINICPMV4_6 = register(
    MiniCPMVArchitecture(
        name="MiniCPM-V 4.6",
        model_types=("minicpmv4_6",),
        hides="image id, <image>…</image> and <slice>…</slice> blocks with their ends",
        pixel_keys=("pixel_values", "pixel_values_videos"),
    )
)
MINICPMV4_7 = register(
    CanvasMiniCPMVArchitecture(
        name="MiniCPM-V 4.7",
        model_types=("minicpmv4_7",),
        hides="image id, <image>…</image> and <slice>…</slice> blocks with their ends",
        pixel_keys=("pixel_values", "pixel_values_videos"),
        token_inputs=("mm_token_type_ids",),
    )
)
