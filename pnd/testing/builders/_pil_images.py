"""For tiny processors whose transformers class takes PIL images (or numpy, paths, URLs) but not the suite's tensors.

Example:
    >>> import torch
    >>> type(pil_images([[torch.zeros(3, 4, 4, dtype=torch.uint8)]])[0][0]).__name__
    'Image'
"""

from __future__ import annotations

import functools

import torch


def pil_images(images):
    """`images` (nested lists) with each (3, H, W) uint8 tensor made a PIL image."""
    import PIL.Image

    if torch.is_tensor(images):
        return PIL.Image.fromarray(images.permute(1, 2, 0).numpy())
    return [pil_images(i) for i in images] if isinstance(images, (list, tuple)) else images


@functools.cache
def taking_tensors(cls: type) -> type:
    """A subclass of processor class `cls`, of the same name (saved as `cls`), that turns tensor images into PIL ones."""

    def __call__(self, images=None, text=None, **kwargs):
        return cls.__call__(self, images=pil_images(images), text=text, **kwargs)

    return type(cls.__name__, (cls,), {"__call__": __call__})
