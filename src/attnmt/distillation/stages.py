"""`attnmt distill`: sequence-level knowledge distillation (Kim and Rush 2016) in resumable stages.

Shapes: none; line files in, line files, a run and an export out.

    teacher   the student config's training sources (and its test set) translated by the teacher
              at beam 5, in resumable shards (sharding.py), on --workers processes
    filter    optional: each (source, teacher output) pair scored by forced decoding
              (Translator.score) and the worst `filter_share` of each corpus dropped: by the
              teacher's cross-entropy, or (filter_by "confidence") by its calibrated confidence in
              its own output (Translator.scored_confidence)
    corpus    the student's corpus (the teacher's outputs; beside them, weighted, the original
              targets), its config (data.train: a list of {path, weight}) and its prepared data
    student   the student config trained (training.train; with --max-minutes, on what the other
              stages leave, at most its own train.max_minutes), resumed exactly after a kill
    export    the student exported to CTranslate2 (int8) with a vocabulary map (engines/vocab_map.py)
    evaluate  teacher and student side by side on the test set (report.py)

Every stage's outputs are recorded in the distillation directory's state file (state.py) and
checked before a later stage reads them. The directory layout: docs/usage.md.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from attnmt.config import Config, TrainCorpus, config_from_dict, load_saved_config, save_config
from attnmt.data.corpus import CorpusFiles, corpus_spec, load_corpus, multi30k_path, read_chunks, train_files
from attnmt.decoding.options import DecodingOptions
from attnmt.direction import Direction
from attnmt.distillation.report import stage_evaluate
from attnmt.distillation.state import (STAGES, START, STUDENT_CONFIG, STUDENT_CONFIG_GIVEN, STUDENT_RUN, Budget,
                                       DistillDir, DistillSettings, OutOfTime, export_folder, language_options,
                                       seconds_key, source_paths, teacher_tests, test_name)
from attnmt.errors import AttnmtError, ConfigError, DataError
from attnmt.files import atomic_write, one_line, read_json, refuse_overwrite, writer_lock
from attnmt.run_dir import RunDir
from attnmt.sharding import finish_job, open_job, run_shards

log = logging.getLogger(__name__)

EVAL_RESERVE_S = 30.0  # kept from the student's training for its export and the evaluation (at least)
EVAL_RESERVE_SHARE = 0.05  # ... or this share of --max-minutes, whichever is larger
MIN_TRAIN_S = 5.0  # less than this left for the student: stop, to be resumed with more time


@dataclass(frozen=True)
class Runtime:
    """How this call runs (may differ between a start and a resume): the budget, processes, device."""

    budget: Budget = dataclasses.field(default_factory=Budget)
    workers: int = 1
    device: str | None = None


@dataclass(frozen=True)
class Entry:
    """One training corpus of the student config, in one direction, as the distillation names it."""

    name: str
    files: CorpusFiles
    direction: Direction


# ----------------------------------------------------------------------------- start, resume

def start(folder: str | Path, settings: DistillSettings, student_cfg: Config, runtime: Runtime = Runtime()) -> dict:
    """Start a distillation in `folder` (new or empty) and run every stage; returns the report.

    Raises:
        AttnmtError: a folder that is not empty, a teacher that lacks a direction of the student, ...
        OutOfTime: the budget ran out (what is done is kept; `resume` goes on).
    """
    d = DistillDir(folder)
    teacher_directions(settings, student_cfg)  # refused before anything is written
    check_filter(settings)
    # never inside (nor over) the teacher it reads: `-o TEACHER/sub` wrote a distillation into the run
    refuse_overwrite(d.path, {}, [("teacher", path) for path in settings.teacher])
    d.refuse_unless_new()
    with writer_lock(d.path):
        d.create(settings)
        save_config(_absolute(student_cfg), d.path / STUDENT_CONFIG_GIVEN)
        d.record(d.path / STUDENT_CONFIG_GIVEN, START)
        return _run(d, settings, runtime)


def resume(folder: str | Path, runtime: Runtime = Runtime(), *, redo: str | None = None) -> dict:
    """Go on with the distillation in `folder` from where it stopped; `redo` makes that stage and
    the later ones again. Returns the report."""
    d = DistillDir(folder)
    d.open()  # refused before the lock is taken (which would make the folder)
    with writer_lock(d.path):
        settings = d.open()
        if redo is not None:
            if redo not in STAGES:
                raise AttnmtError(f"--redo {redo!r}: expected one of {', '.join(STAGES)}")
            log.info("redoing stages %s", ", ".join(d.redo(redo)))
        return _run(d, settings, runtime)


def _run(d: DistillDir, settings: DistillSettings, runtime: Runtime) -> dict:
    d.check(d.path / STUDENT_CONFIG_GIVEN)
    student_cfg = load_saved_config(d.path / STUDENT_CONFIG_GIVEN)

    work = {"teacher": stage_teacher, "filter": stage_filter, "corpus": stage_corpus, "student": stage_student,
            "export": stage_export, "evaluate": stage_evaluate}
    for number, stage in enumerate(STAGES, 1):
        if d.done(stage):
            log.info("stage %d/%d %s: done before", number, len(STAGES), stage)
            continue
        log.info("stage %d/%d %s: starting", number, len(STAGES), stage)
        runtime.budget.check(d.path, stage)
        began = time.monotonic()
        try:
            info = work[stage](d, settings, student_cfg, runtime) or {}
        except BaseException:
            d.add_seconds(stage, time.monotonic() - began)
            raise
        d.finish(stage, time.monotonic() - began, **info)
        log.info("stage %d/%d %s: done in %.1f s", number, len(STAGES), stage, time.monotonic() - began)
    return read_json(d.path / "report.json", DataError)


# ----------------------------------------------------------------------------- the teacher

def teacher_directions(settings: DistillSettings, student_cfg: Config) -> tuple[bool, list[Direction]]:
    """Whether the teacher is multilingual, and the student's directions (each one the teacher's).

    Raises:
        AttnmtError: a teacher folder that is not a run (or an export, for the ctranslate2 engine).
        ConfigError: a student direction the teacher lacks, naming both.
    """
    first = RunDir(settings.teacher[0])
    for path in settings.teacher:
        run = RunDir(path)
        run.require_export() if settings.teacher_engine == "ctranslate2" else run.require_run()
    data = first.config().data
    wanted = student_cfg.data.directions()
    missing = [str(x) for x in wanted if x not in data.directions()]
    if missing:
        key = "data.pairs / data.langs" if student_cfg.data.multilingual else "data.src_lang / data.tgt_lang"
        raise ConfigError(f"student config: {key} names {', '.join(missing)}, which the teacher {first.path} does not "
                          f"translate (it has {', '.join(map(str, data.directions()))})")
    return data.multilingual, wanted


def open_teacher(settings: DistillSettings, runtime: Runtime, *, workers: int = 1):
    """The teacher (a context manager): a Translator (an ensemble for several runs), or a native
    teacher's pool of `workers` processes (workers.open_translator, as attnmt translate opens one;
    CTranslate2 decodes side by side itself)."""
    from attnmt.workers import open_translator

    return open_translator(list(settings.teacher), checkpoint=settings.checkpoint, device=runtime.device,
                           engine=settings.teacher_engine,
                           workers=workers if settings.teacher_engine == "native" else 1)


def check_filter(settings: DistillSettings) -> None:
    """A filter by confidence needs one teacher with a calibration (an ensemble's members' maps
    are not the ensemble's; an uncalibrated confidence ranks as the cross-entropy does).

    Raises:
        AttnmtError: naming the teacher and what to run.
    """
    if settings.filter_by != "confidence" or settings.filter_share == 0:
        return
    if len(settings.teacher) > 1:
        raise AttnmtError("--filter-by confidence: an ensemble of teachers has no calibration; filter by "
                          "cross-entropy, or distill from one calibrated teacher")
    if RunDir(settings.teacher[0]).calibration() is None:
        raise AttnmtError(f"--filter-by confidence: the teacher {settings.teacher[0]} has no calibration: run "
                          f"`attnmt calibrate {settings.teacher[0]}` first")


def teacher_identity(settings: DistillSettings) -> list[str]:
    """What names the teacher's weights in a shard manifest: each file, its size and modification time."""
    return [RunDir(p).weights_identity(settings.checkpoint, settings.teacher_engine) for p in settings.teacher]


def entries(cfg: Config) -> list[Entry]:
    """The student config's training corpora, one per direction, named train<i>[-SRC-TGT]."""
    data = cfg.data
    found = []
    for index, files in enumerate(train_files(data)):
        direction = files.direction or data.directions()[0]
        suffix = f"-{direction}" if data.multilingual else ""
        found.append(Entry(f"train{index}{suffix}", files, direction))
    return found


def _write_lines(path: Path, lines) -> int:
    count = 0

    def write(tmp: Path) -> None:
        nonlocal count
        with open(tmp, "w", encoding="utf-8", newline="\n") as handle:
            for line in lines:
                handle.write(one_line(line) + "\n")
                count += 1
    atomic_write(path, write)
    return count


def extract(d: DistillDir, entry: Entry, limit: int | None) -> int:
    """Write an entry's sources and original targets into data/ (both files recorded); at most
    `limit` pairs. Returns the pairs written."""
    src_path, tgt_path = source_paths(d, entry.name, entry.direction)
    if d.recorded(src_path) and d.recorded(tgt_path):
        return d.state["files"][d.rel(src_path)]["lines"]
    pairs: list[tuple[str, str]] = []
    for chunk in read_chunks(entry.files):
        for _, src, tgt in chunk.pairs():
            if limit is not None and len(pairs) >= limit:
                break
            pairs.append((src, tgt))
    _write_lines(src_path, (s for s, _ in pairs))
    _write_lines(tgt_path, (t for _, t in pairs))
    d.record(src_path, "teacher", len(pairs))
    d.record(tgt_path, "teacher", len(pairs))
    log.info("%s: %d pairs from %s", d.rel(src_path), len(pairs), entry.files.name)
    return len(pairs)


def stage_teacher(d: DistillDir, settings: DistillSettings, cfg: Config, runtime: Runtime) -> dict:
    multilingual, directions = teacher_directions(settings, cfg)
    todo = entries(cfg)
    left = cfg.data.train_subset  # data.train_subset: the first N pairs of all corpora together
    for entry in todo:
        written = extract(d, entry, left)
        left = None if left is None else max(0, left - written)
    tests = []
    for direction in directions:
        src_path, tgt_path = source_paths(d, test_name(cfg, direction), direction)
        if not (d.recorded(src_path) and d.recorded(tgt_path)):
            corpus = load_corpus(corpus_spec(cfg.data), "test", direction if cfg.data.multilingual else None)
            _write_lines(src_path, corpus.src)
            _write_lines(tgt_path, corpus.tgt)
            d.record(src_path, "teacher", len(corpus.src))
            d.record(tgt_path, "teacher", len(corpus.tgt))
        tests.append((direction, src_path))
    speed = d.stage_info("teacher").setdefault("speed", {})
    identity = teacher_identity(settings)
    with open_teacher(settings, runtime, workers=runtime.workers) as teacher:
        for direction, src_path in tests:  # timed: the teacher's sentences/s of the evaluation
            sources = src_path.read_text(encoding="utf-8").splitlines()
            for beam, out in teacher_tests(d, cfg, settings, direction):
                if d.recorded(out):
                    continue
                began = time.perf_counter()
                results = teacher.translate(sources, DecodingOptions(
                    beam_size=beam, batch_size=settings.batch_size, **language_options(multilingual, direction)))
                seconds = time.perf_counter() - began
                _write_lines(out, (r.text for r in results))
                timed = speed.setdefault(str(direction), {"sentences": len(sources), "workers": runtime.workers})
                timed[seconds_key(settings, beam)] = round(seconds, 3)
                d.record(out, "teacher", len(sources))
        for entry in todo:
            runtime.budget.check(d.path, "teacher")
            src_path, _ = source_paths(d, entry.name, entry.direction)
            out = source_paths(d, entry.name, entry.direction, "teacher")[1]
            if d.recorded(out):
                continue
            lines = d.check(src_path)
            options = DecodingOptions(beam_size=settings.beam, batch_size=settings.batch_size,
                                      **language_options(multilingual, entry.direction))

            def translate(columns, options=options):
                runtime.budget.check(d.path, "teacher")
                texts = [_decode(line) for line in columns[0]]
                return [one_line(r.text) + "\n" for r in teacher.translate(texts, options)] if texts else []
            _sharded(d, [src_path], out, settings, {"teacher": identity, "beam": settings.beam,
                                                   "direction": str(entry.direction)}, translate)
            d.record(out, "teacher", lines)
            log.info("teacher: %s done (%d lines)", d.rel(out), lines)
    return {"pairs": sum(d.state["files"][d.rel(source_paths(d, e.name, e.direction)[0])]["lines"] for e in todo)}


def _decode(line: bytes) -> str:
    text = line.decode("utf-8")
    return text[:-1] if text.endswith("\n") else text


def _sharded(d: DistillDir, inputs: list[Path], output: Path, settings: DistillSettings, job_settings: dict,
             work) -> None:
    """`work` over `inputs` into `output` in resumable shards (sharding.py: OUTPUT.shards/ until done)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    job = open_job([str(p) for p in inputs], output, shard_lines=settings.shard_lines, settings=job_settings)
    run_shards(job, work)
    finish_job(job)


# ----------------------------------------------------------------------------- the filter

def stage_filter(d: DistillDir, settings: DistillSettings, cfg: Config, runtime: Runtime) -> dict:
    if settings.filter_share == 0:
        return {"skipped": True}
    check_filter(settings)  # the teacher's calibration may have gone since the start
    multilingual, _ = teacher_directions(settings, cfg)
    dropped_total = 0
    identity = teacher_identity(settings)
    with open_teacher(settings, runtime) as teacher:  # scoring runs in this process
        for entry in entries(cfg):
            src_path = source_paths(d, entry.name, entry.direction)[0]
            out_path = source_paths(d, entry.name, entry.direction, "teacher")[1]
            by_confidence = settings.filter_by == "confidence"
            scores = d.path / "filter" / f"{entry.name}.{'confidence' if by_confidence else 'ce'}"
            dropped_path = d.path / "filter" / f"{entry.name}.dropped"
            if not d.recorded(scores):
                lines = d.check(src_path)
                if d.check(out_path) != lines:
                    raise DataError(f"{out_path}: {d.check(out_path)} lines, its sources {src_path} {lines}")
                languages = language_options(multilingual, entry.direction)

                def score(columns, languages=languages, by_confidence=by_confidence):
                    runtime.budget.check(d.path, "filter")
                    sources, outputs = [_decode(x) for x in columns[0]], [_decode(x) for x in columns[1]]
                    found = teacher.score(sources, outputs, **languages)
                    if by_confidence:  # worse first: the lower confidence, then (a tie) the lower predicted chrF
                        return [f"{-c:.6f}\t{-p:.6f}\n" for c, p in map(teacher.scored_confidence, found)]
                    return [f"{cross_entropy(r):.6f}\n" for r in found]
                _sharded(d, [src_path, out_path], scores, settings,
                         {"teacher": identity, "scores": settings.filter_by}, score)
                d.record(scores, "filter", lines)
            if not d.recorded(dropped_path):
                d.check(scores)
                values = [tuple(map(float, x.split("\t"))) for x in scores.read_text(encoding="utf-8").splitlines()]
                worst = sorted(range(len(values)), key=lambda i: (tuple(-v for v in values[i]), i))[:int(settings.filter_share * len(values))]
                _write_lines(dropped_path, (str(i + 1) for i in sorted(worst)))
                d.record(dropped_path, "filter", len(worst))
            dropped_total += d.state["files"][d.rel(dropped_path)]["lines"]
    return {"dropped": dropped_total}


def cross_entropy(result) -> float:
    """Per-token cross-entropy of a forced decoding (<eos> counted); inf for one that has none (an
    empty source: nan), so that it is dropped first."""
    if result.num_tokens <= 0 or result.log_prob != result.log_prob:
        return float("inf")
    return -result.log_prob / result.num_tokens


# ----------------------------------------------------------------------------- the student's corpus

def stage_corpus(d: DistillDir, settings: DistillSettings, cfg: Config, runtime: Runtime) -> dict:
    from attnmt.data.prepare import prepare

    corpora, originals = [], []
    for entry in entries(cfg):
        src_path, tgt_path = source_paths(d, entry.name, entry.direction)
        out_path = source_paths(d, entry.name, entry.direction, "teacher")[1]
        new_src, new_tgt = source_paths(d, entry.name, entry.direction, "corpus")
        if not (d.recorded(new_src) and d.recorded(new_tgt)):
            lines = d.check(src_path)
            if d.check(out_path) != lines:
                raise DataError(f"{out_path}: {d.check(out_path)} lines, its sources {src_path} {lines}")
            dropped: set[int] = set()
            if settings.filter_share > 0:
                dropped_path = d.path / "filter" / f"{entry.name}.dropped"
                d.check(dropped_path)
                dropped = {int(x) for x in dropped_path.read_text(encoding="utf-8").split()}
            kept = [i for i in range(lines) if i + 1 not in dropped]
            sources = src_path.read_text(encoding="utf-8").split("\n")[:lines]
            outputs = out_path.read_text(encoding="utf-8").split("\n")[:lines]
            _write_lines(new_src, (sources[i] for i in kept))
            _write_lines(new_tgt, (outputs[i] for i in kept))
            d.record(new_src, "corpus", len(kept))
            d.record(new_tgt, "corpus", len(kept))
        pair = str(entry.direction) if cfg.data.multilingual else None
        corpora.append(TrainCorpus(str(d.path / "corpus" / entry.name), 1.0, pair))
        if settings.original_weight > 0:
            d.check(tgt_path)
            originals.append(TrainCorpus(str(d.path / "data" / entry.name), settings.original_weight, pair))
    student = student_config(cfg, tuple(corpora + originals))
    save_config(student, d.path / STUDENT_CONFIG)
    d.record(d.path / STUDENT_CONFIG, "corpus")
    prepared = prepare(student.data)
    log.info("student corpus: %d pairs prepared in %s", len(prepared), prepared.folder)
    return {"prepared": str(prepared.folder), "prepared_pairs": len(prepared),
            "corpora": [dataclasses.asdict(c) for c in corpora + originals]}


def student_config(cfg: Config, corpora: tuple[TrainCorpus, ...]) -> Config:
    """The student config trained on `corpora`: own files (Multi30k's valid and test named by their
    files), no train_subset (the sources were cut at it already)."""
    data = cfg.data
    valid, test = data.valid, data.test
    if data.corpus == "multi30k":
        lang = data.directions()[0].source
        valid, test = (_prefix(multi30k_path(split, lang), lang) for split in ("val", "test_2016_flickr"))
    data = dataclasses.replace(data, corpus="files", train=corpora, train_subset=None, valid=valid, test=test)
    return config_from_dict(cfg.replace(data=data).to_dict(), source="student config")


def _prefix(path: Path, lang: str) -> str:
    """data/val.de.gz (or data/val.de) -> data/val."""
    name = path.name.removesuffix(".gz").removesuffix(f".{lang}")
    return str(path.with_name(name))


def _absolute(cfg: Config) -> Config:
    """The config with its own files' paths absolute, so that a resume from another folder finds them."""
    data = cfg.data

    def absolute(path: str | None) -> str | None:
        return None if path is None else str(Path(path).expanduser().resolve())
    train = data.train
    if isinstance(train, str):
        train = absolute(train)
    elif train is not None:
        train = tuple(dataclasses.replace(c, path=absolute(c.path)) for c in train)
    data = dataclasses.replace(data, train=train, valid=absolute(data.valid), test=absolute(data.test))
    init_from = absolute(cfg.train.init_from)
    return cfg.replace(data=data, train=dataclasses.replace(cfg.train, init_from=init_from))


# ----------------------------------------------------------------------------- the student

def stage_student(d: DistillDir, settings: DistillSettings, cfg: Config, runtime: Runtime) -> dict:
    from attnmt.run_dir import CONFIG
    from attnmt.training import train

    for name, record in sorted(d.state["files"].items()):  # the corpus it trains on, as the corpus stage wrote it
        if record["stage"] == "corpus":
            d.check(d.path / name)
    student = load_saved_config(d.path / STUDENT_CONFIG)
    run_path = d.path / STUDENT_RUN
    run = RunDir(run_path)
    info = d.stage_info("student")
    if info.pop("restart", False):  # `--redo student` (or an earlier stage): the run's own files go, then it starts anew
        if run_path.is_dir():
            run.clear()
        d.save()
    resuming = (run_path / "train_state.json").is_file()
    trained = float(read_json(run_path / "train_state.json", DataError).get("seconds", 0.0)) if resuming else 0.0
    if runtime.budget.minutes is not None:
        left = runtime.budget.left() - max(EVAL_RESERVE_S, EVAL_RESERVE_SHARE * runtime.budget.minutes * 60)
        if left < MIN_TRAIN_S:
            raise OutOfTime(f"{d.path}: {max(left, 0):.0f} s of --max-minutes {runtime.budget.minutes:g} left for the "
                            f"student's training: continue with `attnmt distill --resume {d.path} --max-minutes M`")
        minutes = (trained + left) / 60
        own = student.train.max_minutes  # the student config's own bound, if any, still holds
        if own is not None and own < minutes:
            minutes = own
        student = student.replace(train=dataclasses.replace(student.train, max_minutes=minutes))
        log.info("student: %.1f minutes of training (train.max_minutes or the rest of --max-minutes, the smaller)",
                 minutes - trained / 60)
    if resuming:
        save_config(student, run_path / CONFIG)  # the budget of this call (train --resume --set train.max_minutes)
        run.record_checksums([CONFIG])
    result = train(student, run_path, resume=resuming, overwrite=not resuming)
    best = run.weights("best")
    d.record(best, "student", binary=True)
    return {"epochs": result.epochs, "train_seconds": round(result.seconds, 1),
            "best": d.rel(best), "best_valid_bleu": (run.pointer("best") or {}).get("val_bleu")}


# ----------------------------------------------------------------------------- the export

def stage_export(d: DistillDir, settings: DistillSettings, cfg: Config, runtime: Runtime) -> dict:
    from attnmt.engines.ctranslate2_export import export_run
    from attnmt.engines.vocab_map import VMAP_FILE, VocabMapSettings

    run = RunDir(d.path / STUDENT_RUN)
    best = run.weights("best")
    d.check(best)
    out = export_run(run.path, export_folder(d, settings), quantization=settings.quantization, force=True,
                     vocab_map=VocabMapSettings(top_k=settings.vocab_top_k, frequent=settings.vocab_frequent))
    d.record(out / "model.bin", "export", binary=True)
    d.record(out / VMAP_FILE, "export")
    return {"folder": d.rel(out)}
