"""The distillation directory: its layout, its settings and its state file, `distill.json`.

Shapes: none; files and records.

Every file a stage finishes is recorded in the state file with its line count and sha256 (written
atomically through attnmt.files, after the file itself), and every stage checks the recorded files
it reads before it uses them: a file changed, cut or removed since is refused, naming it, the
stage that wrote it and how to make it again (`--redo STAGE`). A folder that is neither empty nor
a distillation is refused: nothing of the user's is written over.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from attnmt.bounds import BEAM, SHARD_LINES, Bound
from attnmt.config import Config
from attnmt.direction import Direction, language_args
from attnmt.errors import AttnmtError, DataError
from attnmt.files import LOCK_FILE, read_json, sha256_file, write_json

log = logging.getLogger(__name__)

STATE = "distill.json"
FORMAT = "attnmt-distill"
VERSION = 1
STAGES = ("teacher", "filter", "corpus", "student", "export", "evaluate")
START = "start"  # what a distillation's start records (the student config as given): no stage makes it again
QUANTIZATIONS = ("int8", "int8_float32", "int16", "float16", "float32")
ENGINES = ("native", "ctranslate2")
AT_LEAST_ONE, AT_LEAST_ZERO = Bound(1, 2**31 - 1), Bound(0, 2**31 - 1)
# each setting's type (and range), checked when distill.json is read back (issue 66 group G)
SETTING_RULES = {"beam": BEAM, "student_beam": BEAM, "vocab_top_k": AT_LEAST_ONE, "vocab_frequent": AT_LEAST_ZERO,
                 "shard_lines": SHARD_LINES, "batch_size": AT_LEAST_ONE,
                 "filter_share": Bound(0.0, 1.0, integer=False), "original_weight": Bound(0.0, 1000.0, integer=False)}
FILTERS = ("cross-entropy", "confidence")  # what ranks the teacher's pairs for the filter
SETTING_CHOICES = {"teacher_engine": ENGINES, "quantization": QUANTIZATIONS, "filter_by": FILTERS}
SETTING_DEFAULTS = {"filter_by": "cross-entropy"}  # settings added later: what a state file without them meant
STUDENT_CONFIG_GIVEN = "student_config.json"  # the student config as given (its --set applied)
STUDENT_CONFIG = "student.json"  # ... and as trained: data.train on the distilled corpus
STUDENT_RUN = "student"
REPORT_JSON, REPORT_TEXT = "report.json", "report.txt"


@dataclass(frozen=True)
class DistillSettings:
    """What a distillation makes; fixed when it starts (a resume keeps them).

    Attributes:
        teacher: the teacher's folders: one run, several runs (an ensemble) or one CTranslate2 export.
        teacher_engine: "native" (runs) or "ctranslate2" (an export).
        beam: the teacher's beam when it translates the training sources and the test set.
        filter_share: the share of each corpus's pairs dropped, the worst by `filter_by` (0: no filter).
        filter_by: "cross-entropy" (the teacher's per token, forced decoding) or "confidence" (the
            teacher's calibrated confidence of its own output, decoding/confidence.py's map of the
            forced decoding's features: a teacher calibrated by `attnmt calibrate`).
        original_weight: the weight of the original (reference) pairs beside the distilled ones (0: left out).
        student_beam: the student's beam in the evaluation (1: greedy, as deployed students decode).
        quantization: the student export's.
        vocab_top_k, vocab_frequent: the student export's vocabulary map (engines/vocab_map.py).
        shard_lines: lines per resumable shard of the teacher's translation and scoring.
        batch_size: sentences per decoding batch.
        checkpoint: the teacher's weights ("best", "last", "average" or a file).
    """

    teacher: tuple[str, ...]
    teacher_engine: str = "native"
    beam: int = 5
    filter_share: float = 0.0
    filter_by: str = "cross-entropy"
    original_weight: float = 0.0
    student_beam: int = 1
    quantization: str = "int8"
    vocab_top_k: int = 50
    vocab_frequent: int = 100
    shard_lines: int = 10_000
    batch_size: int = 64
    checkpoint: str = "best"

    def __post_init__(self):
        if not self.teacher:
            raise AttnmtError("distill needs a teacher: a run, runs joined by '+' (an ensemble) or an export")
        if not (0.0 <= self.filter_share < 1.0 and math.isfinite(self.filter_share)):
            raise AttnmtError(f"--filter-share {self.filter_share}: must be in [0, 1) (the share of pairs dropped)")
        if self.filter_by not in FILTERS:
            raise AttnmtError(f"--filter-by {self.filter_by!r}: expected one of {', '.join(FILTERS)}")
        if not (0.0 <= self.original_weight <= 1000.0 and math.isfinite(self.original_weight)):
            raise AttnmtError(f"--original-weight {self.original_weight}: must be in [0, 1000] (0: left out)")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> DistillSettings:
        """The settings a state file records, each checked for its type and range (a state file
        is read back, so it may have been edited): a DataError names the file and the key.

        Raises:
            DataError: not an object, an unknown or missing setting, a value of the wrong type or range.
        """
        if not isinstance(raw, dict):
            raise DataError(f"{where}: settings must be an object")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - names)
        if unknown:
            raise DataError(f"{where}: settings.{unknown[0]}: unknown setting")
        raw = {**SETTING_DEFAULTS, **raw}
        missing = sorted(names - set(raw))
        if missing:
            raise DataError(f"{where}: settings.{missing[0]}: missing")
        teacher = raw["teacher"]
        if not (isinstance(teacher, list) and teacher and all(isinstance(t, str) and t for t in teacher)):
            raise DataError(f"{where}: settings.teacher: expected a list of the teacher's folders, got {teacher!r}")
        if not isinstance(raw["checkpoint"], str) or not raw["checkpoint"]:
            raise DataError(f"{where}: settings.checkpoint: expected a name or file, got {raw['checkpoint']!r}")
        for key, bound in SETTING_RULES.items():
            bound.check(f"settings.{key}", raw[key], error=lambda message: DataError(f"{where}: {message}"))
        for key, choices in SETTING_CHOICES.items():
            if raw[key] not in choices:
                raise DataError(f"{where}: settings.{key}={raw[key]!r}: expected one of {', '.join(choices)}")
        try:
            return cls(**{**raw, "teacher": tuple(teacher)})
        except AttnmtError as err:
            raise DataError(f"{where}: settings: {err}") from None


class OutOfTime(AttnmtError):
    """The time budget (--max-minutes) ran out; the distillation resumes where it stopped."""


@dataclass
class Budget:
    """The time this call may take (None: no limit), counted from its start."""

    minutes: float | None = None
    started: float = dataclasses.field(default_factory=time.monotonic)

    def left(self) -> float:
        """Seconds left (inf without a budget)."""
        if self.minutes is None:
            return math.inf
        return self.minutes * 60 - (time.monotonic() - self.started)

    def check(self, folder: Path, stage: str) -> None:
        if self.left() <= 0:
            raise OutOfTime(f"{folder}: the time budget (--max-minutes {self.minutes:g}) ran out in stage {stage!r}; "
                            f"what is done is kept: continue with `attnmt distill --resume {folder} --max-minutes M`")


class DistillDir:
    """A distillation directory and its state file (one object for the whole run)."""

    def __init__(self, path: str | Path):
        self.path = Path(path).expanduser().absolute()  # the student config names its corpus by this path
        self.state: dict = {}

    @property
    def state_path(self) -> Path:
        return self.path / STATE

    # ---- start or open

    def create(self, settings: DistillSettings) -> None:
        """Start a new distillation in an empty (or missing) folder.

        Raises:
            AttnmtError: the folder holds a distillation (resume it) or anything else.
        """
        self.refuse_unless_new()
        self.path.mkdir(parents=True, exist_ok=True)
        self.state = {"format": FORMAT, "version": VERSION, "settings": settings.to_dict(), "stages": {}, "files": {}}
        self.save()

    def refuse_unless_new(self) -> None:
        """Raises AttnmtError unless the folder is missing or empty (its lock file aside)."""
        if self.state_path.is_file():
            raise AttnmtError(f"{self.path}: holds a distillation already: continue it with "
                              f"`attnmt distill --resume {self.path}`, or choose another -o")
        if self.path.exists() and not self.path.is_dir():
            raise AttnmtError(f"{self.path}: exists and is not a folder: choose another -o")
        if self.path.is_dir() and any(p.name != LOCK_FILE for p in self.path.iterdir()):
            raise AttnmtError(f"{self.path}: exists, is not empty and is not a distillation (no {STATE}): "
                              f"choose an empty or new folder for -o")

    def open(self) -> DistillSettings:
        """Read the state of a distillation to resume.

        Raises:
            AttnmtError: not a distillation; DataError: a damaged state file (names the key).
        """
        if not self.state_path.is_file():
            raise AttnmtError(f"{self.path}: not a distillation (no {STATE}); start one with "
                              f"`attnmt distill TEACHER --student CONFIG -o {self.path}`")
        state = read_json(self.state_path, DataError)
        where = str(self.state_path)
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise DataError(f"{where}: not an attnmt distillation state (format is not {FORMAT!r})")
        if state.get("version") != VERSION:
            raise DataError(f"{where}: version {state.get('version')!r}; this attnmt reads version {VERSION}")
        for key in ("stages", "files"):
            if not isinstance(state.get(key), dict):
                raise DataError(f"{where}: {key} must be an object")
        for name, record in state["files"].items():
            if not (isinstance(record, dict) and isinstance(record.get("sha256"), str)
                    and isinstance(record.get("lines"), int) and not isinstance(record.get("lines"), bool)
                    and record.get("stage") in (START, *STAGES)):
                raise DataError(f"{where}: files.{name}: expected {{lines, sha256, stage}}")
        for name, record in state["stages"].items():
            if name not in STAGES:
                raise DataError(f"{where}: stages.{name}: unknown stage (expected one of {', '.join(STAGES)})")
            if not isinstance(record, dict):
                raise DataError(f"{where}: stages.{name}: expected an object")
        settings = DistillSettings.from_dict(state.get("settings"), where)
        self.state = state
        return settings

    def save(self) -> None:
        write_json(self.state_path, self.state)

    # ---- stages

    def done(self, stage: str) -> bool:
        return bool(self.state["stages"].get(stage, {}).get("done"))

    def stage_info(self, stage: str) -> dict:
        return self.state["stages"].setdefault(stage, {})

    def finish(self, stage: str, seconds: float, **info) -> None:
        record = self.stage_info(stage)
        record.update(info, done=True, seconds=round(record.get("seconds", 0.0) + seconds, 3))
        self.save()

    def add_seconds(self, stage: str, seconds: float) -> None:
        """Time spent in a stage that stopped before its end (a budget ran out, an error)."""
        record = self.stage_info(stage)
        record["seconds"] = round(record.get("seconds", 0.0) + seconds, 3)
        self.save()

    def redo(self, stage: str) -> list[str]:
        """Forget `stage` and every later one (their files are made again; the student is trained
        anew when its stage is redone); returns their names. What the start recorded (the student
        config as given) stays, whichever stage a state of an earlier attnmt filed it under: no
        stage makes it, and a redo must leave a state that resumes (issue 66 group E: `--redo
        teacher` forgot it, and the distillation could never be resumed again)."""
        later = list(STAGES[STAGES.index(stage):])
        for name in later:
            self.state["stages"].pop(name, None)
        if "student" in later:
            self.state["stages"]["student"] = {"restart": True}  # done stays false; stage_student trains anew
        self.state["files"] = {k: (dict(v, stage=START) if k == STUDENT_CONFIG_GIVEN else v)
                               for k, v in self.state["files"].items()
                               if v["stage"] not in later or k == STUDENT_CONFIG_GIVEN}
        self.save()
        return later

    # ---- files

    def rel(self, path: Path) -> str:
        return path.relative_to(self.path).as_posix()

    def record(self, path: Path, stage: str, lines: int | None = None, *, binary: bool = False) -> dict:
        """Record a finished file's line count (counted here when not given; -1 for a `binary`
        file, whose lines are not counted) and sha256."""
        if binary:
            lines = -1
        elif lines is None:
            lines = count_lines(path)
        self.state["files"][self.rel(path)] = {"lines": lines, "sha256": sha256_file(path), "stage": stage}
        self.save()
        return self.state["files"][self.rel(path)]

    def recorded(self, path: Path) -> dict | None:
        """The record of `path` when it is recorded and the file still matches it; else None (to be made)."""
        record = self.state["files"].get(self.rel(path))
        if record is None:
            return None
        self.check(path)
        return record

    def check(self, path: Path) -> int:
        """The line count of a recorded file, after checking it against its record.

        Raises:
            DataError: not recorded (its stage has not made it), missing or changed; names the file,
                the stage that wrote it and the way to make it again.
        """
        record = self.state["files"].get(self.rel(path))
        if record is None:
            raise DataError(f"{path}: not recorded in {self.state_path}: the stage that makes it has not finished")
        redo = (f"make it again with `attnmt distill --resume {self.path} --redo {record['stage']}`"
                if record["stage"] != START else
                "it was given when the distillation started: start a new one (`attnmt distill TEACHER --student "
                "CONFIG -o DIR`)")
        if not path.is_file():
            raise DataError(f"{path}: missing (stage {record['stage']!r} wrote it): {redo}")
        lines = count_lines(path) if record["lines"] >= 0 else -1
        if lines != record["lines"]:
            raise DataError(f"{path}: has {lines} lines, stage {record['stage']!r} wrote {record['lines']}: "
                            f"the file was cut or changed; {redo}")
        if sha256_file(path) != record["sha256"]:
            raise DataError(f"{path}: changed since stage {record['stage']!r} wrote it (its sha256 is not the one in "
                            f"{self.state_path}); {redo}")
        return lines


def count_lines(path: Path) -> int:
    """Lines of a text file as sharding.py counts them: "\\n"-terminated, and a last one without."""
    count, last = 0, b"\n"
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


# ----------------------------------------------------------------------------- the layout

def source_paths(d: DistillDir, name: str, direction: Direction, folder: str = "data") -> tuple[Path, Path]:
    """FOLDER/NAME.SRC and FOLDER/NAME.TGT: a corpus's two sides (data/, corpus/; teacher/ holds the target side)."""
    return (d.path / folder / f"{name}.{direction.source}", d.path / folder / f"{name}.{direction.target}")


def test_name(cfg: Config, direction: Direction) -> str:
    return f"test-{direction}" if cfg.data.multilingual else "test"


def teacher_tests(d: DistillDir, cfg: Config, settings: DistillSettings, direction: Direction) -> list[tuple[int, Path]]:
    """(beam, file) of the teacher's test translations: at its own beam (teacher/test.TGT) and, when
    the student decodes with another, at the student's too (teacher/test-beamN.TGT): the report's
    answer to "does the student buy anything over its teacher decoded the same way?"."""
    name = test_name(cfg, direction)
    found = [(settings.beam, source_paths(d, name, direction, "teacher")[1])]
    if settings.student_beam != settings.beam:
        found.append((settings.student_beam,
                      source_paths(d, f"{name}-beam{settings.student_beam}", direction, "teacher")[1]))
    return found


def seconds_key(settings: DistillSettings, beam: int) -> str:
    """Where stage "teacher" keeps the time of its test translation at `beam` (in its speed record)."""
    return "seconds" if beam == settings.beam else f"seconds_beam{beam}"


def export_folder(d: DistillDir, settings: DistillSettings) -> Path:
    return d.path / f"student-ct2-{settings.quantization}"


def language_options(multilingual: bool, direction: Direction) -> dict:
    """Translator.translate's languages for `direction` (a one-direction model takes none)."""
    return language_args(direction if multilingual else None)


def check_export(d: DistillDir, settings: DistillSettings) -> Path:
    """The student's export, its model and vocabulary map checked against their records."""
    out = export_folder(d, settings)
    d.check(out / "model.bin")
    d.check(out / "vmap.txt")
    return out


def iter_tests(d: DistillDir, cfg: Config) -> Iterator[tuple[Direction, Path, Path, Path]]:
    """Each student direction's test sources, references and the teacher's translations (checked)."""
    for direction in cfg.data.directions():
        src_path, ref_path = source_paths(d, test_name(cfg, direction), direction)
        out_path = source_paths(d, test_name(cfg, direction), direction, "teacher")[1]
        for path in (src_path, ref_path, out_path):
            d.check(path)
        yield direction, src_path, ref_path, out_path
