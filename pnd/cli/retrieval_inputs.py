r"""What `pnd retrieve` reads besides the videos: the captions, each video's ground-truth caption, the first stage.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> (folder / "captions.jsonl").write_text('{"caption": "a red circle", "video": "a/clip.mp4"}\n')
    51
    >>> captions, videos = read_captions(folder / "captions.jsonl")
    >>> ground_truth([Path("/data/a/clip.mp4"), Path("/data/b/clip.mp4")], ["/data/a/clip.mp4", "/data/b/clip.mp4"],
    ...              captions, videos, folder / "captions.jsonl")
    [0, None]
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from .inputs import InputsError, read_text


def fail(message: str):
    raise SystemExit(f"pnd retrieve: {message}")


def read_captions(path: Path) -> tuple[list[str], list[str | None]]:
    """(captions, the "video" of each caption or None); a bad line is named by its number. UTF-8 (a byte order mark
    is dropped) as `pnd caption`'s list files and manifests."""
    if not path.is_file():
        fail(f"--captions {path}: no such file.")
    try:
        text = read_text(path)
    except InputsError as error:
        fail(f"--captions {error}")
    captions, videos = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if path.suffix.lower() == ".jsonl":
            try:
                row = json.loads(line)
                caption, video = row["caption"], row.get("video")
            except (ValueError, KeyError, TypeError, AttributeError) as error:
                fail(f"{path}, line {number} is not a JSON object with a 'caption' ({type(error).__name__}: {error}).")
        else:
            caption, video = line.strip(), None
        if not isinstance(caption, str) or not caption.strip():
            fail(f"{path}, line {number}: the caption {caption!r} is empty; give it words or remove the line.")
        if video is not None and (not isinstance(video, str) or not video.strip()):
            fail(f"{path}, line {number}: 'video' must be the path of the caption's video, got {video!r}; leave it out "
                 "for a caption of no listed video.")
        captions.append(caption)
        videos.append(video)
    if not captions:
        fail(f"--captions {path} holds no caption.")
    return captions, videos


def load_first_stage(path: str, shape: tuple[int, int]) -> torch.Tensor:
    """The first-stage (videos x captions) similarities, checked: 2-D, numbers, finite, one row per listed video."""
    import numpy as np

    try:
        matrix = torch.from_numpy(np.load(path)) if path.endswith(".npy") else torch.load(path)
    except Exception as error:  # numpy and torch raise many types for missing or foreign files
        fail(f"--first-stage {path} cannot be read ({type(error).__name__}: {error}); give a .npy or .pt file "
             "holding one (videos x captions) matrix.")
    if not torch.is_tensor(matrix) or matrix.dtype == torch.bool or matrix.is_complex() or matrix.dim() != 2:
        what = f"a {tuple(matrix.shape)} {matrix.dtype} tensor" if torch.is_tensor(matrix) else type(matrix).__name__
        fail(f"--first-stage {path} holds {what}; it must be a 2-D matrix of real numbers (videos x captions).")
    if tuple(matrix.shape) != shape:
        fail(f"--first-stage {path} is {tuple(matrix.shape)}; it must be {shape}: one row per listed video (in the "
             "order pnd lists them, broken ones included) and one column per caption.")
    matrix = matrix.float()
    if not torch.isfinite(matrix).all():
        fail(f"--first-stage {path} has {int((~torch.isfinite(matrix)).sum())} NaN or infinite value(s); fix them.")
    return matrix


def ground_truth(paths: list[Path], ids: list[str], captions: list[str], caption_videos: list,
                 manifest: Path) -> list[int | None]:
    """The index of each listed video's ground-truth caption: the first caption whose "video" names it (`ids`: the
    listed videos' resolved paths). A "video" is a path from the manifest's folder, or absolute; if no such file
    exists, the one listed video whose path ends with it; one that could mean two listed videos is refused."""
    by_id, by_name = {}, {}
    for i, path in enumerate(paths):
        by_id.setdefault(ids[i], []).append(i)
        by_name.setdefault(path.name, []).append(i)
    truth = [None] * len(paths)
    for c, video in enumerate(caption_videos):
        if video is None:
            continue
        path = manifest.parent / video  # a file there that is not listed: a caption of an unlisted video
        named = by_id.get(str(path.resolve()), [] if path.exists() else None)
        if named is None:
            normal = Path(os.path.normpath(video))
            named = [i for i in by_name.get(normal.name, []) if Path(os.path.abspath(paths[i])).parts[-len(normal.parts):]
                     == normal.parts]
            if len({ids[i] for i in named}) > 1:
                fail(f"{manifest}: the caption {captions[c]!r} names the video {video!r}, which could be any of "
                     f"{', '.join(str(paths[i]) for i in named)}; give its path from {manifest.parent} (or absolute).")
        for i in named:
            truth[i] = c if truth[i] is None else truth[i]
    return truth


