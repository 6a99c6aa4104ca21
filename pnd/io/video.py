"""Read videos for the models: files through PyAV (mp4, webm, avi, mkv, mov, gif) or folders of frames.

Frames are sampled uniformly over the whole video and returned as a (frames, 3, H, W) uint8 tensor, the
layout transformers' video processors take.

`write_video` saves frames losslessly (mp4: H.264 RGB, webm: VP9 lossless), for sample and test videos.

Example:
    >>> from pnd.io.video import read_video
    >>> read_video("clip.mp4", frames=8).shape  # doctest: +SKIP
    torch.Size([8, 3, 240, 320])
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..extras import MissingExtra, require

VIDEO_SUFFIXES = (".mp4", ".webm", ".avi", ".mkv", ".mov", ".gif", ".m4v")
FRAME_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")


class VideoReadError(OSError, ValueError):
    """A video that could not be read; the message names the file and the reason.

    It is an OSError (the file could not be read) and a ValueError (a bad input), so either catches it.
    """


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
        >>> from pnd.io.video import read_video, write_video
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
