"""`attnmt export MODEL --format argos -o de_en.argosmodel`: an Argos Translate package of a
Transformer run (or of an attnmt CTranslate2 export), which argostranslate and LibreTranslate
install and translate with offline.

    export_argos("runs/de_en", "de_en.argosmodel")            # int8, the run's best weights
    export_argos("runs/multi", "packages/")                   # a multilingual run: one per direction

The package (package.py) holds attnmt's CTranslate2 export as its model/ (written by
engines/ctranslate2_export.py, attnmt's own files included, so that `attnmt import` gets the run's
pipeline back exactly), one sentencepiece model both sides can use, the sentence splitter of the
source language (splitter.py) and a README.md with the model's config, data, scores and date.
A package is written whole to a temporary file and renamed into place: never over a file that is
not an earlier attnmt package, never over what it reads (files.refuse_overwrite).

Shapes: none (files).
"""

from __future__ import annotations

import datetime
import logging
import os
import shutil
import tempfile
from pathlib import Path

from attnmt.data.languages import lang_token
from attnmt.data.pipeline import TextPipeline
from attnmt.data.tokenizers import SentencePieceTokenizer
from attnmt.engines.ctranslate2_export import export_run
from attnmt.errors import AttnmtError
from attnmt.files import (WRITTEN, atomic_write, check_folder_output, read_json, refuse_overwrite,
                          refuse_replacing_file, staged_folder, write_json, writer_lock, writing)
from attnmt.interop.argos.package import (METADATA, MODEL, PACKAGE_VERSION, README, SENTENCEPIECE, SPLITTER,
                                          SUFFIX, language_name, package_metadata, package_name,
                                          shared_sentencepiece, write_zip, written_by_attnmt)
from attnmt.interop.argos.splitter import compile_rules, splitter_onnx
from attnmt.run_dir import EXPORT_INFO, RunDir

log = logging.getLogger(__name__)

DEFAULT_QUANTIZATION = "int8"  # what the packages of the Argos index hold
FOLDER_INFO = "attnmt_argos_export.json"  # in the folder of a multilingual run's packages: which run, which packages
FOLDER_KIND = f"a folder of Argos packages ({FOLDER_INFO})"  # what `--force` replaces (files.WRITTEN's record)


def argos_expressible(cfg, pipeline: TextPipeline) -> list[str]:
    """Why a run cannot be an Argos package (empty: it can)."""
    problems = []
    if cfg.model.arch != "transformer":
        problems.append(f"model.arch={cfg.model.arch!r} (CTranslate2, which argostranslate runs, has no RNN models)")
    if not all(isinstance(t, SentencePieceTokenizer) for t in (pipeline.src_tokenizer, pipeline.tgt_tokenizer)):
        problems.append(f"data.tokenizer={cfg.data.tokenizer!r} (an Argos package tokenizes with sentencepiece; "
                        f"its bpe.model is subword-nmt's over Moses words, not a word vocabulary)")
    elif any(t.lowercase for t in (pipeline.src_tokenizer, pipeline.tgt_tokenizer)):
        problems.append("data.lowercase=true (argostranslate gives the model the text as it is)")
    if pipeline.source_eos:
        problems.append("sources ending with </s> (an imported Marian run; argostranslate passes the pieces alone)")
    if pipeline.tgt_vocab.suppressed:
        problems.append(f"suppressed target tokens ({', '.join(pipeline.tgt_vocab.suppressed[:3])}: argostranslate "
                        f"passes no suppress_sequences)")
    if pipeline.languages is not None and pipeline.languages.placement != "target":
        problems.append(f"data.lang_token={pipeline.languages.placement!r} (argostranslate can force a target "
                        f"prefix, but puts nothing before the source: train with data.lang_token=target)")
    return problems


def default_output(model_dir: str | Path) -> str:
    """Where `attnmt export MODEL --format argos` writes without -o: MODEL-de_en.argosmodel beside
    it, or the folder MODEL-argos for a multilingual model."""
    cfg = RunDir(model_dir).config()
    base = str(model_dir).rstrip("/")
    if cfg.data.multilingual:
        return base + "-argos"
    return f"{base}-{cfg.data.src_lang}_{cfg.data.tgt_lang}{SUFFIX}"


def export_argos(model_dir: str | Path, output: str | Path, *, checkpoint: str = "best",
                 quantization: str | None = None, force: bool = False, vocab_map=None,
                 version: str = PACKAGE_VERSION) -> list[Path]:
    """Write the Argos package(s) of `model_dir` (a Transformer run, or a folder `attnmt export`
    wrote): one `output` file for a one-direction model, or a folder `output` holding one
    `<from>_<to>.argosmodel` per direction of a multilingual one. `quantization`: default int8
    for a run; an export is packaged as it was quantized. `vocab_map`: a VocabMapSettings adds
    vmap.txt (attnmt's engine decodes with it after `attnmt import`; argostranslate does not pass
    use_vmap). Returns the packages written.

    Raises:
        AttnmtError: a model a package cannot hold (each reason named), an output that exists
            and is not an earlier attnmt package (or `force` is not given), or one over an input.
    """
    source, output = RunDir(model_dir), Path(output)
    if source.is_export:
        if quantization is not None or vocab_map is not None:
            raise AttnmtError(f"{source.path}: is a CTranslate2 export, already quantized "
                              f"({source.export_info().get('quantization')}): --quantization and --vocab-map "
                              f"apply to a run; package the export as it is, or export the run")
        source.verify_all()
    else:
        source.require_run()
    cfg, pipeline = source.config(), source.pipeline()
    problems = argos_expressible(cfg, pipeline)
    if problems:
        raise AttnmtError(f"{source.path}: cannot be an Argos package: {'; '.join(problems)}")
    directions = ([(d.source, d.target) for d in pipeline.languages.directions] if pipeline.languages is not None
                  else [(cfg.data.src_lang, cfg.data.tgt_lang)])
    multilingual = pipeline.languages is not None
    if multilingual:
        check_folder_output(output, {"model": source.path}, force=force, kind=FOLDER_KIND)
    else:
        refuse_overwrite(output, {}, {"model": source.path})
        refuse_replacing_package(output, force=force)
    target = Path(os.path.abspath(output))
    with writer_lock(target.parent, name=f".{target.name}.lock"), \
            tempfile.TemporaryDirectory(prefix=f".{target.name}.", dir=target.parent) as work:
        model = _model_folder(source, Path(work) / "model", checkpoint, quantization or DEFAULT_QUANTIZATION,
                              vocab_map)
        readme = readme_text(source, cfg, model)
        built = []
        for from_code, to_code in directions:
            folder = Path(work) / f"{from_code}_{to_code}"
            _package_folder(folder, model, pipeline, from_code, to_code, multilingual, version, readme)
            built.append((from_code, to_code, folder))
        if not multilingual:
            top = package_name(*directions[0], version)
            atomic_write(output, lambda tmp: write_zip(built[0][2], top, tmp))
            written = [output]
        else:
            written = []
            with staged_folder(output, kind=FOLDER_KIND) as staging, writing(staging, f"{output} is as it was"):
                for from_code, to_code, folder in built:
                    path = staging / f"{from_code}_{to_code}{SUFFIX}"
                    write_zip(folder, package_name(from_code, to_code, version), path)
                    written.append(output / path.name)
                write_json(staging / FOLDER_INFO, {"format": "argos", "model": source.path.name,
                                                   "packages": [p.name for p in written]})
    log.info("exported %s as %d Argos package(s) -> %s", source.path, len(written), output)
    return written


def refuse_replacing_package(path: Path, *, force: bool) -> None:
    """A package over an existing file only with `force`, and then only over a package attnmt
    wrote and nobody changed since (package.written_by_attnmt: its zip comment records its
    entries), never a link, a folder or any other file.

    Raises:
        AttnmtError: naming the file and why.
    """
    refuse_replacing_file(path, force=force, earlier="an earlier Argos package attnmt wrote", ours=written_by_attnmt,
                          not_ours="an Argos package attnmt wrote (or it was changed since: its entries are not the "
                                   "ones its zip comment records)")


def _model_folder(source: RunDir, folder: Path, checkpoint: str, quantization: str, vocab_map) -> Path:
    """The package's model/: attnmt's CTranslate2 export of the run (or a copy of the export),
    with the run's folder and weights named by their names alone (a package travels)."""
    if source.is_export:
        shutil.copytree(source.path, folder, ignore=shutil.ignore_patterns(".*", WRITTEN))
    else:
        export_run(source.path, folder, checkpoint=checkpoint, quantization=quantization, vocab_map=vocab_map)
        (folder / WRITTEN).unlink(missing_ok=True)  # the export's record of its files: the package's own is its zip's
    model = RunDir(folder)
    info = read_json(folder / EXPORT_INFO)
    info.update(run_dir=Path(str(info.get("run_dir", ""))).name, checkpoint=Path(str(info.get("checkpoint", ""))).name)
    write_json(folder / EXPORT_INFO, info)
    model.record_checksums([EXPORT_INFO])
    return folder


def _package_folder(folder: Path, model: Path, pipeline: TextPipeline, from_code: str, to_code: str,
                    multilingual: bool, version: str, readme: str) -> None:
    """One package's files, in `folder` (then zipped under its top folder)."""
    folder.mkdir()
    shutil.copytree(model, folder / MODEL)
    tokens = pipeline.languages.tokens() if multilingual else []
    (folder / SENTENCEPIECE).write_bytes(shared_sentencepiece(pipeline.src_tokenizer.model_file,
                                                              pipeline.tgt_tokenizer.model_file, control=tokens))
    (folder / SPLITTER).mkdir()
    (folder / SPLITTER / f"{from_code}.onnx").write_bytes(splitter_onnx(compile_rules(from_code)))
    prefix = lang_token(to_code) if multilingual else ""
    write_json(folder / METADATA, package_metadata(from_code, to_code, target_prefix=prefix, version=version))
    title = f"# {language_name(from_code)} -> {language_name(to_code)} ({from_code}-{to_code})\n\n"
    (folder / README).write_text(title + readme, encoding="utf-8")


def readme_text(source: RunDir, cfg, model: Path) -> str:
    """The README of a package: what the model is, what it was trained on, its scores, when and
    with what it was written."""
    from attnmt import __version__

    m, d = cfg.model, cfg.data
    info = read_json(model / EXPORT_INFO)
    run = source if not source.is_export else RunDir(source.export_info().get("run_dir", source.path))
    scores = run.scores() if (run.path / "config.json").is_file() else {"best_valid_bleu": None, "test_scores": {}}
    lines = [
        f"An attnmt Transformer, packaged by `attnmt export --format argos` (attnmt {__version__}) on "
        f"{datetime.datetime.now(datetime.timezone.utc).date().isoformat()}.",
        "",
        "## Model",
        f"- {m.enc_layers}+{m.dec_layers} layers, d_model {m.d_model}, {m.heads} heads, feed-forward {m.ff_dim}, "
        f"{m.activation}, {'pre' if m.pre_norm else 'post'}-norm, {m.positions} positions",
        f"- vocabulary: sentencepiece {d.spm_model_type}, {len(RunDir(model).pipeline().tgt_vocab)} tokens"
        f"{' (joint)' if d.spm_joint else ''}",
        f"- CTranslate2 {info.get('ctranslate2_version')}, {info.get('quantization')}; attention from decoder "
        f"layer {info.get('attention_layer')}",
        "",
        "## Data",
        f"- corpus: {d.corpus}" + (f" ({', '.join(Path(c.path).name for c in d.train_corpora())})" if d.corpus == "files" else ""),
        f"- directions: {', '.join(str(direction) for direction in d.directions())}",
        "",
        "## Scores",
    ]
    bleu = scores.get("best_valid_bleu")
    lines.append(f"- best validation BLEU: {bleu:.2f}" if isinstance(bleu, (int, float)) else
                 "- no validation score recorded")
    for name, report in sorted(scores.get("test_scores", {}).items()):
        shown = ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in report.items()
                          if k in ("bleu", "chrf", "beam", "split"))
        lines.append(f"- {name}: {shown}")
    lines += ["", "## Use",
              "argostranslate: `argospm install` is for the index; install this file with "
              "`argostranslate.package.install_from_path(PATH)`. It splits sentences with the rules in "
              f"{SPLITTER}/ (no download). attnmt: `attnmt import PATH -o runs/NAME`.", ""]
    return "\n".join(lines)
