"""A fingerprint of a model's weights from torch's in-place version counter (`Tensor._version`, private): what
`CaptionScorer` keys its kept caption priors on, so that they are not reused once the weights change.

Example:
    >>> import torch
    >>> layer = torch.nn.Linear(2, 2)
    >>> before = weights_state(layer)
    >>> with torch.no_grad():
    ...     _ = layer.weight.mul_(2)
    >>> weights_state(layer) == before
    False
"""

from __future__ import annotations


def weights_state(model) -> tuple:
    """Each parameter's storage, dtype and in-place version: an optimizer step, `load_state_dict` and `.to(...)` each
    change one of them (inference tensors have no version: 0)."""
    return tuple((p.data_ptr(), p.dtype, 0 if p.is_inference() else p._version) for p in model.parameters())
