"""The per-token view (pnd.scoring.explain, CaptionScorer.token_scores) equals the brute-force reference, step by step."""

import math

import pytest
import torch

import pnd
from pnd.scoring.explain import explain
from pnd.testing import TINY_ARCHITECTURES, random_video, tiny_inputs
from pnd.testing.reference import full_logits, greedy

from helpers import refusal

STEPS = 6
ALPHA = 0.7
TOL = dict(abs=1e-4)


def reference_steps(model, inputs, generated):
    """(log P(.|v), log P(.)) at each step of `generated` (1, steps): two from-scratch forwards per step."""
    prompt = inputs["input_ids"]
    conditional, prior = [], []
    for k in range(generated.shape[1]):
        sequence = torch.cat([prompt, generated[:, :k]], 1)
        conditional.append(torch.log_softmax(full_logits(model, inputs, sequence, prior=False)[0], -1))
        prior.append(torch.log_softmax(full_logits(model, inputs, sequence, prior=True)[0], -1))
    return torch.stack(conditional), torch.stack(prior)


def assert_matches_reference(tokens, conditional, prior, alpha):
    """Every number of a per-token view against reference log-probabilities of the same steps."""
    normalized = conditional - alpha * prior
    shift = torch.log_softmax(normalized, -1) - conditional
    views = {"conditional": conditional, "prior": prior, "normalized": normalized}
    for step, token in enumerate(tokens):
        w = token.token_id
        assert token.conditional == pytest.approx(float(conditional[step, w]), **TOL)
        assert token.prior == pytest.approx(float(prior[step, w]), **TOL)
        assert token.normalized == pytest.approx(float(normalized[step, w]), **TOL)
        assert token.shift == pytest.approx(float(shift[step, w]), **TOL)
        for name, view in views.items():
            listed = token.top[name]
            want = view[step].topk(len(listed)).values
            assert [a.value for a in listed] == pytest.approx(want.tolist(), **TOL)  # the k best values
            assert [a.value for a in listed] == pytest.approx([float(view[step, a.token_id]) for a in listed], **TOL)


@pytest.mark.parametrize("model_type", TINY_ARCHITECTURES)
def test_explain_equals_brute_force(tiny, model_type):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type)
    result = explain(pnd.attach(model), processor, inputs, alpha=ALPHA, max_new_tokens=STEPS, top_k=4)
    for tokens, alpha in ((result.plain, 0.0), (result.normalized, ALPHA)):
        ref_tokens, _ = greedy(model, inputs, alpha, STEPS)
        chosen = [t.token_id for t in tokens]
        assert chosen == ref_tokens[0, : len(chosen)].tolist() and len(chosen) >= 1
        conditional, prior = reference_steps(model, inputs, ref_tokens[:, : len(chosen)])
        assert_matches_reference(tokens, conditional, prior, ALPHA)
    plain, normalized = ([t.token_id for t in tokens] for tokens in (result.plain, result.normalized))
    parted = next(k for k, (a, b) in enumerate(zip(plain, normalized)) if a != b)  # the tiny models part here
    assert result.parted_at == parted
    assert result.plain_text == processor.tokenizer.decode(plain, skip_special_tokens=True).strip()


def test_explanation_is_json_ready(tiny):
    import json

    model, processor = tiny("llava_onevision")
    result = explain(pnd.attach(model), processor, tiny_inputs(processor, "llava_onevision"), alpha=1.0,
                     max_new_tokens=3, top_k=3, plausibility=0.99)
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))  # standard JSON: no -Infinity
    assert data["alpha"] == 1.0 and data["plausibility"] == 0.99
    assert set(data["normalized"][0]["top"]) == {"conditional", "prior", "normalized"}
    assert len(data["plain"][0]["top"]["prior"]) == 3
    cut = [a for a in result.normalized[0].top["normalized"] if a.value == -math.inf]  # below 0.99 of the top token
    assert cut and [a["value"] for a in data["normalized"][0]["top"]["normalized"]][-len(cut):] == [None] * len(cut)


def test_explain_refuses_what_it_cannot_do(tiny):
    model, processor = tiny("llava_onevision")
    with pytest.raises(ValueError, match="pnd.attach"):
        explain(model, processor, tiny_inputs(processor, "llava_onevision"))
    with pytest.raises(ValueError, match="one prompt"):
        explain(pnd.attach(model), processor, tiny_inputs(processor, "llava_onevision", ("a", "b")))


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl"])
def test_caption_scorer_token_scores_equal_brute_force(tiny, model_type):
    model, processor = tiny(model_type)
    scorer = pnd.CaptionScorer(model, processor, alpha=0.8, reduction="sum")
    video, caption = random_video(3), "a red circle moves left"
    tokens = scorer.token_scores(video, caption, top_k=3)
    ids = scorer.caption_ids(caption)
    assert [t.token_id for t in tokens] == ids and "".join(t.text for t in tokens).strip() == caption
    prompt = scorer.prompt_inputs(video)
    conditional, prior = reference_steps(model, prompt, torch.tensor([ids]))
    assert_matches_reference(tokens, conditional, prior, 0.8)
    total = scorer.score([video], [caption])[0, 0]  # the caption's score is the sum of its tokens'
    assert sum(t.normalized for t in tokens) == pytest.approx(float(total), abs=1e-3)


# -- the bundled demo model ----------------------------------------------------------------------------------------

PUSHED_DOWN = -0.3  # nats: a token the prior clearly pushed down among its alternatives


@pytest.fixture(scope="module")
def demo():
    from pnd.demo import load_demo_model

    model, processor = load_demo_model()
    return pnd.attach(model), processor


def demo_explanation(demo, clip, alpha=1.0):
    from pnd.demo import PLAUSIBILITY
    from pnd.io.prompts import video_prompt

    model, processor = demo
    inputs = processor(text=[video_prompt(processor, "Describe the video.")], videos=[clip], return_tensors="pt")
    return explain(model, processor, inputs, alpha=alpha, max_new_tokens=8, plausibility=PLAUSIBILITY)


def test_demo_planted_prior_shows_as_the_pushed_down_tokens(demo):
    """Noisy clips of other colours and sizes: the tokens the prior pushes down are "red" and "small"'s first."""
    from pnd.demo import uniform_test_set
    from pnd.demo.moving import PLANTED

    clips, pairs = uniform_test_set(1, noise=0.85)
    planted = {f" {PLANTED[0]}", f" {PLANTED[1][0]}"}  # the demo's tokenizer spells "small" " s", "m", "a", ...
    pushed = []
    for pair in (("blue", "medium"), ("green", "small"), ("blue", "small")):
        result = demo_explanation(demo, clips[pairs.index(pair)])
        tokens = result.plain + result.normalized
        pushed += [t.text for t in tokens if t.shift < PUSHED_DOWN]
        assert all(t.shift < -PUSHED_DOWN for t in tokens if t.text in planted)  # never clearly pushed up
    assert set(pushed) <= planted and len(pushed) >= 2, pushed


@pytest.fixture(scope="module")
def explained(tmp_path_factory):
    """`pnd explain` through the console script on a noisy demo clip (medium blue), alpha 1."""
    import subprocess
    import sys
    from pathlib import Path

    from pnd.demo import uniform_test_set
    from pnd.io.video import write_video

    root = tmp_path_factory.mktemp("explain")
    clips, pairs = uniform_test_set(1, noise=0.85)
    write_video(root / "clip.mp4", clips[pairs.index(("blue", "medium"))])
    script = Path(sys.executable).with_name("pnd")
    result = subprocess.run([script, "explain", root / "clip.mp4", "--alpha", "1.0", "--max-new-tokens", "10",
                             "--out", root / "out"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return root / "out", result.stdout


def test_pnd_explain_writes_html_png_json(explained):
    import json
    import re

    out, stdout = explained
    data = json.loads((out / "explain.json").read_text())
    assert data["alpha"] == 1.0 and data["plausibility"] == 0.1 and data["prompt"] == "Describe the video."
    assert f"plain:      {data['plain_text']}" in stdout and data["plain_text"] != data["normalized_text"]
    page = (out / "explain.html").read_text()
    for view in ("plain", "normalized"):
        spans = re.findall(rf'data-view="{view}" data-step="(\d+)" data-token-id="(\d+)"', page)
        assert [(int(s), int(i)) for s, i in spans] == [(k, t["token_id"]) for k, t in enumerate(data[view])]
    assert not re.search(r"(src|href)=|https?:|<script|@import|url\(", page)  # self-contained
    assert (out / "explain.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (out / "explain.png").stat().st_size > 5000


def test_pnd_explain_takes_an_image_and_refuses_bad_input(tmp_path):
    import json

    from PIL import Image

    from pnd.cli import main
    from pnd.demo import uniform_test_set

    clips, _ = uniform_test_set(1, noise=0.3)
    Image.fromarray(clips[4][3].permute(1, 2, 0).numpy()).save(tmp_path / "frame.png")
    assert main(["explain", str(tmp_path / "frame.png"), "--max-new-tokens", "3", "--out", str(tmp_path / "o")]) == 0
    assert json.loads((tmp_path / "o" / "explain.json").read_text())["prompt"] == "Describe the image."
    with pytest.raises(SystemExit, match="alpha must be"):
        main(["explain", str(tmp_path / "frame.png"), "--alpha", "2"])
    with pytest.raises(SystemExit, match="no such file"):
        main(["explain", str(tmp_path / "missing.mp4")])
    with pytest.raises(SystemExit, match="^pnd explain: the prompt 'Is <image> red[?]' holds '<image>'"):
        main(["explain", str(tmp_path / "frame.png"), "--prompt", "Is <image> red?"])  # the processor's own error


def test_pnd_explain_method(tmp_path, explained):
    """`pnd explain --method`: the method's decoding and its contrast per token; its settings checked first."""
    import json

    from pnd.cli import main

    clip = explained[0].parent / "clip.mp4"
    assert main(["explain", str(clip), "--method", "icd", "--method-args", "instruction=Be vague.",
                 "--max-new-tokens", "4", "--top-k", "2", "--out", str(tmp_path / "o")]) == 0
    data = json.loads((tmp_path / "o" / "explain.json").read_text())
    assert data["method"] == "icd" and data["settings"]["instruction"] == "Be vague."
    assert data["alpha"] == 1.0 and data["plausibility"] == 0.1  # ICD's paper defaults
    assert set(data["normalized"][0]["top"]) == {"conditional", "prior", "normalized"}
    for args, message in [(["--method", "m3id", "--alpha", "1"], "'m3id' has no setting 'alpha'"),
                          (["--method", "vcd", "--method-args", "noise_step=2000"], "noise_step must be an integer"),
                          (["--method", "pai"], "PAI acts in no layer of this model's 2 decoder layers")]:
        with pytest.raises(SystemExit, match=message):  # the last is refused by the model (PAI's layer 2): one line
            main(["explain", str(clip), "--out", str(tmp_path / "bad"), *args])
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("args, message", [
    (["--max-new-tokens", "0"], "--max-new-tokens must be at least 1, got 0"),
    (["--top-k", "-2"], "--top-k must be at least 1, got -2"),
    (["--out", "{tmp}/afile"], "{tmp}/afile is a file, not a folder; pick another --out"),
    (["--out", "{tmp}/afile/why"], "{tmp}/afile is a file, not a folder; pick another --out"),
    (["--device", "bogus"], "--device bogus: not a device name; pass cpu, cuda, cuda:1, mps"),
    (["--device", "cuda:99"], "--device cuda:99: this machine has"),
])
def test_pnd_explain_refuses_bad_arguments_before_any_model_loads(tmp_path, monkeypatch, args, message):
    """One line, exit 1 (a `SystemExit` with its message), nothing written; the first case also through the console
    script, which prints that line on stderr."""
    import subprocess
    import sys
    from pathlib import Path

    from PIL import Image

    Image.new("RGB", (16, 16)).save(tmp_path / "frame.png")
    (tmp_path / "afile").write_text("notes")
    monkeypatch.chdir(tmp_path)
    args = [str(tmp_path / "frame.png"), *(a.format(tmp=tmp_path) for a in args)]
    said = refusal("explain", *args)
    assert said.startswith(f"pnd explain: {message.format(tmp=tmp_path)}")
    if message.startswith("--max-new-tokens"):
        result = subprocess.run([Path(sys.executable).with_name("pnd"), "explain", *args], capture_output=True,
                                text=True, cwd=tmp_path, timeout=120)
        assert result.returncode == 1 and result.stderr == said + "\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "frame.png"]
    assert (tmp_path / "afile").read_text() == "notes"


@pytest.fixture(scope="module")  # module scope: it runs before `explained`, so a skip costs nothing
def browser() -> str:
    """The headless browser the set-up installs (`.ci/run`: Debian's chromium); in CI its absence fails."""
    import os
    import shutil

    found = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
    if found is None:
        message = "no chromium binary on PATH: install Debian's chromium package (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message + "; .ci/run installs it")
        pytest.skip(message)
    return found


def test_pnd_explain_page_renders_in_a_headless_browser(browser, explained, tmp_path):
    import json
    import subprocess
    from html.parser import HTMLParser

    from PIL import Image

    out, _ = explained
    url = (out / "explain.html").resolve().as_uri()
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(flags + ["--dump-dom", url], capture_output=True, text=True, timeout=120, check=True).stdout

    class Tokens(HTMLParser):  # the rendered DOM's token spans: (view, step, text)
        def __init__(self):
            super().__init__()
            self.found, self.open = [], None

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if tag == "span" and "data-view" in attrs:
                self.open = [attrs["data-view"], int(attrs["data-step"]), ""]

        def handle_data(self, data):
            if self.open is not None:
                self.open[2] += data

        def handle_endtag(self, tag):
            if tag == "span" and self.open is not None:
                self.found.append(tuple(self.open))
                self.open = None

    parser = Tokens()
    parser.feed(dom)
    data = json.loads((out / "explain.json").read_text())
    want = [(view, k, t["text"]) for view in ("plain", "normalized") for k, t in enumerate(data[view])]
    assert parser.found == want  # every token of both decodings, in order, with its text

    shot = out / "screenshot.png"
    subprocess.run(flags + ["--window-size=1000,800", f"--screenshot={shot}", url], capture_output=True,
                   timeout=120, check=True)
    pixels = Image.open(shot).convert("RGB").getdata()
    red = sum(r > 200 and g < 140 and b < 140 for r, g, b in pixels)
    blue = sum(b > 200 and r < 200 and g < 200 for r, g, b in pixels)
    assert red > 100 and blue > 100  # the coloured tokens were painted


def test_pnd_explain_stops_on_sigterm_with_one_line(tmp_path, monkeypatch, capsys):
    """SIGTERM while it decodes (a real signal to this process): exit 143 and one line saying to run it again, as
    `pnd caption` and `pnd retrieve` stop on it."""
    import os
    import signal
    import time

    from PIL import Image

    import pnd.scoring.explain
    from pnd.cli import main

    def terminated(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises before this ends
        raise AssertionError("SIGTERM did not stop pnd explain")
    monkeypatch.setattr(pnd.scoring.explain, "explain", terminated)
    Image.new("RGB", (16, 16)).save(tmp_path / "frame.png")
    assert main(["explain", str(tmp_path / "frame.png"), "--out", str(tmp_path / "o")]) == 143
    assert capsys.readouterr().err.endswith("\npnd explain: terminated before it finished; run the same command again.\n")
    assert not (tmp_path / "o").exists()
