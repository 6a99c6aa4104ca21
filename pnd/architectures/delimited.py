"""The visual expansion of families whose chat template wraps each image or video in a start and an end token.

The processor replaces the placeholder inside such a block by its whole expansion (for Qwen3-VL: per-frame
`<t seconds>` timestamps and inner start/end pairs around each frame's tokens), so the expansion is exactly
what lies strictly inside each outermost block.

Example:
    >>> import torch
    >>> inside_outermost_blocks(torch.tensor([[9, 1, 5, 1, 7, 2, 2, 9]]), start_id=1, end_id=2)
    tensor([[False, False,  True,  True,  True,  True, False, False]])
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .qwen2_vl import MRoPEArchitecture


def inside_outermost_blocks(input_ids: torch.Tensor, start_id: int, end_id: int) -> torch.Tensor:
    """Mask of the tokens strictly inside each outermost `start_id … end_id` block (blocks may nest).

    Raises:
        ValueError: when a row's start and end tokens do not pair up (an end before its start, or a block that
            never closes): the extent of that visual block cannot be determined.
    """
    starts, ends = input_ids == start_id, input_ids == end_id
    depth = starts.long().cumsum(-1) - ends.long().cumsum(-1)  # after each token
    unpaired = (depth < 0).any(-1) | (depth[:, -1] != 0)
    if unpaired.any():
        rows = unpaired.nonzero().flatten().tolist()
        raise ValueError(
            f"The visual start/end tokens (ids {start_id}/{end_id}) of prompt row(s) {rows} do not pair up, so the "
            "extent of a visual block cannot be determined. Build the prompt with the processor's chat template and "
            "do not truncate it."
        )
    return (depth > 0) & ~(starts & (depth == 1))



def blocks_with_ends(input_ids: torch.Tensor, start_id: int, end_id: int) -> torch.Tensor:
    """Mask of each outermost `start_id … end_id` block with its start and end tokens (`inside_outermost_blocks`).

    Example:
        >>> blocks_with_ends(torch.tensor([[9, 1, 5, 2, 9]]), start_id=1, end_id=2).int().tolist()
        [[0, 1, 1, 1, 0]]
    """
    return inside_outermost_blocks(input_ids, start_id, end_id) | (input_ids == start_id) | (input_ids == end_id)

@dataclass(frozen=True)
class DelimitedArchitecture(MRoPEArchitecture):
    """An M-RoPE family whose expansion is everything strictly inside the template's outermost delimiter pairs.

    `delimiters` names the config attributes of each (start, end) token-id pair.
    """

    delimiters: tuple[tuple[str, str], ...] = (("vision_start_token_id", "vision_end_token_id"),)
    hides: str = "everything inside the template's outermost start/end pairs (timestamps, inner delimiters)"

    def expansion_mask(self, config, input_ids: torch.Tensor) -> torch.Tensor:
        """Tokens inside an outermost delimited block; a placeholder outside every block is an error (its
        expansion's extent is unknown)."""
        inside = torch.zeros_like(input_ids, dtype=torch.bool)
        for start, end in self.delimiters:
            inside |= inside_outermost_blocks(input_ids, getattr(config, start), getattr(config, end))
        self.check_covered(config, input_ids, inside,
                           f"a {self.name} visual block ({', '.join(f'{a}…{b}' for a, b in self.delimiters)})",
                           "Build the prompt with the processor's chat template (a {'type': 'video'} or {'type': 'image'} "
                           "content part).")
        return inside
