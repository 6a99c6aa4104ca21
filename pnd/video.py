"""Read videos for the models: files through PyAV (mp4, webm, avi, mkv, mov, gif) or folders of frames.

Frames are sampled uniformly over the whole video and returned as a (frames, 3, H, W) uint8 tensor, the
layout transformers' video processors take.

`write_video` saves frames losslessly (mp4: H.264 RGB, webm: VP9 lossless), for sample and test videos.

Example:
    >>> from pnd.video import read_video
    >>> read_video("clip.mp4", frames=8).shape  # doctest: +SKIP
    torch.Size([8, 3, 240, 320])
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .extras import MissingExtra, require

VIDEO_SUFFIXES = (".mp4", ".webm", ".avi", ".mkv", ".mov", ".gif", ".m4v")
FRAME_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")


class VideoReadError(OSError, ValueError):
    """A video that could not be read; the message names the file and the reason.

    It is an OSError (the file could not be read) and a ValueError (a bad input), so either catches it.
    """


def check_frames(video, where: str | None = None) -> None:
    """Raise a ValueError naming the fix for in-memory frames pnd cannot caption or score as given.

    Accepted: a (frames, 3, H, W) tensor or array (channels last too) of uint8 0-255 or floats 0-255, or a list of
    frames. Refused: no frame; another number of dimensions (a batch of videos is a list of them); NaN or inf; floats
    in [0, 1] (transformers' processors would rescale them once more, to a black video) or outside [0, 255] (already
    normalized frames). `where` names the video in the message (e.g. "videos[2]").

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
                         "(pnd.video.read_video(path, frames=8) samples frames from a file).")
    if not isinstance(video, (torch.Tensor, np.ndarray)):
        return
    values = torch.as_tensor(video)
    if values.ndim != 4:
        raise ValueError(f"{name} has shape {tuple(values.shape)}: pass one video as a (frames, 3, H, W) tensor (a "
                         "batch of videos is a list of such tensors).")
    if not values.is_floating_point():
        return
    if not torch.isfinite(values).all():
        raise ValueError(f"{name} holds non-finite values (NaN or inf): pass frames of pixel values in 0-255.")
    low, high = float(values.min()), float(values.max())
    if low < 0 or high > 255:
        raise ValueError(f"{name} holds values from {low:g} to {high:g}: pass pixel values in 0-255 (uint8, or float), "
                         "before any normalization (the processor normalizes them).")
    if 0 < high <= 1:
        raise ValueError(f"{name} holds floats in [0, 1]: pnd takes pixel values in 0-255 (the processor rescales them "
                         "by 1/255): pass (video * 255).round().to(torch.uint8).")


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


def uniform_indices(total: int, frames: int) -> list[int]:
    """`frames` indices spread evenly over `total` frames (centres of equal segments)."""
    return [min(total - 1, int((i + 0.5) * total / frames)) for i in range(frames)]


def read_video(path: str | Path, frames: int = 8) -> torch.Tensor:
    """Uniformly sampled frames of a video file or of a folder of images.

    Args:
        path: a video file (mp4, webm, avi, mkv, mov, gif, m4v; read with PyAV, `pnd[video]`) or a folder of
            frame images (read in name order).
        frames: how many frames to sample, uniformly over the whole video.

    Returns:
        uint8 tensor (frames, 3, H, W), the layout transformers' video processors take.

    Raises:
        VideoReadError: the file is missing, unreadable or has no frames (the message names it).

    Example:
        >>> import tempfile, torch
        >>> from pnd.video import read_video, write_video
        >>> path = tempfile.mkdtemp() + "/clip.mp4"
        >>> write_video(path, torch.zeros(4, 3, 16, 16, dtype=torch.uint8))
        >>> read_video(path, frames=2).shape
        torch.Size([2, 3, 16, 16])
    """
    path = Path(path)
    if frames < 1:
        raise ValueError(f"frames must be >= 1, got {frames}.")
    if not path.exists():
        raise VideoReadError(f"{path}: no such file or folder.")
    try:
        images = _frame_folder(path) if path.is_dir() else _decode(path)
    except (VideoReadError, MissingExtra):  # a missing PyAV is no broken video
        raise
    except Exception as error:  # PyAV/PIL raise many types for broken files
        raise VideoReadError(f"{path}: cannot be decoded ({type(error).__name__}: {error}).") from error
    if not images:
        raise VideoReadError(f"{path}: contains no frames.")
    chosen = [images[i] for i in uniform_indices(len(images), frames)]
    sizes = sorted({image.shape[:2] for image in chosen})
    if len(sizes) > 1:
        raise VideoReadError(f"{path}: frames have different sizes {', '.join(f'{h}x{w}' for h, w in sizes)}; "
                             "resize them to one size.")
    return torch.from_numpy(np.stack(chosen)).permute(0, 3, 1, 2).contiguous()


def _decode(path: Path) -> list[np.ndarray]:
    av = require("av", "video")

    with av.open(str(path)) as container:
        if not container.streams.video:
            raise VideoReadError(f"{path}: has no video stream.")
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


def _frame_folder(path: Path) -> list[np.ndarray]:
    from PIL import Image

    files = sorted(p for p in path.iterdir() if p.suffix.lower() in FRAME_SUFFIXES)
    return [np.asarray(Image.open(f).convert("RGB")) for f in files]


_LOSSLESS = {".mp4": ("libx264rgb", "rgb24", {"crf": "0"}), ".webm": ("libvpx-vp9", "gbrp", {"lossless": "1"})}


def write_video(path: str | Path, frames: torch.Tensor, fps: int = 8) -> None:
    """Save frames losslessly as .mp4 (H.264 RGB) or .webm (VP9 lossless) with PyAV; `read_video` gives them back.

    Args:
        path: where to write; the suffix picks the format.
        frames: uint8 (frames, 3, H, W).
        fps: frames per second stored in the file.
    """
    av = require("av", "video")

    path = Path(path)
    if path.suffix not in _LOSSLESS:
        raise ValueError(f"{path}: write_video writes {' or '.join(_LOSSLESS)} files; pick one of those suffixes.")
    codec, pix_fmt, options = _LOSSLESS[path.suffix]
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=fps, options=options)
        stream.height, stream.width, stream.pix_fmt = frames.shape[2], frames.shape[3], pix_fmt
        for image in frames.permute(0, 2, 3, 1).contiguous().numpy():
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode())


def _is_frame_folder(path: Path) -> bool:
    return path.is_dir() and any(p.suffix.lower() in FRAME_SUFFIXES for p in path.iterdir())


def list_videos(paths: list[str | Path]) -> list[Path]:
    """Expand folder trees into the video files and frame folders they hold (sorted); keep files as given.

    Args:
        paths: files and folders. A folder that holds images is one video (its frames); any other folder is
            searched, subfolders included.

    Returns:
        The videos, as paths.
    """
    found = []
    for path in map(Path, paths):
        if path.is_dir() and not _is_frame_folder(path):
            for child in sorted(path.iterdir()):
                if child.is_dir():
                    found += list_videos([child])
                elif child.suffix.lower() in VIDEO_SUFFIXES:
                    found.append(child)
        else:
            found.append(path)
    return found
