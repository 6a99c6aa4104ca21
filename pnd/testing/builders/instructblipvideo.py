"""InstructBLIP-Video: an EVA vision tower, a Q-Former reading each frame with the instruction, and a Llama language
model; the Q-Former's queries of the 4 frames are prepended to the prompt as `<video>` placeholders.

Worked around: the processor's `__init__` reads a named `tokenizer.video_token` (a str) as an `AddedToken`
(`.content`) and crashes, so the tokenizer holds `<video>` as an unnamed special token (the processor then finds no
named one and adds `<video>`, already there). Its `__call__` takes the frames as `images=`: the builder's processor
also takes them as `videos=`, as pnd's helpers pass them. The vision tower's `initializer_range` (1e-10) and the
zero-initialised query tokens would keep the video from the language model, and the Q-Former's cross-attention at
0.02 left it faint: all are re-initialised (`qformer.py`).
"""

from __future__ import annotations

import torch

from .qformer import qformer_parts, reinitialise, with_template


def build(seed: int):
    from transformers import (
        InstructBlipVideoConfig,
        InstructBlipVideoForConditionalGeneration,
        InstructBlipVideoProcessor,
        InstructBlipVideoVideoProcessor,
    )

    class Processor(InstructBlipVideoProcessor):  # frames as `videos=` too (pnd's helpers pass them so)
        def __call__(self, images=None, text=None, videos=None, **kwargs):
            return super().__call__(images=videos if images is None else images, text=text, **kwargs)

    tokenizer, qformer_tokenizer, parts = qformer_parts("<video>")
    config = InstructBlipVideoConfig(**parts, video_token_index=tokenizer.convert_tokens_to_ids("<video>"))
    torch.manual_seed(seed)
    model = reinitialise(InstructBlipVideoForConditionalGeneration(config).eval())
    processor = Processor(video_processor=InstructBlipVideoVideoProcessor(size={"height": 32, "width": 32}),
                          tokenizer=tokenizer, qformer_tokenizer=qformer_tokenizer,
                          num_query_tokens=config.num_query_tokens)
    Processor.__name__ = Processor.__qualname__ = "InstructBlipVideoProcessor"
    return model, with_template(processor)
