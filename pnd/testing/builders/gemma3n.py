"""Gemma 3n: a timm vision tower (MobileNet-V5 in the real model; timm's `test_efficientnet` here), a Conformer audio
tower, and a Gemma 3n language model (per-layer inputs, AltUp, LAuReL, KV sharing, sliding and full layers).

The processor writes `\\n\\n<start_of_image>` + `<image_soft_token>` x image_seq_length + `<end_of_image>\\n\\n` for an
image. Vision and audio tokens have ids past the text vocabulary (`embed_vision.vocab_offset`, `embed_audio.vocab_offset`):
the tokenizer adds them last. A 64-pixel image: timm's 2x2 feature map, 4 image tokens.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        Gemma3nAudioFeatureExtractor,
        Gemma3nConfig,
        Gemma3nForConditionalGeneration,
        Gemma3nProcessor,
        PreTrainedTokenizerFast,
        SiglipImageProcessor,
    )

    from ..parts import chat_template, tiny_tokenizer

    text_named = {"boi_token": "<start_of_image>", "boa_token": "<start_of_audio>"}
    vision = {"eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}
    audio = {"eoa_token": "<end_of_audio>", "audio_token": "<audio_soft_token>"}
    trained = tiny_tokenizer(list(text_named.values()))
    trained.add_tokens(["\n\n\n", "\n\n"])  # as Gemma's tokenizer: a run of newlines is one token
    text_vocab = len(trained)
    trained.add_special_tokens({"additional_special_tokens": [*vision.values(), *audio.values()]})
    vision_vocab = audio_vocab = 2
    # the same vocabulary, the named tokens readable as tokenizer.image_token(_id) etc. (and saved so)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=trained.backend_tokenizer, eos_token=trained.eos_token,
                                        pad_token=trained.pad_token, padding_side="left",
                                        extra_special_tokens={**text_named, **vision, **audio})
    ids = {f"{name}_id": getattr(tokenizer, f"{name}_id") for name in ("boi_token", "eoi_token", "image_token",
                                                                        "boa_token", "eoa_token", "audio_token")}
    config = Gemma3nConfig(
        text_config=dict(vocab_size=len(tokenizer), vocab_size_per_layer_input=text_vocab, hidden_size=64,
                         hidden_size_per_layer_input=8, intermediate_size=128, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=6,
                         layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
                         num_kv_shared_layers=2, laurel_rank=8, altup_num_inputs=2,
                         activation_sparsity_pattern=[0.95, 0.0, 0.0, 0.0], max_position_embeddings=1024,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None),
        vision_config=dict(architecture="test_efficientnet", hidden_size=256, vocab_size=vision_vocab,
                           vocab_offset=text_vocab),
        audio_config=dict(vocab_size=audio_vocab, vocab_offset=text_vocab + vision_vocab, input_feat_size=16,
                          hidden_size=32, conf_num_attention_heads=2, conf_num_hidden_layers=1,
                          sscp_conv_channel_size=(8, 4)),
        vision_soft_tokens_per_image=4,
        audio_soft_tokens_per_image=4,
        boi_token_id=ids["boi_token_id"], eoi_token_id=ids["eoi_token_id"], image_token_id=ids["image_token_id"],
        boa_token_id=ids["boa_token_id"], eoa_token_id=ids["eoa_token_id"], audio_token_id=ids["audio_token_id"],
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Gemma3nForConditionalGeneration(config).eval()
    processor = Gemma3nProcessor(
        feature_extractor=Gemma3nAudioFeatureExtractor(feature_size=16),
        image_processor=SiglipImageProcessor(size={"height": 64, "width": 64}),
        tokenizer=tokenizer,
        image_seq_length=4,
        audio_seq_length=4,
        chat_template=chat_template(vision["image_token"]),
    )
    return model, processor
