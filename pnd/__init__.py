"""pnd: prior-normalized decoding for vision-language models.

    import pnd
    pnd.attach(model)
    out = model.generate(**inputs, max_new_tokens=64, logits_processor=[pnd.PriorNormalized(alpha=0.5)])

`import pnd` itself loads neither torch nor transformers: each public name loads its module on first use, so the
command line's `--help` and lmms-eval's scan of its plugins stay fast.
"""

import importlib
import importlib.util
import sys

from ._moved import MovedModules

__version__ = "0.2.0"
if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, MovedModules())  # before any finder that could still see an old file

_HOMES = {  # public name -> the module that defines it
    "M3ID": "decoding.m3id", "ONLY": "interventions", "PAI": "interventions", "VISTA": "interventions",
    "CaptionScorer": "scoring", "PriorNormalized": "decoding.logits_processor", "ScoreParts": "scoring",
    "attach": "decoding.paired", "detach": "decoding.paired", "icd_inputs": "decoding.contrast",
    "prior_logits": "decoding.prior", "supported_model_types": "architectures", "vcd_noise": "decoding.contrast",
}
__all__ = [*_HOMES, "__version__"]


def __getattr__(name: str):
    """A public name, or a submodule (`pnd.testing`), imported on first use.

    >>> import pnd
    >>> pnd.PriorNormalized.__module__
    'pnd.decoding.logits_processor'
    """
    if name in _HOMES:
        value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
        globals()[name] = value
        return value
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
