"""Clips of a moving coloured square with planted colour and size priors: the demo model's task.

Captions read "a {size} {colour} square moves across". In training one colour (red) and one size
(small) are far more frequent than the others, and part of the clips are drowned in noise, so the
trained model answers "small red" when the pixels are ambiguous: the bias prior normalization removes.
The direction of motion is random and not named: in minutes of CPU training the tiny models did not
learn it (tried: 1500 steps; a 4-layer language model; Qwen2-VL's two-frame patches; motion trails).

Example:
    >>> import torch
    >>> from pnd.moving import make_moving_clip, caption, attributes
    >>> make_moving_clip("blue", "small", torch.Generator().manual_seed(0), noise=0.3).shape
    torch.Size([8, 3, 32, 32])
    >>> attributes(caption("blue", "small"))
    ('blue', 'small')
"""

from __future__ import annotations

import torch

from .synthetic import COLOURS, planted_weights, with_noise

SIZES = {"small": 6, "medium": 14, "big": 24}  # side of the square, pixels
MOTIONS = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}  # (dx, dy), image coordinates
PLANTED = ("red", "small")
FRAMES, FRAME_SIZE = 8, 32


def make_moving_clip(colour: str, size: str, generator: torch.Generator, noise: float, motion: str | None = None,
                     frames: int = FRAMES) -> torch.Tensor:
    """A (frames, 3, 32, 32) uint8 clip: a square crossing the frame, blended with uniform noise.

    The square travels from one edge to the opposite one along `motion` (random when None), at a random
    offset across it; frames are taken at the centres of equal time segments, as `pnd.video` samples.
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


def caption(colour: str, size: str) -> str:
    return f"a {size} {colour} square moves across"


def attributes(text: str) -> tuple[str | None, str | None]:
    """(colour, size) named in a caption, None for an attribute it does not name (first word wins)."""
    words = text.replace(".", " ").split()
    return next((w for w in words if w in COLOURS), None), next((w for w in words if w in SIZES), None)


def train_demo_model(steps: int = 1500, seed: int = 0, planted_share: float = 0.7, batch: int = 32,
                     progress: bool = False):
    """(model, processor): the bundled demo model, a tiny LLaVA-OneVision trained on moving squares.

    Colour and size are drawn independently, each the planted one with probability `planted_share`
    and uniform over the others otherwise; the noise level of each clip is uniform in [0, 1].
    """
    from .synthetic import train_captioner
    from .tiny import tiny_model

    torch.manual_seed(seed)
    model, processor = tiny_model("llava_onevision", seed=seed, sharpen=1.0)
    weights = {k: planted_weights(list(names), p, planted_share) for k, names, p in zip("cs", (COLOURS, SIZES), PLANTED)}

    def pick(kind: str, names, generator) -> list[str]:
        return [list(names)[i] for i in torch.multinomial(weights[kind], batch, replacement=True, generator=generator)]

    def draw(generator):
        colours, sizes = pick("c", COLOURS, generator), pick("s", SIZES, generator)
        clips = [make_moving_clip(c, s, generator, float(torch.rand((), generator=generator)))
                 for c, s in zip(colours, sizes)]
        return clips, [caption(c, s) for c, s in zip(colours, sizes)]

    generator = torch.Generator().manual_seed(seed)
    return train_captioner(model, processor, draw, steps, generator, progress=progress), processor
