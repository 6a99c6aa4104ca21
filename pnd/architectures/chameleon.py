"""Chameleon (`chameleon`): an image is discrete VQ tokens, `<racm3:break>` + `<image>` x 1024 + `<eoss>` (the VQ codes'
embeddings replace the `<image>` ones), all of it the expansion that the processor reports; the base model is the
language model (no `language_model`). Its forward sets its VQ tokens' logits to the dtype's minimum: the prior's
prefill logits get the same (`suppressed_tokens`).

Example:
    >>> CHAMELEON.model_types
    ('chameleon',)
"""

from .registry import Architecture, register


class ChameleonArchitecture(Architecture):
    """Chameleon: its forward sets the logits of its VQ image tokens to the dtype's minimum (it never writes them)."""

    def suppressed_tokens(self, model) -> list[int]:
        return model.model.vocabulary_mapping.image_tokens


CHAMELEON = register(ChameleonArchitecture(name="Chameleon", model_types=("chameleon",), pixel_keys=("pixel_values",),
                                          reported=True))
