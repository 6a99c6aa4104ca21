"""The registry behind `pnd.architectures`: the `Architecture` record, `register` and the look-ups.

Example:
    >>> from pnd.architectures.registry import Architecture
    >>> Architecture("demo", ("demo",), ("pixel_values",)).pixel_keys
    ('pixel_values',)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

_REGISTRY: dict[str, "Architecture"] = {}


@dataclass(frozen=True)
class Architecture:
    """What pnd needs to know about one family of vision-language models."""

    name: str
    model_types: tuple[str, ...]
    pixel_keys: tuple[str, ...]  # generate() inputs that carry pixels ("blank" prior zeroes them)

    def visual_token_ids(self, config) -> list[int]:
        """Placeholder token ids that the processor expands for images and videos."""
        ids = (getattr(config, key, None) for key in ("image_token_id", "video_token_id"))
        return [int(i) for i in ids if i is not None]

    def visual_mask(self, config, input_ids: torch.Tensor) -> torch.Tensor:
        """Boolean mask of the visual-token positions of `input_ids`."""
        ids = torch.tensor(self.visual_token_ids(config), device=input_ids.device)
        return torch.isin(input_ids, ids)


def register(architecture: Architecture) -> Architecture:
    """Make pnd support `architecture.model_types` (called once by each family's module); returns it."""
    for model_type in architecture.model_types:
        _REGISTRY[model_type] = architecture
    return architecture


def supported_model_types() -> list[str]:
    """The Hugging Face `model_type`s pnd supports, sorted.

    Example:
        >>> import pnd
        >>> "llava_onevision" in pnd.supported_model_types()
        True
    """
    return sorted(_REGISTRY)


def architecture_for(model) -> Architecture:
    """The registered architecture of a Hugging Face model, or a ValueError listing the supported ones."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in _REGISTRY:
        raise ValueError(
            f"pnd does not support model_type {model_type!r} ({type(model).__name__}). "
            f"Supported model types: {', '.join(supported_model_types())}. "
            "Load one of these with its *ForConditionalGeneration class, or add an adapter in pnd/architectures/."
        )
    return _REGISTRY[model_type]

