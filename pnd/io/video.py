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

import re
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
            frame images (read in name order, numbers by value: frame_2.png before frame_10.png).
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
        chosen = _folder_frames(path, frames) if path.is_dir() else _decode(path, frames)
    except (VideoReadError, MissingExtra):  # a missing PyAV is no broken video
        raise
    except Exception as error:  # PyAV/PIL raise many types for broken files
        raise VideoReadError(f"{path}: cannot be decoded ({type(error).__name__}: {error}).") from error
    if not chosen:
        raise VideoReadError(f"{path}: contains no frames.")
    sizes = sorted({image.shape[:2] for image in chosen})
    if len(sizes) > 1:
        raise VideoReadError(f"{path}: frames have different sizes {', '.join(f'{h}x{w}' for h, w in sizes)}; "
                             "resize them to one size.")
    return torch.from_numpy(np.stack(chosen)).permute(0, 3, 1, 2).contiguous()


def read_image(path: str | Path):
    """An image file as an RGB PIL image, 16-bit grayscale scaled to 0-255 (PIL's `convert("RGB")` clips it to white).

    Example:
        >>> import tempfile, numpy as np
        >>> from PIL import Image
        >>> path = tempfile.mkdtemp() + "/grey16.png"
        >>> Image.fromarray(np.full((2, 2), 30000, np.uint16)).save(path)
        >>> read_image(path).getpixel((0, 0))
        (117, 117, 117)
    """
    from PIL import Image

    with Image.open(path) as image:
        if image.mode.startswith("I"):  # "I;16", "I;16B", "I": 16-bit grayscale (PNG)
            values = np.asarray(image).astype(np.int64).clip(0, 65535)
            return Image.fromarray(((values * 255 + 32767) // 65535).astype(np.uint8)).convert("RGB")
        return image.convert("RGB")


def _decode(path: Path, frames: int) -> list[np.ndarray]:
    """The sampled frames, the only ones converted and kept. The frame count is the packets' (demuxed, not decoded),
    checked against the frames decoded; where they differ, the file is decoded again, knowing the count."""
    av = require("av", "video")

    with av.open(str(path)) as container:
        if not container.streams.video:
            raise VideoReadError(f"{path}: has no video stream.")
        counted = sum(packet.size > 0 for packet in container.demux(video=0))  # the flush packet is empty
    kept, total = _decoded(av, path, _sampled(counted, frames))
    if total != counted:
        kept, _ = _decoded(av, path, _sampled(total, frames))
    return [kept[i] for i in _sampled(total, frames)]


def _sampled(total: int, frames: int) -> list[int]:
    return uniform_indices(total, frames) if total else []


def _decoded(av, path: Path, wanted: list[int]) -> tuple[dict[int, np.ndarray], int]:
    """The frames at the indices `wanted`, by index, and how many frames the file holds."""
    wanted, kept, total = set(wanted), {}, 0
    with av.open(str(path)) as container:
        for total, frame in enumerate(container.decode(video=0), 1):
            if total - 1 in wanted:
                kept[total - 1] = frame.to_ndarray(format="rgb24")
    return kept, total


def _folder_frames(path: Path, frames: int) -> list[np.ndarray]:
    """The sampled frames of a frame folder, the only images read."""
    files = _frame_files(path)
    chosen = _sampled(len(files), frames)
    images = {i: np.asarray(read_image(files[i])) for i in set(chosen)}
    return [images[i] for i in chosen]


def _frame_files(path: Path) -> list[Path]:
    """A folder's frame images in name order; a VideoReadError if it holds video files too."""
    files, videos, _ = _contents(path)
    if files and videos:
        raise VideoReadError(f"{path}: holds both video files ({_names(videos)}) and frame images ({_names(files)}), "
                             "so it is neither one video of frames nor a folder of videos. Move the images into a "
                             "folder of their own (or out of it), or the videos.")
    return files


def _contents(path: Path) -> tuple[list[Path], list[Path], list[Path]]:
    """A folder's frame images, its video files and its subfolders, each in name order (`name_order`)."""
    children = sorted(path.iterdir(), key=name_order)
    folders = [p for p in children if p.is_dir()]
    return ([p for p in children if p.suffix.lower() in FRAME_SUFFIXES and p not in folders],
            [p for p in children if p.suffix.lower() in VIDEO_SUFFIXES and p not in folders], folders)


def name_order(path: Path) -> list:
    """A sort key that orders numbers in names by value: frame_2.png before frame_10.png (and 0002 before 0010).

    Example:
        >>> [p.name for p in sorted(map(Path, ["f10.png", "f9.png", "f1.png"]), key=name_order)]
        ['f1.png', 'f9.png', 'f10.png']
    """
    return [(int(part), part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def _names(paths: list[Path], shown: int = 3) -> str:
    names = [p.name for p in paths]
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


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


def list_videos(paths: list[str | Path]) -> list[Path]:
    """Expand folder trees into the video files and frame folders they hold (sorted); keep files as given.

    Args:
        paths: files and folders. A folder that holds images and no video file is one video (its frames); any
            other folder is searched, subfolders included. A folder that holds both is listed with its videos, so
            that none is left out unnoticed, and `read_video` refuses it, naming both kinds.

    Returns:
        The videos, as paths.
    """
    found = []
    for path in map(Path, paths):
        if not path.is_dir():
            found.append(path)
            continue
        images, videos, folders = _contents(path)
        if images:
            found.append(path)  # a frame folder, or (with videos) one that read_video refuses, naming both kinds
        if videos or not images:
            for child in sorted(videos + folders, key=name_order):
                found += list_videos([child]) if child in folders else [child]
    return found
