"""PerceptionLM: the processor expands `<|image|>` / `<|video|>` into placeholder tokens only (pooled patches of
every tile or frame), so the prior hides the placeholders.
"""

from .registry import Architecture, register

PERCEPTION_LM = register(
    Architecture(
        name="PerceptionLM",
        model_types=("perception_lm",),
        pixel_keys=("pixel_values", "pixel_values_videos"),
    )
)
