"""Nemotron-H Omni (Nemotron 3 Nano Omni): a RADIO vision tower (cls and register tokens, CPE position embeddings, a
video patch projection over pairs of frames), pixel shuffle and an MLP projector, and Nemotron-H, a hybrid language
model (Mamba-2 layers on both sides of an attention layer without RoPE, MLP and MoE layers between); 1-D positions,
which the language model does not use.

A 56-pixel image is 4x4 patches of 14, pixel-shuffled 2x2: `<img>`, 4 `<image>` and `</img>`. A 4-frame 56-pixel
video is 2 tubelets of 2 frames, each on its own line: `Frame 1 and frame 2: ` (no timestamps without video metadata),
`<img>`, 4 `<image>` (a video's tokens are image tokens too) and `</img>`. The processor takes one video per call and
does not return `text_replacement_offsets` (the bound processor keeps them, `pnd/architectures/reported.py`).
transformers' forward `torch.cat`s the video features that its `get_video_features` returns as one tensor: the model
built here is repaired as `pnd.attach` repairs it (`pnd._compat.repairs.repair_video_features`).
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        NemotronH_Omni_Reasoning_V3,
        NemotronH_Omni_Reasoning_V3_Config,
        NemotronH_Omni_Reasoning_V3ImageProcessor,
        NemotronH_Omni_Reasoning_V3Processor,
        NemotronH_Omni_Reasoning_V3VideoProcessor,
        ParakeetFeatureExtractor,
    )
    from transformers.image_utils import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD

    from pnd._compat.repairs import repair_video_features
    from pnd.testing import chat_template, tiny_tokenizer

    tokenizer = tiny_tokenizer(["<image>", "<video>", "<img>", "</img>"], corpus=("Frame 1 and frame 2: Frame 3",))
    config = NemotronH_Omni_Reasoning_V3_Config(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=1024,
            # the real pattern (M E M E M * E ...), shortened: Mamba-2 on both sides of the attention layer
            layers_block_type=["linear_attention", "moe", "full_attention", "linear_attention", "mlp"],
            mamba_num_heads=4, mamba_head_dim=16, ssm_state_size=16, n_groups=2,
            chunk_size=16,  # prompts: 24 (image) and 46 (video) tokens, so the scan runs over several chunks
            n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
            moe_shared_expert_intermediate_size=32, tie_word_embeddings=False,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
            initializer_range=0.1,  # at 0.02 the tokens barely depend on the prompt
            time_step_min=1e-20,  # transformers clamps dt to it in a prefill, not in a decoding step: never reached
        ),
        vision_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2.0, patch_size=14,
                           image_size=56, max_img_size=56, num_registers=1, video_temporal_patch_size=2),
        vision_hidden_size=32,
        projector_hidden_size=64,
        video_temporal_patch_size=2,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<video>"),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = NemotronH_Omni_Reasoning_V3(config).eval()
    repair_video_features(model)  # plain generate with a video fails without it, as pnd.attach repairs it
    processor = NemotronH_Omni_Reasoning_V3Processor(
        # 56-pixel images keep their 4x4 grid of 14-pixel patches
        image_processor=NemotronH_Omni_Reasoning_V3ImageProcessor(patch_size=14, min_num_patches=4,
                                                                  max_num_patches=16),
        video_processor=NemotronH_Omni_Reasoning_V3VideoProcessor(
            patch_size=14, video_target_num_patches=16, norm_mean=OPENAI_CLIP_MEAN, norm_std=OPENAI_CLIP_STD),
        tokenizer=tokenizer,
        feature_extractor=ParakeetFeatureExtractor(),  # required by the processor; no audio tower here
        # one placeholder per image or video; the processor writes the `<img>...</img>` blocks and frame labels
        chat_template=chat_template("<image>", "<video>"),
    )
    return model, processor
