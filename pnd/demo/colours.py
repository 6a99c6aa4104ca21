"""The colour task: clips of one colour with a planted caption prior (the retrieval demo's data).

The captions say "a {colour} video"; in training one colour is far more frequent than the others (the
planted prior) and part of the clips are drowned in noise, so a model trained on them
(`pnd.demo.training.train_colour_model`) answers the frequent colour when the pixels are ambiguous:
exactly the bias prior normalization removes.

Example:
    >>> from pnd.demo.colours import COLOURS, make_clip
    >>> import torch
    >>> make_clip("red", torch.Generator().manual_seed(0), noise=0.5).shape
    torch.Size([4, 3, 32, 32])
"""

from __future__ import annotations

import torch

COLOURS = {"red": (220, 40, 40), "blue": (40, 60, 220), "green": (40, 200, 60), "yellow": (230, 220, 40)}
PLANTED = "red"


def make_clip(colour: str, generator: torch.Generator, noise: float, frames: int = 4, size: int = 32) -> torch.Tensor:
    """A (frames, 3, size, size) uint8 clip: the colour blended with uniform noise (noise in [0, 1])."""
    base = torch.tensor(COLOURS[colour], dtype=torch.float32).view(1, 3, 1, 1).expand(frames, 3, size, size)
    return with_noise(base, generator, noise)


def with_noise(clean: torch.Tensor, generator: torch.Generator, noise: float) -> torch.Tensor:
    """`clean` (float pixel values) blended with uniform noise in [0, 255] (noise in [0, 1]), as uint8."""
    random = torch.rand(clean.shape, generator=generator) * 255
    return (clean * (1 - noise) + random * noise).round().clamp(0, 255).to(torch.uint8)


def colour_caption(colour: str) -> str:
    return f"a {colour} video"


def planted_weights(names: list[str], planted: str, share: float) -> torch.Tensor:
    """Sampling weights: `share` for the planted name, the rest split evenly over the others."""
    return torch.tensor([share if n == planted else (1 - share) / (len(names) - 1) for n in names])
