"""`pnd merge`: put the part files a `pnd caption` job left next to --out into --out, each video once.

    pnd merge --out captions.jsonl
    pnd merge --out results/          # a `pnd retrieve` --out folder: its score rows into results/rows.jsonl

A job that ran to its end merges by itself (rank 0 after every rank finished); this is for the parts of
a job that was stopped, crashed or lost a rank. Re-running that `pnd caption` command instead captions what
is missing and merges too (for `pnd retrieve`, re-running also writes the scores and metrics). Parts still
being written by a running job are refused.

Example:
    >>> from pnd.cli import main
    >>> main(["merge", "--out", "captions.jsonl"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import sys
from pathlib import Path

from .records import CAPTIONS, ROW, ROWS, RecordsError, merge, part_paths


def add_arguments(parser) -> None:
    parser.add_argument("--out", required=True, help="the --out of the pnd caption job (JSON lines or .parquet), or "
                        "the --out folder of the pnd retrieve job")


def run(args) -> int:
    out, kind = (Path(args.out) / ROWS, ROW) if Path(args.out).is_dir() else (Path(args.out), CAPTIONS)
    parts = part_paths(out)
    if not parts:
        print(f"pnd merge: no part files next to {out} ({out.name}.part-*); nothing to merge", file=sys.stderr)
        return 0 if out.exists() else 1
    try:
        total = merge(out, kind=kind)
    except RecordsError as error:
        raise SystemExit(f"pnd merge: {error}") from error
    print(f"pnd merge: merged {len(parts)} part file(s); {out} holds {total} {kind.name}(s)", file=sys.stderr)
    return 0
