"""`attnmt export RUN --format argos`: the package's layout and metadata as argostranslate reads
them (argostranslate/package.py 1.11), the model inside translating as the run's own CTranslate2
export, one sentencepiece model for both sides, the models a package cannot hold refused with
the reason, and the output rule (atomic, never over what the user did not ask to replace)."""

from __future__ import annotations

import json
import os
import zipfile

import pytest
import sentencepiece as spm

from attnmt.cli import main
from attnmt.engines.ctranslate2_export import export_run
from attnmt.errors import AttnmtError
from attnmt.interop.argos.export import export_argos
from attnmt.translator import Translator

from support import argos, toy

TOP = "translate-de_en-1_0"


def unpack(package, folder):
    with zipfile.ZipFile(package) as archive:
        archive.extractall(folder)
    return folder / TOP


def test_the_layout_and_metadata_argostranslate_reads(argos_package, argos_run, tmp_path):
    with zipfile.ZipFile(argos_package) as archive:
        names = set(archive.namelist())
        metadata = json.loads(archive.read(f"{TOP}/metadata.json"))
        readme = archive.read(f"{TOP}/README.md").decode()
    assert {name.split("/")[0] for name in names} == {TOP}  # one top folder
    for part in ("metadata.json", "sentencepiece.model", "README.md", "minisbd/de.onnx", "model/model.bin",
                 "model/config.json", "model/shared_vocabulary.json"):
        assert f"{TOP}/{part}" in names, part
    assert metadata == {"package_version": "1.0", "argos_version": "1.9", "type": "translate", "from_code": "de",
                        "from_name": "German", "to_code": "en", "to_name": "English"}
    best = json.loads((argos_run / "best.json").read_text())
    assert f"best validation BLEU: {best['val_bleu']:.2f}" in readme
    assert "2+2 layers, d_model 32, 4 heads" in readme and "int8" in readme
    assert str(argos_run) not in archive_text(argos_package)  # no path of this machine travels


def archive_text(package) -> str:
    with zipfile.ZipFile(package) as archive:
        return "".join(archive.read(n).decode("utf-8", "replace") for n in archive.namelist() if n.endswith(".json"))


def test_the_model_inside_translates_as_the_runs_own_export(argos_package, argos_run, tmp_path):
    export_run(argos_run, tmp_path / "ct2", quantization="int8")
    inside = unpack(argos_package, tmp_path / "unpacked") / "model"
    ours, theirs = Translator.load(tmp_path / "ct2", engine="ctranslate2"), Translator.load(inside, engine="ctranslate2")
    for options in (dict(beam_size=1), dict(beam_size=4, length_penalty=0.2)):
        a, b = ours.translate(argos.COPY_SOURCES, **options), theirs.translate(argos.COPY_SOURCES, **options)
        assert [r.tokens for r in a] == [r.tokens for r in b]
        assert [r.score for r in a] == pytest.approx([r.score for r in b], abs=1e-6)
    info = json.loads((inside / "attnmt_export.json").read_text())
    assert info["quantization"] == "int8" and info["run_dir"] == "run"


def test_the_package_is_the_same_bytes_when_written_again(argos_run, tmp_path):
    first = export_argos(argos_run, tmp_path / "a.argosmodel")[0].read_bytes()
    second = export_argos(argos_run, tmp_path / "b.argosmodel", quantization="int8")[0].read_bytes()
    with zipfile.ZipFile(tmp_path / "a.argosmodel") as a, zipfile.ZipFile(tmp_path / "b.argosmodel") as b:
        assert [(i.filename, i.CRC) for i in a.infolist() if not i.filename.endswith("README.md")] == \
            [(i.filename, i.CRC) for i in b.infolist() if not i.filename.endswith("README.md")]
    assert len(first) > 0 and len(second) > 0


def test_separate_vocabularies_become_one_model_both_sides_can_use(tmp_path):
    """A run with a sentencepiece model per language: the package's one model encodes every
    source as the source model does and decodes every target piece as the target model does."""
    run = argos.toy_run(tmp_path / "separate", epochs=2, data={"spm_joint": False, "spm_vocab_size": 40})
    package = export_argos(run, tmp_path / "de_en.argosmodel")[0]
    shared = spm.SentencePieceProcessor(model_file=str(unpack(package, tmp_path / "p") / "sentencepiece.model"))
    settings = json.loads((run / "tokenizers.json").read_text())
    source = spm.SentencePieceProcessor(model_file=str(run / settings["src"]["model_file"]))
    target = spm.SentencePieceProcessor(model_file=str(run / settings["tgt"]["model_file"]))
    assert settings["src"]["model_file"] != settings["tgt"]["model_file"]
    for line in (tmp_path / "separate" / "copy" / "test.de").read_text().splitlines():
        assert shared.encode(line, out_type=str) == source.encode(line, out_type=str)
    for line in (tmp_path / "separate" / "copy" / "test.en").read_text().splitlines():
        pieces = target.encode(line, out_type=str)
        # argostranslate's decoding: decode_pieces, then every "▁" a space, one leading space dropped
        assert shared.decode_pieces(pieces).replace("\u2581", " ").lstrip(" ") == target.decode_pieces(pieces)


def test_models_a_package_cannot_hold_are_refused_with_the_reason(toy_run, tmp_path):
    with pytest.raises(AttnmtError, match=r"model.arch='rnn'.*data.tokenizer='moses'"):
        export_argos(toy_run, tmp_path / "x.argosmodel")
    moses = toy.make_random_run(tmp_path / "moses")
    with pytest.raises(AttnmtError, match=r"cannot be an Argos package: data.tokenizer='moses'"):
        export_argos(moses, tmp_path / "y.argosmodel")
    assert not (tmp_path / "x.argosmodel").exists() and not (tmp_path / "y.argosmodel").exists()


def test_the_output_rule(argos_run, argos_package, tmp_path, capsys):
    out = tmp_path / "de_en.argosmodel"
    assert main(["export", str(argos_run), "--format", "argos", "-o", str(out)]) == 0
    assert main(["export", str(argos_run), "--format", "argos", "-o", str(out)]) == 2
    assert "exists; --force replaces an earlier Argos package attnmt wrote" in capsys.readouterr().err
    assert main(["export", str(argos_run), "--format", "argos", "-o", str(out), "--force"]) == 0  # its own: replaced
    theirs = tmp_path / "theirs.argosmodel"
    theirs.write_bytes(b"a file of the user's")
    changed = tmp_path / "changed.argosmodel"
    changed.write_bytes(argos_package.read_bytes())
    with zipfile.ZipFile(changed, "a") as archive:  # a package attnmt wrote, then edited by the user
        archive.writestr(f"{TOP}/NOTES.md", "mine")
    for path in (theirs, changed):
        before = path.read_bytes()
        assert main(["export", str(argos_run), "--format", "argos", "-o", str(path), "--force"]) == 2
        assert "is not an Argos package attnmt wrote" in capsys.readouterr().err
        assert path.read_bytes() == before
    link = tmp_path / "link.argosmodel"
    os.symlink(out, link)
    assert main(["export", str(argos_run), "--format", "argos", "-o", str(link), "--force"]) == 2
    assert main(["export", str(argos_run), "--format", "argos", "-o", str(argos_run / "x.argosmodel")]) == 2
    assert "inside the model" in capsys.readouterr().err
    assert not (argos_run / "x.argosmodel").exists()


def test_a_failed_write_leaves_nothing(argos_run, tmp_path, monkeypatch):
    from attnmt.interop.argos import export as export_module

    def full_disk(folder, top, path):
        path.write_bytes(b"half a zip")
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(export_module, "write_zip", full_disk)
    out = tmp_path / "de_en.argosmodel"
    with pytest.raises(AttnmtError, match="No space left on device"):
        export_argos(argos_run, out)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".de_en.argosmodel.lock")) == []


def test_the_cli_default_output_and_the_export_folder(argos_run, tmp_path, capsys):
    ct2 = tmp_path / "ct2"
    export_run(argos_run, ct2, quantization="int8")
    assert main(["export", str(ct2), "--format", "argos"]) == 0  # an export packaged as it is
    assert (tmp_path / "ct2-de_en.argosmodel").is_file()
    assert main(["export", str(ct2), "--format", "argos", "--quantization", "float32", "-o",
                 str(tmp_path / "q.argosmodel")]) == 2
    assert "already quantized (int8)" in capsys.readouterr().err
