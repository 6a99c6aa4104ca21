"""Coverage: every image-text-to-text model type of the installed transformers, supported or refused with the reason.

`pnd models --all` prints it. A model type the installed transformers maps to image-text-to-text that is neither
registered nor listed in `REFUSED` has no row of its own: the test suite fails on it, so a transformers upgrade shows
what it added.

Example:
    >>> rows = dict(coverage())
    >>> rows["qwen3_vl"].startswith("supported: video and image")
    True
    >>> rows["florence2"]
    'refused: encoder-decoder (the text decoder cross-attends to the image: no visual span in the prompt to hide)'
"""

from __future__ import annotations

import functools
import textwrap

import torch

from .layers import layer_plan
from .refused import REFUSED, structural
from .registry import _REGISTRY, Architecture, registered, registered_in


def image_text_to_text_types() -> list[str]:
    """The model types the installed transformers maps to image-text-to-text (`AutoModelForImageTextToText`)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    return sorted(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)


def takes_video(model_type: str) -> bool:
    """Whether the processor class transformers maps `model_type` to has a video processor (without one mapped: whether
    the registered family takes `pixel_values_videos`)."""
    import transformers
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

    processor = getattr(transformers, PROCESSOR_MAPPING_NAMES.get(model_type) or "", None)
    if processor is None:
        return model_type in _REGISTRY and "pixel_values_videos" in _REGISTRY[model_type].pixel_keys
    return "video_processor" in processor.get_attributes()


@functools.cache
def prefill_path(architecture: Architecture, model_type: str) -> str:
    """How the prior's prefill runs with the family's default config (docs/design.md §4)."""
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type).get_text_config(decoder=True)
    plan = layer_plan(config)
    if plan.in_slot and any(kind.in_slot and kind.state == "indexed" for kind in plan.kinds):
        return "own call in the prompt's slots, visual keys hidden from the indexers (slot-anchored sparse layers)"
    if plan.in_slot:
        return "own call in the prompt's slots, visual keys masked (chunks of slots kept)"
    if plan.kept_only:
        return "own call on the kept tokens (recurrent or indexed layers)"
    if architecture.bidirectional_prefix(None, torch.ones(1, 1)) is not None:
        return "own call (bidirectional prefix: a prefix LM)"
    if not architecture.causal_prompt:
        return "own call (bidirectional visual blocks)"
    if architecture.embeds_prompt:
        return "own call (the family's generate runs its language model's own generate)"
    if "sliding_attention" in (getattr(config, "layer_types", None) or ()):
        return "own call (sliding-window layers)"
    if "reference_sliding_attention" in (getattr(config, "layer_types", None) or ()):
        return "own call (reference sliding-window layers: the prompt apart from a window of generated tokens)"
    return "packed into the conditioned prefill (own call where a checkpoint's layers are recurrent or sparse)"


def status(model_type: str) -> str:
    """One model type's row: supported (inputs, what the prior hides, prefill path), or refused and why."""
    if model_type in _REGISTRY:
        architecture = _REGISTRY[model_type]
        inputs = ("video only" if not architecture.takes_images else
                  "video and image" if takes_video(model_type) else "image")
        return (f"supported: {inputs}; {architecture.name}; hides {architecture.hidden()}; prior prefill "
                f"{prefill_path(architecture, model_type)}")
    if model_type in REFUSED:
        return f"refused: {REFUSED[model_type]}"
    return "unreviewed: pnd has no row for this model type yet"


def coverage() -> list[tuple[str, str]]:
    """(model type, status) for every image-text-to-text model type of the installed transformers and every
    supported one."""
    return [(t, status(t)) for t in sorted(set(image_text_to_text_types()) | set(_REGISTRY))]


def _inputs(architecture: Architecture) -> str:
    video = [t for t in architecture.model_types if takes_video(t)]
    if not architecture.takes_images:
        return "video only"
    if len(video) == len(architecture.model_types):
        return "video and image"
    return f"video ({', '.join(video)}) and image" if video else "image"


def coverage_summary() -> str:
    """README's one-paragraph count of the image-text-to-text types supported and refused (a test keeps it in sync).

    Example:
        >>> coverage_summary().startswith("pnd supports **")
        True
    """
    import transformers

    types = image_text_to_text_types()
    supported = [t for t in types if t in _REGISTRY]
    refused = [t for t in types if t in REFUSED]
    left = [t for t in refused if not structural(REFUSED[t])]
    families = len([a for a in registered() if set(a.model_types) & set(supported)])
    not_yet = f" and **{len(left)}** are not supported yet" if left else ""
    summary = (f"pnd supports **{len(supported)}** of the **{len(types)}** image-text-to-text model types of "
               f"transformers {transformers.__version__} ({families} families); **{len(refused) - len(left)}** are "
               f"refused for a structural reason (encoder-decoders, cross-attention, not text generators)"
               f"{not_yet}. The table of families, what the prior hides in each, the "
               "family notes and every refusal with its reason: [docs/families.md](docs/families.md) (`pnd models "
               "--all` prints the same rows).")
    return textwrap.fill(summary, width=118)


def refused_table() -> str:
    """docs/families.md's table of the refused model types and why (a test keeps it in sync).

    Example:
        >>> refused_table().splitlines()[0]
        '| `model_type` | why pnd refuses it |'
    """
    rows = ["| `model_type` | why pnd refuses it |", "|---|---|"]
    rows += [f"| `{t}` | {REFUSED[t]} |" for t in image_text_to_text_types() if t in REFUSED]
    return "\n".join(rows)


def families_table() -> str:
    """docs/families.md's table of supported families, one row per registered architecture (a test keeps it in sync).

    Example:
        >>> families_table().splitlines()[0]
        '| `model_type` | family | inputs | what the prior hides | prior prefill | registered in |'
    """
    rows = ["| `model_type` | family | inputs | what the prior hides | prior prefill | registered in |",
            "|---|---|---|---|---|---|"]
    for architecture in registered():
        module = registered_in(architecture.model_types[0]).replace(".", "/") + ".py"
        cells = (", ".join(f"`{t}`" for t in architecture.model_types), architecture.name, _inputs(architecture),
                 architecture.hidden(), prefill_path(architecture, architecture.model_types[0]), f"`{module}`")
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows)


GENERATED = {("README.md", "coverage"): coverage_summary, ("docs/families.md", "families"): families_table,
             ("docs/families.md", "refused"): refused_table}
"""The documentation's generated sections: (file, marker) -> the function that writes what stands between
`<!-- marker:start -->` and `<!-- marker:end -->`."""


def section(text: str, marker: str) -> str:
    """What stands between `marker`'s start and end comments in `text`.

    Example:
        >>> section("a\\n<!-- x:start -->\\nb\\n<!-- x:end -->\\n", "x")
        'b'
    """
    return text.split(f"<!-- {marker}:start -->\n")[1].split(f"\n<!-- {marker}:end -->")[0]


def regenerate(root: str = ".") -> None:
    """Rewrite every generated section of the documentation under the repository `root` (after registering or refusing
    a model type): `python -m pnd.architectures.coverage`."""
    from pathlib import Path

    for (name, marker), write in GENERATED.items():
        path = Path(root) / name
        text = path.read_text()
        path.write_text(text.replace(section(text, marker), write(), 1))


if __name__ == "__main__":
    regenerate()
