"""`benchmarks/RESULTS.md` is made of `## title` sections; each benchmark run replaces its own section.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "RESULTS.md"
    >>> write_section(path, "Decoding", "old"); write_section(path, "Retrieval", "r"); write_section(path, "Decoding", "new")
    >>> print(path.read_text())
    # Benchmark results
    <BLANKLINE>
    Regenerate with `bash benchmarks/run.sh`.
    <BLANKLINE>
    ## Decoding
    <BLANKLINE>
    new
    <BLANKLINE>
    ## Retrieval
    <BLANKLINE>
    r
    <BLANKLINE>
"""

from __future__ import annotations

import re
from pathlib import Path

HEADER = "# Benchmark results\n\nRegenerate with `bash benchmarks/run.sh`.\n"


def write_section(path: Path, title: str, body: str) -> None:
    """Replace the section `## title` of the Markdown file at `path` with `body`, or append it."""
    sections = re.split(r"(?m)^(?=## )", Path(path).read_text() if Path(path).exists() else HEADER)
    new = f"## {title}\n\n{body}\n"
    index = next((i for i, s in enumerate(sections) if s.startswith(f"## {title}\n")), len(sections))
    sections[index : index + 1] = [new]
    Path(path).write_text("\n".join(s.rstrip("\n") + "\n" for s in sections))
