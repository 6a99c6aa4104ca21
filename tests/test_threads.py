"""docs/design.md §3.9: two threads generating on one attached model, or one PriorNormalized shared by two models,
each get what they get alone; per-call state lives in the call, and nothing is switched per call."""

import threading

import torch

import pnd
from pnd._compat.masks import attention_implementation
from pnd.attachment import attachment_of
from pnd.testing import tiny_inputs

from helpers import PROMPTS


def decode(model, inputs, normalizer):
    out = model.generate(**inputs, max_new_tokens=8, min_new_tokens=8, do_sample=False, logits_processor=[normalizer],
                         return_dict_in_generate=True, output_scores=True)
    return out.sequences, torch.stack(out.scores)


def overlapping(calls):
    """Run the calls in threads that start together (a barrier), several times; every result of every round."""
    rounds = []
    for _ in range(3):
        barrier, results, errors = threading.Barrier(len(calls)), [None] * len(calls), []

        def work(i, call):
            barrier.wait()
            try:
                results[i] = call()
            except Exception as error:  # surfaced below, not lost in the thread
                errors.append(error)

        threads = [threading.Thread(target=work, args=(i, call)) for i, call in enumerate(calls)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        rounds.append(results)
    return rounds


def assert_same(got, want):
    assert torch.equal(got[0], want[0])
    torch.testing.assert_close(got[1], want[1], atol=1e-5, rtol=0)


def test_two_threads_on_one_model_with_different_alphas(tiny):
    model, processor = tiny("llava_onevision")
    pnd.attach(model)
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    calls = [lambda: decode(model, inputs, pnd.PriorNormalized(0.3)), lambda: decode(model, inputs, pnd.PriorNormalized(0.9))]
    alone = [call() for call in calls]
    assert not torch.equal(alone[0][0], alone[1][0])  # the two alphas decode differently: a mix-up would show
    for results in overlapping(calls):
        for got, want in zip(results, alone):
            assert_same(got, want)
    config = model.config.get_text_config(decoder=True)
    assert attention_implementation(config) == "pnd_packed_sdpa"  # switched once by attach, not per call
    pnd.detach(model)
    assert attention_implementation(config) == "sdpa"


def test_one_processor_object_shared_by_two_models(tiny):
    normalizer = pnd.PriorNormalized(0.7)
    runs = []
    for model_type in ("llava_onevision", "qwen2_vl"):
        model, processor = tiny(model_type)
        inputs = tiny_inputs(processor, model_type, PROMPTS)
        attached = pnd.attach(model)
        runs.append(lambda model=attached, inputs=inputs: decode(model, inputs, normalizer))
    alone = [run() for run in runs]
    for results in overlapping(runs):
        for got, want in zip(results, alone):
            assert_same(got, want)


def test_no_per_call_state_outlives_the_call(tiny):
    model, processor = tiny("qwen2_vl")
    normalizer = pnd.PriorNormalized(0.5)
    decode(pnd.attach(model), tiny_inputs(processor, "qwen2_vl", PROMPTS), normalizer)
    assert vars(normalizer) == {"alpha": 0.5, "prior": "masked", "plausibility": None, "combine": "prior",
                                "noise_step": 500, "seed": 0}  # its settings only
    assert pnd.decoding.generation.running_generation() is None
    assert not any(isinstance(v, pnd.decoding.generation.Generation) for v in vars(attachment_of(model)).values())


def test_two_vista_calls_in_flight_each_steer_once(tiny):
    """VISTA's steering is a forward hook on each decoder layer: two calls in flight on one model (they meet at every
    step) each add their own vectors once, as alone."""
    model, processor = tiny("llava_onevision")
    pnd.attach(model)
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    meet = threading.Barrier(2)

    class Meet:
        def __init__(self, together):
            self.together = together

        def __call__(self, input_ids, scores):
            if self.together:
                meet.wait(timeout=120)
            return scores

    def call(strength, together):
        out = model.generate(**inputs, max_new_tokens=6, min_new_tokens=6, do_sample=False, return_dict_in_generate=True,
                             output_scores=True, logits_processor=[Meet(together), pnd.VISTA(strength)])
        return out.sequences, torch.stack(out.scores)

    alone = [call(0.05, False), call(0.1, False)]
    assert not torch.equal(alone[0][0], alone[1][0])
    for results in overlapping([lambda: call(0.05, True), lambda: call(0.1, True)]):
        for got, want in zip(results, alone):
            assert_same(got, want)
