"""The module paths of pnd 0.2 that moved in 0.3 keep working for one release, with a DeprecationWarning.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True):
    ...     from pnd.video import read_video
    >>> read_video.__module__
    'pnd.io.video'
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import warnings

MOVED = {f"pnd.{old}": f"pnd.{new}" for old, new in {
    "logits_processor": "decoding.logits_processor", "paired": "decoding.paired", "prior": "decoding.prior",
    "packed": "decoding.packed", "cache": "decoding.cache", "captioning": "decoding.captioning",
    "layers": "architectures.layers", "ranking": "scoring.ranking", "tokens": "scoring.tokens",
    "explain": "scoring.explain", "video": "io.video", "prompts": "io.prompts", "loading": "io.loading",
    "tiny_builders": "testing.builders",
}.items()}


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old path as the module at its new path (the same module object), warning once per old path."""

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec):
        warnings.warn(f"{spec.name} moved to {MOVED[spec.name]} in pnd 0.3; import it from there (the old path goes "
                      "in 0.4).", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(MOVED[spec.name])
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state  # the import system gave the module the old path's spec
