"""Scoring captions with prior normalization: `CaptionScorer`, ranking, the per-token view and `explain`.

    >>> from pnd.scoring import CaptionScorer
"""

from .scorer import CaptionScorer, ScoreParts

__all__ = ["CaptionScorer", "ScoreParts"]
