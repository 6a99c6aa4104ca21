"""Fuyu: image patches projected into the prompt at `|SPEAKER|` tokens, one row of patches closed by `|NEWLINE|`.

Fuyu's processor writes the image in front of the prompt: per row of patches, one `|SPEAKER|` per patch and a
`|NEWLINE|` (the row breaks carry the image's shape), then the `<s>` the text starts with. The visual span is the
`|SPEAKER|` and `|NEWLINE|` tokens; the `<s>` stays in the prior (a prompt without an image starts with it too),
although the processor reports it as part of its replacement. The newline token's id is not in the config, so the rule
reads it from the prompt: the token right after each run of `|SPEAKER|` tokens.

Fuyu's processor adds the beginning-of-answer token `<0x04>` after the prompt and places the image itself (the chat
template writes no image placeholder); it takes one image per prompt. It returns the patches as `image_patches` unless
called with `return_legacy_image_output=False` (`pnd.io.prompts.pixel_values_kwargs`): pnd reads `pixel_values` only.

Example:
    >>> import torch
    >>> speakers_and_row_ends(torch.tensor([[0, 7, 7, 8, 7, 7, 8, 1, 5]]), 7).int().tolist()
    [[0, 1, 1, 1, 1, 1, 1, 0, 0]]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .registry import Architecture, register


def speakers_and_row_ends(input_ids: torch.Tensor, image_token_id: int) -> torch.Tensor:
    """Mask of the `image_token_id` tokens and of the token right after each run of them (its row end)."""
    speakers = input_ids == image_token_id
    after = torch.zeros_like(speakers)
    after[:, 1:] = speakers[:, :-1] & ~speakers[:, 1:]
    return speakers | after


@dataclass(frozen=True)
class FuyuArchitecture(Architecture):
    hides: str = "the `|SPEAKER|` patch tokens and the `|NEWLINE|` closing each row (not the `<s>` after them)"

    def expansion_mask(self, config, input_ids: torch.Tensor) -> torch.Tensor:
        """The patch tokens and their row ends; a row end that is not one token id is an error."""
        mask = speakers_and_row_ends(input_ids, config.image_token_id)
        ends = input_ids[mask & (input_ids != config.image_token_id)]
        if ends.unique().numel() > 1:
            raise ValueError(f"The {self.name} image rows of these prompts end in different tokens "
                             f"({sorted(ends.unique().tolist())}), not in one `|NEWLINE|`: they were not built by "
                             "FuyuProcessor. Build the prompt with the processor (it writes the image's tokens).")
        return mask


FUYU = register(FuyuArchitecture(name="Fuyu", model_types=("fuyu",), pixel_keys=("pixel_values",)))
