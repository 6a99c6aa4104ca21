"""Nemotron-H Omni (Nemotron 3 Nano Omni): a Mamba-2 / attention / MoE hybrid language model (`pnd/architectures/layers.py`), its
expansion found by the generic finder (`reported.py`).

What its processor writes (transformers 5.23): per image `<img>`, the `<image>` tokens, `</img>`; per video one such
block per pair of frames (a tubelet), labelled `Frame 1 and frame 2: ` (with `sampled at t seconds` when the video's
metadata gives its frame rate), blocks on lines of their own; a video's tokens are image tokens. Its `__call__` drops
the replacement offsets (the bound processor keeps them) and takes one video per call.

The top model has no `.model`: `model.language_model` is a causal LM, whose decoder is its `.model` and whose head
gives the logits. transformers' video path fails as released (`pnd._compat.repairs.repair_video_features`): `pnd.attach` and
`CaptionScorer` repair the model they are given.

Example:
    >>> from pnd.testing import tiny_model
    >>> model, _ = tiny_model("nemotron_h_omni")
    >>> type(NEMOTRON_H_OMNI.language_model(model)).__name__
    'NemotronHModel'
"""

from __future__ import annotations

from .._compat.repairs import repair_video_features
from .registry import Architecture, register


class NemotronHOmniArchitecture(Architecture):
    def language_model(self, model):
        return model.language_model.model

    def prepare(self, model) -> None:
        repair_video_features(model)


NEMOTRON_H_OMNI = register(NemotronHOmniArchitecture(name="Nemotron-H Omni", model_types=("nemotron_h_omni",),
                                                     pixel_keys=("pixel_values", "pixel_values_videos"),
                                                     one_video_per_call=True, reported=True))
