"""`attnmt import PACKAGE.argosmodel -o DIR`: a package attnmt wrote comes back as its export
exactly (round trip); one without attnmt's files (as another tool writes them: the CTranslate2
model, its vocabulary and config, sentencepiece.model, metadata.json) gets a pipeline from those
files and translates and scores as the export did; and a stranger's package is refused in one
line for each way it can be hostile or wrong. Generated packages (hypothesis) are imported or
refused with an attnmt error, never anything else."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import stat
import struct
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from attnmt.cli import main
from attnmt.errors import AttnmtError
from attnmt.interop.argos.importing import import_argos
from attnmt.interop.argos.model_bin import read_model_bin
from attnmt.translator import Translator

from support import argos

TOP = "translate-de_en-1_0"
ATTNMT_FILES = ("attnmt_config.json", "attnmt_export.json", "checksums.json", "tokenizers.json", "vocab.src.json",
                "vocab.tgt.json")


def entries(package) -> dict[str, bytes]:
    with zipfile.ZipFile(package) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def write(path, files: dict[str, bytes], modes: dict[str, int] | None = None):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (modes or {}).get(name, stat.S_IFREG | 0o644) << 16
            archive.writestr(info, data)
    return path


def foreign(package) -> dict[str, bytes]:
    """The package as another tool writes it: attnmt's files left out of model/."""
    return {name: data for name, data in entries(package).items()
            if not (name.startswith(f"{TOP}/model/") and (name.rsplit("/", 1)[1] in ATTNMT_FILES
                                                          or name.endswith(".model")))}


@pytest.fixture(scope="module")
def exported(argos_run, tmp_path_factory):
    from attnmt.engines.ctranslate2_export import export_run

    return export_run(argos_run, tmp_path_factory.mktemp("ct2") / "ct2", quantization="int8")


def test_a_package_attnmt_wrote_comes_back_as_its_export(argos_package, exported, tmp_path):
    run = import_argos(argos_package, tmp_path / "imported")
    assert run.is_export and run.config().search.beam_size == 4  # the run's own search section (toy: 4)
    a, b = Translator.load(exported, engine="ctranslate2"), Translator.load(run.path, engine="ctranslate2")
    for x, y in zip(a.translate(argos.COPY_SOURCES, beam_size=4), b.translate(argos.COPY_SOURCES, beam_size=4)):
        assert (x.tokens, x.score) == (y.tokens, y.score)
        np.testing.assert_array_equal(x.attention, y.attention)


def test_a_package_without_attnmts_files_translates_and_scores_as_the_export(argos_package, exported, tmp_path):
    package = write(tmp_path / "foreign.argosmodel", foreign(argos_package))
    run = import_argos(package, tmp_path / "imported")
    info = json.loads((run.path / "attnmt_export.json").read_text())
    assert info["imported_from"] == "argos" and info["attention_layer"] == 1 and info["attention_heads"] == 4
    cfg = run.config()
    assert (cfg.model.d_model, cfg.model.heads, cfg.model.enc_layers, cfg.model.ff_dim) == (32, 4, 2, 64)
    assert (cfg.search.beam_size, cfg.search.length_penalty, cfg.search.replace_unk) == (4, 0.2, True)
    assert cfg.search.budget_in_lower_case is False  # a foreign model may answer capitals in capitals
    a, b = Translator.load(exported, engine="ctranslate2"), Translator.load(run.path, engine="ctranslate2")
    a.engine.search_cfg = dataclasses.replace(a.engine.search_cfg, budget_in_lower_case=False)  # the same budgets
    for options in (dict(beam_size=1), dict(beam_size=4, length_penalty=0.2)):
        x, y = a.translate(argos.COPY_SOURCES, **options), b.translate(argos.COPY_SOURCES, **options)
        assert [r.text for r in x] == [r.text for r in y]
        assert [r.score for r in x] == pytest.approx([r.score for r in y], abs=1e-6)
        for r, s in zip(x, y):
            np.testing.assert_allclose(r.attention, s.attention, atol=1e-6)
    targets = ["Dog red .", "Cat blue big .", "", "Tree .", "Car", "Dog", "Ball ball ball ."]
    for r, s in zip(a.score(argos.COPY_SOURCES, targets), b.score(argos.COPY_SOURCES, targets)):
        assert r.num_tokens == s.num_tokens and r.log_prob == pytest.approx(s.log_prob, abs=1e-5)


def test_the_cli_imports_and_overwrite_replaces_only_an_import(argos_package, tmp_path, capsys):
    out = tmp_path / "runs" / "argos"
    assert main(["import", str(argos_package), "-o", str(out)]) == 0
    assert main(["import", str(argos_package), "-o", str(out)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert main(["import", str(argos_package), "-o", str(out), "--overwrite"]) == 0
    (out / "notes.txt").write_text("mine")
    assert main(["import", str(argos_package), "-o", str(out), "--overwrite"]) == 2
    assert (out / "notes.txt").read_text() == "mine"
    assert main(["import", str(argos_package), "-o", str(tmp_path / "x"), "--src-lang", "de"]) == 2
    capsys.readouterr()
    (tmp_path / "in.de").write_text("Hund rot .\n", encoding="utf-8")
    assert main(["translate", str(out), "--engine", "ctranslate2", "-i", str(tmp_path / "in.de")]) == 0
    assert capsys.readouterr().out.strip()


# ----------------------------------------------------------------------------- refusals, one line each

def model_bin_of(argos_package) -> bytes:
    return entries(argos_package)[f"{TOP}/model/model.bin"]


def refusals(argos_package):
    """(what, files, modes, the message expected): each a package that must be refused."""
    good = foreign(argos_package)
    meta = json.loads(good[f"{TOP}/metadata.json"])
    model_bin = good[f"{TOP}/model/model.bin"]

    def with_(name, data):
        return {**good, f"{TOP}/{name}": data}

    cut = bytearray(model_bin)
    struct.pack_into("<I", cut, 0, 99)
    yield "a path leaving the folder", {**good, f"{TOP}/../../escape.txt": b"x"}, None, r"leaves the package's folder"
    yield "an absolute path", {**good, "/etc/passwd": b"x"}, None, r"not a relative path inside the package"
    yield "a link", {**good, f"{TOP}/model/link": b"/etc/passwd"}, {f"{TOP}/model/link": stat.S_IFLNK | 0o777}, \
        r"is a symbolic link"
    yield "two top folders", {**good, "other/metadata.json": b"{}"}, None, r"holds 2 top folders"
    yield "no model", {n: d for n, d in good.items() if "model.bin" not in n}, None, r"has no model/model.bin"
    yield "bpe", {n: d for n, d in good.items() if "sentencepiece" not in n} | {f"{TOP}/bpe.model": b"#v"}, None, \
        r"holds bpe.model"
    yield "a model.bin that is not CTranslate2's", with_("model/model.bin", b"\x89PNG garbage" * 100), None, \
        r"not a CTranslate2 model.bin"
    yield "a model.bin of another binary version", with_("model/model.bin", bytes(cut)), None, r"binary version 99"
    yield "a model.bin cut short", with_("model/model.bin", model_bin[:len(model_bin) // 2]), None, \
        r"not a CTranslate2 model.bin: .*past the end of the file|ends early"
    yield "metadata that is no object", with_("metadata.json", b"[1, 2]"), None, r"metadata.json: expected a JSON object"
    yield "metadata naming no language", with_("metadata.json", json.dumps({**meta, "from_code": "German"}).encode()), \
        None, r"from_code='German' is not a language code"
    yield "metadata of one language", with_("metadata.json", json.dumps({**meta, "to_code": "de"}).encode()), None, \
        r"from_code and to_code are both 'de'"
    yield "metadata nested too deep", with_("metadata.json", b"[" * 100 + b"]" * 100), None, r"nested deeper"
    yield "a target prefix the model lacks", \
        with_("metadata.json", json.dumps({**meta, "target_prefix": "__en__"}).encode()), None, r"target_prefix='__en__'"
    yield "a vocabulary of another size", with_("model/shared_vocabulary.json", json.dumps(["<unk>", "a"]).encode()), \
        None, r"has 2 tokens, model.bin's embeddings 55"
    yield "a sentencepiece.model that is not one", with_("sentencepiece.model", b"not a model"), None, \
        r"not a sentencepiece model"


def test_each_hostile_or_wrong_package_is_refused_in_one_line(argos_package, tmp_path, capsys):
    for i, (what, files, modes, message) in enumerate(refusals(argos_package)):
        package = write(tmp_path / f"p{i}.argosmodel", files, modes)
        out = tmp_path / f"out{i}"
        assert main(["import", str(package), "-o", str(out)]) == 2, what
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("attnmt import: error: "), (what, err)
        assert re.search(message, err), (what, err)
        assert not out.exists(), what  # nothing written
    assert not (tmp_path.parent / "escape.txt").exists()


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path, capsys):
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{TOP}/model/model.bin", b"\0" * 300_000_000)  # 300 MB of zeros: ~300 kB deflated
    path = tmp_path / "bomb.argosmodel"
    path.write_bytes(bomb.getvalue())
    assert main(["import", str(path), "-o", str(tmp_path / "out")]) == 2
    assert "refused as a zip bomb" in capsys.readouterr().err


def test_metadata_that_lies_about_the_direction_of_attnmts_model(argos_package, tmp_path, capsys):
    files = entries(argos_package)
    meta = json.loads(files[f"{TOP}/metadata.json"])
    files[f"{TOP}/metadata.json"] = json.dumps({**meta, "from_code": "en", "to_code": "de"}).encode()
    assert main(["import", str(write(tmp_path / "lie.argosmodel", files)), "-o", str(tmp_path / "out")]) == 2
    assert "says en -> de, but the model in model/ translates de-en" in capsys.readouterr().err
    files = entries(argos_package)
    files[f"{TOP}/model/model.bin"] = files[f"{TOP}/model/model.bin"][:-4] + b"\0\0\0\1"
    assert main(["import", str(write(tmp_path / "changed.argosmodel", files)), "-o", str(tmp_path / "out")]) == 2
    assert "attnmt's export files that do not check" in capsys.readouterr().err


# ----------------------------------------------------------------------------- generated packages

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_a_mutated_package_is_imported_or_refused_with_an_attnmt_error(argos_package, tmp_path_factory, data):
    files = foreign(argos_package)
    name = data.draw(st.sampled_from(sorted(files)))
    blob = bytearray(files[name])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, max(0, len(blob) - 1)))
        blob[at:at + 1] = bytes([data.draw(st.integers(0, 255))])
    if data.draw(st.booleans()):
        blob = blob[:data.draw(st.integers(0, len(blob)))]
    files[name] = bytes(blob)
    base = tmp_path_factory.mktemp("mutated")
    try:
        import_argos(write(base / "p.argosmodel", files), base / "out")
    except AttnmtError:
        assert not (base / "out").exists()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_are_a_model_bin_or_refused(tmp_path_factory, blob):
    path = tmp_path_factory.mktemp("bin") / "model.bin"
    path.write_bytes(blob)
    try:
        read_model_bin(path)
    except AttnmtError:
        pass
