"""The entry point of lmms-eval's `lmms_eval.models` group (pyproject.toml): pnd's models, named by class path.

lmms-eval loads every plugin's entry point whenever `lmms_eval.models` is imported, whichever model a run uses. This
module imports nothing heavy (neither torch nor pnd's core), so a run of lmms-eval's own models starts as fast with
pnd installed as without it; `pnd.integrations.lmms_eval` loads when `--model pnd_...` asks for one of its classes.

Example:
    >>> sorted(manifest.model_id for manifest in manifests())
    ['pnd_hf', 'pnd_llava_ov', 'pnd_qwen2_vl']
"""

from __future__ import annotations

MODELS = {"pnd_hf": "PndHf", "pnd_llava_ov": "PndLlavaOnevision", "pnd_qwen2_vl": "PndQwen2VL"}


def manifests():
    """The models pnd adds to lmms-eval, each by the path of its class in `pnd.integrations.lmms_eval`."""
    from lmms_eval.models.registry_v2 import ModelManifest  # here, not at import: lmms_eval.models imports us

    return [ModelManifest(model_id=name, simple_class_path=f"pnd.integrations.lmms_eval.{class_name}")
            for name, class_name in MODELS.items()]
