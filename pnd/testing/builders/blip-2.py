"""BLIP-2: an EVA vision tower, a Q-Former reading the image (no instruction), and a Llama language model (the real
checkpoints use OPT or Flan-T5; the encoder-decoder ones are not decoder-only); the Q-Former's queries are prepended to
the prompt as `<image>` placeholders (`pnd/architectures/qformer.py`).

Worked around: the processor's `__init__` drops a `chat_template` argument (set afterwards); the vision tower's
`initializer_range` (1e-10) and the zero-initialised query tokens would keep the image from the language model, and
the Q-Former's cross-attention at 0.02 left it faint: all are re-initialised (`qformer.py`).
"""

from __future__ import annotations

import torch

from .qformer import qformer_parts, reinitialise, with_template


def build(seed: int):
    from transformers import Blip2Config, Blip2ForConditionalGeneration, Blip2Processor, BlipImageProcessor

    tokenizer, _, parts = qformer_parts("<image>")
    parts["qformer_config"].pop("vocab_size")  # BLIP-2's Q-Former reads no text
    config = Blip2Config(**parts, image_token_index=tokenizer.convert_tokens_to_ids("<image>"))
    torch.manual_seed(seed)
    model = reinitialise(Blip2ForConditionalGeneration(config).eval())
    processor = Blip2Processor(image_processor=BlipImageProcessor(size={"height": 32, "width": 32}),
                               tokenizer=tokenizer, num_query_tokens=config.num_query_tokens)
    return model, with_template(processor)
