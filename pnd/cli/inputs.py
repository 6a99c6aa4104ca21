"""What `pnd caption` captions: videos named on the command line, folder trees, list files and manifests.

- a video file or a frame folder: itself;
- a folder: every video file and frame folder in its tree (`pnd.io.video.list_videos`);
- a list file (`.txt`, `.lst`): one video path per line;
- a manifest (`.jsonl`, `.csv`, `.parquet`): one row per video, a `video` column, optional `prompt` (this
  row's instruction) and `id` (the record's key) columns.

Relative paths in list files and manifests are relative to the file's folder. Each video gets a stable
id, the key resume and merging use: the manifest's `id`, or else the resolved absolute path, so naming a
video twice (`a.mp4`, `./a.mp4`, its folder) or running from another folder finds the same record.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from pnd.cli.inputs import read_inputs
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = (root / "list.txt").write_text("a.mp4\\n./a.mp4\\n")
    >>> [item.video for item in read_inputs([root / "list.txt"])] == [str(root / "a.mp4")]
    True
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import torch

from ..extras import require
from ..io.video import VideoReadError, list_videos, read_video

MANIFESTS = (".jsonl", ".csv", ".parquet")
LISTS = (".txt", ".lst")
TEXT = "utf-8-sig"  # list files and manifests: UTF-8, with or without the byte order mark Excel writes


class Item(NamedTuple):
    """One video to caption: its key, its path as named, and its own prompt (None: the --prompt)."""

    id: str
    video: str
    prompt: str | None = None


class InputsError(ValueError):
    """A list file or manifest that cannot be used; the message names the file (and row) and the fix."""


def read_inputs(sources: list[str | Path]) -> list[Item]:
    """The videos `sources` name, each once (the first naming wins; repeats are reported on stderr).

    Raises:
        InputsError: for one id given to two different videos (ids key the records: one would be lost).
    """
    named: list[tuple[Item, str]] = []  # each item, and where it was named
    for source in map(Path, sources):
        if source.is_file() and source.suffix.lower() in MANIFESTS:
            named += _manifest(source)
        elif source.is_file() and source.suffix.lower() in LISTS:
            lines = [line.strip() for line in read_text(source).splitlines()]
            named += [(_item(source.parent / line), f"{source}, line {number}")
                      for number, line in enumerate(lines, 1) if line and not line.startswith("#")]
        else:
            named += [(_item(path), str(path)) for path in list_videos([source])]
    first: dict[str, tuple[Item, str]] = {}
    for item, where in named:
        earlier, earlier_where = first.setdefault(item.id, (item, where))
        if Path(earlier.video).resolve() != Path(item.video).resolve():
            raise InputsError(f"{earlier_where} and {where} both have the id {item.id!r} but name different videos "
                              f"({earlier.video} and {item.video}): an id keys one record, so one of them would be "
                              "lost. Give each video its own id.")
    if len(first) < len(named):
        print(f"pnd: {len(named) - len(first)} video(s) named more than once; each is captioned once", file=sys.stderr)
    return [item for item, _ in first.values()]


def read_text(path: Path) -> str:
    """The text of a list file, manifest or captions file: UTF-8, a leading byte order mark dropped, line ends as they
    are (`str.splitlines` and `csv` read them all).

    Raises:
        InputsError: for a file that is not UTF-8 (e.g. saved as Latin-1 or UTF-16), naming it and the fix.
    """
    try:
        return path.read_bytes().decode(TEXT)
    except UnicodeDecodeError as error:
        raise InputsError(f"{path} is not UTF-8 text (byte {error.object[error.start]:#04x} at offset {error.start}); "
                          "save it as UTF-8.") from error


def _item(path: Path, prompt: str | None = None, id: str | None = None) -> Item:
    return Item(str(path.resolve()) if id is None else str(id), str(path), prompt)


def _manifest(path: Path) -> list[tuple[Item, str]]:
    rows = _rows(path)
    items = []
    for number, row in enumerate(rows, 1):
        video, prompt = row.get("video"), row.get("prompt")
        if not isinstance(video, str) or not video:
            raise InputsError(f"{path}, row {number}: no 'video' (a path to the video); every row needs one.")
        if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
            raise InputsError(f"{path}, row {number}: 'prompt' must be a non-empty text, got {prompt!r}; leave it "
                              "out to use --prompt.")
        video_path = Path(video) if Path(video).is_absolute() else path.parent / video
        items.append((_item(video_path, prompt, row.get("id")), f"{path}, row {number}"))
    return items


def _rows(path: Path) -> list[dict]:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            return require("pyarrow.parquet", "parquet").read_table(path).to_pylist()
        except ImportError:
            raise
        except Exception as error:  # pyarrow raises several types for files that are not Parquet
            raise InputsError(f"{path} cannot be read as Parquet ({error}).") from error
    if suffix == ".csv":
        rows = csv.DictReader(io.StringIO(read_text(path), newline=""))
        return [{k: v or None for k, v in row.items()} for row in rows]
    rows = []
    for number, line in enumerate(read_text(path).splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError as error:
                raise InputsError(f"{path}, line {number} is not JSON ({error}).") from error
            if not isinstance(rows[-1], dict):
                raise InputsError(f"{path}, line {number} is not a JSON object with a 'video' field.")
    return rows


class VideoFrames(torch.utils.data.Dataset):
    """The frames of each input, read by DataLoader workers: (item, frames, None), or (item, None, the reason) for a
    video that cannot be read; `video_of(item)` is the item's video path. Frames are a uint8 numpy array: a worker
    sends it by value through the loader's pipe (`decoded_videos`)."""

    def __init__(self, items: list, frames: int, video_of: Callable):
        self.items, self.frames, self.video_of = items, frames, video_of

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        item = self.items[index]
        try:
            return item, read_video(self.video_of(item), self.frames).numpy(), None
        except VideoReadError as error:
            return item, None, str(error)


def decoded_videos(items: list, frames: int, video_of: Callable, batch_size: int, workers: int) -> Iterator[list]:
    """Batches of (item, frames as a tensor or None, the reason or None), in order, decoded by `workers` DataLoader
    processes, which start at once (while the model loads).

    Workers send numpy arrays, not tensors: a tensor would travel as a file descriptor through multiprocessing's
    resource sharer, whose thread prints a traceback when a signal stops the run while a worker sends one.
    """
    loader = torch.utils.data.DataLoader(VideoFrames(items, frames, video_of), batch_size=batch_size,
                                         num_workers=workers, collate_fn=list)
    return ([(item, None if clip is None else torch.from_numpy(clip), error) for item, clip, error in batch]
            for batch in iter(loader))
