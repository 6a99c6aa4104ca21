"""Issue 23: the generic expansion finder (what the processor reports replacing) and `pnd models --all`.

The finder must give exactly the expansion of every family's token-id rule, on video and image prompts, in a
left-padded batch; a prompt the bound processor did not build is refused, never guessed.
"""

import pickle

import pytest
import torch

import pnd
from pnd.architectures import architecture_for
from pnd.architectures.coverage import REFUSED, coverage, image_text_to_text_types
from pnd.architectures.refused import structural
from pnd.architectures.reported import recalled_expansion
from pnd.io.prompts import video_prompt
from pnd.testing import TINY_ARCHITECTURES, VIDEO_ARCHITECTURES, random_video, tiny_inputs
from pnd.testing.reference import processor_expansion, text_in_replacement, visual_positions

# the Q-Former families' processors prepend the placeholders outside `get_text_with_replacements`: nothing is reported,
# their expansion is their token-id rule alone (tests/test_qformer.py checks it against what the processor prepends);
# PP-Chart2Table's processor replaces nothing (the prompt holds the placeholders): its rule is tested below
TEMPLATE_WRITTEN = ("pp_chart2table",)
UNREPORTED = ("instructblipvideo", "instructblip", "blip-2", "kosmos-2", "kosmos-2.5", *TEMPLATE_WRITTEN)
# processors that return no token offsets (they tokenize parts of the prompt apart): the finder cannot read them, the
# family's token-id rule is checked against the replacement text read from the decoded tokens
OFFSETLESS = ("fuyu",)
CASES = [(t, False) for t in VIDEO_ARCHITECTURES if t not in UNREPORTED] + [
    (t, True) for t in TINY_ARCHITECTURES if t not in UNREPORTED]


@pytest.mark.parametrize("model_type, image", CASES)
def test_reported_expansion_equals_the_family_rule(tiny, model_type, image):
    """On every family: the finder's mask equals the adapter's (its token-id rule where it has one), and the
    brute-force reference's independent reading of the prompt."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, ("Describe it.", "what colour is the shape? answer."), image=image)
    ids, attention = inputs["input_ids"], inputs["attention_mask"]
    if model_type in OFFSETLESS:
        found = processor_expansion(processor, [video_prompt(processor, p, "image" if image else "video") for p in
                                                ("Describe it.", "what colour is the shape? answer.")],
                                    images=[[random_video(i, frames=1)[0]] for i in range(2)])[1]
    else:
        found = recalled_expansion(processor, ids, attention, model_type)
    found &= ~text_in_replacement(processor, model_type, ids)
    assert torch.equal(found, architecture_for(model).expansion(model, ids, attention))
    assert torch.equal(found, visual_positions(model, ids))
    assert bool(found.any(-1).all()) and not bool((found & ~attention.bool()).any())


@pytest.mark.parametrize("model_type", TEMPLATE_WRITTEN)
def test_a_family_whose_template_writes_the_placeholders_uses_the_placeholder_rule(tiny, model_type):
    """PP-Chart2Table: its processor reports no replacement, so the finder would find no expansion; the family's rule
    (the config's image token) finds the placeholders the template wrote, as the reference does."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, ("Describe it.", "what colour is the shape? answer."), image=True)
    ids, attention = inputs["input_ids"], inputs["attention_mask"]
    replaced = processor_expansion(processor, [video_prompt(processor, "Describe it.", "image")],
                                   images=[[random_video(0, frames=1, size=64)[0]]])[1]
    assert not replaced.any() and not architecture_for(model).reported
    found = architecture_for(model).expansion(model, ids, attention)
    assert torch.equal(found, ids == model.config.image_token_id) and bool(found.any(-1).all())
    assert torch.equal(found, visual_positions(model, ids))


def test_a_family_through_the_finder_is_a_registration(tiny):
    """A family registered with `reported=True` and no expansion code decodes exactly as the token-id rule does: Qwen3-VL
    registered that way (its timestamps and inner delimiters are hidden without the delimiter rule)."""
    from pnd.architectures.qwen2_vl import MRoPEArchitecture
    from pnd.architectures.registry import _REGISTRY

    model, processor = tiny("qwen3_vl")
    inputs = tiny_inputs(processor, "qwen3_vl", ("Describe it.", "what colour is the shape? answer."))
    kwargs = dict(max_new_tokens=6, do_sample=False, logits_processor=[pnd.PriorNormalized(0.7)])
    expected = pnd.attach(model, processor).generate(**inputs, **kwargs)
    pnd.detach(model)
    rule = _REGISTRY["qwen3_vl"]
    _REGISTRY["qwen3_vl"] = MRoPEArchitecture(name="Qwen3-VL, reported", model_types=("qwen3_vl",),
                                              pixel_keys=rule.pixel_keys, token_inputs=rule.token_inputs, reported=True)
    try:
        with pytest.raises(ValueError, match="what its processor reports replacing"):
            _REGISTRY["qwen3_vl"].expansion_mask(model.config, inputs["input_ids"])
        assert torch.equal(pnd.attach(model, processor).generate(**inputs, **kwargs), expected)
    finally:
        _REGISTRY["qwen3_vl"] = rule


def test_prompt_built_before_attach_is_refused_with_the_fix():
    from pnd.testing import tiny_model

    model, processor = tiny_model("smolvlm")
    fresh = pickle.loads(pickle.dumps(processor))  # a copy is the original class, reporting nothing
    assert type(fresh).__mro__[0] is type(processor).__mro__[1]
    inputs = tiny_inputs(fresh, "smolvlm")
    with pytest.raises(ValueError, match=r"Build the inputs with that processor after pnd.attach"):
        pnd.prior_logits(model, **inputs)
    pnd.attach(model, fresh)
    inputs = tiny_inputs(fresh, "smolvlm")
    assert pnd.prior_logits(model, **inputs).shape[0] == 1
    pnd.detach(model)


def test_chat_template_tokenized_by_the_processor_is_found(tiny):
    """`processor.apply_chat_template(..., tokenize=True)` goes through the processor's call: its prompts are found,
    equal to the processor's own record read independently (`reference.processor_expansion`)."""
    model, processor = tiny("video_llama_3")
    conversation = [{"role": "user", "content": [{"type": "video", "video": pnd.testing.random_video(3).numpy()},
                                                 {"type": "text", "text": "Describe the video."}]}]
    inputs = processor.apply_chat_template(conversation, tokenize=True, return_dict=True, return_tensors="pt",
                                           add_generation_prompt=True,
                                           processor_kwargs={"video_metadata": [{"fps": 2, "total_num_frames": 4,
                                                                                 "frames_indices": [0, 1, 2, 3]}]})
    assert "text_replacement_offsets" not in inputs and "offset_mapping" not in inputs  # what the caller did not ask for
    found = recalled_expansion(processor, inputs["input_ids"], inputs["attention_mask"], "VideoLLaMA3")
    assert torch.equal(found, visual_positions(model, inputs["input_ids"]))


def test_outputs_the_caller_asked_for_stay(tiny):
    model, processor = tiny("internvl")
    text = [pnd.io.prompts.video_prompt(processor, "Describe the video.")]
    ids, replaced = processor_expansion(processor, text, videos=[pnd.testing.random_video(0)])
    assert torch.equal(recalled_expansion(processor, ids, None, "InternVL"), replaced)


def test_every_image_text_to_text_type_has_a_row(capsys):
    """A transformers upgrade that adds a family fails here until it is registered or refused for a structural reason
    (an encoder-decoder, cross-attention, not a text generator, ...: `pnd.architectures.refused.structural`)."""
    from pnd.cli import main

    rows = dict(coverage())
    unreviewed = [t for t in image_text_to_text_types() if not rows[t].startswith(("supported", "refused"))]
    assert not unreviewed, f"model types with no pnd row: {unreviewed}"
    assert not set(REFUSED) & set(pnd.supported_model_types())
    assert set(REFUSED) <= set(image_text_to_text_types())  # no stale rows
    ours = sorted(t for t, reason in REFUSED.items() if not structural(reason))
    assert not ours, f"model types refused for a reason of pnd's, not a structural one: {ours}"
    assert main(["models", "--all"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in printed] == sorted(rows)


def test_refusal_names_the_reason():
    from transformers import AutoConfig

    class Model:
        config = AutoConfig.for_model("florence2")

    with pytest.raises(ValueError, match="encoder-decoder"):
        architecture_for(Model())


@pytest.mark.parametrize("model_type", ["qwen3_omni_moe_thinker", "qwen2_5_omni_thinker"])
def test_audio_in_video_is_refused(tiny, model_type):
    """The Omni thinkers' `use_audio_in_video` interleaves audio with the frames: the prior hides visual expansions
    only."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type)
    with pytest.raises(ValueError, match=r"does not support audio inputs \(use_audio_in_video"):
        pnd.attach(model, processor).generate(**inputs, use_audio_in_video=True, max_new_tokens=2,
                                              logits_processor=[pnd.PriorNormalized(0.5)])


@pytest.mark.parametrize("name, marker", [("README.md", "coverage"), ("docs/families.md", "families"),
                                          ("docs/families.md", "refused")])
def test_generated_docs_are_the_registry(name, marker):
    from pathlib import Path

    from pnd.architectures.coverage import GENERATED, section

    text = (Path(__file__).parents[1] / name).read_text()
    assert section(text, marker) == GENERATED[name, marker](), "regenerate: python -m pnd.architectures.coverage"


def test_one_prompt_without_tensors_is_remembered(tiny):
    """`processor(text="...", videos=...)` with no return_tensors: lists, remembered all the same."""
    model, processor = tiny("kimi_k25")
    text = pnd.io.prompts.video_prompt(processor, "Describe the video.")
    lists = processor(text=text, videos=[pnd.testing.random_video(0)])
    ids = torch.tensor(lists["input_ids"])
    assert torch.equal(recalled_expansion(processor, ids, None, "Kimi K2.5"), visual_positions(model, ids))
