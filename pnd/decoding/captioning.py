"""Batched greedy captions of videos, plain or prior-normalized: what `pnd caption` and `pnd demo` run.

Example:
    >>> import pnd
    >>> from pnd.decoding.captioning import generate_captions
    >>> from pnd.testing import tiny_model, random_video
    >>> model, processor = tiny_model("llava_onevision")
    >>> captions = generate_captions(pnd.attach(model), processor, [random_video(0)], alpha=0.5, max_new_tokens=3)
    >>> len(captions)
    1
"""

from __future__ import annotations

import torch

from ..architectures import architecture_for
from ..io.prompts import video_prompt
from ..validation import check_frames
from .logits_processor import PriorNormalized
from .methods import method as registered_method

GREEDY = {"do_sample": False, "num_beams": 1, "num_return_sequences": 1}  # whatever the checkpoint's defaults say


class VideosRefused(ValueError):
    """The processor refused the videos of a `generate_captions` call (e.g. Qwen2-VL's, a frame's aspect ratio over
    200): the others of a batch may still be captioned one at a time."""


@torch.no_grad()
def generate_captions(model, processor, videos: list[torch.Tensor], alpha: float | None,
                      prompt: str = "Describe the video.", plausibility: float | None = None,
                      max_new_tokens: int = 32, method: str | None = None, settings: dict | None = None) -> list[str]:
    """Greedy captions of a batch of videos (frames as `pnd.io.video.read_video` gives them).

    Args:
        model: an attached model (`pnd.attach`) and `processor` its processor.
        videos: (frames, 3, H, W) uint8 tensors, one per video.
        alpha: None decodes plainly (no logits processor); otherwise `PriorNormalized(alpha,
            plausibility=plausibility)`.
        prompt: the instruction after the video.
        max_new_tokens: the longest caption, in tokens.
        method, settings: a registered decoding method (`pnd.decoding.methods`: "cpn", "vcd", "icd", "m3id") and its
            settings (the others at the paper's defaults); `alpha` and `plausibility`, where not None, are settings
            too. ICD's contrast prompt is `prompt` after its instruction, on the same videos.

    Returns:
        One caption per video, stripped.

    Raises:
        VideosRefused: where the processor refuses the videos.
    """
    for index, video in enumerate(videos):
        check_frames(video, f"videos[{index}]")
    architecture = architecture_for(model)
    if architecture.one_video_per_call and len(videos) > 1:
        return [caption for video in videos
                for caption in generate_captions(model, processor, [video], alpha, prompt, plausibility, max_new_tokens,
                                                 method, settings)]
    architecture.check_video_batch(videos)

    def prompts(text: str):
        text = video_prompt(processor, text)
        try:
            encoded = processor(text=[text] * len(videos), videos=list(videos), return_tensors="pt", padding=True)
        except (ValueError, TypeError) as error:
            raise VideosRefused(f"the processor refused the video{'s' * (len(videos) > 1)}: {error}") from error
        return architecture.on_model(model, encoded)

    inputs, extra = prompts(prompt), {}
    if method is not None:
        chosen = registered_method(method)
        given = {**{k: v for k, v in (("alpha", alpha), ("plausibility", plausibility)) if v is not None},
                 **(settings or {})}
        processors = [chosen.processor(**given)]
        if (contrast := chosen.contrast_text(prompt, **given)) is not None:
            extra["prior_inputs"] = prompts(contrast)
    else:
        processors = [] if alpha is None else [PriorNormalized(alpha, plausibility=plausibility)]
    out = model.generate(**inputs, max_new_tokens=max_new_tokens, **GREEDY, logits_processor=processors, **extra)
    return [c.strip() for c in processor.batch_decode(out[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)]
