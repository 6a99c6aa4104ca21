"""LFM2-VL (`lfm2_vl`): images only (transformers 5.23 has no LFM2-VL video processor). The chat template writes
`<image>`; the processor replaces it with `<|image_start|>`, then for an image split into tiles each tile's
`<|img_row_R_col_C|>` + `<image>` tokens and `<|img_thumbnail|>` + the thumbnail's `<image>` tokens, or for a small
image its `<image>` tokens alone, then `<|image_end|>` (`Lfm2VlProcessor._build_image_tokens`). With
`use_image_special_tokens=False` it inserts the `<image>` tokens alone.

The prior hides each `<|image_start|>…<|image_end|>` block with its ends (the processor wrote both: the tile grid it
spells out is visual) and every `<image>` token outside a block. The config holds the image token's id only, so the
delimiters' ids are read from the tokenizer of the processor bound by `pnd.attach(model, processor)`.

The language model (LFM2) is hybrid: short causal convolutions (`conv` layers, whose cache holds their last inputs)
between full-attention layers. Its prior runs the kept tokens alone through every layer, as Qwen3.5's does
(`prior.masked_prefill`): a convolution must not span the removed block.

Example:
    >>> import torch
    >>> from pnd.testing import tiny_model
    >>> model, processor = tiny_model("lfm2_vl")
    >>> start, image, end = processor.tokenizer.convert_tokens_to_ids(["<|image_start|>", "<image>", "<|image_end|>"])
    >>> LFM2_VL.expansion(model, torch.tensor([[9, start, 8, image, end, 9, image, 9]])).int().tolist()
    [[0, 1, 1, 1, 1, 0, 1, 0]]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .delimited import blocks_with_ends
from .registry import Architecture, register
from .reported import bound_processor


def delimiter_ids(processor) -> tuple[int, int]:
    """The ids of the `<|image_start|>` and `<|image_end|>` tokens that LFM2-VL's processor `processor` writes.

    Raises:
        ValueError: for a processor without them (another family's, or a tokenizer that lacks the tokens).
    """
    tokens = [getattr(processor, f"image_{end}_token", None) for end in ("start", "end")]
    vocabulary = processor.tokenizer.get_vocab()
    if any(token not in vocabulary for token in tokens):
        raise ValueError(f"The processor bound to this LFM2-VL model ({type(processor).__name__}) does not write the "
                         "<|image_start|>/<|image_end|> tokens of its tokenizer: bind the model's own processor, "
                         "pnd.attach(model, processor).")
    return vocabulary[tokens[0]], vocabulary[tokens[1]]


@dataclass(frozen=True)
class Lfm2VlArchitecture(Architecture):
    """LFM2-VL's expansion: `<|image_start|>…<|image_end|>` blocks with their ends, and `<image>` tokens outside them."""

    def expansion(self, model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The image blocks of `input_ids`, delimiters read with the processor bound to `model`.

        Raises:
            ValueError: without a bound processor (or another family's), or when a row's start and end tokens do not
                pair up (a truncated prompt: the block's extent is unknown).
        """
        processor = bound_processor(model, "LFM2-VL's image delimiters (<|image_start|>, <|image_end|>) are tokenizer "
                                           "tokens whose ids the model's config does not hold")
        start, end = delimiter_ids(processor)
        blocks = blocks_with_ends(input_ids, start, end)
        return blocks | self.placeholder_mask(model.config, input_ids)  # use_image_special_tokens=False: no block

    def expansion_mask(self, config, input_ids: torch.Tensor) -> torch.Tensor:
        raise ValueError("LFM2-VL's visual expansion is read with the processor: use expansion(model, input_ids) after "
                         "pnd.attach(model, processor).")


LFM2_VL = register(
    Lfm2VlArchitecture(
        name="LFM2-VL",
        model_types=("lfm2_vl",),
        hides="each <|image_start|>…<|image_end|> block with its ends (tile markers, thumbnail)",
        pixel_keys=("pixel_values",),
    )
)
