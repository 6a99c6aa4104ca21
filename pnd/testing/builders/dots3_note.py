"""dots3 (dots3_note): a Qwen2-VL-style vision tower (2-D axial RoPE, 2x2 merge, MoE MLPs) with an adapter, an audio
encoder, and a DeepSeek-V3.2-style language model whose DeepSeek-Sparse-Attention MLA layers (an indexer keeps the top
`index_topk` keys per query) sit between sliding-window MLA layers with their own head sizes; a dense first MLP then
MoE; 1-D positions.

The processor writes placeholders only: `<|imgpad|>` per merged image patch, `<|video_pad|>` per merged video patch
(Qwen2-VL's image processor, Qwen3-VL's video processor, patches of one frame, as its patch embedding takes them:
a 64-pixel image or frame is 4 tokens), inside the
template's `<|img|>`…`<|endofimg|>` pair. The indexer keeps 8 keys per query and the window is 16 slots, so on
~30-token prompts both drop keys. The padding token (which the tiny models can generate) gets a random embedding
instead of zeros: as a query, a zero embedding scores every key 0 in the indexer, and its top-k of ties then depends
on the number of keys (in transformers itself), so the prior on the kept tokens alone and in the prompt's slots differ.
"""

from __future__ import annotations

import torch

_TOKENS = ("<|img|>", "<|endofimg|>", "<|imgpad|>", "<|video_pad|>", "<|audio_comp_pad|>")


def build(seed: int):
    from transformers import (
        Dots3NoteConfig,
        Dots3NoteFeatureExtractor,
        Dots3NoteForConditionalGeneration,
        Dots3NoteProcessor,
        Qwen2VLImageProcessor,
        Qwen3VLVideoProcessor,
    )

    from pnd.testing import chat_template, tiny_tokenizer

    tokenizer = tiny_tokenizer(list(_TOKENS))
    ids = {name: tokenizer.convert_tokens_to_ids(token) for name, token in
           (("image_token_id", "<|imgpad|>"), ("video_token_id", "<|video_pad|>"), ("audio_token_id", "<|audio_comp_pad|>"))}
    mla = dict(num_attention_heads=4, num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=32, head_dim=24,
               qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16)
    config = Dots3NoteConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
            shared_experts_intermediate_size=32, num_hidden_layers=3, max_position_embeddings=1024,
            layer_types=["indexed_attention", "sliding_attention", "indexed_attention"], sliding_window=16,
            mlp_layer_types=["dense", "sparse", "sparse"], n_routed_experts=4, num_experts_per_tok=2,
            n_shared_experts=1, **mla, **{f"swa_{name}": value for name, value in mla.items()},
            # 16 indexer heads: a key scores 0 only if every head's ReLU does, so top-k seldom meets a tie
            index_n_heads=16, index_head_dim=16, index_topk=8,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(hidden_size=32, intermediate_size=64, moe_intermediate_size=32, num_hidden_layers=2,
                           num_attention_heads=2, patch_size=16, spatial_merge_size=2, mlp_layer_types=["dense", "sparse"],
                           num_local_experts=4, num_experts_per_tok=2, adapter_in_dim=32, adapter_out_dim=64),
        audio_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                          downsample_hidden_size=32, adapter_input_size=32, adapter_out_dim=64),
        **ids,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Dots3NoteForConditionalGeneration(config).eval()
    with torch.no_grad():  # the padding token's zero embedding: as a query, every indexer score 0, a top-k of ties
        model.get_input_embeddings().weight[tokenizer.pad_token_id].normal_(0.0, 0.02)
    video_size = {"shortest_edge": 64 * 64, "longest_edge": 64 * 64 * 4}
    processor = Dots3NoteProcessor(
        image_processor=Qwen2VLImageProcessor(patch_size=16, temporal_patch_size=1, merge_size=2, min_pixels=64 * 64, max_pixels=64 * 64),
        video_processor=Qwen3VLVideoProcessor(size=video_size, patch_size=16, temporal_patch_size=1, merge_size=2,
                                              do_sample_frames=False, cap_pixels_per_frame=True, fps=2),
        feature_extractor=Dots3NoteFeatureExtractor(),
        tokenizer=tokenizer,
        chat_template=chat_template("<|img|><|imgpad|><|endofimg|>", "<|img|><|video_pad|><|endofimg|>"),
    )
    return model, processor
