"""The parts the tiny models share: a tokenizer trained locally, the chat template, config pieces and the
attention sharpening.

Example:
    >>> tokenizer = tiny_tokenizer(["<image>"])
    >>> tokenizer.convert_ids_to_tokens(tokenizer("<image>")["input_ids"])
    ['<image>']
"""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from ..decoding.prior import output_embeddings

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


def sharpen_attention(model: torch.nn.Module, factor: float) -> None:
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


HYBRID_LAYERS = ["linear_attention", "full_attention", "linear_attention"]  # a recurrent layer on both sides


TINY_CLIP = dict(model_type="clip_vision_model", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=2, image_size=32, patch_size=8, projection_dim=32)


def tiny_llama_text(tokenizer) -> dict:
    """The text config of a tiny Llama language model for `tokenizer`."""
    return dict(model_type="llama", vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None)


def strengthen_latent_queries(model) -> None:
    """Kosmos-2 and Kosmos-2.5: draw the latent-query projection at unit gain and scale the text attention's values and
    outputs by 8, so that the image changes the tokens (at init its features barely reach the last token: the
    sinusoidal positions and the token embeddings outweigh what attention adds)."""
    at_unit_gain(model.image_to_text_projection)
    with torch.no_grad():
        for name, weight in model.text_model.named_parameters():
            if name.endswith(("v_proj.weight", "out_proj.weight")):
                weight.mul_(8)


def at_unit_gain(*modules: torch.nn.Module) -> None:
    """Redraw the linear weights in `modules` at unit gain (std 1/sqrt(fan-in)), where an init's 0.02 keeps the image
    from the tokens: an output then varies with its input as much as the input varies.

    Example:
        >>> layer = torch.nn.Linear(400, 2)
        >>> at_unit_gain(layer)
        >>> 0.04 < float(layer.weight.detach().std()) < 0.06  # 1 / sqrt(400)
        True
    """
    with torch.no_grad():
        for module in modules:
            for linear in module.modules():
                if isinstance(linear, torch.nn.Linear):
                    linear.weight.normal_(std=linear.in_features ** -0.5)
