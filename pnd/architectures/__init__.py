"""Registry of supported architectures: what counts as a visual token and which inputs carry pixels.

A family with code of its own has a module named after it (or after the mechanism it shares: `qformer.py`,
`prefix_lm.py`); every other family is one registration in `families.py`. docs/adding-a-family.md says which.

Example:
    >>> from pnd.architectures import architecture_for, supported_model_types
    >>> "qwen2_vl" in supported_model_types()
    True
"""

from __future__ import annotations

from . import (  # noqa: F401  (each module registers its families)
    chameleon,
    exaone4_5,
    families,
    fuyu,
    gemma3,
    hyperclovax_vision_v2,
    idefics2,
    inkling,
    janus,
    kosmos2,
    lfm2_vl,
    llama4,
    minicpmv,
    minimax_m3_vl,
    molmo2,
    nemotron_h_omni,
    prefix_lm,
    qformer,
    qwen2_vl,
    smolvlm,
    unlimited_ocr,
)
from .registry import Architecture, architecture_for, register, registered, supported_model_types

__all__ = ["Architecture", "architecture_for", "register", "registered", "supported_model_types"]
