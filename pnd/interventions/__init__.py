"""Methods that change one side of pnd's pair inside the model: PAI, ONLY and VISTA (docs/methods.md).

An intervention is declared once (`engine.AttentionIntervention`: which rows, which layers, what it does to their
attention at the visual placeholder tokens' keys) and runs inside pnd's paired calls on every family whose layers it
reaches (`engine.reach`).

Example:
    >>> import pnd
    >>> pnd.ONLY()
    ONLY(layer=0, alpha1=3.0, alpha2=1.0, gamma=0.2)
"""

from .processors import ONLY, PAI, VISTA

__all__ = ["ONLY", "PAI", "VISTA"]
