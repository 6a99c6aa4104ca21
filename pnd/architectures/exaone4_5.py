"""EXAONE 4.5 (`exaone4_5`) and HyperCLOVA X Vision V2 (`hyperclovax_vision_v2`): Qwen2-VL's processor,
`<|image_pad|>` / `<|video_pad|>` tokens only (inside the template's `<|vision_start|>…<|vision_end|>` pair), and plain
1-D positions.

- EXAONE 4.5: an EXAONE 4 language model of sliding-window layers with RoPE and global layers without. Its
  `prepare_inputs_for_generation` drops the position ids `generate` made (the model then counts them from the cache,
  padding included), and pnd's paired prefill reads them: `Exaone4_5Architecture.prepare` gives the model one that
  passes the positions the model itself would count (0, 1, ... over the whole sequence, left padding included), so
  decoding with pnd at alpha=0 is bit-identical to the family's own `generate`.
- HyperCLOVA X Vision V2: EXAONE 4.5's processor and the same dropped position ids (`Exaone4_5Architecture` serves
  it); the checkpoint's chat template writes `"video_duration": <|video_duration|>` for a video, where the processor's
  `get_text_with_replacements` writes the video's duration in seconds before its replacements, without reporting it.
  pnd reports those spans too (`reported.WRITTEN_UNREPORTED`, `_hyperclovax_durations`): the duration is the video's,
  so the prior must not see it. Its forward multiplies the logits by the text config's `logits_scaling` (MuP), where
  Granite's divides: the prior's logits do the same (`pnd.decoding.prior.output_logits`); the tiny model uses 0.5.

Example:
    >>> EXAONE4_5.model_types, HYPERCLOVAX_VISION_V2.model_types
    (('exaone4_5',), ('hyperclovax_vision_v2',))
"""

import functools
import json
import re

import torch

from .._compat.repairs import pending_video_durations
from .registry import Architecture, register
from .reported import WRITTEN_UNREPORTED


def _exaone4_5_inputs(model, input_ids, **kwargs):
    """EXAONE 4.5's model inputs with the position ids its forward would count (`arange` over the whole sequence,
    left padding included) instead of None, for a caller that reads them (pnd's paired prefill)."""
    inputs = type(model).prepare_inputs_for_generation(model, input_ids, **kwargs)
    new = inputs.get("input_ids")
    new = new if new is not None else inputs["inputs_embeds"]
    if inputs.get("position_ids") is None:
        total = max(input_ids.shape[1], new.shape[1])  # `input_ids` holds the whole sequence so far
        positions = torch.arange(total - new.shape[1], total, device=new.device)
        inputs["position_ids"] = positions.unsqueeze(0).expand(new.shape[0], -1)
    return inputs


def _hyperclovax_durations(processor, texts) -> list[list[tuple[int, int]]]:
    """Per prompt, the spans where HyperCLOVAX Vision V2's processor writes a video's duration (`json.dumps` of it in
    place of each `<|video_duration|>`, the durations in order across prompts), in the text it then expands."""
    durations, token = iter(pending_video_durations(processor)), processor.video_duration_token
    spans = []
    for text in [texts] if isinstance(texts, str) else texts:
        row, shift = [], 0
        for match in re.finditer(re.escape(token), text):
            duration = next(durations, None)
            if duration is None:  # the processor itself fails here
                break
            written = json.dumps(duration)
            row.append((match.start() + shift, match.start() + shift + len(written)))
            shift += len(written) - len(token)
        spans.append(row)
    return spans


WRITTEN_UNREPORTED["HyperCLOVAXVisionV2Processor"] = _hyperclovax_durations


class Exaone4_5Architecture(Architecture):
    """EXAONE 4.5 and HyperCLOVAX Vision V2: their `prepare_inputs_for_generation` passes no position ids; pnd gives
    the model one that passes the model's own (`_exaone4_5_inputs`)."""

    def prepare(self, model) -> None:
        if "prepare_inputs_for_generation" not in vars(model):
            model.prepare_inputs_for_generation = functools.partial(_exaone4_5_inputs, model)


EXAONE4_5 = register(Exaone4_5Architecture(name="EXAONE 4.5", model_types=("exaone4_5",),
                                           pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
HYPERCLOVAX_VISION_V2 = register(Exaone4_5Architecture(name="HyperCLOVA X Vision V2",
                                                       model_types=("hyperclovax_vision_v2",),
                                                       pixel_keys=("pixel_values", "pixel_values_videos"),
                                                       reported=True))
