"""Tiny random-weight models of the real supported architectures, built offline from configs.

For tests (pnd's and yours), benchmarks, docstring examples and the quickstart: no hub, no downloads.

Example:
    >>> from pnd.testing import tiny_model
    >>> model, processor = tiny_model("llava_onevision")
    >>> model.config.model_type
    'llava_onevision'
"""

from __future__ import annotations

import importlib

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from ..architectures.reported import EXPANSION_KEY, bind_processor
from ..decoding.prior import output_embeddings
from ..io.prompts import video_prompt

_CORPUS = (
    "a red circle moves left. a blue square moves right. a green triangle moves up. "
    "the video shows a yellow star moving down. describe the video. what colour is the shape? "
    "answer with one word. yes no maybe. the cat sat on the mat and the dog ran in the park. "
    "system user assistant you are a helpful assistant."
).split(". ")

_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{{ image_placeholder }}"
    "{% elif part['type'] == 'video' %}{{ video_placeholder }}"
    "{% else %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def chat_template(image: str, video: str | None = None) -> str:
    """The tiny models' chat template (ChatML turns) with `image` (and `video`, where given) written for each visual
    part of a message, as the family's own template writes its placeholder.

    Example:
        >>> "[IMG]" in chat_template("[IMG]") and "{{ image_placeholder }}" not in chat_template("[IMG]")
        True
    """
    template = _CHAT_TEMPLATE.replace("{{ image_placeholder }}", image)
    return template if video is None else template.replace("{{ video_placeholder }}", video)


def tiny_tokenizer(special_tokens: list[str], vocab_size: int = 600, named: dict | None = None,
                   corpus: tuple[str, ...] = ()) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on a few sentences (about one token per word), plus special tokens.

    `named` maps attribute names to special tokens (e.g. {"image_token": "<|image|>"}: `tokenizer.image_token` and
    `tokenizer.image_token_id`), for processors that read them from the tokenizer; `corpus` adds training sentences.
    """
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *special_tokens]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([*_CORPUS, *corpus], trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        padding_side="left",
        extra_special_tokens=named or {},
    )


QWEN_VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")


def vision_token_ids(tokenizer, tokens: tuple[str, ...] = QWEN_VISION_TOKENS) -> dict:
    """The config fields of Qwen2-VL's format's (start, end, image, video) special tokens, for families that use it.

    Example:
        >>> sorted(vision_token_ids(tiny_tokenizer(list(QWEN_VISION_TOKENS))))
        ['image_token_id', 'video_token_id', 'vision_end_token_id', 'vision_start_token_id']
    """
    start, end, image, video = tokenizer.convert_tokens_to_ids(list(tokens))
    return dict(vision_start_token_id=start, vision_end_token_id=end, image_token_id=image, video_token_id=video)


def _scale_attention(model: torch.nn.Module, factor: float) -> None:
    """Sharpen attention, short convolutions and logits so that position or masking bugs change the tokens.

    At random init attention is nearly uniform (docs/design.md §7): scaling q/k and lm_head fixes that.
    """
    with torch.no_grad():
        for name, param in model.named_parameters():
            if ("language_model" in name or "text_model" in name) and name.endswith(("q_proj.weight", "k_proj.weight")):
                param.mul_(factor)
            if "language_model" in name and name.endswith("q_b_proj.weight"):  # MLA (Kimi K2.5): queries only
                param.mul_(factor * factor)
            # LFM2's short convolutions, y = C * conv(B * x): scaling the input projection (B, C, x) and the kernel makes
            # the convolution matter, so that a state carried across the removed span changes the tokens too; the same
            # for Mamba-2's input projection and convolution (Nemotron-H)
            if "language_model" in name and name.endswith(("conv.in_proj.weight", "conv.conv.weight",
                                                           "mixer.in_proj.weight", "mixer.conv1d.weight")):
                param.mul_(factor)
        # q/k RMSNorms right after the projections (Qwen3-VL, Qwen3.5, Gemma 3, LFM2) undo that scaling: scale their gain
        for name, module in model.named_modules():
            if ("language_model" in name or "text_model" in name) and name.endswith(
                    ("q_norm", "k_norm", "q_layernorm", "k_layernorm", "query_layernorm", "key_layernorm")):
                if getattr(module, "weight", None) is None:  # a weightless L2 norm (Muse Glimmer: it scales itself)
                    continue
                if module.weight.any():
                    module.weight.mul_(factor)  # gain = weight (ones at init)
                else:
                    module.weight.fill_(factor - 1)  # gain = 1 + weight (zeros at init)
        output_embeddings(model).weight.mul_(factor)


def _llava_onevision(seed: int, **text):
    from transformers import (
        LlavaOnevisionConfig,
        LlavaOnevisionForConditionalGeneration,
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
    )

    tokenizer = tiny_tokenizer(["<image>", "<video>"])
    size = {"height": 32, "width": 32}
    config = LlavaOnevisionConfig(
        vision_config=dict(
            model_type="siglip_vision_model", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=2, image_size=32, patch_size=8,
        ),
        text_config={
            **dict(model_type="qwen2", vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                   eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id),
            **text,
        },
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        video_token_index=tokenizer.convert_tokens_to_ids("<video>"),
        vision_feature_layer=-1,
        vision_feature_select_strategy="full",
        image_grid_pinpoints=[[32, 32], [32, 64], [64, 32]],
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlavaOnevisionForConditionalGeneration(config).eval()
    processor = LlavaOnevisionProcessor(
        image_processor=LlavaOnevisionImageProcessor(size=size, image_grid_pinpoints=config.image_grid_pinpoints),
        video_processor=LlavaOnevisionVideoProcessor(size=size),
        tokenizer=tokenizer,
        num_image_tokens=(32 // 8) ** 2,
        vision_feature_select_strategy="full",
        chat_template=chat_template("<image>", "<video>"),
    )
    return model, processor


def _qwen2_vl(seed: int, model_type: str = "qwen2_vl"):
    from transformers import (
        AutoConfig,
        AutoModelForImageTextToText,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    tokenizer = tiny_tokenizer(list(QWEN_VISION_TOKENS))
    vision = dict(depth=1, embed_dim=32, hidden_size=64, num_heads=2, patch_size=14, spatial_merge_size=2,
                  temporal_patch_size=2, in_channels=3)
    if model_type == "qwen2_5_vl":
        vision = dict(depth=2, hidden_size=32, out_hidden_size=64, intermediate_size=64, num_heads=2, patch_size=14,
                      spatial_merge_size=2, temporal_patch_size=2, window_size=56, fullatt_block_indexes=[1])
    config = AutoConfig.for_model(
        model_type,
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 10000.0},
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=vision,
        **vision_token_ids(tokenizer),
    )
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config).eval()
    pixels = dict(min_pixels=56 * 56, max_pixels=56 * 56)
    processor = Qwen2VLProcessor(
        image_processor=Qwen2VLImageProcessor(**pixels),
        video_processor=Qwen2VLVideoProcessor(**pixels, cap_pixels_per_frame=True),
        tokenizer=tokenizer,
        chat_template=chat_template("<|vision_start|><|image_pad|><|vision_end|>",
                                    "<|vision_start|><|video_pad|><|vision_end|>"),
    )
    return model, processor


def _qwen3_vl(seed: int, model_type: str = "qwen3_vl"):
    """Qwen3-VL, or Qwen3.5 (same processor; a hybrid language model: Gated-DeltaNet layers around full attention)."""
    from transformers import AutoConfig, AutoModelForImageTextToText, Qwen3VLProcessor

    tokenizer = tiny_tokenizer(list(QWEN_VISION_TOKENS))
    rope = {"rope_type": "default", "mrope_section": [2, 3, 3], "mrope_interleaved": True, "rope_theta": 10000.0}
    text = dict(num_hidden_layers=2, intermediate_size=128)
    vision = dict(deepstack_visual_indexes=[0])
    if model_type.startswith("qwen3_5"):  # rotary on the whole head (Qwen3.5 defaults to a quarter of it)
        rope["partial_rotary_factor"] = 1.0
        text = dict(num_hidden_layers=3, intermediate_size=128, layer_types=_HYBRID_LAYERS, linear_conv_kernel_dim=4,
                    linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4)
        vision = {}
    if model_type.endswith("moe"):
        text |= dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
        if model_type == "qwen3_5_moe":
            text |= dict(shared_expert_intermediate_size=32)
    config = AutoConfig.for_model(
        model_type,
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, head_dim=16, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=1024, rope_parameters=rope, **text,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=16,
                           spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64,
                           num_position_embeddings=16, **vision),
        **vision_token_ids(tokenizer),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config).eval()
    return model, Qwen3VLProcessor(tokenizer=tokenizer, **qwen3_vl_processor_parts())


def qwen3_vl_processor_parts() -> dict:
    """The tiny Qwen3-VL processor's image and video processors and chat template (families that write its format
    build theirs from them): a 64-pixel image or frame pair is 4 tokens."""
    from transformers import Qwen2VLImageProcessor, Qwen3VLVideoProcessor

    video_size = {"shortest_edge": 64 * 64, "longest_edge": 64 * 64 * 4}
    return dict(
        image_processor=Qwen2VLImageProcessor(patch_size=16, merge_size=2, min_pixels=64 * 64, max_pixels=64 * 64),
        video_processor=Qwen3VLVideoProcessor(size=video_size, patch_size=16, merge_size=2, do_sample_frames=False,
                                              cap_pixels_per_frame=True, fps=2),
        chat_template=chat_template("<|vision_start|><|image_pad|><|vision_end|>",
                                    "<|vision_start|><|video_pad|><|vision_end|>"),
    )


_HYBRID_LAYERS = ["linear_attention", "full_attention", "linear_attention"]  # a recurrent layer on both sides


def _glm4v(seed: int, model_type: str = "glm4v"):
    from transformers import (
        AutoConfig,
        AutoModelForImageTextToText,
        Glm4vImageProcessor,
        Glm4vProcessor,
        Glm4vVideoProcessor,
    )

    specials = ["<|begin_of_image|>", "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>", "<|image|>",
                "<|video|>"]
    tokenizer = tiny_tokenizer(specials)
    ids = dict(zip(("image_start_token_id", "image_end_token_id", "video_start_token_id", "video_end_token_id",
                    "image_token_id", "video_token_id"), tokenizer.convert_tokens_to_ids(specials)))
    moe = dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1,
               first_k_dense_replace=1, n_group=1, topk_group=1) if model_type == "glm4v_moe" else {}
    config = AutoConfig.for_model(
        model_type,
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2, head_dim=16,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024, **moe,
            rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3], "partial_rotary_factor": 1.0,
                             "rope_theta": 10000.0},
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        ),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=14, image_size=56,
                           spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64),
        **ids,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config).eval()
    size = {"shortest_edge": 56 * 56, "longest_edge": 56 * 56 * 4}
    processor = Glm4vProcessor(
        image_processor=Glm4vImageProcessor(size={"shortest_edge": 56 * 56, "longest_edge": 56 * 56}),
        video_processor=Glm4vVideoProcessor(size=size, do_sample_frames=False),
        tokenizer=tokenizer,
        chat_template=chat_template("<|begin_of_image|><|image|><|end_of_image|>",
                                    "<|begin_of_video|><|video|><|end_of_video|>"),
    )
    return model, processor


_TINY_CLIP = dict(model_type="clip_vision_model", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=2, image_size=32, patch_size=8, projection_dim=32)


def _tiny_llama(tokenizer) -> dict:
    """The text config of a tiny Llama language model for `tokenizer`."""
    return dict(model_type="llama", vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None)


def _llava(seed: int):
    from transformers import CLIPImageProcessor, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    tokenizer = tiny_tokenizer(["<image>"])
    config = LlavaConfig(
        vision_config=_TINY_CLIP,
        text_config=_tiny_llama(tokenizer),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=chat_template("<image>"),
    )
    return model, processor


def _video_llava(seed: int):
    from transformers import (
        VideoLlavaConfig,
        VideoLlavaForConditionalGeneration,
        VideoLlavaImageProcessor,
        VideoLlavaProcessor,
        VideoLlavaVideoProcessor,
    )

    tokenizer = tiny_tokenizer(["<image>", "<video>"])
    config = VideoLlavaConfig(
        vision_config=_TINY_CLIP,
        text_config=_tiny_llama(tokenizer),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        video_token_index=tokenizer.convert_tokens_to_ids("<video>"),
        vision_feature_layer=-1,
        image_seq_length=16,
        video_seq_length=4 * 17,
    )
    torch.manual_seed(seed)
    model = VideoLlavaForConditionalGeneration(config).eval()
    crop = dict(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    processor = VideoLlavaProcessor(
        image_processor=VideoLlavaImageProcessor(**crop),
        video_processor=VideoLlavaVideoProcessor(**crop),
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=chat_template("<image>", "<video>"),
    )
    return model, processor


def _perception_lm(seed: int):
    from transformers import (
        PerceptionLMConfig,
        PerceptionLMForConditionalGeneration,
        PerceptionLMImageProcessor,
        PerceptionLMProcessor,
        PerceptionLMVideoProcessor,
    )

    tokenizer = tiny_tokenizer(["<|image|>", "<|video|>"], named={"image_token": "<|image|>", "video_token": "<|video|>"})
    config = PerceptionLMConfig(  # a timm ViT built from its config: no weights downloaded
        vision_config={"model_type": "timm_wrapper", "architecture": "vit_tiny_patch16_224", "num_classes": 0,
                       "model_args": {"img_size": 32, "patch_size": 8, "embed_dim": 32, "depth": 1, "num_heads": 2,
                                      "class_token": True, "global_pool": ""}},
        text_config=_tiny_llama(tokenizer),
        vision_use_cls_token=True,
        projector_pooling_ratio=2,
        image_token_id=tokenizer.image_token_id,
        video_token_id=tokenizer.video_token_id,
    )
    torch.manual_seed(seed)
    model = PerceptionLMForConditionalGeneration(config).eval()
    processor = PerceptionLMProcessor(
        image_processor=PerceptionLMImageProcessor(tile_size=32, max_num_tiles=1),
        video_processor=PerceptionLMVideoProcessor(size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        patch_size=8,
        pooling_ratio=2,
        chat_template=chat_template("<|image|>", "<|video|>"),
    )
    return model, processor


def _gemma3(seed: int):
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3ImageProcessor, Gemma3Processor

    names = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}
    tokenizer = tiny_tokenizer(list(names.values()), named=names)
    tokenizer.add_tokens(["\n\n\n", "\n\n"])  # as Gemma's tokenizer: a run of newlines is one token
    config = Gemma3Config(
        vision_config={**_TINY_CLIP, "model_type": "siglip_vision_model"},
        text_config=dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, head_dim=16,
                         num_attention_heads=4, num_key_value_heads=2, query_pre_attn_scalar=16,
                         max_position_embeddings=1024, num_hidden_layers=3, sliding_window=6,  # prompts: ~25 tokens
                         layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None),
        mm_tokens_per_image=4,
        boi_token_index=tokenizer.boi_token_id,
        eoi_token_index=tokenizer.convert_tokens_to_ids(names["eoi_token"]),
        image_token_index=tokenizer.image_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Gemma3ForConditionalGeneration(config).eval()
    with torch.no_grad():  # initialised to zeros: the image would not reach the language model
        model.model.multi_modal_projector.mm_input_projection_weight.normal_(0, 1)
    processor = Gemma3Processor(
        image_processor=Gemma3ImageProcessor(size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        image_seq_length=config.mm_tokens_per_image,
        chat_template=chat_template(names["boi_token"]),
    )
    return model, processor


def _internvl(seed: int):
    from transformers import (
        GotOcr2ImageProcessor,
        InternVLConfig,
        InternVLForConditionalGeneration,
        InternVLProcessor,
        InternVLVideoProcessor,
    )

    named = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>",
             "video_token": "<video>"}
    tokenizer = tiny_tokenizer(list(named.values()), named=named)
    config = InternVLConfig(
        vision_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                           image_size=32, patch_size=8),
        text_config={**_tiny_llama(tokenizer), "model_type": "qwen2"},
        image_token_id=tokenizer.context_image_token_id,
        image_seq_length=4,  # (32 / 8)^2 patches, pixel-shuffled by downsample_ratio 0.5
        downsample_ratio=0.5,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = InternVLForConditionalGeneration(config).eval()
    size = {"height": 32, "width": 32}
    processor = InternVLProcessor(
        image_processor=GotOcr2ImageProcessor(size=size, max_patches=2),
        video_processor=InternVLVideoProcessor(size=size),
        tokenizer=tokenizer,
        image_seq_length=4,
        chat_template=chat_template("<IMG_CONTEXT>\n", "<video>\n"),
    )
    return model, processor


def _molmo2(seed: int):
    from transformers import (
        Molmo2Config,
        Molmo2ForConditionalGeneration,
        Molmo2ImageProcessor,
        Molmo2Processor,
        Molmo2VideoProcessor,
    )

    specials = ["<|image|>", "<|video|>", "<im_patch>", "<im_col>", "<im_start>", "<low_res_im_start>", "<frame_start>",
                "<im_end>", "<frame_end>", "<im_low>"]
    tokenizer = tiny_tokenizer(specials, named={"image_token": "<|image|>", "video_token": "<|video|>"})
    ids = dict(zip(specials, tokenizer.convert_tokens_to_ids(specials)))
    attention = dict(num_attention_heads=2, num_key_value_heads=2, head_dim=16, intermediate_size=64)
    config = Molmo2Config(
        vision_config=dict(hidden_size=32, num_hidden_layers=2, image_size=[56, 56], patch_size=14,
                           num_position_embeddings=16, **attention),
        adapter_config=dict(vision_feature_layer=[-1], hidden_size=32, text_hidden_size=64, **attention),
        text_config=dict(vocab_size=len(tokenizer), additional_vocab_size=0, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         max_position_embeddings=1024, rope_scaling_layers=[], eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=None),
        image_start_token_id=ids["<im_start>"], low_res_image_start_token_id=ids["<low_res_im_start>"],
        image_end_token_id=ids["<im_end>"], image_patch_id=ids["<im_patch>"],
        frame_start_token_id=ids["<frame_start>"], frame_end_token_id=ids["<frame_end>"],
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Molmo2ForConditionalGeneration(config).eval()
    size = {"height": 56, "width": 56}  # one 4x4-patch crop per view, pooled 2x2: 4 tokens per view
    processor = Molmo2Processor(
        image_processor=Molmo2ImageProcessor(size=size, max_crops=1, overlap_margins=[1, 1], pooling_size=[2, 2]),
        video_processor=Molmo2VideoProcessor(size=size, pooling_size=[2, 2], do_sample_frames=False),
        tokenizer=tokenizer,
        chat_template=chat_template("<|image|>", "<|video|>"),
    )
    return model, processor


def _smolvlm(seed: int):
    from transformers import (
        SmolVLMConfig,
        SmolVLMForConditionalGeneration,
        SmolVLMImageProcessor,
        SmolVLMProcessor,
        SmolVLMVideoProcessor,
    )
    from transformers.models.smolvlm.processing_smolvlm import DEFAULT_CHAT_TEMPLATE

    named = {"fake_image_token": "<fake_token_around_image>", "image_token": "<image>",
             "global_image_token": "<global-img>", "end_of_utterance_token": "<end_of_utterance>", "video_token": "<video>"}
    tiles = [f"<row_{row}_col_{col}>" for row in (1, 2) for col in (1, 2)]
    # the intro trained in, so that " You" after the template's "User:" is one token (half template, half expansion)
    tokenizer = tiny_tokenizer([*named.values(), *tiles], named=named,
                               corpus=("User: You are provided the following series of frames from a video",))
    config = SmolVLMConfig(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8),
        text_config=_tiny_llama(tokenizer),
        image_token_id=tokenizer.image_token_id,
        scale_factor=2,  # (32 / 8)^2 / 2^2 = 4 tokens per frame or tile
    )
    torch.manual_seed(seed)
    model = SmolVLMForConditionalGeneration(config).eval()
    tile = {"longest_edge": 32}
    processor = SmolVLMProcessor(
        image_processor=SmolVLMImageProcessor(size={"longest_edge": 64}, max_image_size=tile),
        video_processor=SmolVLMVideoProcessor(size=tile, max_image_size=tile),
        tokenizer=tokenizer,
        image_seq_len=4,
        chat_template=DEFAULT_CHAT_TEMPLATE,  # SmolVLM's own, which its processor also forces for videos
    )
    return model, processor


def _video_llama_3(seed: int):
    from transformers import (
        VideoLlama3Config,
        VideoLlama3ForConditionalGeneration,
        VideoLlama3ImageProcessor,
        VideoLlama3Processor,
        VideoLlama3VideoProcessor,
    )

    named = {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>"}
    tokenizer = tiny_tokenizer(list(named.values()), named=named)
    config = VideoLlama3Config(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           patch_size=14),
        text_config={**_tiny_llama(tokenizer), "model_type": "qwen2"},
        image_token_id=tokenizer.image_token_id,
        video_token_id=tokenizer.video_token_id,
    )
    torch.manual_seed(seed)
    model = VideoLlama3ForConditionalGeneration(config).eval()
    pixels = dict(min_pixels=56 * 56, max_pixels=56 * 56)
    processor = VideoLlama3Processor(
        image_processor=VideoLlama3ImageProcessor(**pixels),
        video_processor=VideoLlama3VideoProcessor(min_pixels=112 * 112, max_pixels=112 * 112),
        tokenizer=tokenizer,
        chat_template=chat_template("<|image_pad|>", "<|video_pad|>"),
    )
    return model, processor


def _minicpmv(seed: int, model_type: str = "minicpmv4_6"):
    """MiniCPM-V 4.6 or 4.7 (canvas M-RoPE), or MiniCPM-OCR (1-D positions), with Qwen3.5's hybrid language model;
    images of 56 pixels cut into 2x2 slices (28-pixel scale)."""
    import transformers
    from transformers import AutoConfig, AutoModelForImageTextToText

    family = "MiniCPMOcr" if model_type == "minicpm_ocr" else "MiniCPMV4_6"
    processor_name = "MiniCPMV4_7Processor" if model_type == "minicpmv4_7" else f"{family}Processor"

    named = {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>", "image_start_token": "<image>",
             "image_end_token": "</image>", "slice_start_token": "<slice>", "slice_end_token": "</slice>",
             "image_id_start_token": "<image_id>", "image_id_end_token": "</image_id>"}
    tokenizer = tiny_tokenizer(list(named.values()), named=named)
    rope = {"rope_type": "default", "mrope_section": [2, 3, 3], "mrope_interleaved": True, "rope_theta": 10000.0,
            "partial_rotary_factor": 1.0}
    markers = {}
    if model_type == "minicpmv4_7":  # canvas M-RoPE pins these tokens to the image's corners
        [newline] = tokenizer("\n", add_special_tokens=False).input_ids
        markers = dict(zip(("image_start_id", "image_end_id", "slice_start_id", "slice_end_id"),
                           tokenizer.convert_tokens_to_ids(["<image>", "</image>", "<slice>", "</slice>"])),
                       newline_id=newline)
    config = AutoConfig.for_model(
        model_type,
        **markers,
        text_config=dict(
            model_type="qwen3_5_text", vocab_size=len(tokenizer), hidden_size=64, head_dim=16, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=1024, rope_parameters=rope, num_hidden_layers=3,
            intermediate_size=128, layer_types=_HYBRID_LAYERS, linear_conv_kernel_dim=4, linear_key_head_dim=16,
            linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=56, patch_size=14),
        insert_layer_id=0,
        downsample_mode="4x",  # one 2x2 merge: a 28-pixel slice is one token, a 56-pixel frame four
        image_token_id=tokenizer.image_token_id,
        video_token_id=tokenizer.video_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config).eval()
    common = dict(patch_size=14, downsample_mode="4x")
    processor = getattr(transformers, processor_name)(
        image_processor=getattr(transformers, f"{family}ImageProcessor")(scale_resolution=28, max_slice_nums=4,
                                                                          **common),
        video_processor=getattr(transformers, f"{family}VideoProcessor")(scale_resolution=56, do_sample_frames=False,
                                                                          **common),
        tokenizer=tokenizer,
        chat_template=chat_template("<|image_pad|>", "<|video_pad|>"),
    )
    return model, processor


def _lfm2_vl(seed: int):
    """LFM2-VL: a hybrid language model (short-convolution layers on both sides of a full-attention layer); a 56x56
    image is split into 2x2 tiles of 4 tokens each plus a thumbnail of 4, a 32x128 one into 1x4 tiles plus a thumbnail
    of 4, a 32x32 one is a single block of 4."""
    from transformers import Lfm2VlConfig, Lfm2VlForConditionalGeneration, Lfm2VlImageProcessor, Lfm2VlProcessor

    named = {"image_token": "<image>", "image_start_token": "<|image_start|>", "image_end_token": "<|image_end|>",
             "image_thumbnail_token": "<|img_thumbnail|>"}
    tiles = [f"<|img_row_{row}_col_{col}|>" for row in (1, 2) for col in (1, 2, 3, 4)]
    tokenizer = tiny_tokenizer([*named.values(), *tiles], named=named)
    config = Lfm2VlConfig(
        vision_config=dict(model_type="siglip2_vision_model", hidden_size=32, intermediate_size=64,
                           num_hidden_layers=2, num_attention_heads=2, patch_size=8, num_patches=16),
        text_config={**_tiny_llama(tokenizer), "model_type": "lfm2", "num_hidden_layers": 3,
                     "layer_types": ["conv", "full_attention", "conv"], "block_auto_adjust_ff_dim": False},
        image_token_id=tokenizer.image_token_id,
        projector_hidden_size=64,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Lfm2VlForConditionalGeneration(config).eval()
    processor = Lfm2VlProcessor(
        image_processor=Lfm2VlImageProcessor(encoder_patch_size=8, tile_size=32, min_image_tokens=1,
                                             max_image_tokens=4, min_tiles=2, max_tiles=4),
        tokenizer=tokenizer,
        chat_template=chat_template("<image>"),
    )
    return model, processor


_BUILDERS = {
    "llava_onevision": _llava_onevision,
    "qwen2_vl": lambda seed: _qwen2_vl(seed, "qwen2_vl"),
    "qwen2_5_vl": lambda seed: _qwen2_vl(seed, "qwen2_5_vl"),
    "llava": _llava,
    "qwen3_vl": lambda seed: _qwen3_vl(seed, "qwen3_vl"),
    "qwen3_vl_moe": lambda seed: _qwen3_vl(seed, "qwen3_vl_moe"),
    "qwen3_5": lambda seed: _qwen3_vl(seed, "qwen3_5"),
    "qwen3_5_moe": lambda seed: _qwen3_vl(seed, "qwen3_5_moe"),
    "glm4v": lambda seed: _glm4v(seed, "glm4v"),
    "glm4v_moe": lambda seed: _glm4v(seed, "glm4v_moe"),
    "video_llava": _video_llava,
    "perception_lm": _perception_lm,
    "gemma3": _gemma3,
    "molmo2": _molmo2,
    "internvl": _internvl,
    "smolvlm": _smolvlm,
    "video_llama_3": _video_llama_3,
    "minicpmv4_6": lambda seed: _minicpmv(seed, "minicpmv4_6"),
    "minicpmv4_7": lambda seed: _minicpmv(seed, "minicpmv4_7"),
    "lfm2_vl": _lfm2_vl,
}
# families added through the generic expansion finder: builders in pnd/testing/builders/<model type>.py
FINDER_VIDEO_ARCHITECTURES = ("gemma4", "gemma4_unified", "glm46v", "cosmos3_edge", "cosmos3_omni", "cohere_compass",
                              "ernie4_5_vl_moe", "qwen3_omni_moe_thinker", "kimi_k25", "muse_glimmer", "lfm3_vl",
                              "minicpm_ocr", "qwen4_exp", "nemotron_h_omni", "glm5_next",
                              "qwen2_5_omni_thinker")
FINDER_IMAGE_ARCHITECTURES = ("mistral3", "idefics3", "step3p7", "hunyuan_vl", "granite4_vision",
                              "chameleon", "idefics2", "emu3", "janus", "vipllava",
                              "aya_vision")
ONE_VIDEO_PER_CALL = ("nemotron_h_omni",)  # processors that take one video per call: `tiny_inputs` batches by hand
TINY_ARCHITECTURES = (*_BUILDERS, *FINDER_VIDEO_ARCHITECTURES, *FINDER_IMAGE_ARCHITECTURES)
VIDEO_ARCHITECTURES = ("llava_onevision", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "glm4v", "glm4v_moe", "video_llava",
                       "perception_lm", "qwen3_5", "qwen3_5_moe", "internvl", "smolvlm", "video_llama_3", "minicpmv4_6",
                       "minicpmv4_7", *FINDER_VIDEO_ARCHITECTURES)


def tiny_model(model_type: str, seed: int = 0, sharpen: float = 4.0, **text):
    """A tiny random-weight model of a real architecture and its processor, built offline.

    Args:
        model_type: one of `TINY_ARCHITECTURES`.
        seed: the weights' seed.
        sharpen: attention (q/k), short-convolution (LFM2) and output weights are scaled by this, so that a position
            or masking bug changes the generated tokens (at random init attention is nearly uniform).
        **text: overrides of the language model's config, for "llava_onevision" (e.g. hidden_size=512).

    Returns:
        (model, processor); the processor is bound to the model, as `pnd.attach(model, processor)` binds it.

    Example:
        >>> from pnd.testing import tiny_model
        >>> model, processor = tiny_model("qwen2_vl")
        >>> model.config.model_type
        'qwen2_vl'
    """
    build = _BUILDERS.get(model_type) or importlib.import_module(f"pnd.testing.builders.{model_type}").build
    model, processor = build(seed, **text) if text else build(seed)
    _scale_attention(model, sharpen)
    bind_processor(model, processor)  # as pnd.attach(model, processor) does
    return model, processor


def random_video(seed: int, frames: int = 4, size: int = 56) -> torch.Tensor:
    """A (frames, 3, size, size) uint8 video of random pixels, the same for the same seed.

    Example:
        >>> random_video(0, frames=2).shape
        torch.Size([2, 3, 56, 56])
    """
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (frames, 3, size, size), dtype=torch.uint8, generator=generator)


def tiny_inputs(processor, model_type: str, prompts=("Describe the video.",), seed: int = 0, image: bool = False):
    """Processor outputs for one visual input per prompt, ready for `model.generate(**inputs)`.

    Args:
        processor, model_type: from `tiny_model`.
        prompts: one chat prompt is built per instruction (batched with left padding).
        seed: the first random video's seed (one more per prompt).
        image: an image instead of a video (always for LLaVA-1.5, which takes no video).

    Returns:
        The processor's BatchFeature.

    Example:
        >>> from pnd.testing import tiny_model, tiny_inputs
        >>> _, processor = tiny_model("llava_onevision")
        >>> tiny_inputs(processor, "llava_onevision", prompts=("a", "b c"))["input_ids"].shape[0]
        2
    """
    kind = "image" if image or model_type not in VIDEO_ARCHITECTURES else "video"
    texts = [video_prompt(processor, prompt, kind) for prompt in prompts]
    visuals = [random_video(seed + i, frames=4 if kind == "video" else 1) for i in range(len(prompts))]
    if kind == "image":
        return processor(text=texts, images=[[v[0]] for v in visuals], return_tensors="pt", padding=True)  # per prompt
    if model_type in ONE_VIDEO_PER_CALL:
        return left_padded([processor(text=[t], videos=[v], return_tensors="pt") for t, v in zip(texts, visuals)],
                           processor.tokenizer.pad_token_id)
    return processor(text=texts, videos=visuals, return_tensors="pt", padding=True)


def left_padded(rows: list, pad_token_id: int):
    """One batch of single-prompt processor outputs: token inputs left-padded, the rest (pixels) concatenated, as a user
    batches a processor that takes one video per call (Nemotron-H Omni).

    Example:
        >>> from transformers import BatchFeature
        >>> rows = [BatchFeature({"input_ids": torch.tensor([[5, 6]]), "attention_mask": torch.tensor([[1, 1]])}),
        ...         BatchFeature({"input_ids": torch.tensor([[7]]), "attention_mask": torch.tensor([[1]])})]
        >>> left_padded(rows, 0)["input_ids"].tolist()
        [[5, 6], [0, 7]]
    """
    from transformers import BatchFeature

    width = max(row["input_ids"].shape[1] for row in rows)

    def pad(row, key, value):
        return torch.nn.functional.pad(row[key], (width - row[key].shape[1], 0), value=value)

    batch = {"input_ids": torch.cat([pad(row, "input_ids", pad_token_id) for row in rows]),
             "attention_mask": torch.cat([pad(row, "attention_mask", 0) for row in rows])}
    if EXPANSION_KEY in rows[0]:  # what a processor bound to an attached model adds
        batch[EXPANSION_KEY] = torch.cat([pad(row, EXPANSION_KEY, 0) for row in rows])
    for key in rows[0].keys() - batch.keys():
        batch[key] = torch.cat([row[key] for row in rows])
    return BatchFeature(batch)
