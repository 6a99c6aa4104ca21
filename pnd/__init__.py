"""pnd: prior-normalized decoding for vision-language models.

    import pnd
    pnd.attach(model)
    out = model.generate(**inputs, max_new_tokens=64, logits_processor=[pnd.PriorNormalized(alpha=0.5)])
"""

import sys

from ._moved import MovedModules
from .architectures import supported_model_types
from .decoding.contrast import icd_inputs, vcd_noise
from .decoding.logits_processor import PriorNormalized
from .decoding.m3id import M3ID
from .decoding.paired import attach, detach
from .decoding.prior import prior_logits
from .interventions import ONLY, PAI, VISTA
from .scoring import CaptionScorer, ScoreParts

__version__ = "0.2.0"
if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, MovedModules())  # before any finder that could still see an old file
__all__ = ["M3ID", "ONLY", "PAI", "VISTA", "CaptionScorer", "PriorNormalized", "ScoreParts", "attach", "detach", "icd_inputs", "prior_logits",
           "supported_model_types", "vcd_noise", "__version__"]
