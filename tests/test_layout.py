"""The package tree is the architecture: the core imports no front end, and no module of pnd is in an import cycle.

Front ends: the command line (`pnd.cli`), integrations (`pnd.integrations`), the demo (`pnd.demo`) and the test
helpers (`pnd.testing`, `pnd.testing.builders`). Everything else is the core. Imports are read from the source (lazy ones inside
functions included), so a cycle that only shows at run time is caught too.
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import pnd

ROOT = Path(pnd.__file__).parent
FRONT_ENDS = ("pnd.cli", "pnd.integrations", "pnd.demo", "pnd.testing", "pnd.testing.builders")
OPTIONAL = ("av", "lmms_eval", "bitsandbytes", "matplotlib", "decord")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def is_front_end(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FRONT_ENDS)


def imports_of(name: str) -> set[str]:
    """The pnd modules that module `name` imports anywhere in its source (`if TYPE_CHECKING:` blocks aside)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and ast.unparse(block.test) ==
                   "TYPE_CHECKING" for n in ast.walk(block)}  # imports for annotations only: never run
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in MODULES and t != name)
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` as a path that ends where it starts, or None."""
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt, path + [nxt])):
                return cycle
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [start])):
            return cycle
    return None


def test_the_import_graph_is_read_from_the_source():
    assert GRAPH["pnd"] == {"pnd._moved"} and "pnd.registry" not in GRAPH  # the public names load lazily
    assert GRAPH["pnd.architectures.chameleon"] == {"pnd.architectures.registry"}
    assert "pnd.demo" in GRAPH["pnd.cli.caption"]  # a lazy import inside a function counts


def test_cycle_finder_finds_a_cycle_through_a_lazy_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_of_pnd_is_in_an_import_cycle():
    assert find_cycle(GRAPH) is None


@pytest.mark.parametrize("name", sorted(n for n in MODULES if not is_front_end(n)))
def test_core_module_imports_no_front_end(name):
    assert not [m for m in GRAPH[name] if is_front_end(m)]


FIRST_CALLS = {  # each extra: what its front end does first
    "video": "import torch; from pnd.io.video import write_video; write_video('unused.mp4', torch.zeros(1, 3, 8, 8))",
    "eval": "import pnd.integrations.lmms_eval",
    "plot": "from pnd.extras import pyplot; pyplot()",
    "quant": "from pnd.io.loading import load_model; load_model('unused', load_in_4bit=True)",
}

NEW_PROCESS = f"""
import contextlib, io, json, sys
said = {{}}
import pnd
said["import pnd"] = sorted(m for m in sys.modules if m.split(".")[0] in ("pnd", "torch", "transformers"))
public = [getattr(pnd, name) for name in pnd.__all__]
said["pnd's names"] = [sorted(m for m in sys.modules if m.startswith("pnd")), [m for m in {OPTIONAL!r} if m in sys.modules]]

for name in {OPTIONAL!r}:
    sys.modules[name] = None  # as if not installed: importing it raises ImportError
from pnd.testing import random_video, tiny_inputs, tiny_model
model, processor = tiny_model("llava_onevision")
pnd.attach(model)
out = model.generate(**tiny_inputs(processor, "llava_onevision"), max_new_tokens=3, do_sample=False,
                     logits_processor=[pnd.PriorNormalized(0.5)])
scores = pnd.CaptionScorer(model, processor).score([random_video(0)], ["a red circle"])
said["core"] = [out.shape[1], list(scores.shape)]

said["first calls"] = {{}}
for extra, code in {FIRST_CALLS!r}.items():
    try:
        exec(code)
        said["first calls"][extra] = "ran"
    except Exception as error:
        said["first calls"][extra] = " ".join(str(error).split())

from pnd.cli import main
with contextlib.redirect_stderr(io.StringIO()) as stderr:
    said["pnd demo"] = [main(["demo", "--out", sys.argv[1]]), stderr.getvalue()]
print(json.dumps(said))
"""


@pytest.fixture(scope="module")
def new_process(tmp_path_factory):
    """What one new interpreter saw, in this order: `import pnd` alone; then, with the optional packages blocked (as if
    `pip install pnd` with no extra), the core on a tiny model, each extra's first call and `pnd demo`."""
    out = tmp_path_factory.mktemp("new_process") / "x.png"
    result = subprocess.run([sys.executable, "-c", NEW_PROCESS, str(out)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_import_pnd_alone_loads_neither_torch_nor_transformers(new_process):
    """`pnd --help` and lmms-eval's scan of its plugins import pnd: each public name loads its module on first use."""
    assert new_process["import pnd"] == ["pnd", "pnd._moved"]


def test_pnds_names_load_core_modules_only_and_no_optional_dependency(new_process):
    loaded, optional = new_process["pnd's names"]
    assert "pnd.decoding.paired" in loaded and not [m for m in loaded if is_front_end(m)]
    assert optional == []


def test_the_core_works_without_any_extra(new_process):
    """What `pip install pnd` (no extra) gives: attach + PriorNormalized + CaptionScorer on a tiny model."""
    length, scores = new_process["core"]
    assert length > 0 and scores == [1, 1]


def test_a_front_end_without_its_extra_names_the_extra_to_install(new_process):
    """Each front end without the optional packages: an error that names its extra."""
    said = new_process["first calls"]
    assert list(said) == list(FIRST_CALLS)
    for extra, message in said.items():
        assert f"pip install 'pnd[{extra}]'" in message, (extra, message)


def test_the_command_line_reports_a_missing_extra_in_one_line(new_process):
    """`pnd demo` reads its sample videos with PyAV: without pnd[video] it says so in one line and exits 2."""
    status, stderr = new_process["pnd demo"]
    assert status == 2 and "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].startswith("pnd demo: av is missing")
    assert "pip install 'pnd[video]'" in stderr


def test_test_modules_do_not_import_each_other():
    """Shared test code lives in tests/helpers.py and pnd/testing/reference/, not in another test module."""
    for path in Path(__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.startswith("test_") for n in names), f"{path.name} imports a test module: {names}"


def test_the_reference_is_independent_of_pnds_decoding_code():
    """The brute-force reference (pnd.testing.reference) reads the processor an attached model holds and nothing else
    of pnd: not the adapters, the decoding or the scoring code it is there to check."""
    reference = [n for n in MODULES if n.startswith("pnd.testing.reference")]
    assert len(reference) > 1
    outside = {i for n in reference for i in GRAPH[n] if not i.startswith("pnd.testing.reference")}
    assert outside == {"pnd.attachment"}


LAYERS = (  # each layer imports only from the layers before it (and from itself)
    ("pnd._compat", "pnd._moved", "pnd.attachment", "pnd.extras", "pnd.validation"),
    ("pnd.architectures",),
    ("pnd.io",),
    ("pnd.decoding", "pnd.interventions"),  # decoding registers the interventions, which are paired processors
    ("pnd.scoring",),
)


def layer_of(name: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) if any(name == p or name.startswith(p + ".") for p in layer)),
                None)


def test_every_core_module_has_a_layer():
    assert [n for n in MODULES if n != "pnd" and not is_front_end(n) and layer_of(n) is None] == []


@pytest.mark.parametrize("name", sorted(n for n in MODULES if layer_of(n) is not None))
def test_a_core_package_imports_only_the_layers_below_it(name):
    """base < architectures < io < decoding < scoring: e.g. decoding never imports scoring, io never decoding."""
    assert [m for m in GRAPH[name] if (layer_of(m) or 0) > layer_of(name)] == []


def private_reaches(path: Path) -> list[str]:
    """`x._name` on anything but self/cls, and `from <another package> import _name`, in one source file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") and \
                node.attr not in ("_asdict", "_replace", "_fields", "_make"):  # a NamedTuple's public methods
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls", "_compat")):
                found.append(f"{path.name}:{node.lineno} .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.level > 1:
            found += [f"{path.name}:{node.lineno} import {a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__") and a.name != "_compat"]
    return found


@pytest.mark.parametrize("name", sorted(n for n in MODULES if not n.startswith("pnd._compat")))
def test_no_module_reaches_into_private_attributes(name):
    """Private names stay in their package; transformers' private calls are pnd/_compat/'s alone."""
    assert private_reaches(MODULES[name]) == []


def test_the_old_module_paths_still_import_with_a_deprecation_warning(monkeypatch):
    """What pnd 0.2 users imported (pnd.video, pnd.explain, pnd.tiny_builders, ...) is the moved module itself."""
    import importlib
    import warnings

    from pnd._moved import MOVED

    for old, new in MOVED.items():
        monkeypatch.delitem(sys.modules, old, raising=False)  # imported before (the doctest of pnd._moved): anew
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(old)
        assert module is importlib.import_module(new) and module.__name__ == new == module.__spec__.name, old
        assert [w.category for w in caught] == [DeprecationWarning] and new in str(caught[0].message), (old, caught)
    monkeypatch.delitem(sys.modules, "pnd.video", raising=False)
    with pytest.warns(DeprecationWarning, match="pnd.video moved to pnd.io.video"):
        from pnd.video import read_video
    assert read_video.__module__ == "pnd.io.video"


def test_no_module_of_pnd_is_over_400_lines():
    """A module over ~400 lines holds more than one concern: split it (CONTRIBUTING.md, the layout)."""
    assert {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > 400} == {}


SHARED_MECHANISMS = {"families", "qformer", "prefix_lm"}  # modules that register several families by what they share


def test_each_family_is_registered_where_its_model_type_says():
    """A family is registered in `families.py`, a shared mechanism's module, or a module named after one of its model
    types (docs/adding-a-family.md §4): a reader finds it in one step, whatever the order families were added in."""
    from pnd.architectures import registered
    from pnd.architectures.registry import registered_in

    def named_after(stem: str, model_type: str) -> bool:
        return model_type.replace("-", "").replace(".", "_").startswith(stem)

    misplaced = [(a.model_types, module) for a in registered()
                 if (module := registered_in(a.model_types[0])).rpartition(".")[2] not in SHARED_MECHANISMS
                 and not any(named_after(module.rpartition(".")[2], t) for t in a.model_types)]
    assert misplaced == []
