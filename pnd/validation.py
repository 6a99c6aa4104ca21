"""Checks of what users pass to pnd, shared by decoding, scoring and the command line: each raises a ValueError that
names the problem and the fix.

Example:
    >>> check_alpha_and_prior(1.5, "masked")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: alpha must be a finite number in [0, 1], got 1.5. ...
"""

from __future__ import annotations

import math
import numbers
import sys

import numpy as np
import torch

PRIOR_MODES = ("masked", "text", "blank")


def real_number(value) -> float | None:
    """`value` as a float if it is a real number (Python, numpy, or a 0-dim torch tensor), else None (bools too).

    Example:
        >>> import numpy as np
        >>> real_number(np.float32(0.5)), real_number(torch.tensor(1)), real_number(True), real_number("0.5")
        (0.5, 1.0, None, None)
    """
    if torch.is_tensor(value):
        if value.ndim != 0 or value.dtype == torch.bool or value.is_complex():
            return None
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return None
    return float(value)


def check_alpha_and_prior(alpha, prior: str, modes: tuple[str, ...] = PRIOR_MODES) -> None:
    """Raise a ValueError naming the problem if alpha is not a finite number in [0, 1] or prior not in modes."""
    value = real_number(alpha)
    if value is None or not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"alpha must be a finite number in [0, 1], got {alpha!r}. Typical values: 0.5 for "
                         "generation, 0.8-1.0 for retrieval.")
    if prior not in modes:
        raise ValueError(f"prior must be one of {', '.join(map(repr, modes))}, got {prior!r}.")


def check_frames(video, where: str | None = None) -> None:
    """Raise a ValueError naming the fix for in-memory frames pnd cannot caption or score as given.

    Accepted: a (frames, 3, H, W) tensor or array (channels last too) of uint8 0-255 or floats 0-255, or a list of
    such frames (tensors, arrays or PIL images) of one shape. Refused: no frame; another number of dimensions (a batch
    of videos is a list of them); frames of different shapes; booleans; integers outside 0-255 (16-bit frames); NaN
    or inf; floats in [0, 1] (transformers' processors would rescale them once more, to a black video) or outside
    [0, 255] (already normalized frames). `where` names the video in the message (e.g. "videos[2]").

    Example:
        >>> check_frames(torch.zeros(0, 3, 32, 32))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: video has 0 frames: pass at least one frame, ...
        >>> check_frames(torch.rand(4, 3, 32, 32))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: video holds floats in [0, 1]...
    """
    name = f"{where}: video" if where else "video"
    frames = video.shape[0] if getattr(video, "ndim", 0) > 0 else len(video) if isinstance(video, (list, tuple)) else 1
    if frames == 0:
        raise ValueError(f"{name} has 0 frames: pass at least one frame, as a (frames, 3, H, W) tensor with frames >= 1 "
                         "(pnd.io.video.read_video(path, frames=8) samples frames from a file).")
    if isinstance(video, (list, tuple)):
        video = _stacked(video, name)
    if not isinstance(video, (torch.Tensor, np.ndarray)):
        return
    if video.ndim != 4:
        raise ValueError(f"{name} has shape {tuple(video.shape)}: pass one video as a (frames, 3, H, W) tensor (a "
                         "batch of videos is a list of such tensors).")
    _check_values(video, name, "video")


def check_image(image, where: str | None = None) -> None:
    """`check_frames`'s rules for one image: a PIL image, or a (3, H, W) or (H, W, 3) tensor or array.

    Example:
        >>> check_image(torch.rand(3, 32, 32))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: image holds floats in [0, 1]...
    """
    name = f"{where}: image" if where else "image"
    if _is_pil(image):
        image = np.asarray(image)
    elif isinstance(image, (torch.Tensor, np.ndarray)) and image.ndim != 3:
        raise ValueError(f"{name} has shape {tuple(image.shape)}: pass one image as a (3, H, W) tensor or an "
                         "(H, W, 3) array (or a PIL image).")
    if isinstance(image, (torch.Tensor, np.ndarray)):
        _check_values(image, name, "image")


def _is_pil(value) -> bool:
    image = sys.modules.get("PIL.Image")  # not imported: no PIL image exists
    return image is not None and isinstance(value, image.Image)


def _stacked(frames: list | tuple, name: str):
    """A list of frames (tensors, arrays or PIL images) as one tensor, refused if their shapes differ; unchanged
    if one frame is something else."""
    arrays = [np.asarray(frame) if _is_pil(frame) else frame for frame in frames]
    if not all(isinstance(array, (torch.Tensor, np.ndarray)) for array in arrays):
        return frames
    shapes = sorted({tuple(array.shape) for array in arrays})
    if len(shapes) > 1:
        raise ValueError(f"{name} has frames of different shapes {', '.join('x'.join(map(str, s)) for s in shapes)}: "
                         "give every frame of a video the same size (resize them, e.g. PIL's image.resize((W, H))).")
    return torch.stack([_tensor(array) for array in arrays])


def _tensor(values) -> torch.Tensor:
    if torch.is_tensor(values):
        return values
    # torch takes native byte order and non-negative strides only, and warns on read-only arrays (a PIL image's)
    return torch.from_numpy(np.require(values, values.dtype.newbyteorder("="), ("W", "C")))


def _check_values(values, name: str, what: str) -> None:
    """The pixel values of `what` (a video or an image: a tensor or array): uint8, or integers or floats in 0-255."""
    values = _tensor(values)
    if values.dtype == torch.bool:
        raise ValueError(f"{name} holds booleans: pass pixel values in 0-255, uint8 (mask.to(torch.uint8) * 255) or "
                         "float.")
    if values.is_complex() or values.dtype == torch.uint8 or values.numel() == 0:
        return
    if not values.is_floating_point():
        wide = values.to(torch.int64)  # min and max of uint16/uint32 are not implemented
        low, high = int(wide.min()), int(wide.max())
        if low < 0 or high > 255:
            raise ValueError(f"{name} holds {str(values.dtype).removeprefix('torch.')} values from {low} to {high}: "
                             "pass pixel values in 0-255, uint8 or float; 16-bit frames (0-65535) scaled, "
                             f"({what}.double() * 255 / 65535).round().to(torch.uint8).")
        return
    if not torch.isfinite(values).all():
        raise ValueError(f"{name} holds non-finite values (NaN or inf): pass frames of pixel values in 0-255.")
    low, high = float(values.min()), float(values.max())
    if low < 0 or high > 255:
        raise ValueError(f"{name} holds values from {low:g} to {high:g}: pass pixel values in 0-255 (uint8, or float), "
                         "before any normalization (the processor normalizes them).")
    if 0 < high <= 1:
        raise ValueError(f"{name} holds floats in [0, 1]: pnd takes pixel values in 0-255 (the processor rescales them "
                         f"by 1/255): pass ({what} * 255).round().to(torch.uint8).")


def check_pixels(inputs: dict, keys, where: str) -> None:
    """A ValueError naming the input if one of the pixel tensors `keys` of `inputs` holds NaN or inf (a result
    computed next to it would be NaN, and nothing computed from it may be kept).

    Example:
        >>> check_pixels({"pixel_values": torch.tensor([float("nan")])}, ["pixel_values"], "generate")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: generate: pixel_values holds non-finite values (NaN or inf); check the video or image it was ...
    """
    for key in keys:
        value = inputs.get(key)
        if torch.is_tensor(value) and value.is_floating_point() and not torch.isfinite(value).all():
            raise ValueError(f"{where}: {key} holds non-finite values (NaN or inf); check the video or image it was "
                             "built from.")


def check_conditioned_logits(logits: torch.Tensor, where: str) -> None:
    """A ValueError if the conditioned pass's `logits` hold NaN or +inf although its pixels were finite: the visual
    features overflowed, and with them every token of the row (attention's 0 x inf is NaN, the text before the video
    included, which the prior reuses). Nothing computed from that pass may be decoded or kept.

    Example:
        >>> check_conditioned_logits(torch.tensor([[float("nan"), 0.0]]), "generate")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: generate: the model's forward over the prompt and its visual inputs gave NaN or inf logits ...
    """
    if (logits.isnan() | logits.isposinf()).any():
        raise ValueError(f"{where}: the model's forward over the prompt and its visual inputs gave NaN or inf logits "
                         "from finite pixel values: its visual features overflowed (a vision tower in float16 often "
                         "does). Load the model in bfloat16 or float32. pnd decodes and keeps nothing of such a pass.")


def checked_plausibility(plausibility) -> float | None:
    """The plausibility cut beta (VCD's adaptive plausibility constraint) as a float, or None for no cut; anything
    else but a number in (0, 1] is refused.

    Example:
        >>> checked_plausibility(0.1), checked_plausibility(None)
        (0.1, None)
    """
    beta = real_number(plausibility)
    if plausibility is not None and (beta is None or not 0 < beta <= 1):
        raise ValueError(f"plausibility must be None or a number in (0, 1], got {plausibility!r}.")
    return beta


REFUSED_PRIOR = "PriorNormalized (alpha > 0)"


def refused_name(normalizer) -> str:
    """The method a refusal names: the class the user passed (PriorNormalized: at an alpha that runs the prior)."""
    method = type(normalizer).__name__
    return REFUSED_PRIOR if method == "PriorNormalized" else method
