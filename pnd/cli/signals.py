"""SIGTERM stops a `pnd` command as Ctrl-C does (`pnd caption`, `pnd retrieve`: parts kept, how to resume said).

Example:
    >>> stopped_by(Terminated())
    ('terminated', 143)
    >>> stopped_by(KeyboardInterrupt())
    ('interrupted', 130)
"""

from __future__ import annotations


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the running command so that it stops as on Ctrl-C: parts flushed, one line saying how to
    resume, DataLoader workers shut down with it; the command then exits with 143 (128 + SIGTERM)."""


def terminate(signum, frame) -> None:
    """The SIGTERM handler `pnd.cli.main` installs while a command runs."""
    raise Terminated()


def stopped_by(interruption: KeyboardInterrupt) -> tuple[str, int]:
    """How an interrupted command says it stopped, and its exit status: ("terminated", 143) or ("interrupted", 130)."""
    return ("terminated", 143) if isinstance(interruption, Terminated) else ("interrupted", 130)
