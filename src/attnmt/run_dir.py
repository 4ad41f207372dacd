"""The run directory: the one place that knows its layout.

A run directory (`attnmt train`) holds:

    config.json                 the resolved config
    vocab.src.json, vocab.tgt.json
    tokenizers.json             tokenizer settings (+ sentencepiece *.model files beside it)
    prepared.json               the key of the prepared training data (in $ATTNMT_CACHE/prepared)
    checkpoints/epoch_NNN.safetensors   model weights after each epoch, validated ...
    checkpoints/step_NNNNNNN.safetensors   ... and every train.validate_every updates (the last `keep_last`)
    best.json, last.json        small pointers: {"file": "checkpoints/epoch_NNN.safetensors", ...}
    average.json                the pointer `attnmt average` writes
    train_state.json            counters, optimizer/scheduler settings, for --resume; names ...
    checkpoints/train_state_NNNNNN.safetensors   ... the optimizer moments and random states
    checkpoints/resume_stepNNNNNNN.safetensors   the mid-epoch weights the state resumes from
    metrics.jsonl               one JSON object per log event
    eval_*.json                 `attnmt evaluate` reports

A CTranslate2 export (`attnmt export`) holds the same tokenizers and vocabularies, the run's
config as attnmt_config.json (CTranslate2 owns config.json) and attnmt_export.json.

    run = RunDir("runs/multi30k_rnn")
    cfg, pipeline = run.config(), run.pipeline()
    model = run.load_model("best", cfg, pipeline)     # 'best', 'last', 'average' or a file
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Sequence

from torch import nn

from attnmt.checkpoint import (LEGACY_TRAIN_STATE, PREVIOUS_TRAIN_STATE, TRAIN_STATE, load_weights, recorded_digest,
                               train_state_files, weights_step)
from attnmt.config import Config, load_saved_config
from attnmt.data.lexicon import LEXICON_FILE
from attnmt.data.pipeline import TextPipeline
from attnmt.errors import AttnmtError, CheckpointError
from attnmt.files import read_json, sha256_file, write_json
from attnmt.models import build_model

CONFIG = "config.json"
PREPARED = "prepared.json"  # which prepared training data (data/prepared.py) the run was trained on
CHECKSUMS = "checksums.json"  # sha256 of the files written once per run (config, tokenizers, vocabularies)
PIPELINE_FILES = ("tokenizers.json", "vocab.src.json", "vocab.tgt.json")
EXPORT_INFO = "attnmt_export.json"
EXPORT_CONFIG = "attnmt_config.json"  # in an export: CTranslate2 owns config.json
POINTERS = ("best", "last", "average")

# Files and folders a run writes; `--overwrite` deletes these and nothing else.
RUN_FILES = (CONFIG, CHECKSUMS, PREPARED, "vocab.src.json", "vocab.tgt.json", "tokenizers.json", "best.json", "last.json",
             "average.json", TRAIN_STATE, PREVIOUS_TRAIN_STATE, LEGACY_TRAIN_STATE, "metrics.jsonl", "checkpoints", "tensorboard", "cache")
CONFIG_SECTIONS = {"data", "model", "train", "search"}  # the top-level keys of a run's config.json
RUN_MARKERS = (CONFIG, "metrics.jsonl", TRAIN_STATE, LEGACY_TRAIN_STATE)


def model_for(cfg: Config, pipeline: TextPipeline) -> nn.Module:
    """A freshly initialised model of `cfg.model`, sized to `pipeline`'s vocabularies."""
    vocab = pipeline.tgt_vocab
    return build_model(cfg.model, len(pipeline.src_vocab), len(vocab), pad_id=vocab.pad_id,
                       bos_id=vocab.bos_id, eos_id=vocab.eos_id)


def no_scores() -> dict:
    """What `RunDir.scores` says of a run with no scores."""
    return {"best_valid_bleu": None, "best_epoch": None, "test_scores": {}}


class RunDir:
    """A training run's folder, or a CTranslate2 export of one."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # ---- what it is

    @property
    def is_export(self) -> bool:
        """True for a folder written by `attnmt export`."""
        return (self.path / EXPORT_INFO).is_file()

    @property
    def engine(self) -> str:
        """The engine that reads this folder: "ctranslate2" for an export, "native" for a run."""
        return "ctranslate2" if self.is_export else "native"

    def require_run(self) -> None:
        """Raises AttnmtError unless this is a training run (an export is refused with the way out)."""
        if self.is_export:
            raise AttnmtError(f"{self.path}: a CTranslate2 export holds no PyTorch weights; load it with "
                              f"engine='ctranslate2' (CLI: --engine ctranslate2), or load the run it came from")
        if not (self.path / CONFIG).is_file():
            raise AttnmtError(f"{self.path}: no {CONFIG}; is it a run directory written by `attnmt train`?")

    def require_export(self) -> None:
        """Raises AttnmtError unless this is a CTranslate2 export."""
        if not self.is_export:
            raise AttnmtError(f"{self.path}: not a CTranslate2 export (no {EXPORT_INFO}); make one with "
                              f"`attnmt export {self.path} -o DIR` and load DIR")

    # ---- what it holds

    @property
    def config_path(self) -> Path:
        return self.path / (EXPORT_CONFIG if self.is_export else CONFIG)

    def config(self) -> Config:
        return load_saved_config(self.verified(self.config_path.name))

    def pipeline(self) -> TextPipeline:
        for name in self.pipeline_files():
            self.verified(name)
        return TextPipeline.load(self.path)

    def pipeline_files(self) -> list[str]:
        """The files of the run's text pipeline: tokenizer settings, sentencepiece models, vocabularies,
        and the training data's source words when the run keeps them (lexicon.json)."""
        lexicon = [LEXICON_FILE] if (self.path / LEXICON_FILE).is_file() else []
        return [*PIPELINE_FILES, *sorted(p.name for p in self.path.glob("*.model")), *lexicon]

    def export_info(self) -> dict:
        return read_json(self.verified(EXPORT_INFO))

    # ---- integrity

    def _checksums(self) -> dict[str, str]:
        """checksums.json, or {} in a run written before checksums existed."""
        path = self.path / CHECKSUMS
        if not path.is_file():
            return {}
        found = read_json(path)
        if not isinstance(found, dict) or not all(isinstance(v, str) for v in found.values()):
            raise CheckpointError(f"{path}: corrupted: expected an object of file names and sha256 digests")
        return found

    def record_checksums(self, names: Sequence[str]) -> None:
        """Record the sha256 of the files `names` (in this folder) in checksums.json."""
        recorded = self._checksums()
        recorded.update({name: sha256_file(self.path / name) for name in names})
        write_json(self.path / CHECKSUMS, recorded)

    def verified(self, name: str) -> Path:
        """The path of file `name`, after checking it against its recorded sha256 (if recorded).

        Raises:
            CheckpointError: the file differs from what was written; names it.
        """
        path = self.path / name
        expected = self._checksums().get(name)
        if expected is not None and path.is_file() and sha256_file(path) != expected:
            raise CheckpointError(f"{path}: corrupted or changed since it was written: its sha256 does not "
                                  f"match {self.path / CHECKSUMS} (if you edited it on purpose, delete its entry "
                                  f"there to accept the change)")
        return path

    def verify_all(self) -> None:
        """Check every file checksums.json names (an export: the model, vocabularies, config)."""
        for name in self._checksums():
            if not (self.path / name).is_file():
                raise CheckpointError(f"{self.path / name}: missing (named in {self.path / CHECKSUMS})")
            self.verified(name)

    def pointer(self, name: str) -> dict | None:
        """The pointer `name` ('best', 'last', 'average') as a dict, or None when there is none."""
        path = self.path / f"{name}.json"
        if not path.is_file():
            return None
        info = read_json(path)
        if not isinstance(info, dict) or not isinstance(info.get("file"), str):
            raise CheckpointError(f"{path}: expected a JSON object with a 'file' key")
        return info

    def weights(self, which: str = "best") -> Path:
        """Resolve 'best', 'last', 'average' (after `attnmt average`) or a file name to a weights file."""
        if which in POINTERS:
            info = self.pointer(which)
            if info is None:
                hint = (f"run `attnmt average {self.path}` first" if which == "average"
                        else f"is {self.path} a finished or running attnmt run?")
                raise CheckpointError(f"{self.path / (which + '.json')}: not found; {hint}")
            pointer, weights = self.path / f"{which}.json", self.path / info["file"]
            if not weights.resolve().is_relative_to(self.path.resolve()):  # refused before it is opened
                raise CheckpointError(f"{pointer}: names {info['file']!r}, outside {self.path}")
            if "sha256" in info and recorded_digest(weights) != info["sha256"]:
                raise CheckpointError(f"{pointer}: names {info['file']}, whose sha256 is not the one recorded here: "
                                      f"the file was replaced or corrupted")
            return weights
        path = Path(which)
        return path if path.is_absolute() or path.exists() else self.path / which

    def calibration(self):
        """The model's confidence calibration (calibration.json, `attnmt calibrate`), checked against
        its recorded sha256; None when it has none (its confidence is then uncalibrated).

        Raises:
            CheckpointError: the file changed since it was written; DataError: it is damaged.
        """
        from attnmt.decoding.confidence import CALIBRATION_FILE, Calibration

        if not (self.path / CALIBRATION_FILE).is_file():
            return None
        return Calibration.load(self.verified(CALIBRATION_FILE))

    def weights_identity(self, which: str = "best", engine: str = "native") -> str:
        """What names the weights a job decodes with (a shard manifest's record): the file (an
        export's model.bin, or `which` of a run), its size and modification time; a retrained run
        is another model."""
        path = (self.path / "model.bin" if engine == "ctranslate2" else self.weights(which)).resolve()
        stat = path.stat()
        return f"{path} {stat.st_size} {stat.st_mtime_ns}"

    def load_model(self, which: str = "best", cfg: Config | None = None,
                   pipeline: TextPipeline | None = None) -> nn.Module:
        """The run's model with the weights `which` names (on the CPU, in eval mode)."""
        cfg = cfg or self.config()
        model = model_for(cfg, pipeline or self.pipeline())
        load_weights(model, self.weights(which))
        return model.eval()

    def checkpoints(self) -> list[Path]:
        """The validated weight files (after each epoch, and every train.validate_every updates),
        oldest first: by the update they were saved after."""
        found = [*(self.path / "checkpoints").glob("epoch_*.safetensors"),
                 *(self.path / "checkpoints").glob("step_*.safetensors")]
        return sorted(found, key=lambda path: (weights_step(path), path.name))

    def eval_report_path(self, split: str, beam: int, suffix: str = "") -> Path:
        """Where `attnmt evaluate` keeps its report of `split` at `beam` (suffix: checkpoint, penalty)."""
        return self.path / f"eval_{split}_beam{beam}{suffix}.json"

    def eval_report(self, split: str, beam: int) -> dict | None:
        """The report `attnmt evaluate --split split --beam beam` kept (best weights, the run's
        length penalty), or None when there is none.

        Raises:
            CheckpointError: the file is not a JSON object; names it.
        """
        path = self.eval_report_path(split, beam)
        if not path.is_file():
            return None
        report = read_json(path)
        if not isinstance(report, dict):
            raise CheckpointError(f"{path}: expected a JSON object of scores")
        return report

    def scores(self) -> dict:
        """Best validation BLEU (best.json) and the `attnmt evaluate` reports (eval_*.json); what
        cannot be read is left out."""
        found = no_scores()
        try:
            best = self.pointer("best")
        except CheckpointError:
            best = None
        if best is not None:
            bleu = best.get("val_bleu")
            found["best_valid_bleu"] = float(bleu) if isinstance(bleu, (int, float)) else None
            found["best_epoch"] = best.get("epoch") if isinstance(best.get("epoch"), int) else None
        for path in sorted(self.path.glob("eval_*.json")):
            try:
                report = read_json(path)
            except CheckpointError:
                continue
            if isinstance(report, dict):
                found["test_scores"][path.stem] = {k: v for k, v in report.items()
                                                   if isinstance(v, (int, float, str)) or v is None}
        return found

    # ---- what training writes

    def check_new(self, *, resume: bool, overwrite: bool) -> None:
        """Refuse to start a fresh run where a finished or interrupted run lives, unless `overwrite`;
        `overwrite` replaces only a run attnmt wrote (`refuse_foreign`)."""
        if overwrite and not resume:
            self.refuse_foreign()
        if resume or overwrite:
            return
        found = [name for name in RUN_MARKERS if (self.path / name).exists()]
        resumable = any((self.path / name).is_file() for name in (TRAIN_STATE, PREVIOUS_TRAIN_STATE, LEGACY_TRAIN_STATE))
        if found and not resumable:  # killed before its first state: --resume cannot continue it (no loop back there)
            raise AttnmtError(f"{self.path} already holds a run ({', '.join(found)}) that stopped before it saved its "
                              f"first training state, so it cannot be resumed: start it again from scratch with "
                              f"--overwrite (deletes that run), or pick another --run-dir")
        if found:
            raise AttnmtError(f"{self.path} already holds a run ({', '.join(found)}): continue it with --resume "
                              f"{self.path}, start it again from scratch with --overwrite (deletes that run), or "
                              f"pick another --run-dir")

    def refuse_foreign(self) -> None:
        """`--overwrite` deletes a run's files (RUN_FILES): refused where the folder's config.json is
        not an attnmt run's (another tool's model folder, say a Marian one), so none of its files goes.

        Raises:
            AttnmtError: naming the folder and its config.json.
        """
        path = self.path / CONFIG
        if not path.exists():
            return
        try:
            saved = read_json(path, AttnmtError)
        except (AttnmtError, OSError):
            saved = None
        if not isinstance(saved, dict) or not saved.keys() <= CONFIG_SECTIONS:
            raise AttnmtError(f"{self.path}: its {CONFIG} is not an attnmt run's config, so --overwrite (which "
                              f"deletes a run's files) will not touch it: pick another folder")

    def clear(self) -> None:
        """Delete what a previous run wrote (`--overwrite`); other files stay."""
        for name in RUN_FILES:
            path = self.path / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        for model_file in self.path.glob("*.model"):  # sentencepiece models beside tokenizers.json
            model_file.unlink()

    def write_pointer(self, name: str, info: dict | None) -> None:
        """Write best.json / last.json (or remove it when `info` is None)."""
        if info is None:
            (self.path / f"{name}.json").unlink(missing_ok=True)
        else:
            write_json(self.path / f"{name}.json", info)

    def prune(self, keep: int) -> None:
        """Delete old validated checkpoints, never the ones that best/last or a kept training state name."""
        pinned = {info["file"] for info in (self.pointer("best"), self.pointer("last")) if info is not None}
        pinned |= train_state_files(self.path)
        files = self.checkpoints()
        for path in files[: max(0, len(files) - keep)]:
            if str(path.relative_to(self.path)) not in pinned:
                path.unlink(missing_ok=True)
