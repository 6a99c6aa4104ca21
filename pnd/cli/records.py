"""Caption records on disk: one part file per rank, locked while written, merged into --out exactly once.

A record is a JSON object keyed by "id": the video's resolved absolute path (symlinks followed), or the
`id` column of a manifest. Each rank appends its records to its own part file next to --out,
`{out}.part-{rank:05d}` (JSON lines, flushed per record), holding an exclusive `fcntl` lock on it, so a
second run on the same --out is refused instead of captioning everything again; a part left empty (a run
refused or stopped before its first record) is removed when closed. `merge` folds --out and every part into
--out (JSON lines, or Parquet when --out ends in .parquet, in any case), each id once (the first seen),
writes it atomically (a temporary file renamed over --out) and removes the parts.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from pnd.cli.records import PartWriter, merge, read_records
    >>> out = Path(tempfile.mkdtemp()) / "captions.jsonl"
    >>> with PartWriter(out, rank=0) as part:
    ...     part.write({"id": "/v/a.mp4", "video": "a.mp4", "caption": "a cat"})
    >>> merge(out), [r["caption"] for r in read_records(out)]
    (1, ['a cat'])
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import sys
from pathlib import Path
from typing import NamedTuple

from ..extras import require

PART = ".part-"


class RecordsError(ValueError):
    """A file that should hold caption records does not; the message names it and says what to do."""


class Kind(NamedTuple):
    """What a records file holds: its records' name in messages and the fields every record has."""

    name: str
    fields: tuple[str, ...]


CAPTIONS = Kind("caption", ("video", "caption"))
ROWS = "rows.jsonl"  # in --out: one record per video, {"id", "video", "run", "normalized", ...}: what resume skips
ROW = Kind("score row", ("id", "run", "normalized"))


def file_in_the_way(out: Path) -> str | None:
    """Why `out` cannot be created under its parents, or None: a parent that is a file, not a folder.

    Example:
        >>> import tempfile
        >>> afile = Path(tempfile.mkstemp()[1])
        >>> file_in_the_way(afile / "x.jsonl") == f"{afile} is a file, not a folder; pick another --out."
        True
    """
    blocking = next((p for p in out.parents if p.exists() and not p.is_dir()), None)
    return None if blocking is None else f"{blocking} is a file, not a folder; pick another --out."


def is_parquet(path: Path) -> bool:
    """Whether `path` is read and written as Parquet: its name ends in .parquet, in any case.

    Example:
        >>> is_parquet(Path("captions.PARQUET")), is_parquet(Path("captions.jsonl"))
        (True, False)
    """
    return path.suffix.lower() == ".parquet"


def part_path(out: Path, rank: int) -> Path:
    return out.with_name(f"{out.name}{PART}{rank:05d}")


def part_paths(out: Path) -> list[Path]:
    """The part files next to `out`, of any rank and any earlier number of ranks."""
    return sorted(Path(p) for p in glob.glob(glob.escape(str(out)) + PART + "[0-9]*"))


def record_id(record: dict) -> str:
    """The key a record is resumed and merged on (records of older pnd versions: the resolved video path)."""
    return str(record["id"]) if record.get("id") is not None else str(Path(record["video"]).resolve())


def read_records(path: Path, quiet: bool = False, kind: Kind = CAPTIONS) -> list[dict]:
    """The complete records of a captions file (JSON lines or Parquet); refuses any other file untouched.

    An unfinished last line (a run killed mid-write) is left out and reported on stderr unless `quiet`.
    `kind` names the records and the fields each must have (`pnd retrieve` keeps score rows this way).
    """
    if is_parquet(path):
        return _read_parquet(path)
    try:
        text = path.read_text()
    except (UnicodeDecodeError, IsADirectoryError) as error:
        raise RecordsError(f"{path} is not a {kind.name}s file ({error}); pass another --out or move it away.") from error
    complete, tail = text[: text.rfind("\n") + 1], text[text.rfind("\n") + 1 :]
    records = [_check(path, number, line, kind) for number, line in enumerate(complete.splitlines(), 1)]
    if tail:
        if not tail.startswith("{"):  # not the start of a record: some other file, keep it whole
            _check(path, len(records) + 1, tail, kind)
        if not quiet:
            print(f"pnd: {path}: left out an unfinished last line from an interrupted run", file=sys.stderr)
    return records


def _check(path: Path, number: int, line: str, kind: Kind) -> dict:
    try:
        record = json.loads(line)
        if not isinstance(record, dict) or not set(kind.fields) <= record.keys():
            raise ValueError(f"it has no {' and '.join(map(repr, kind.fields))}")
    except ValueError as error:
        raise RecordsError(f"{path}, line {number} is not a {kind.name} record ({error}); pass another --out or "
                           "move the file away (pnd leaves it untouched).") from error
    return record


def _read_parquet(path: Path) -> list[dict]:
    parquet = require("pyarrow.parquet", "parquet")
    try:
        records = parquet.read_table(path).to_pylist()
    except Exception as error:  # pyarrow raises several types for files that are not Parquet
        raise RecordsError(f"{path} is not a Parquet captions file ({error}); pass another --out or move it away.") from error
    if records and not {"video", "caption"} <= records[0].keys():
        raise RecordsError(f"{path} has no 'video' and 'caption' columns; pass another --out or move it away.")
    return [{k: v for k, v in r.items() if v is not None} for r in records]


def write_records(path: Path, records: list[dict]) -> None:
    """Write `records` to `path` atomically: JSON lines, or Parquet when `path` ends in .parquet."""
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        if is_parquet(path):
            pyarrow, parquet = require("pyarrow", "parquet"), require("pyarrow.parquet", "parquet")
            columns = list(dict.fromkeys(k for r in records for k in r))
            parquet.write_table(pyarrow.Table.from_pylist([{k: r.get(k) for k in columns} for r in records]), temporary)
        else:
            temporary.write_text("".join(json.dumps(r) + "\n" for r in records))
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def finished_ids(out: Path, quiet: bool = False, kind: Kind = CAPTIONS) -> set[str]:
    """Ids of every record in `out` and in its part files: what a resumed run skips."""
    return {record_id(r) for r in finished_records(out, quiet, kind)}


def finished_records(out: Path, quiet: bool = False, kind: Kind = CAPTIONS) -> list[dict]:
    """Every record in `out` and in its part files."""
    files = ([out] if out.exists() else []) + part_paths(out)
    return [r for f in files for r in read_records(f, quiet, kind)]


def _lock(file, path: Path) -> None:
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        file.close()
        raise RecordsError(f"{path} is being written by another running pnd command on the same --out; wait for "
                           "it to finish (it captions the same videos) or pass another --out.") from None


class PartWriter:
    """The part file of one rank, locked while open; records are appended and flushed one by one.

    An unfinished last line left by a killed run is cut off before anything is appended; a part that holds no
    record when closed (a run refused or stopped before its first) is removed, while still locked.
    """

    def __init__(self, out: Path, rank: int):
        self.path = part_path(out, rank)
        self.file = open(self.path, "a+")
        _lock(self.file, self.path)
        self.file.seek(0)
        text = self.file.read()
        if text and not text.endswith("\n"):
            self.file.truncate(text.rfind("\n") + 1)
        self.written = 0

    def write(self, record: dict) -> None:
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()
        self.written += 1

    def close(self) -> None:
        if not self.file.closed and self.file.seek(0, os.SEEK_END) == 0:
            self.path.unlink(missing_ok=True)
        self.file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def merge(out: Path, order: list[str] | None = None, kind: Kind = CAPTIONS) -> int:
    """Fold the part files into `out` (each id once, `out`'s records first) and remove them.

    `order` (ids, e.g. the inputs as listed) sorts the records from the parts; ids not in it go last.

    Returns:
        The number of records in `out` afterwards.

    Raises:
        RecordsError: a part is still locked by a running command, or a file is not a captions file.
    """
    parts = part_paths(out)
    handles = []
    try:
        for part in parts:
            handles.append(open(part, "a"))
            _lock(handles[-1], part)
        records = read_records(out, quiet=True, kind=kind) if out.exists() else []
        seen = {record_id(r) for r in records}
        added = {}
        for part in parts:
            for record in read_records(part, quiet=True, kind=kind):
                if record_id(record) not in seen:
                    added.setdefault(record_id(record), record)
        rank = {id: i for i, id in enumerate(order or [])}
        records += sorted(added.values(), key=lambda r: rank.get(record_id(r), len(rank)))
        unfinished = out.exists() and not is_parquet(out) and not out.read_bytes().endswith(b"\n")
        if parts or not out.exists() or unfinished and out.stat().st_size:
            write_records(out, records)
        for part in parts:
            part.unlink()
    finally:
        for handle in handles:
            handle.close()
    return len(records)
