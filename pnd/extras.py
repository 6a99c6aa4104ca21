"""Optional dependencies: each front end imports what it needs here, or learns which pnd extra installs it.

The core (`pnd.PriorNormalized`, `pnd.attach`, `pnd.CaptionScorer`) needs torch, transformers and accelerate
only. The rest comes with extras: `pnd[video]` (PyAV: reading and writing video files), `pnd[eval]`
(lmms-eval), `pnd[quant]` (bitsandbytes: 4-/8-bit loading), `pnd[plot]` (matplotlib), `pnd[parquet]`
(pyarrow: Parquet manifests and outputs of `pnd caption`), `pnd[all]`.

Example:
    >>> from pnd.extras import require
    >>> require("json", "plot").dumps([1])
    '[1]'
"""

from __future__ import annotations

import importlib

EXTRAS = {"video": "PyAV", "eval": "lmms-eval", "quant": "bitsandbytes", "plot": "matplotlib", "parquet": "pyarrow"}


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the pnd extra that installs it."""


def require(module: str, extra: str):
    """Import `module`, or raise an ImportError that names the pnd extra to install.

    Args:
        module: the module to import, e.g. "av".
        extra: the pnd extra that installs it: one of "video", "eval", "quant", "plot", "parquet".

    Returns:
        The imported module.
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingExtra(f"{module} is missing: this part of pnd needs {EXTRAS[extra]}. Install it with "
                          f"pip install 'pnd[{extra}]' (or 'pnd[all]' for every extra).") from error


def pyplot():
    """matplotlib.pyplot with the non-interactive Agg backend (figures are saved, never shown)."""
    require("matplotlib", "plot").use("Agg")
    return require("matplotlib.pyplot", "plot")
