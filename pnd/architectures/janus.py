"""Janus (`janus`): `<begin_of_image>` + `<image_placeholder>` tokens + `<end_of_image>` per image (continuous SigLIP
features for understanding; its VQ-VAE only generates images), markers included, as the processor reports them. Its
`generate` drops `logits_processor` in text mode (transformers 5.23), which would silently decode without the prior:
`JanusArchitecture.prepare` gives the model a `generate` that keeps it (wrapping whatever `generate` the model has).

Example:
    >>> JANUS.model_types
    ('janus',)
"""

from transformers import GenerationMixin

from .registry import Architecture, register, unwrap, wrap


def _janus_generate(model, generate, *args, generation_mode: str = "text", **kwargs):
    """Janus's `generate` with `logits_processor` kept in text mode (its own drops it: transformers 5.23); the
    model's `generate` as it was (`generate`) in image mode."""
    if generation_mode != "text":
        return generate(*args, generation_mode=generation_mode, **kwargs)
    return GenerationMixin.generate(model, *args, guidance_scale=None, **kwargs)


class JanusArchitecture(Architecture):
    """Janus: its `generate` drops the `logits_processor` argument in text mode, so pnd gives the model one that
    keeps it (as Janus's does otherwise: `GenerationMixin.generate` without classifier-free guidance)."""

    def prepare(self, model) -> None:
        wrap(model, "generate", _janus_generate, model)

    def unprepare(self, model) -> None:
        unwrap(model, "generate")


JANUS = register(JanusArchitecture(name="Janus", model_types=("janus",), pixel_keys=("pixel_values",), reported=True))
