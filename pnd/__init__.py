"""pnd: prior-normalized decoding for vision-language models.

    import pnd
    pnd.attach(model)
    out = model.generate(**inputs, max_new_tokens=64, logits_processor=[pnd.PriorNormalized(alpha=0.5)])
"""

from .architectures import supported_model_types
from .paired import attach, detach
from .prior import prior_logits
from .scoring import CaptionScorer, ScoreParts
from .logits_processor import PriorNormalized

__version__ = "0.2.0"
__all__ = ["CaptionScorer", "PriorNormalized", "ScoreParts", "attach", "detach", "prior_logits", "supported_model_types", "__version__"]
