"""Idefics2: a SigLIP-style vision tower, a perceiver resampler (a fixed number of latents per image) and a Mistral
language model.

The processor's own `__call__` (not `get_text_with_replacements`) writes, per `<image>` of the prompt,
`<fake_token_around_image>` + `<image>` x image_seq_len + `<fake_token_around_image>` (5 such blocks with image
splitting, adjacent fake tokens merged into one), then a space after a closing fake token that a word follows directly
(`pnd/architectures/idefics2.py`). A 32-pixel image is 4x4 patches of 8 pixels, resampled to 4 latents (4 `<image>`).

The resampler's latents (ones at init: every latent alike) are drawn at random and its attention's values and output
at unit gain (at 0.02 what attention adds to the latents is faint: another image changed the logits by 3e-3 only).
The placeholder's row of `lm_head` is zero: the random model wrote `<image>`, which a from-scratch forward over the
generated text (the brute-force reference's) takes for an image slot, and crashes.

transformers' processor loads every image with `load_image` (PIL images, paths and URLs only): the tiny processor
turns the suite's (3, H, W) uint8 tensors into PIL images first, and is saved as the real class.
"""

from __future__ import annotations

import torch


def build(seed: int, do_image_splitting: bool = False):
    from transformers import Idefics2Config, Idefics2ForConditionalGeneration, Idefics2ImageProcessor, Idefics2Processor

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer
    from pnd.testing.parts import at_unit_gain

    from ._pil_images import taking_tensors

    tokenizer = tiny_tokenizer(["<fake_token_around_image>", "<image>", "<end_of_utterance>"],
                               corpus=(" Describe the image. Describe the video.",) * 4)
    config = Idefics2Config(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8),
        perceiver_config=dict(hidden_size=64, resampler_n_latents=4, resampler_depth=1, resampler_n_heads=2,
                              resampler_head_dim=16, num_key_value_heads=1),
        text_config={**tiny_llama_text(tokenizer), "model_type": "mistral", "sliding_window": None},
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Idefics2ForConditionalGeneration(config).eval()
    resampler = model.model.connector.perceiver_resampler
    with torch.no_grad():
        resampler.latents.normal_()
        model.lm_head.weight[config.image_token_id] = 0  # as Janus's: never written, else a forward takes it for a slot
    at_unit_gain(*(module for layer in resampler.layers for module in (layer.self_attn.v_proj, layer.self_attn.o_proj)))
    processor = taking_tensors(Idefics2Processor)(
        image_processor=Idefics2ImageProcessor(size={"shortest_edge": 32, "longest_edge": 32},
                                               do_image_splitting=do_image_splitting),
        tokenizer=tokenizer,
        image_seq_len=4,
        chat_template=chat_template("<image>"),  # Idefics2's own template writes a bare "<image>" for an image part
    )
    return model, processor
