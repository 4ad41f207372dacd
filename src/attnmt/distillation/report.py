"""The last stage of `attnmt distill`: teacher and student side by side on the test set.

Shapes: none; translations in, one table out.

For each direction: the teacher (its beam-5 translations of stage "teacher", timed there; and
at the student's beam, when that differs: what the student has to beat), the student's
CTranslate2 export without and with its vocabulary map (timed here, tokenizing included): BLEU,
chrF, the difference to the teacher's first row with its 95% paired-bootstrap interval and
the approximate-randomization p-value (significance.compare_systems, sacreBLEU's), sentences/s
and the model's size on disk. Written to report.json and report.txt, and printed by the command.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from attnmt.config import Config
from attnmt.decoding.options import DecodingOptions
from attnmt.distillation.state import (REPORT_JSON, REPORT_TEXT, DistillDir, DistillSettings, check_export,
                                       iter_tests, language_options, seconds_key, teacher_tests)
from attnmt.files import atomic_write_text, write_json
from attnmt.run_dir import RunDir

log = logging.getLogger(__name__)

COLUMNS = ("pair", "system", "engine", "beam", "BLEU", "chrF", "dBLEU", "95% CI", "p(ar)", "sent/s", "MB")


def model_megabytes(settings: DistillSettings) -> float:
    """The teacher's weights on disk (an ensemble: all members), in MB."""
    if settings.teacher_engine == "ctranslate2":
        files = [Path(p) / "model.bin" for p in settings.teacher]
    else:
        files = [RunDir(p).weights(settings.checkpoint) for p in settings.teacher]
    return sum(f.stat().st_size for f in files) / 1e6


def stage_evaluate(d: DistillDir, settings: DistillSettings, cfg: Config, runtime) -> dict:
    from attnmt.significance import compare_systems
    from attnmt.translator import Translator

    export = check_export(d, settings)
    student = Translator.load(export, engine="ctranslate2")
    student_mb = (export / "model.bin").stat().st_size / 1e6
    teacher_mb = model_megabytes(settings)
    speed = d.stage_info("teacher").get("speed", {})
    teacher_name = "+".join(Path(p).name for p in settings.teacher)
    rows, signatures = [], {}
    logging.getLogger("sacrebleu").setLevel(logging.WARNING)
    for direction, src_path, ref_path, out_path in iter_tests(d, cfg):
        sources = src_path.read_text(encoding="utf-8").splitlines()
        refs = ref_path.read_text(encoding="utf-8").splitlines()
        languages = language_options(cfg.data.multilingual, direction)
        systems = []  # (name, translations, engine, beam, sentences/s, MB)
        timed = speed.get(str(direction), {})
        for beam, path in teacher_tests(d, cfg, settings, direction):
            if path != out_path and not d.recorded(path):  # (checked; a teacher stage older than this row has none)
                continue
            seconds = timed.get(seconds_key(settings, beam))
            systems.append((f"teacher {teacher_name}", path.read_text(encoding="utf-8").splitlines(),
                            settings.teacher_engine, beam, timed.get("sentences", 0) / seconds if seconds else None,
                            teacher_mb))
        for use_vmap in (False, True):
            student.engine.use_vmap = use_vmap
            options = DecodingOptions(beam_size=settings.student_beam, batch_size=settings.batch_size, **languages)
            student.translate(sources[:1], options)  # warm up
            began = time.perf_counter()
            hyps = [r.text for r in student.translate(sources, options)]
            rate = len(sources) / max(time.perf_counter() - began, 1e-9)
            systems.append((f"student {settings.quantization}" + (" + vmap" if use_vmap else ""), hyps,
                            "ctranslate2", settings.student_beam, rate, student_mb))
        comparison = compare_systems([(name, hyps) for name, hyps, *_ in systems], refs)
        for i, (name, _, engine, beam, rate, megabytes) in enumerate(systems):
            paired = comparison.paired[i - 1]["BLEU"] if i else None
            rows.append({"pair": str(direction), "system": name, "engine": engine, "beam": beam,
                         "BLEU": round(comparison.scores["BLEU"][i], 2),
                         "chrF": round(comparison.scores["chrF2"][i], 2),
                         "dBLEU": None if paired is None else round(paired.difference, 2),
                         "ci": None if paired is None else [round(paired.ci_low, 2), round(paired.ci_high, 2)],
                         "p_ar": None if paired is None else round(paired.p_randomization, 4),
                         "sentences_per_s": None if rate is None else round(rate, 1),
                         "megabytes": round(megabytes, 2)})
        signatures[str(direction)] = comparison.signatures["BLEU"]["score"]
    report = {"sentences": {str(direction): len(src.read_text(encoding="utf-8").splitlines())
                            for direction, src, _, _ in iter_tests(d, cfg)},
              "rows": rows, "signature": signatures,
              "notes": "sentences/s: all test sentences, tokenizing included; the teacher's timed in stage "
                       "'teacher' (with its --workers), the student's here; MB: the weights on disk"}
    write_json(d.path / REPORT_JSON, report)
    atomic_write_text(d.path / REPORT_TEXT, format_report(report) + "\n")
    return {"report": REPORT_JSON}


def format_report(report: dict) -> str:
    """The report's rows as one text table, and the signature below."""
    cells = [[row["pair"], row["system"], row["engine"], str(row["beam"]), f"{row['BLEU']:.2f}", f"{row['chrF']:.2f}",
              "" if row["dBLEU"] is None else f"{row['dBLEU']:+.2f}",
              "" if row["ci"] is None else f"[{row['ci'][0]:+.2f}, {row['ci'][1]:+.2f}]",
              "" if row["p_ar"] is None else f"{row['p_ar']:.4f}",
              "-" if row["sentences_per_s"] is None else f"{row['sentences_per_s']:.1f}",
              f"{row['megabytes']:.2f}"] for row in report["rows"]]
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(COLUMNS)]
    line = "  ".join(h.ljust(w) if i < 3 else h.rjust(w) for i, (h, w) in enumerate(zip(COLUMNS, widths)))
    out = [line, "-" * len(line)]
    out += ["  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))) for row in cells]
    out.append("dBLEU: the row - the teacher's first row, with its 95% paired-bootstrap interval; "
               "p(ar): approximate randomization")
    out += [f"{pair}: {signature}" for pair, signature in report["signature"].items()]
    return "\n".join(out)
