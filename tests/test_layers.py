"""Imports point down the layers (docs/architecture.md): a module imports only modules of a lower
layer, or the named same-layer neighbours below. Checked on the source, lazy imports included."""

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "attnmt"

# module (dotted, below attnmt) or package prefix -> layer; the most specific entry wins.
LAYERS = {
    "errors": 0, "direction": 0,  # language codes and directions: one rule, one spelling
    "bounds": 0,  # the ranges of the numbers that the config, the CLI, decoding and the service share
    "files": 1, "devices": 1, "masks": 1, "checkpoint": 2, "config": 2,
    "world": 1,  # the torchrun process group: ranks, barriers, broadcasts (data.prepare, training, sharding)
    "allocator": 1,  # the C allocator of a training process (commands/train.py)
    "untrusted": 1,  # untrusted YAML and JSON read within bounds (config.py)
    "attention": 3,  # pure tensor math over masks.py
    "data": 4,
    "models": 5,
    "decoding": 6,  # search, constrained search, inputs, results, alignment: one package (anything goes within)
    "run_dir": 7, "engines": 8,
    "interop": 8,  # Marian / Hugging Face checkpoints <-> runs (run_dir.py, models, data)
    "interop.argos": 9,  # Argos Translate packages <-> CTranslate2 exports: calls engines/ctranslate2_export.py
    "evaluation": 9, "significance": 9, "training": 10,
    "translator": 11, "sharding": 11, "plotting": 12,  # sharding: line files in resumable shards over ranks
    "workers": 12,  # decoding in several processes, each with its own Translator (translator.py)
    "calibration": 12,  # attnmt calibrate: a translator's confidence fitted on held-out data (translator.py)
    "distillation": 13,  # `attnmt distill`: teacher -> student in resumable stages (translator, sharding, training, workers)
    "documents": 13,  # .txt, .html, .docx, .pptx, .odt, .odp, .epub, .srt, .po, .xliff, .pdf: one table of formats,
                      # documents/markup.py's placement by word alignment, translator results
    "server": 14, "commands": 15, "cli": 16, "__main__": 17, "__init__": 17,
}


def layer_of(name: str) -> int:
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in LAYERS:
            return LAYERS[key]
    raise KeyError(f"attnmt.{name} has no layer in tests/test_layers.py: add it to LAYERS")


def imports_of(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
    return {name[len("attnmt."):] for name in found if name.startswith("attnmt.")}


def modules():
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).with_suffix("")
        yield path, ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts) or "__init__"


@pytest.mark.parametrize("path,module", list(modules()), ids=lambda v: str(v) if isinstance(v, str) else "")
def test_imports_point_down(path, module):
    own = layer_of(module)
    top = module.split(".")[0]
    for name in imports_of(path, "attnmt." + module if module != "__init__" else "attnmt"):
        if name.split(".")[0] == top:  # within one package (data.*, models.*, training.*, server.*)
            continue
        assert layer_of(name) < own, f"attnmt.{module} (layer {own}) imports attnmt.{name} (layer {layer_of(name)})"


def test_layer_table_is_complete():
    missing = []
    for _, module in modules():
        try:
            layer_of(module)
        except KeyError:
            missing.append(f"attnmt.{module}")
    assert missing == [], f"modules with no layer in LAYERS: {missing}"


def test_no_module_imports_itself_through_others():
    """No import circle, within a package included (lazy imports count): the graph of explicit
    imports between modules is acyclic."""
    known = {module for _, module in modules()}
    graph = {module: {name for name in imports_of(path, "attnmt." + module if module != "__init__" else "attnmt")
                      if name in known and name != module}
             for path, module in modules()}
    done, path, circles = set(), [], []

    def visit(module):
        if module in path:
            circles.append(path[path.index(module):] + [module])
            return
        if module in done:
            return
        path.append(module)
        for name in sorted(graph[module]):
            visit(name)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)
    assert circles == [], "import circles: " + "; ".join(" -> ".join(c) for c in circles)


TESTS = Path(__file__).resolve().parent
# test files at the root of tests/ that test no one root module but the whole (imports, packaging,
# docs, the GPU paths, hostile input, integrity, users' files, fuzzing of text)
CROSS_CUTTING = {"test_layers.py", "test_packaging.py", "test_docs.py", "test_gpu.py", "test_hostile_input.py",
                 "test_integrity.py", "test_output_paths.py", "test_run_safety.py", "test_text_fuzz.py"}


def listed_paths(listing: str) -> list[str]:
    """The paths docs/architecture.md's file list names, relative to src/attnmt: an entry is a line
    of at most 8 spaces of indent whose first word is a folder (ends in '/', the parent of the
    more indented entries below it) or a file; deeper lines continue a description."""
    paths, folders = [], []  # folders: (indent, path) of the open folders
    for line in listing.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent > 8:
            continue
        word = line.split()[0].rstrip(",")
        while folders and folders[-1][0] >= indent:
            folders.pop()
        path = (folders[-1][1] if folders else "") + word
        if word.endswith("/"):
            folders.append((indent, path))
        else:
            paths.append(path)
    return [p.removeprefix("src/attnmt/") for p in paths if p.startswith("src/attnmt/")]


def test_the_architecture_page_lists_every_module_by_its_path():
    """docs/architecture.md's file list is the tree, path by path: every module of src/attnmt is an
    entry under its own folder, and every .py entry there exists (a file with the name of another
    one, elsewhere, no longer hides a missing entry)."""
    page = (SRC.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    listing = page.split("Files as they are:", 1)[1].split("```", 2)[1]
    listed = {p for p in listed_paths(listing) if p.endswith(".py")}
    actual = {str(path.relative_to(SRC)) for path in SRC.rglob("*.py")}
    assert sorted(actual - listed - {p for p in actual if p.endswith("__init__.py")}) == [], \
        "docs/architecture.md's file list does not name these modules by their path"
    assert sorted(listed - actual) == [], "docs/architecture.md's file list names modules that are not there"


def test_the_tests_mirror_the_packages():
    """tests/ mirrors src/attnmt: each package has a test folder of its name, and a test file at the
    root is a root module's (test_config_bounds.py: config.py) or one of the few cross-cutting ones."""
    packages = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").is_file())
    assert [p for p in packages if not any((TESTS / p).glob("test_*.py"))] == [], \
        "src/attnmt packages without a tests/ folder of their tests"
    modules = {p.stem for p in SRC.glob("*.py")} - {"__init__", "__main__"}
    stray = [f.name for f in sorted(TESTS.glob("test_*.py"))
             if f.name not in CROSS_CUTTING and not any(f.stem == f"test_{m}" or f.stem.startswith(f"test_{m}_")
                                                        for m in modules)]
    assert stray == [], "test files at the root of tests/ that name no root module (move them to their package's folder)"


def test_test_files_have_unique_names():
    """pytest imports test modules by their file name (its prepend import mode): two of one name
    in two folders collide (and one hides the other from a check by name)."""
    names = [f.name for f in TESTS.rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
