"""Registry of supported architectures: what counts as a visual token and which inputs carry pixels.

Adding an architecture is one small module that calls :func:`register`.

Example:
    >>> from pnd.architectures import architecture_for, supported_model_types
    >>> "qwen2_vl" in supported_model_types()
    True
"""

from __future__ import annotations

# Registration order: the hand-written families, then those added through the generic finder.
# isort: off
from . import (gemma3, glm4v, internvl, lfm2_vl, llava, minicpmv, molmo2, nemotron_h_omni,  # noqa: F401
               perception_lm, qwen2_vl, qwen3_5, qwen3_vl, smolvlm, video_llama_3, video_llava)  # each registers itself
from . import finder_families  # noqa: F401
from . import llama4  # noqa: F401
from . import qformer  # noqa: F401
from . import prefix_lm  # noqa: F401
from . import finder_families_more  # noqa: F401
from . import finder_families_late  # noqa: F401
from . import fuyu  # noqa: F401
from . import ocr_families  # noqa: F401
from . import sparse_families  # noqa: F401
from . import kosmos2  # noqa: F401
from . import inkling  # noqa: F401
from . import unlimited_ocr  # noqa: F401
# isort: on
from .registry import Architecture, architecture_for, register, registered, supported_model_types

__all__ = ["Architecture", "architecture_for", "register", "registered", "supported_model_types"]
