"""docs/design.md §3.12: everything pnd keeps on a model is one object, and `pnd.detach` leaves the model as it was."""

import copy
import pickle

import pytest
import torch

import pnd
from pnd.attachment import attachment_of
from pnd.testing import random_video, tiny_inputs, tiny_model


def instance_state(model) -> dict:
    """The model's own attributes (vars), its attention implementation and its submodules' own methods: what attach
    may change."""
    config = model.config.get_text_config(decoder=True)
    patched = tuple(name for name, module in model.named_modules() if "forward" in vars(module))
    return {**vars(model), "attention": config._attn_implementation, "patched submodules": patched}


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl", "nemotron_h_omni", "minimax_m3_vl", "kosmos-2",
                                        "exaone4_5"])
def test_detach_leaves_no_pnd_attribute_on_the_model(model_type):
    """nemotron_h_omni: attach also repairs transformers' video features on the instance; minimax_m3_vl: it patches
    the indexers of its sparse layers; exaone4_5: its `prepare_inputs_for_generation`. detach takes them back."""
    model, processor = tiny_model(model_type)
    pnd.detach(model)  # tiny_model binds the processor, as attach(model, processor) does: start from a bare model
    before = instance_state(model)
    pnd.attach(model, processor).generate(**tiny_inputs(processor, model_type), max_new_tokens=2, do_sample=False,
                                          logits_processor=[pnd.PriorNormalized(0.5)])
    assert [name for name in vars(model) if "pnd" in name] == ["_pnd"]
    pnd.detach(model)
    after = instance_state(model)
    assert after.keys() == before.keys() and all(after[k] is before[k] or after[k] == before[k] for k in before)
    assert not [name for name in vars(model) if "pnd" in name]


def test_detach_restores_a_hook_set_before_attach():
    model, processor = tiny_model("llava")
    hook = model.forward  # a bound method on the instance, as accelerate's forward hook is
    model.forward = hook
    pnd.attach(model, processor)
    assert model.forward is not hook
    pnd.detach(model)
    assert vars(model)["forward"] is hook and attachment_of(model) is None


def test_the_processor_a_scorer_binds_lives_in_the_same_attachment():
    """gemma4: its expansion is read with the bound processor, so a scorer used after a detach binds it again."""
    model, processor = tiny_model("gemma4")
    pnd.detach(model)
    scorer = pnd.CaptionScorer(model, processor)
    assert attachment_of(model).processor is processor and not attachment_of(model).attached
    pnd.attach(model)  # the bound processor stays; attach adds its methods to the same object
    assert attachment_of(model).processor is processor and attachment_of(model).attached
    pnd.detach(model)
    assert attachment_of(model) is None
    scores = scorer.score([random_video(0)], ["a red circle"])
    torch.testing.assert_close(scores, pnd.CaptionScorer(model, processor).score([random_video(0)], ["a red circle"]))


def test_detach_after_a_scorer_prepared_the_model_leaves_no_repair(tiny):
    """CaptionScorer (and pnd.prior_logits) prepare the model without attaching it: Kosmos-2.5's repaired forward is
    then on the model when pnd.attach runs. attach does not take it for the user's own, so detach removes it."""
    model, processor = tiny("kosmos-2.5")
    pnd.CaptionScorer(model, processor, modality="image")
    assert "forward" in vars(model)  # the scorer's repair
    pnd.detach(pnd.attach(model, processor))
    assert "forward" not in vars(model)



@pytest.mark.parametrize("model_type, prepare", [
    ("kosmos-2", lambda model, processor: pnd.prior_logits(model, **tiny_inputs(processor, "kosmos-2"))),
    ("exaone4_5", lambda model, processor: pnd.CaptionScorer(model, processor))])
def test_detach_after_pnd_prepared_the_model_first_leaves_no_repair(model_type, prepare):
    """pnd.prior_logits and CaptionScorer prepare an unattached model (Kosmos-2's forward, EXAONE 4.5's
    prepare_inputs_for_generation); a later attach and detach leave the model as it was before either."""
    model, processor = tiny_model(model_type)
    pnd.detach(model)
    before = instance_state(model)
    prepare(model, processor)
    assert instance_state(model).keys() - before.keys() - {"_pnd"}  # the repair is on the model
    pnd.detach(pnd.attach(model, processor))
    after = instance_state(model)
    assert after.keys() == before.keys() and all(after[k] is before[k] or after[k] == before[k] for k in before)


@pytest.mark.parametrize("model_type", ["llava_onevision", "kosmos-2", "instructblipvideo", "inkling2"])
def test_a_deep_copy_of_an_attached_model_runs_its_own_weights(model_type):
    """copy.deepcopy of an attached model (a reference or EMA copy): the copy is attached, decodes with its own
    weights as the same weights attached anew do, and detaches alone. kosmos-2, instructblipvideo, inkling2: a
    family's repairs (the model's forward, the language model's, a submodule's) are the copy's own too."""
    model, processor = tiny_model(model_type)
    inputs = tiny_inputs(processor, model_type)
    settings = dict(max_new_tokens=3, do_sample=False, logits_processor=[pnd.PriorNormalized(0.5)],
                    return_dict_in_generate=True, output_scores=True)
    before = pnd.attach(model, processor).generate(**inputs, **settings)
    copied, anew = copy.deepcopy(model), tiny_model(model_type)[0]
    with torch.no_grad():
        for weights in (*copied.parameters(), *anew.parameters()):
            weights.mul_(0.5)
    got, want = copied.generate(**inputs, **settings), pnd.attach(anew, processor).generate(**inputs, **settings)
    assert torch.equal(got.sequences, want.sequences)
    torch.testing.assert_close(torch.stack(got.scores), torch.stack(want.scores))
    assert not torch.allclose(torch.stack(got.scores), torch.stack(before.scores))
    pnd.detach(copied)
    assert attachment_of(copied) is None and attachment_of(model).attached
    again = model.generate(**inputs, **settings)
    assert torch.equal(again.sequences, before.sequences)
    torch.testing.assert_close(torch.stack(again.scores), torch.stack(before.scores))


def test_a_pickled_attached_model_runs_its_own_weights_attached():
    """`torch.save(model)` and `pickle.dumps(model)` failed on an attached model: pnd's methods carried transformers'
    annotations, which cannot be pickled. The loaded copy is attached to its own weights, as a deep copy is."""
    model, processor = tiny_model("llava_onevision")  # never run: transformers' own hooks pickle before a forward
    inputs = tiny_inputs(processor, "llava_onevision")
    loaded = pickle.loads(pickle.dumps(pnd.attach(model, processor)))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(0.5)
    ours = loaded.generate(**inputs, max_new_tokens=3, do_sample=False, logits_processor=[pnd.PriorNormalized(0.7)],
                           return_dict_in_generate=True, output_scores=True)
    model, _ = tiny_model("llava_onevision")  # the same weights, attached anew
    anew = pnd.attach(model, processor).generate(**inputs, max_new_tokens=3, do_sample=False, output_scores=True,
                                                 logits_processor=[pnd.PriorNormalized(0.7)],
                                                 return_dict_in_generate=True)
    assert torch.equal(ours.sequences, anew.sequences)
    assert all(torch.equal(a, b) for a, b in zip(ours.scores, anew.scores))


def test_detach_refuses_to_drop_a_hook_set_after_attach_and_works_once_it_is_removed():
    """An accelerate hook set after attach (dispatch_model) wraps pnd's forward: detach dropped it silently, and
    removing the hook later put pnd's forward back on a detached model."""
    from accelerate.hooks import ModelHook, add_hook_to_module, remove_hook_from_module

    model, _ = tiny_model("llava")
    own = model.forward
    add_hook_to_module(pnd.attach(model), ModelHook())
    with pytest.raises(ValueError, match=r"model.forward was replaced after pnd.attach .*remove_hook_from_module"):
        pnd.detach(model)
    assert attachment_of(model).attached  # nothing changed
    remove_hook_from_module(model)
    pnd.detach(model)
    assert model.forward == own and "forward" not in vars(model)


def test_detach_while_a_generate_call_runs_is_refused_and_the_call_finishes():
    """Detaching in the middle of a call (another thread's, or a logits processor's) crashed that call."""
    model, processor = tiny_model("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision")
    refusals = []

    def detach_now(input_ids, scores):
        with pytest.raises(RuntimeError, match="a generate call is running on this model") as refused:
            pnd.detach(model)
        refusals.append(refused)
        return scores

    out = pnd.attach(model).generate(**inputs, max_new_tokens=3, min_new_tokens=3, do_sample=False,
                                     logits_processor=[pnd.PriorNormalized(0.7), detach_now])
    assert len(refusals) == 3 and out.shape[1] == inputs["input_ids"].shape[1] + 3
    pnd.detach(model)  # after the call
    assert attachment_of(model) is None


def test_attach_refuses_a_peft_model_and_names_the_model_to_attach():
    """A PeftModel's generate runs its inner model's own forward, which pnd never saw: at alpha > 0 it failed with
    'no prior logits for this step'. Its base model (the adapter's layers in it) attaches."""
    peft = pytest.importorskip("peft")
    model, processor = tiny_model("llava_onevision")
    wrapped = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj"]))
    with pytest.raises(TypeError, match=r"got a PEFT PeftModel: attach model.get_base_model\(\)"):
        pnd.attach(wrapped)
    inputs = tiny_inputs(processor, "llava_onevision")
    pnd.attach(wrapped.get_base_model()).generate(**inputs, max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.7)])


def test_generate_in_training_mode_with_gradient_checkpointing_is_refused():
    """transformers runs checkpointed layers in training mode without the cache the prior rows live in: an internal
    TypeError (SDPA) or other tokens (eager)."""
    model, processor = tiny_model("qwen2_vl")
    model.gradient_checkpointing_enable()
    model.train()
    with pytest.raises(ValueError, match=r"gradient checkpointing in training mode: .*call model.eval\(\)"):
        pnd.attach(model).generate(**tiny_inputs(processor, "qwen2_vl"), max_new_tokens=2,
                                   logits_processor=[pnd.PriorNormalized(0.7)])
