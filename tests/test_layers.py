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
    "evaluation": 9, "significance": 9, "training": 10,
    "translator": 11, "sharding": 11, "plotting": 12,  # sharding: line files in resumable shards over ranks
    "workers": 12,  # decoding in several processes, each with its own Translator (translator.py)
    "markup": 12,  # HTML split into sentences and put back with tags placed by word alignment (decoding/alignment.py)
    "distillation": 13,  # `attnmt distill`: teacher -> student in resumable stages (translator, sharding, training, workers)
    "documents": 13,  # .docx, .pptx, .odt, .odp, .epub, .srt, .po, .xliff, .pdf: markup.py's placement, translator results
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


def test_the_architecture_page_names_every_module():
    """docs/architecture.md's file list matches the tree: every module of src/attnmt is named there."""
    page = (SRC.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [str(path.relative_to(SRC)) for path in sorted(SRC.rglob("*.py"))
               if path.name != "__init__.py" and path.name not in page]
    assert missing == [], f"docs/architecture.md does not name {missing}"
    listing = page.split("Files as they are:", 1)[1].split("## ", 1)[0]
    names = {path.name for path in SRC.rglob("*.py")}
    stale = sorted({name for name in re.findall(r"[\w]+\.py\b", listing)} - names)
    assert stale == [], f"docs/architecture.md's file list names modules that are gone: {stale}"
