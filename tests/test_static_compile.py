"""docs/design.md §3.8: `generate(..., cache_implementation="static")` and compiled decoding (generate's own
`compile_config`, or `model.forward = torch.compile(model.forward)` before `pnd.attach`) equal the brute-force
reference, greedy and beam search; the decoding steps run through one compiled graph."""

import inspect

import pytest
import torch
from torch.overrides import TorchFunctionMode
from transformers import CompileConfig, DynamicCache, Qwen2Config, StaticCache
from transformers.generation import utils as generation_utils

import pnd
from pnd.attachment import attachment_of
from pnd.decoding.cache import PairedStaticCache
from pnd.decoding.methods import method
from pnd.testing.reference import forced_scores, greedy

from helpers import PND_ROOT, PROMPTS, pnd_call_site, tiny_inputs, tiny_model

STEPS, ALPHA = 5, 0.6


@pytest.fixture(autouse=True)
def fresh_compiler():
    """A clean torch.compile cache per test, as transformers' compile tests keep (the compiled call of a model is
    `Module.__call__`, one code object for every model, with a recompile limit)."""
    torch.compiler.reset()


def counting_backend():
    """A torch.compile backend that runs the traced graphs as they are (no code generation), and the list it appends
    each graph to (a function: CompileConfig deep-copies its options, and a function copies as itself)."""
    graphs = []

    def backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward
    return backend, graphs


def compile_config(backend):
    config = CompileConfig(backend=backend, fullgraph=True, mode="default")
    config._compile_all_devices = True  # generate compiles on CUDA-like devices only, unless told (private switch)
    return config


SEARCH = {"greedy": {"min_new_tokens": STEPS}, "beam": {"num_beams": 3, "num_return_sequences": 2, "length_penalty": 1.0}}


def run(model, inputs, mode, cache_implementation="static", **kwargs):
    return pnd.attach(model).generate(**inputs, max_new_tokens=STEPS, do_sample=False, return_dict_in_generate=True,
                                      output_scores=True, logits_processor=[pnd.PriorNormalized(ALPHA)],
                                      cache_implementation=cache_implementation, **SEARCH[mode], **kwargs)


def assert_equals_reference(model, inputs, out, mode):
    prompt_len = inputs["input_ids"].shape[1]
    if mode == "greedy":
        tokens, scores = greedy(model, inputs, ALPHA, STEPS, banned=[model.generation_config.eos_token_id])
        assert torch.equal(out.sequences[:, prompt_len:], tokens)
        for got, want in zip(out.scores, scores):
            finite = torch.isfinite(got)
            torch.testing.assert_close(got[finite], want[finite], atol=1e-4, rtol=0)
        return
    assert inputs["input_ids"].shape[0] == 1  # beam rows all continue prompt 0
    eos = model.generation_config.eos_token_id
    for row in range(out.sequences.shape[0]):
        generated = out.sequences[row, prompt_len:]
        length = int((generated == eos).nonzero()[0, 0]) + 1 if (generated == eos).any() else len(generated)
        scores = forced_scores(model, inputs, generated[None, :length], ALPHA)[0]
        total = scores.gather(1, generated[:length, None]).sum()
        torch.testing.assert_close(out.sequences_scores[row], total / length, atol=1e-4, rtol=0)


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl", "mistral3", "kimi_k25", "cosmos3_omni",
                                        "instructblip", "kosmos-2.5"])  # Kosmos-2.5: its generate passes no positions
@pytest.mark.parametrize("mode", ["greedy", "beam"])
def test_static_cache_equals_the_reference(tiny, model_type, mode):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS if mode == "greedy" else PROMPTS[:1])
    out = run(model, inputs, mode)
    assert_equals_reference(model, inputs, out, mode)
    # the returned cache is a StaticCache of the conditioned rows, as plain generate returns, holding what the
    # dynamic cache holds
    dynamic = run(model, inputs, mode, cache_implementation=None)
    assert type(out.past_key_values) is StaticCache and type(dynamic.past_key_values) is DynamicCache
    length = dynamic.past_key_values.get_seq_length()
    assert int(out.past_key_values.get_seq_length()) == length
    for got, want in zip(out.past_key_values.layers, dynamic.past_key_values.layers):
        assert got.keys.shape[0] == want.keys.shape[0]
        if mode == "greedy":  # beam search returns the cache of the last step's beams, not of the returned sequences
            torch.testing.assert_close(got.keys[:, :, :length], want.keys, atol=1e-5, rtol=0)


@pytest.mark.parametrize("model_type, mode", [("llava_onevision", "greedy"), ("qwen2_vl", "greedy"),
                                              ("llava_onevision", "beam"), ("qwen2_vl", "beam"),
                                              ("instructblip", "greedy")])  # generate runs its language model's
def test_generate_compile_config_equals_the_reference(tiny, model_type, mode):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS if mode == "greedy" else PROMPTS[:1])
    backend, graphs = counting_backend()
    out = run(model, inputs, mode, compile_config=compile_config(backend))
    assert_equals_reference(model, inputs, out, mode)
    # fullgraph: each decoding step on [conditioned rows; prior rows] is one graph, compiled once for greedy search
    # (beam search's reordering replaces the cache tensors: one more)
    assert 1 <= len(graphs) <= (1 if mode == "greedy" else 2)


def test_forward_compiled_before_attach_equals_the_reference():
    model, processor = tiny_model("qwen2_vl")  # its own model: its forward gets replaced
    inputs = tiny_inputs(processor, "qwen2_vl", PROMPTS)
    backend, graphs = counting_backend()
    model.forward = torch.compile(model.forward, backend=backend)
    out = run(model, inputs, "greedy")
    assert graphs
    pnd.detach(model)
    del model.forward  # the reference runs the model's own forward
    assert_equals_reference(model, inputs, out, "greedy")


def test_static_cache_refuses_models_with_other_than_full_attention_layers():
    config = Qwen2Config(num_hidden_layers=2, hidden_size=16, num_attention_heads=2, num_key_value_heads=1,
                         intermediate_size=32, vocab_size=64, use_sliding_window=True, sliding_window=4,
                         layer_types=["full_attention", "sliding_attention"])
    with pytest.raises(ValueError, match=r"full-attention layers only.*StaticSlidingWindowLayer.*dynamic cache"):
        PairedStaticCache(config, max_cache_len=16)


@pytest.mark.parametrize("alpha", [None, 0.0])
def test_compiled_plain_decoding_of_an_attached_model_is_plain_compiled_decoding(tiny, alpha):
    """Without a PriorNormalized, or at alpha=0, generate compiles the attached model's forward as its own (fullgraph:
    pnd's wrapper breaks no graph) and decodes as the detached model does."""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    kwargs = dict(max_new_tokens=3, do_sample=False, cache_implementation="static")
    plain = model.generate(**inputs, **kwargs)
    backend, graphs = counting_backend()
    processors = [] if alpha is None else [pnd.PriorNormalized(alpha)]
    ours = pnd.attach(model).generate(**inputs, logits_processor=processors, compile_config=compile_config(backend),
                                      **kwargs)
    assert graphs and torch.equal(plain, ours)


def test_forward_compiled_after_attach_equals_the_reference():
    """pnd's own frame runs eagerly inside the compiled forward (a graph break), the model's forward is compiled."""
    model, processor = tiny_model("llava_onevision")  # its own model: its forward gets replaced
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    pnd.attach(model)
    backend, graphs = counting_backend()
    wrapper = model.forward
    model.forward = torch.compile(wrapper, backend=backend)
    out = run(model, inputs, "greedy")
    assert graphs
    model.forward = wrapper
    pnd.detach(model)  # the reference runs the model's own forward
    assert_equals_reference(model, inputs, out, "greedy")


@pytest.mark.parametrize("mode", ["greedy", "beam"])
def test_compiled_decoding_runs_the_models_own_compiled_call(mode):
    """As transformers' compile tests ask of every model: a dynamic-cache generate compiles nothing; a static-cache one
    with a compile_config runs its decoding steps through the model's own compiled call (`get_compiled_call`, which
    leaves `model._compiled_call`), fullgraph, to the reference's tokens."""
    model, processor = tiny_model("llava_onevision")  # its own model: the compiled call stays on it
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS if mode == "greedy" else PROMPTS[:1])
    backend, graphs = counting_backend()
    run(model, inputs, mode, cache_implementation=None, compile_config=compile_config(backend))
    assert not hasattr(model, "_compiled_call") and not graphs
    out = run(model, inputs, mode, compile_config=compile_config(backend))
    assert hasattr(model, "_compiled_call") and graphs
    assert_equals_reference(model, inputs, out, mode)


def test_a_shorter_prompt_reuses_the_compiled_decoding_step():
    """transformers' test_static_cache_no_recompile_with_smaller_length: after a long prompt, a shorter one decodes with
    the graph already compiled (its static cache is as long as the longest so far, as generate's own is)."""
    model, processor = tiny_model("qwen2_vl")
    backend, graphs = counting_backend()
    long = tiny_inputs(processor, "qwen2_vl", ("Describe every object in the video, then its colour.", "What moves?"))
    run(model, long, "greedy", compile_config=compile_config(backend))
    compiled = len(graphs)
    short = tiny_inputs(processor, "qwen2_vl", ("Describe.", "Colour?"), seed=3)
    assert short["input_ids"].shape[1] < long["input_ids"].shape[1]
    with torch._dynamo.config.patch(error_on_recompile=True):
        out = run(model, short, "greedy", compile_config=compile_config(backend))
    assert len(graphs) == compiled
    assert_equals_reference(model, short, out, "greedy")


def test_compiled_decoding_returns_every_output():
    """transformers' test_generate_compilation_all_outputs, with pnd: static cache and compile_config set on the model's
    generation_config, every output asked for; each describes the conditioned rows, as the dynamic-cache call's do."""
    model, processor = tiny_model("qwen2_vl")
    model.set_attn_implementation("eager")  # attention weights are an output of eager attention only
    inputs = tiny_inputs(processor, "qwen2_vl", PROMPTS)
    n, prompt_len = inputs["input_ids"].shape
    backend, graphs = counting_backend()
    outputs = dict(output_attentions=True, output_hidden_states=True, output_logits=True)
    dynamic = run(model, inputs, "greedy", cache_implementation=None, **outputs)
    model.generation_config.compile_config = compile_config(backend)
    model.generation_config.cache_implementation = "static"
    out = pnd.attach(model).generate(**inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False,
                                     return_dict_in_generate=True, logits_processor=[pnd.PriorNormalized(ALPHA)],
                                     output_scores=True, **outputs)
    assert hasattr(model, "_compiled_call") and graphs
    assert torch.equal(out.sequences, dynamic.sequences) and out.sequences.shape == (n, prompt_len + STEPS)
    layers = model.config.get_text_config(decoder=True).num_hidden_layers
    for name in ("scores", "logits", "attentions", "hidden_states"):
        assert len(getattr(out, name)) == STEPS
    for step in range(STEPS):
        torch.testing.assert_close(out.logits[step], dynamic.logits[step], atol=1e-4, rtol=0)
        assert len(out.attentions[step]) == layers and len(out.hidden_states[step]) == layers + 1
        assert all(a.shape[0] == n for a in out.attentions[step]) and all(h.shape[0] == n for h in out.hidden_states[step])
    pnd.detach(model)  # plain generate, static cache and compiled too: the shapes pnd's outputs must have
    plain = model.generate(**inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False,
                           return_dict_in_generate=True, output_scores=True, **outputs)
    for name in ("attentions", "hidden_states"):
        assert [[t.shape for t in step] for step in getattr(out, name)] == \
               [[t.shape for t in step] for step in getattr(plain, name)], name  # prefill keys: the static cache's
    queries = inputs["attention_mask"].bool()  # a padding query's weights are arbitrary (all its keys masked)
    for got, want in zip(out.attentions[0], plain.attentions[0]):  # the prefill's weights, the cache's slots 0
        torch.testing.assert_close(got.transpose(1, 2)[queries], want.transpose(1, 2)[queries], atol=1e-5, rtol=0)


NOT_TESTING = {path.name for path in PND_ROOT.iterdir()} - {"testing"}  # pnd's code, not the tiny models' builders
HOST_SYNCS = {torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__bool__, torch.Tensor.__int__,
              torch.Tensor.__float__, torch.Tensor.__index__, torch.Tensor.cpu, torch.Tensor.numpy}


class HostSyncs(TorchFunctionMode):
    """Counts the calls that wait for a device's result on the host (`.item()`, `.tolist()`, `bool(tensor)`, ...)
    made from pnd's own files."""

    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        site = pnd_call_site(inspect.currentframe().f_back, NOT_TESTING) if func in HOST_SYNCS else None
        if site:
            self.calls.append(f"{site} {func.__name__}")
        return func(*args, **(kwargs or {}))


STEP_METHODS = {  # ICD's steps are VCD's (contrast rows in the cache); PAI from layer 0 of the tiny model's 2
    "cpn": lambda: pnd.PriorNormalized(ALPHA), "vcd": lambda: method("vcd").processor(),
    "m3id": lambda: method("m3id").processor(), "pai": lambda: pnd.PAI(start_layer=0), "only": pnd.ONLY,
    "vista": lambda: pnd.VISTA(steer_strength=0.5),
}


@pytest.mark.parametrize("name", STEP_METHODS)
@pytest.mark.parametrize("cache_implementation", ["static", None])
@pytest.mark.parametrize("prompts", [PROMPTS, PROMPTS[:1]], ids=["padded", "unpadded"])  # generate's masks differ
def test_a_decoding_step_makes_no_host_sync(tiny, cache_implementation, name, prompts):
    """Issue 47: what pnd adds to a decoding step waits for no device result (no `.item()`, `.tolist()`, `bool()`,
    CPU copy), so that the GPU never idles on pnd's host code and CUDA graphs can capture the step: the count of pnd's
    host syncs in a generate call does not grow with its steps, for every method's step (its logits processor
    included; issue 45's interventions too)."""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", prompts)
    syncs = {}
    for steps in (2, 6):
        with HostSyncs() as guard:
            pnd.attach(model).generate(**inputs, max_new_tokens=steps, min_new_tokens=steps, do_sample=False,
                                       logits_processor=[STEP_METHODS[name]()],
                                       cache_implementation=cache_implementation)
        syncs[steps] = sorted(guard.calls)
    assert syncs[6] == syncs[2], "pnd's host syncs grow with the decoding steps"


@pytest.mark.parametrize("name", ["pai", "only", "vista"])
def test_interventions_decode_the_same_under_compile_config(tiny, name):
    """Issue 45: with a static cache and generate's compile_config (what generate does by itself on a GPU), PAI, ONLY
    and VISTA decode as without it, scores included: their steps run eagerly, where the interventions act (a traced
    attention runs plain SDPA), so they are never compiled away."""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    backend, graphs = counting_backend()
    eager, compiled = (pnd.attach(model).generate(**inputs, max_new_tokens=STEPS, min_new_tokens=STEPS,
                                                  do_sample=False, return_dict_in_generate=True, output_scores=True,
                                                  logits_processor=[STEP_METHODS[name]()],
                                                  cache_implementation="static", **extra)
                       for extra in ({}, {"compile_config": compile_config(backend)}))
    assert torch.equal(compiled.sequences, eager.sequences) and not graphs
    assert all(torch.equal(a, b) for a, b in zip(compiled.scores, eager.scores, strict=True))


class PndTensorCalls(TorchFunctionMode):
    """The torch calls made from pnd's own files, outside its logits processors (where generate's scores are
    combined): what pnd runs on the forward side of a step."""

    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        site = pnd_call_site(inspect.currentframe().f_back, NOT_TESTING)
        if site and not site.startswith("decoding/logits_processor"):
            self.calls.append(f"{site} {getattr(func, '__name__', func)}")
        return func(*args, **(kwargs or {}))


def test_a_compiled_decoding_step_runs_the_paired_glue_inside_the_models_compiled_call(monkeypatch):
    """Issue 47: with generate's compile_config, pnd's per-step glue (the paired ids, mask and positions, the prior's
    log-probabilities) is traced with the model in its compiled call: pnd runs no torch call of its own outside it in a
    step (the count of such calls does not grow with the steps), and the compiled graph holds the log-softmax."""
    model, processor = tiny_model("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    own = type(model).get_compiled_call

    def unobserved(self, config):  # the mode watches pnd's eager calls, not what runs inside the compiled call
        call = own(self, config)

        def run(**kwargs):
            with torch.overrides._pop_mode_temporarily():
                return call(**kwargs)
        return run

    monkeypatch.setattr(type(model), "get_compiled_call", unobserved)
    backend, graphs = counting_backend()
    calls = {}
    for steps in (2, 6):
        with PndTensorCalls() as mode:
            out = pnd.attach(model).generate(**inputs, max_new_tokens=steps, min_new_tokens=steps, do_sample=False,
                                             logits_processor=[pnd.PriorNormalized(ALPHA)],
                                             cache_implementation="static", compile_config=compile_config(backend))
        calls[steps] = sorted(mode.calls)
    assert calls[6] == calls[2], "pnd's eager torch calls grow with the decoding steps"
    assert any("log_softmax" in str(node.target) for graph in graphs for node in graph.graph.nodes)
    tokens, _ = greedy(model, inputs, ALPHA, 6, banned=[model.generation_config.eos_token_id])
    assert torch.equal(out[:, inputs["input_ids"].shape[1]:], tokens)


def test_compiled_decoding_at_transformers_defaults_has_no_graph_break_and_no_recompile(tiny):
    """Issue 47: with a static cache and generate's own compile_config at transformers' defaults (fullgraph False, where
    a graph break would pass silently), torch's own counters see no graph break and one graph, and a second call, on
    a prompt of another length, compiles nothing more."""
    model, processor = tiny("qwen2_vl")
    config = CompileConfig(backend="eager")
    config._compile_all_devices = True  # generate compiles on CUDA-like devices only, unless told (private switch)
    counters = torch._dynamo.utils.counters
    counters.clear()
    for prompts in (PROMPTS, ("Describe.", "Colour?")):
        run(model, tiny_inputs(processor, "qwen2_vl", prompts), "greedy", compile_config=config)
        assert dict(counters["graph_break"]) == {}
        assert counters["stats"]["unique_graphs"] == 1 and not counters["recompiles"]


@pytest.mark.parametrize("cache_implementation", ["static", None])
def test_a_decoding_step_hands_the_model_its_whole_mask(tiny, cache_implementation):
    """Issue 47: on an SDPA model, each eager decoding step gives the model the 4D mask of all its rows (built by pnd,
    with a static cache too, where generate then builds none), so that the model builds none of its own: the
    conditioned rows see their prompt (padding masked) and every slot up to the new token, the prior rows the same but
    no visual slot of the prompt (the masked prior). Brute force from the prompt's attention mask and video token ids.
    The mask is additive in the model's dtype (0 where a row attends, -inf elsewhere), so that no layer's SDPA
    converts a bool one."""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    attachment = pnd.attach(model) and attachment_of(model)
    masks, forward = [], attachment.forward

    def spy(**kwargs):
        if kwargs["input_ids"].shape[1] == 1:  # a decoding step
            masks.append(kwargs["attention_mask"])
        return forward(**kwargs)

    attachment.forward = spy
    try:
        out = run(model, inputs, "greedy", cache_implementation=cache_implementation)
    finally:
        attachment.forward = forward
    n, length = inputs["input_ids"].shape
    attends = inputs["attention_mask"].bool()
    video = inputs["input_ids"] == model.config.video_token_id
    prompt = torch.cat([attends, attends & ~video])
    assert len(masks) == STEPS - 1 and out.sequences.shape[1] == length + STEPS
    for step, mask in enumerate(masks):
        slots = mask.shape[-1] if cache_implementation == "static" else length + step + 1
        keys = torch.arange(slots, device=prompt.device)
        later = torch.ones(2 * n, slots - length, dtype=torch.bool, device=prompt.device)
        expected = torch.cat([prompt, later], 1) & (keys <= length + step)
        assert mask.dtype == model.dtype and torch.equal(mask == 0, expected[:, None, None])
        assert torch.isneginf(mask[mask != 0]).all()


@pytest.mark.parametrize("compiled", [False, True])
def test_static_decoding_on_an_sdpa_model_leaves_generate_no_step_mask_to_build(tiny, compiled, monkeypatch):
    """Issue 47: with a static cache on an SDPA model, pnd builds each decoding step's 4D mask itself (eagerly, or in
    the compiled step), so `generate`'s mask builder, which plain static decoding runs at every step, runs in none of
    pnd's steps; the tokens equal the brute-force reference."""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    builder = getattr(model, "create_masks_for_generate", None) or generation_utils.create_masks_for_generate
    built = []

    def counted(*args, **kwargs):
        built.append(kwargs["inputs_embeds"].shape[1])  # the call's new tokens
        return builder(*args, **kwargs)

    # generate reads it from the model first; the session's cached model gets it back after the test
    monkeypatch.setattr(model, "create_masks_for_generate", counted, raising=False)
    settings = {"compile_config": compile_config(counting_backend()[0])} if compiled else {}
    plain = model.generate(**inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False,
                           cache_implementation="static", **settings)
    assert built.count(1) == STEPS - 1, "plain static decoding builds a mask at every step"
    built.clear()
    out = run(model, inputs, "greedy", **settings)
    assert built.count(1) == 0 and plain.shape == out.sequences.shape
    assert_equals_reference(model, inputs, out, "greedy")


@pytest.mark.parametrize("how", ["model.compile", "forward"])
@pytest.mark.parametrize("name", ["pai", "only"])
def test_interventions_on_a_compiled_model_are_refused_not_dropped(name, how):
    """PAI and ONLY act in pnd's attention, which a model compiled by the user (`model.compile()`, or its forward
    through torch.compile) runs traced, out of pnd's sight: refused with the reason, never decoded without the
    intervention."""
    model, processor = tiny_model("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    if how == "model.compile":
        model.compile(backend="eager")
    else:
        model.forward = torch.compile(model.forward, backend="eager")
    with pytest.raises(ValueError, match="did not reach the language model's attention: its layers ran compiled"):
        pnd.attach(model).generate(**inputs, max_new_tokens=2, do_sample=False, logits_processor=[STEP_METHODS[name]()])
