"""Fuyu's token-id rule (pnd/architectures/fuyu.py): the patch tokens and each row's end, the `<s>` after them kept."""

import pytest
import torch

from pnd.architectures import architecture_for
from pnd.testing import tiny_inputs


def test_the_rule_hides_each_row_end_and_keeps_the_bos(tiny):
    model, processor = tiny("fuyu")
    ids = tiny_inputs(processor, "fuyu", ("Describe it.",), image=True)["input_ids"]
    tokens = processor.tokenizer.convert_ids_to_tokens(ids[0][architecture_for(model).expansion(model, ids)[0]])
    assert tokens == (["|SPEAKER|"] * 4 + ["|NEWLINE|"]) * 4  # 4 rows of 4 patches; the `<s>` after them is text


def test_rows_ending_in_different_tokens_are_refused(tiny):
    model, _ = tiny("fuyu")
    speaker = model.config.image_token_id
    with pytest.raises(ValueError, match="not built by FuyuProcessor"):
        architecture_for(model).expansion(model, torch.tensor([[speaker, 5, speaker, 6]]))
