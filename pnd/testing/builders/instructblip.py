"""InstructBLIP: an EVA vision tower, a Q-Former reading the image with the instruction, and a Llama language model;
the Q-Former's queries are prepended to the prompt as `<image>` placeholders (`pnd/architectures/qformer.py`).

Worked around: the processor's `__init__` drops a `chat_template` argument (set afterwards); the vision tower's
`initializer_range` (1e-10) and the zero-initialised query tokens would keep the image from the language model, and
the Q-Former's cross-attention at 0.02 left it faint: all are re-initialised (`qformer.py`).
"""

from __future__ import annotations

import torch

from .qformer import qformer_parts, reinitialise, with_template


def build(seed: int):
    from transformers import (
        BlipImageProcessor,
        InstructBlipConfig,
        InstructBlipForConditionalGeneration,
        InstructBlipProcessor,
    )

    tokenizer, qformer_tokenizer, parts = qformer_parts("<image>")
    config = InstructBlipConfig(**parts, image_token_index=tokenizer.convert_tokens_to_ids("<image>"))
    torch.manual_seed(seed)
    model = reinitialise(InstructBlipForConditionalGeneration(config).eval())
    processor = InstructBlipProcessor(image_processor=BlipImageProcessor(size={"height": 32, "width": 32}),
                                      tokenizer=tokenizer, qformer_tokenizer=qformer_tokenizer,
                                      num_query_tokens=config.num_query_tokens)
    return model, with_template(processor)
