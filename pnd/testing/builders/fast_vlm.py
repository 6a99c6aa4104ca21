"""FastVLM: a tiny random-weight `FastVlmForConditionalGeneration` with LLaVA's processor, built offline (images only).

The vision tower is timm's FastViT-MCi3 (`fastvit_mci3` through `TimmWrapperModel`: RepMixer stages, then attention
stages with conditional position encodings, a 64x downsampling) with one block per stage and narrow stages; its
unpooled last feature map is projected (two-layer MLP) to one token per 64x64 pixels. A 128-pixel image is 2x2 tokens:
the processor writes 4 `<image>` placeholders and nothing else. The language model is Qwen2 (full attention).

The vision convolutions are drawn at He gain and the projector at unit gain: at the 0.02 init the image's signal
vanishes across the tower (its features ~1e-23), so another image left the logits exactly unchanged.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import CLIPImageProcessor, FastVlmConfig, FastVlmForConditionalGeneration, LlavaProcessor

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    tokenizer = tiny_tokenizer(["<image>"])
    widths = (8, 16, 16, 32, 32)  # attention stages: multiples of its head width, 32
    config = FastVlmConfig(
        vision_config=dict(model_type="timm_wrapper", architecture="fastvit_mci3", do_pooling=False,
                           hidden_size=2 * widths[-1],  # FastViT's final convolution doubles the last stage's width
                           model_args={"inference_mode": True, "layers": (1, 1, 1, 1, 1), "embed_dims": widths}),
        text_config={**tiny_llama_text(tokenizer), "model_type": "qwen2"},
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = FastVlmForConditionalGeneration(config).eval()
    with torch.no_grad():  # else the image's signal vanishes across the tower (see the module's docstring)
        for module in model.model.vision_tower.modules():
            if isinstance(module, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
        for module in model.model.multi_modal_projector.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.normal_(std=module.in_features ** -0.5)
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 128}, crop_size={"height": 128, "width": 128}),
        tokenizer=tokenizer,
        patch_size=64,
        vision_feature_select_strategy="full",
        num_additional_image_tokens=0,
        image_token="<image>",
        chat_template=chat_template("<image>"),
    )
    return model, processor
