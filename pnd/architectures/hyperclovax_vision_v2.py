"""HyperCLOVA X Vision V2 (`hyperclovax_vision_v2`): EXAONE 4.5's processor (Qwen2-VL's `<|image_pad|>` /
`<|video_pad|>` tokens) and the same dropped position ids (`Exaone4_5Architecture` serves it).

The checkpoint's chat template writes `"video_duration": <|video_duration|>` for a video, where the processor's
`get_text_with_replacements` writes the video's duration in seconds before its replacements, without reporting it.
pnd reports those spans too (`reported.WRITTEN_UNREPORTED`, `_hyperclovax_durations`): the duration is the video's, so
the prior must not see it. Its forward multiplies the logits by the text config's `logits_scaling` (MuP), where
Granite's divides: the prior's logits do the same (`pnd.decoding.prior.output_logits`); the tiny model uses 0.5.

Example:
    >>> from types import SimpleNamespace
    >>> processor = SimpleNamespace(video_duration_token="<d>", _pending_video_durations=[2.5])
    >>> _hyperclovax_durations(processor, ["A <d> B"])
    [[(2, 5)]]
"""

import json
import re

from .._compat.repairs import pending_video_durations
from .exaone4_5 import Exaone4_5Architecture
from .registry import register
from .reported import WRITTEN_UNREPORTED


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


HYPERCLOVAX_VISION_V2 = register(Exaone4_5Architecture(name="HyperCLOVA X Vision V2",
                                                       model_types=("hyperclovax_vision_v2",),
                                                       pixel_keys=("pixel_values", "pixel_values_videos"),
                                                       reported=True))
