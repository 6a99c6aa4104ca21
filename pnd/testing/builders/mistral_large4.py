"""Mistral Large 4 (mistral_large4): Mistral 3's Pixtral vision tower and 2x2 patch merger, and a DeepSeek-V3.2-style
language model: MLA attention without query LoRA under DeepSeek Sparse Attention (an indexer scores every cached key
per query and keeps the top `index_topk`), learned-frequency RoPE (LeRoPE), a log-position query scaling in attention
and indexer, every 4th layer NoPE (here the 3rd of 3), a dense first MLP then MoE with a shared expert, and
tanh-softcapped logits.

A 64-pixel image is 8x8 patches of 8 pixels, merged 2x2: 4 rows of 4 `[IMG]` tokens, each row closed by `[IMG_BREAK]`
and the last by `[IMG_END]` (20 tokens). The indexer keeps 8 keys per query, so on ~40-token prompts the sparse layers
do drop keys. The zero-initialised position scalings (LeRoPE's `alpha`, the query scaling's `scale`) get small random
values, so that a prior at other positions than the conditioned ones shows; the padding token a random embedding
(see dots3_note.py).
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        MistralLarge4Config,
        MistralLarge4ForConditionalGeneration,
        PixtralImageProcessor,
        PixtralProcessor,
    )

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    tokenizer = tiny_tokenizer(["[IMG]", "[IMG_BREAK]", "[IMG_END]"])
    text = {key: value for key, value in tiny_llama_text(tokenizer).items() if key not in ("model_type",
                                                                                            "num_key_value_heads")}
    config = MistralLarge4Config(
        vision_config=dict(model_type="pixtral", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, head_dim=16, image_size=64, patch_size=8, hidden_act="silu"),
        text_config={**text, "model_type": "mistral_large4_text", "num_hidden_layers": 3, "num_key_value_heads": 4,
                     "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2,
                     "kv_lora_rank": 32, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
                     "no_rope_layers": [1, 1, 0], "mlp_layer_types": ["dense", "sparse", "sparse"],
                     # 16 indexer heads: a key scores 0 only if every head's ReLU does, so top-k seldom meets a tie
                     "index_n_heads": 16, "index_head_dim": 16, "index_topk": 8,
                     "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}},
        image_token_index=tokenizer.convert_tokens_to_ids("[IMG]"),
        spatial_merge_size=2,
        vision_feature_layer=-1,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = MistralLarge4ForConditionalGeneration(config).eval()
    with torch.no_grad():
        for module in model.modules():
            if type(module).__name__ == "MistralLarge4TextSoftmaxScaling":
                module.scale.normal_(0.0, 0.3)
            elif type(module).__name__ == "MistralLarge4TextRotaryEmbedding":
                module.alpha.normal_(0.0, 0.3)
        # the padding token's zero embedding: as a query, every indexer score 0, a top-k of ties (dots3_note.py)
        model.get_input_embeddings().weight[tokenizer.pad_token_id].normal_(0.0, 0.02)
    processor = PixtralProcessor(
        image_processor=PixtralImageProcessor(size={"longest_edge": 64}, patch_size=16),
        tokenizer=tokenizer,
        patch_size=8,
        spatial_merge_size=2,
        chat_template=chat_template("[IMG]"),
    )
    return model, processor
