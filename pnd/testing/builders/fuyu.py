"""Fuyu: a tiny random-weight `FuyuForCausalLM` and its processor, built offline (images only).

Fuyu has no vision tower: each 8x8 patch of the image is flattened and projected (`vision_embed_tokens`, one linear
layer) into the Persimmon language model at a `|SPEAKER|` token. The processor ignores the chat template's image part:
it writes the image in front of the whole prompt, one `|SPEAKER|` per patch and a `|NEWLINE|` closing each row of
patches, then the `<s>` that starts the text, and it appends the beginning-of-answer token `<0x04>`. A 56-pixel image is
resized to 32 pixels: 4 rows of 4 patches.

The tokenizer is a character-level SentencePiece-style one (`LlamaTokenizer`, `▁` for spaces) in which `|SPEAKER|` and
`|NEWLINE|` are ordinary vocabulary words, as in Fuyu's own: the processor tokenizes the image's text apart and drops its
first token, the `▁` such a tokenizer writes in front of it (a tokenizer that writes none, as `pnd.testing.tiny_tokenizer`,
loses the first `|SPEAKER|` and the processor then fails its own token count check).
"""

from __future__ import annotations

import string

import torch
from tokenizers import decoders


def _merges(word: str) -> list[tuple[str, str]]:
    """The BPE merges that build `word` from its characters, left to right."""
    return [(word[:i], word[i]) for i in range(1, len(word))]


def tokenizer():
    """The tiny SentencePiece-style tokenizer: characters, and `|SPEAKER|` and `|NEWLINE|` as words."""
    from transformers import LlamaTokenizer

    merges = _merges("|SPEAKER|") + _merges("|NEWLINE|")
    pieces = ["▁", "\n", *string.ascii_letters, *string.digits, *string.punctuation, *(a + b for a, b in merges)]
    vocab = {piece: i for i, piece in enumerate(dict.fromkeys(["<unk>", "<s>", "</s>", *pieces]))}
    made = LlamaTokenizer(vocab=vocab, merges=merges, legacy=True, eos_token="<|im_end|>", padding_side="left")
    made.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<0x04>"]})
    made.backend_tokenizer.decoder = decoders.Replace("▁", " ")  # each token's text adds up to the prompt's (no stripping)
    return made


def build(seed: int):
    from transformers import FuyuConfig, FuyuForCausalLM, FuyuImageProcessor, FuyuProcessor

    from pnd.testing import chat_template, tiny_llama_text

    text_tokenizer = tokenizer()
    text = {**tiny_llama_text(text_tokenizer), "model_type": "persimmon", "bos_token_id": text_tokenizer.bos_token_id,
            "partial_rotary_factor": 0.5}
    text.pop("num_key_value_heads")  # Persimmon has no grouped-query attention
    config = FuyuConfig(text_config=text, image_size=32, patch_size=8,
                        image_token_id=text_tokenizer.convert_tokens_to_ids("|SPEAKER|"))
    torch.manual_seed(seed)
    model = FuyuForCausalLM(config).eval()
    processor = FuyuProcessor(
        image_processor=FuyuImageProcessor(size={"height": 32, "width": 32}, patch_size={"height": 8, "width": 8}),
        tokenizer=text_tokenizer)
    processor.chat_template = chat_template("")  # FuyuProcessor drops a chat_template argument; it places the image
    return model, processor
