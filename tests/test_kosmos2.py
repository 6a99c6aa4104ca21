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


def test_kosmos2_5_generate_drops_the_position_ids():
    """Kosmos-2.5 stays refused for Kosmos-2's reason: its `prepare_inputs_for_generation` drops the position ids
    (its sinusoidal positions are derived inside from the padding tokens and the cache length)."""
    from transformers import Kosmos2_5Config, Kosmos2_5ForConditionalGeneration

    config = Kosmos2_5Config(text_config=dict(vocab_size=64, embed_dim=32, layers=1, attention_heads=2, ffn_dim=64),
                             vision_config=dict(hidden_size=32, patch_embed_hidden_size=48, intermediate_size=64,
                                                head_dim=16, num_hidden_layers=1, num_attention_heads=2),
                             latent_query_num=4)
    model = Kosmos2_5ForConditionalGeneration(config).eval()
    ids = torch.tensor([[0, 5, 6, 7]])
    inputs = model.prepare_inputs_for_generation(ids, attention_mask=torch.ones_like(ids), use_cache=True,
                                                 position_ids=torch.arange(4)[None], is_first_iteration=True)
    assert "position_ids" not in inputs  # given, and dropped: what pnd's paired prefill and decoding steps read
    with pytest.raises(ValueError, match="position ids"):
        pnd.attach(model)
