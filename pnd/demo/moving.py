"""Clips of a moving coloured square with planted colour and size priors: the demo model's task.

Captions read "a {size} {colour} square moves across". In training one colour (red) and one size
(small) are far more frequent than the others, and part of the clips are drowned in noise, so the
trained model answers "small red" when the pixels are ambiguous: the bias prior normalization removes.
The direction of motion is random and not named: in minutes of CPU training the tiny models did not
learn it (tried: 1500 steps; a 4-layer language model; Qwen2-VL's two-frame patches; motion trails).

Example:
    >>> import torch
    >>> from pnd.demo.moving import make_moving_clip, moving_caption, attributes
    >>> make_moving_clip("blue", "small", torch.Generator().manual_seed(0), noise=0.3).shape
    torch.Size([8, 3, 32, 32])
    >>> attributes(moving_caption("blue", "small"))
    ('blue', 'small')
"""

from __future__ import annotations

import torch

from .colours import COLOURS, with_noise

SIZES = {"small": 6, "medium": 14, "big": 24}  # side of the square, pixels
MOTIONS = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}  # (dx, dy), image coordinates
PLANTED = ("red", "small")
FRAMES, FRAME_SIZE = 8, 32


def make_moving_clip(colour: str, size: str, generator: torch.Generator, noise: float, motion: str | None = None,
                     frames: int = FRAMES) -> torch.Tensor:
    """A (frames, 3, 32, 32) uint8 clip: a square crossing the frame, blended with uniform noise.

    The square travels from one edge to the opposite one along `motion` (random when None), at a random
    offset across it; frames are taken at the centres of equal time segments, as `pnd.io.video` samples.
    """
    side = SIZES[size]
    travel = FRAME_SIZE - side
    if motion is None:
        motion = list(MOTIONS)[int(torch.randint(0, len(MOTIONS), (), generator=generator))]
    dx, dy = MOTIONS[motion]
    across = int(torch.randint(0, travel + 1, (), generator=generator))
    clip = torch.zeros(frames, 3, FRAME_SIZE, FRAME_SIZE)
    for i in range(frames):
        along = round(travel * (i + 0.5) / frames)
        x = across if dx == 0 else (along if dx > 0 else travel - along)
        y = across if dy == 0 else (along if dy > 0 else travel - along)
        clip[i, :, y : y + side, x : x + side] = torch.tensor(COLOURS[colour], dtype=torch.float32).view(3, 1, 1)
    return with_noise(clip, generator, noise)


def moving_caption(colour: str, size: str) -> str:
    return f"a {size} {colour} square moves across"


def attributes(text: str) -> tuple[str | None, str | None]:
    """(colour, size) named in a caption, None for an attribute it does not name (first word wins)."""
    words = text.replace(".", " ").split()
    return next((w for w in words if w in COLOURS), None), next((w for w in words if w in SIZES), None)
