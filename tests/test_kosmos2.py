"""Kosmos-2 stays refused (`pnd/architectures/refused.py`): the fact its reason states, checked on transformers."""

import pytest
import torch

import pnd


def test_kosmos2_generate_hands_its_forward_no_position_ids():
    from transformers import Kosmos2Config, Kosmos2ForConditionalGeneration

    config = Kosmos2Config(text_config=dict(vocab_size=64, embed_dim=32, layers=1, attention_heads=2, ffn_dim=64),
                           vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                              num_attention_heads=2, image_size=32, patch_size=8),
                           latent_query_num=4)
    model = Kosmos2ForConditionalGeneration(config).eval()
    ids = torch.tensor([[1, 5, 6, 7]])
    inputs = model.text_model.prepare_inputs_for_generation(ids, attention_mask=torch.ones_like(ids), use_cache=True,
                                                            is_first_iteration=True)
    assert "position_ids" not in inputs  # what pnd's paired prefill and decoding steps read
    with pytest.raises(ValueError, match="no position ids"):
        pnd.attach(model)


def _kosmos2():
    import importlib

    return importlib.import_module("pnd.testing.builders.kosmos-2").build(0)


def _image(seed=0):
    import numpy as np
    from PIL import Image

    return Image.fromarray(np.random.RandomState(seed).randint(0, 255, (32, 32, 3), dtype=np.uint8))


def test_kosmos2_expansion_is_the_image_tags_and_the_latent_query_slots_between():
    """What a rule bounded by `<image>`…`</image>` would hide: the processor writes `<s><image>`, one ordinary
    vocabulary id per latent query (the ids after `<unk>`), `</image>`; `image_embeds_position_mask` marks those slots."""
    model, processor = _kosmos2()
    out = processor(text=["<grounding> An image of"], images=[_image()], return_tensors="pt")
    ids, slots = out["input_ids"][0], out["image_embeds_position_mask"][0].bool()
    tokens = processor.tokenizer.convert_ids_to_tokens(ids)
    queries = model.config.latent_query_num
    assert tokens[:2] == ["<s>", "<image>"] and tokens[2 + queries] == "</image>"
    assert slots.nonzero().flatten().tolist() == list(range(2, 2 + queries))
    assert ids[slots].tolist() == list(range(processor.tokenizer.unk_token_id + 1,
                                             processor.tokenizer.unk_token_id + 1 + queries))


def test_kosmos2_left_padded_rows_decode_otherwise_than_alone_in_transformers():
    """transformers' own Kosmos-2 numbers a prompt's positions from its first non-pad token, but a decoding step's
    position from the cache length, which counts the left padding: from the second generated token on, a padded row
    decodes otherwise than the same prompt alone (plain generate, no pnd)."""
    model, processor = _kosmos2()
    kwargs = dict(max_new_tokens=4, do_sample=False, output_scores=True, return_dict_in_generate=True)
    prompts = ["<grounding> An image of", "a much longer prompt about a red square here"]
    padded = model.generate(**processor(text=prompts, images=[_image(), _image()], return_tensors="pt",
                                        padding=True), **kwargs)
    alone = model.generate(**processor(text=prompts[:1], images=[_image()], return_tensors="pt"), **kwargs)
    assert torch.allclose(padded.scores[0][0], alone.scores[0][0], atol=1e-5)  # the prompt: the same positions
    assert not torch.allclose(padded.scores[1][0], alone.scores[1][0], atol=1e-2)  # a step: pad slots counted


def test_kosmos2_forward_requires_the_image():
    """The prior's own prefill runs the model on token ids alone, which Kosmos-2's forward refuses."""
    model, processor = _kosmos2()
    out = processor(text=["<grounding> An image of"], images=[_image()], return_tensors="pt")
    with pytest.raises(ValueError, match="either `pixel_values` or `image_embeds`"):
        model(input_ids=out["input_ids"], attention_mask=out["attention_mask"])
