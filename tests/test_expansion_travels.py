"""Issue 39: the visual expansion travels with the inputs (`visual_expansion_mask`, docs/design.md §1).

Prompts of the families whose expansion is what the processor reports (InternVL: video, frame labels; Mistral 3: an
image; VideoLLaMA3: video, timestamps) built in DataLoader workers, by `datasets.map` in other processes and read back
from disk, saved with `torch.save` in another process, built more than the in-memory record holds before generation,
or left-padded by `tokenizer.pad` after being built one by one, decode exactly the brute-force reference's tokens.
Each test first checks that the bound processor's in-memory record does not know the prompt, so that only what the
inputs carry can be what decodes it.
"""

import copy
import pickle
import subprocess
import sys
import textwrap

import pytest
import torch

import pnd
from pnd.architectures.reported import EXPANSION_KEY, REMEMBERED_PROMPTS, recalled_expansion
from pnd.testing import random_video, tiny_inputs
from pnd.testing.reference import greedy, visual_positions

FAMILIES = ("internvl", "mistral3", "video_llama_3")  # video (frame labels), image, video with timestamps
PROMPTS = ("Describe it.", "what colour is the shape? answer.")
ALPHA, STEPS = 0.7, 3


class Prompts(torch.utils.data.Dataset):
    """One prompt per item, built by the processor inside `__getitem__` (in a DataLoader worker)."""

    def __init__(self, processor, model_type):
        self.processor, self.model_type = processor, model_type

    def __len__(self):
        return len(PROMPTS)

    def __getitem__(self, index):
        return dict(tiny_inputs(self.processor, self.model_type, (PROMPTS[index],), seed=index))


def attached(tiny, model_type):
    """The cached tiny model, attached with a copy of its processor: the copy's in-memory record knows no prompt that
    an earlier test of this process built with the same text and seed."""
    model, processor = tiny(model_type)
    processor = copy.deepcopy(processor)
    return pnd.attach(model, processor), processor


def assert_not_remembered(model, processor, inputs):
    """The in-memory record of this process does not know these prompts: only the inputs can say their expansion."""
    with pytest.raises(ValueError, match="is unknown"):
        recalled_expansion(processor, inputs["input_ids"], inputs["attention_mask"], model.config.model_type)


def assert_decodes_exactly(model, inputs):
    """Greedy prior-normalized decoding equals the brute-force reference, and the carried expansion its own reading."""
    assert torch.equal(inputs[EXPANSION_KEY].bool(), visual_positions(model, inputs["input_ids"]))
    out = model.generate(**inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False,
                         logits_processor=[pnd.PriorNormalized(ALPHA)])
    eos = model.generation_config.eos_token_id
    expected, _ = greedy(model, inputs, ALPHA, STEPS, banned=[eos] if isinstance(eos, int) else eos or [])
    assert torch.equal(out[:, inputs["input_ids"].shape[1]:], expected)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_dataloader_workers(tiny, model_type):
    model, processor = attached(tiny, model_type)
    loader = torch.utils.data.DataLoader(Prompts(processor, model_type), batch_size=None, num_workers=2)
    items = list(loader)
    assert len(items) == len(PROMPTS)
    for inputs in items:
        assert_not_remembered(model, processor, inputs)
        assert_decodes_exactly(model, inputs)


def test_dataloader_workers_started_by_spawn(tiny):
    """Spawned workers get a pickled copy of the dataset and its processor (macOS, Windows, forkserver): it carries."""
    model, processor = attached(tiny, "internvl")
    loader = torch.utils.data.DataLoader(Prompts(processor, "internvl"), batch_size=None, num_workers=2,
                                         multiprocessing_context="spawn")
    for inputs in loader:
        assert_not_remembered(model, processor, inputs)
        assert_decodes_exactly(model, inputs)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_datasets_map_in_processes_saved_and_read_back(tiny, model_type, tmp_path):
    datasets = pytest.importorskip("datasets")
    model, processor = attached(tiny, model_type)

    def build(row):
        torch.set_num_threads(1)  # a forked worker must not enter the OpenMP pool the parent started: it would hang
        return dict(tiny_inputs(processor, model_type, (row["prompt"],), seed=row["seed"]))

    table = datasets.Dataset.from_dict({"prompt": list(PROMPTS), "seed": list(range(len(PROMPTS)))})
    table.map(build, num_proc=2, remove_columns=["prompt", "seed"]).save_to_disk(str(tmp_path / "prompts"))
    for inputs in datasets.load_from_disk(str(tmp_path / "prompts")).with_format("torch"):
        assert_not_remembered(model, processor, inputs)
        assert_decodes_exactly(model, inputs)


BUILD_ELSEWHERE = """
import sys, torch, pnd
from pnd.testing import tiny_model, tiny_inputs
saved = {}
for model_type in sys.argv[2:]:
    model, processor = tiny_model(model_type)
    pnd.attach(model, processor)
    saved[model_type] = dict(tiny_inputs(processor, model_type, sys.argv[1].split("|")))
torch.save(saved, "saved.pt")
"""


@pytest.fixture(scope="module")
def saved_elsewhere(tmp_path_factory):
    """Every family's left-padded prompts, built in another process and saved there with torch.save."""
    where = tmp_path_factory.mktemp("elsewhere")
    subprocess.run([sys.executable, "-c", textwrap.dedent(BUILD_ELSEWHERE), "|".join(PROMPTS), *FAMILIES], cwd=where,
                   check=True, capture_output=True)
    return torch.load(where / "saved.pt")


@pytest.mark.parametrize("model_type", FAMILIES)
def test_torch_save_in_another_process(tiny, model_type, saved_elsewhere):
    model, processor = attached(tiny, model_type)
    inputs = saved_elsewhere[model_type]
    assert_not_remembered(model, processor, inputs)
    assert_decodes_exactly(model, inputs)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_more_prompts_built_than_remembered(tiny, model_type):
    """5000 prompts built after the first and before it is generated: the record forgot it, the inputs did not."""
    model, processor = attached(tiny, model_type)
    first = tiny_inputs(processor, model_type, PROMPTS)
    for start in range(0, 5000, 500):
        processor(text=[f"prompt {i}" for i in range(start, start + 500)], padding=True, return_tensors="pt")
    assert 5000 > REMEMBERED_PROMPTS
    assert_not_remembered(model, processor, first)
    assert_decodes_exactly(model, first)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_rows_built_one_by_one_then_padded(tiny, model_type):
    """`tokenizer.pad` pads the carried expansion as it pads attention_mask (left, with 0); pixels concatenated."""
    model, processor = attached(tiny, model_type)
    rows = [tiny_inputs(processor, model_type, (prompt,), seed=i) for i, prompt in enumerate(PROMPTS)]
    tokens = ("input_ids", "attention_mask", EXPANSION_KEY)
    inputs = dict(processor.tokenizer.pad([{k: row[k][0] for k in tokens} for row in rows], padding_side="left",
                                          return_tensors="pt"))
    inputs.update({k: torch.cat([row[k] for row in rows]) for k in rows[0].keys() - set(tokens)})
    assert not inputs["attention_mask"][0].all()  # the shorter prompt really padded
    processor(text=[f"prompt {i}" for i in range(REMEMBERED_PROMPTS)], padding=True, return_tensors="pt")  # forgotten
    assert_not_remembered(model, processor, inputs)
    assert_decodes_exactly(model, inputs)


def test_a_row_sliced_from_a_padded_batch(tiny):
    """Mistral 3's inputs hold one image per row: a row sliced out of a left-padded batch, padding and all."""
    model, processor = attached(tiny, "mistral3")
    batch = tiny_inputs(processor, "mistral3", PROMPTS)
    processor(text=[f"prompt {i}" for i in range(REMEMBERED_PROMPTS)], padding=True, return_tensors="pt")  # forgotten
    for row in range(len(PROMPTS)):
        inputs = {k: v[row : row + 1] for k, v in batch.items()}
        assert_not_remembered(model, processor, inputs)
        assert_decodes_exactly(model, inputs)


def test_the_attached_model_ignores_it_and_detach_stops_it(tiny):
    """A plain forward and generate of the attached model accept the new output; pnd's entry points read it; a
    pickled copy of the processor (a worker's) keeps adding it; after detach the processor no longer adds it."""
    model, processor = attached(tiny, "internvl")
    inputs = tiny_inputs(processor, "internvl", PROMPTS)
    without = {k: v for k, v in inputs.items() if k != EXPANSION_KEY}
    assert torch.equal(model(**inputs).logits, model(**without).logits)
    assert torch.equal(model.generate(**inputs, max_new_tokens=2, do_sample=False),
                       model.generate(**without, max_new_tokens=2, do_sample=False))
    assert torch.equal(pnd.prior_logits(model, **inputs), pnd.prior_logits(model, **without))
    scorer = pnd.CaptionScorer(model, processor)
    assert torch.equal(scorer.score_prompts(inputs, [["a cat"], ["a dog"]])[1],
                       scorer.score_prompts(without, [["a cat"], ["a dog"]])[1])
    assert EXPANSION_KEY in tiny_inputs(pickle.loads(pickle.dumps(processor)), "internvl")
    pnd.detach(model)
    assert EXPANSION_KEY not in tiny_inputs(processor, "internvl")


def test_a_refusal_says_what_is_true(tiny):
    """Inputs whose expansion nobody knows name every possible cause; inputs whose tokens moved away from the carried
    expansion say they were changed; a carried expansion sliced unlike input_ids says so."""
    model, processor = attached(tiny, "internvl")
    inputs = tiny_inputs(processor, "internvl", PROMPTS)
    processor(text=[f"prompt {i}" for i in range(REMEMBERED_PROMPTS)], padding=True, return_tensors="pt")  # forgotten
    without = {k: v for k, v in inputs.items() if k != EXPANSION_KEY}
    with pytest.raises(ValueError, match=rf"carry no {EXPANSION_KEY} .* not build them in this process .*\(they were "
                                         rf"built before attach, by another processor, or by hand\), or {EXPANSION_KEY} "
                                         rf"was left behind .* changed after building. .* \({EXPANSION_KEY} with them\)"):
        pnd.prior_logits(model, **without)
    with pytest.raises(ValueError, match=r"outside the InternVL visual expansion given with them .* changed after"):
        pnd.prior_logits(model, **{**inputs, EXPANSION_KEY: torch.zeros_like(inputs[EXPANSION_KEY])})
    with pytest.raises(ValueError, match=rf"{EXPANSION_KEY} has shape \(2, 1\) but input_ids"):
        model.generate(**{**inputs, EXPANSION_KEY: inputs[EXPANSION_KEY][:, :1]}, max_new_tokens=1,
                       logits_processor=[pnd.PriorNormalized(ALPHA)])


def test_a_token_id_family_gets_no_extra_output(tiny):
    """Only families that read what the processor reports carry it: LLaVA-OneVision's expansion is its placeholder
    tokens, so its inputs stay as transformers builds them and may be extended by hand (input_ids and mask alone)."""
    model, processor = tiny("llava_onevision")
    pnd.attach(model, processor)
    inputs = tiny_inputs(processor, "llava_onevision")
    assert EXPANSION_KEY not in inputs
    token = pnd.prior_logits(model, **inputs).argmax(-1, keepdim=True)
    longer = {**inputs, "input_ids": torch.cat([inputs["input_ids"], token], 1),
              "attention_mask": torch.cat([inputs["attention_mask"], torch.ones_like(token)], 1)}
    assert pnd.prior_logits(model, **longer).shape == (1, model.config.get_text_config().vocab_size)


@pytest.mark.parametrize("model_type", ["internvl", "idefics3", "paligemma"])
def test_a_text_only_row_before_an_image_row_builds_and_decodes_as_plain(tiny, model_type):
    """A batch [text only, with an image]: the attached processor failed ("Unable to convert output
    'text_replacement_offsets' to tensor"): pnd asks for the offsets, and these processors' calls make tensors of them.
    Built, its alpha 0 is plain `generate` and alpha > 0 names the row without a visual."""
    from pnd.io.prompts import images_for, video_prompt

    model, processor = attached(tiny, model_type)
    story = [{"role": "user", "content": [{"type": "text", "text": "Tell me a story."}]}]
    texts = [processor.apply_chat_template(story, add_generation_prompt=True),
             video_prompt(processor, "Describe it.", "image")]
    image = random_video(0, frames=1, size=64)[0]
    inputs = processor(text=texts, images=images_for(processor, [[], [image]]), return_tensors="pt", padding=True)
    alone = processor(text=texts[1:], images=images_for(processor, [[image]]), return_tensors="pt")
    width = alone["input_ids"].shape[1]  # left padded: the image row ends as the prompt built alone
    assert torch.equal(inputs[EXPANSION_KEY][1, -width:], alone[EXPANSION_KEY][0]) and not inputs[EXPANSION_KEY][0].any()
    plain = model.generate(**inputs, max_new_tokens=STEPS, do_sample=False)
    assert torch.equal(model.generate(**inputs, max_new_tokens=STEPS, do_sample=False,
                                      logits_processor=[pnd.PriorNormalized(0.0)]), plain)
    with pytest.raises(ValueError, match=r"No visual tokens in prompt row\(s\) \[0\]"):
        model.generate(**inputs, max_new_tokens=STEPS, logits_processor=[pnd.PriorNormalized(ALPHA)])
