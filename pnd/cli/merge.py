"""`pnd merge`: put the part files a `pnd caption` job left next to --out into --out, each video once.

    pnd merge --out captions.jsonl

A job that ran to its end merges by itself (rank 0 after every rank finished); this is for the parts of
a job that was stopped, crashed or lost a rank. Re-running that `pnd caption` command instead captions what
is missing and merges too. Parts still being written by a running job are refused.

Example:
    >>> from pnd.cli import main
    >>> main(["merge", "--out", "captions.jsonl"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import sys
from pathlib import Path

from .records import RecordsError, merge, part_paths


def add_arguments(parser) -> None:
    parser.add_argument("--out", required=True, help="the --out of the pnd caption job (JSON lines or .parquet)")


def run(args) -> int:
    out = Path(args.out)
    parts = part_paths(out)
    if not parts:
        print(f"pnd merge: no part files next to {out} ({out.name}.part-*); nothing to merge", file=sys.stderr)
        return 0 if out.exists() else 1
    try:
        total = merge(out)
    except RecordsError as error:
        raise SystemExit(f"pnd merge: {error}") from error
    print(f"pnd merge: merged {len(parts)} part file(s); {out} holds {total} caption(s)", file=sys.stderr)
    return 0
