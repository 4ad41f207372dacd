"""`attnmt translate RUN_DIR [RUN_DIR ...] [-i IN] [-o OUT] [--beam K] [--n-best K] [--sampling-topk K]`: one
translation per input line; with --n-best K > 1, K lines 'rank<TAB>score<TAB>text' per input
line, then an empty line. --alignments appends a tab and the word alignment ('0-0 1-2 ...',
source-output word indices) to each translation; --no-replace-unk keeps <unk> in the output.
--glossary TERMS.TSV ('source phrase<TAB>target phrase' lines) puts each target phrase whose
source phrase occurs in a line into its translation exactly once (constrained beam search).
--split-sentences translates each line as a paragraph, sentence by sentence (data/sentences.py),
joined back with the line's own spacing; off by default, so a file of one sentence per line
translates exactly as before. --report lists on stderr each line whose translation may have left
part of its source out (decoding/coverage.py: a source word with almost no attention, or an
output far shorter than the input).
From a file into a file (-i and -o), and on every rank under torchrun, the input is translated in
shards of --shard-lines lines that survive a kill (commands/file_jobs.py, sharding.py). --workers N
decodes in N processes (workers.py), outputs in input order. An -i FILE with a document's extension
(.docx, .pptx, .odt, .odp, .epub, .srt, .po, .xliff, .html, .pdf) is translated as that document
into -o (commands/document_files.py)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from attnmt.bounds import CONFIDENCE, DECODING_SEED, SAMPLING_TEMPERATURE, SAMPLING_TOPK
from attnmt.commands.arguments import (add_decoding_args, add_engine_arg, add_language_args, add_shard_args,
                                       add_workers_arg, beam_size, bounded, decoding_options)
from attnmt.commands.text_io import (check_text_input, open_input, open_output, open_text_file, output_line,
                                     read_lines)
from attnmt.decoding.inputs import unknown_target_words
from attnmt.decoding.options import DecodingOptions
from attnmt.errors import AttnmtError, DataError
from attnmt.files import sha256_file
from attnmt.untrusted import MAX_READ_BYTES, bounded_lines

if TYPE_CHECKING:
    from attnmt.sharding import Work
    from attnmt.translator import Translator
    from attnmt.workers import WorkerPool

HELP = "translate lines from stdin (or -i) to stdout (or -o)"


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", nargs="+", metavar="RUN_DIR", help="a run; several runs are decoded as one ensemble (native engine)")
    parser.add_argument("-i", "--input", default=None)
    parser.add_argument("-o", "--output", default=None)
    add_decoding_args(parser)
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    add_language_args(parser)
    add_engine_arg(parser)
    parser.add_argument("--n-best", type=beam_size, default=1, metavar="K",
                        help="print the K best: 'rank<TAB>score<TAB>text' lines, an empty line after each sentence")
    add_shard_args(parser)
    add_workers_arg(parser)
    parser.add_argument("--sampling-topk", type=bounded(SAMPLING_TOPK), default=1,
                        metavar="K",
                        help="sample from the K most probable tokens (0 = all; 1 = no sampling), e.g. for back-translation")
    temperature = bounded(SAMPLING_TEMPERATURE)
    parser.add_argument("--sampling-temperature", type=temperature, default=1.0, metavar="T",
                        help=f"sampling temperature, {SAMPLING_TEMPERATURE.range_text()}")
    parser.add_argument("--seed", type=bounded(DECODING_SEED), default=None,
                        help=f"seed for sampling (repeatable output), {DECODING_SEED.range_text()}")
    parser.add_argument("--replace-unk", action=argparse.BooleanOptionalAction, default=None,
                        help="replace each <unk> by the source word it attends to most (default: "
                             "search.replace_unk; null = on for moses, off for sentencepiece)")
    parser.add_argument("--alignments", action="store_true",
                        help="append a tab and the word alignment in Pharaoh format ('0-0 1-2 ...': "
                             "source-output word indices, from attention)")
    parser.add_argument("--split-sentences", action="store_true",
                        help="translate each line sentence by sentence (split in the source language) and join "
                             "the translations with the line's own spacing; for paragraphs, not for a file of "
                             "one sentence per line (the default: each line is one sentence to the model)")
    parser.add_argument("--report", action="store_true",
                        help="list on stderr each line whose translation may have left part of its source out: "
                             "coverage, the source words with almost no attention, the length ratio")
    parser.add_argument("--min-confidence", type=bounded(CONFIDENCE), default=None, metavar="P",
                        help="a line whose translation is less confident than P (0..1: the model's calibrated "
                             "probability that it is good, attnmt calibrate) is written as its source, and named "
                             "on stderr")
    parser.add_argument("--retranslate", action="store_true",
                        help="documents (.po, .pot, .xliff, .xlf): translate entries that already have a "
                             "translation too (default: kept as they are); machine output is marked for "
                             "review (fuzzy, needs-review-translation) either way")
    parser.add_argument("--review-below", type=bounded(CONFIDENCE), default=None, metavar="P",
                        help="documents (.docx, .odt, .po, .xliff): a paragraph whose translation is less "
                             "confident than P (0..1) is marked for review: a comment by attnmt (.docx, .odt), "
                             "a '# attnmt: confidence ...' comment (.po), a note (.xliff)")
    parser.add_argument("--glossary", default=None, metavar="TERMS.TSV",
                        help="terminology: 'source phrase<TAB>target phrase' lines; where the source phrase "
                             "occurs in a sentence, the target phrase appears in its translation exactly once "
                             "(constrained search: native engine; greedy or beam)")


def run(args) -> int:
    from attnmt.commands import document_files, file_jobs
    from attnmt.run_dir import RunDir

    if document_files.wanted(args):  # -i report.docx: a document, not a line file
        return document_files.run(args)
    if getattr(args, "retranslate", False):
        raise AttnmtError("--retranslate applies to documents that hold translations (-i FILE.po, FILE.xliff)")
    if getattr(args, "review_below", None) is not None:
        from attnmt.documents import REVIEWED

        raise AttnmtError(f"--review-below marks documents (-i FILE with {', '.join(REVIEWED)}); a line file's "
                          f"unsure lines are named by --report")
    file_jobs.refuse_overwriting_inputs(args.output, {"input (-i)": args.input, "glossary": args.glossary}, args.run_dir)
    file_jobs.check_workers(args.workers, args.engine)
    if args.input is not None:  # a text file or a pipe (no device, folder, zip named .txt), before the model loads
        check_text_input(args.input)
    glossary = read_glossary(args.glossary) if args.glossary is not None else None
    if glossary:
        _say_unknown_terms(args.glossary, glossary, RunDir(args.run_dir[0]).pipeline())
    job = LineJob(decoding_options(args), glossary, args.report)
    chunk_size = args.batch_size * 8
    if file_jobs.wanted(args):
        settings = {k: v for k, v in dataclasses.asdict(job.options).items() if k != "batch_size"}
        settings["glossary"] = sha256_file(args.glossary) if args.glossary is not None else None
        if job.options.sampling:  # a seed repeats a sample for one split among the workers only
            settings["workers"] = args.workers
        return file_jobs.run(args, [args.input], settings, lambda translator: _work(translator, job, chunk_size),
                             workers=args.workers)
    file_jobs.refuse_shard_lines(args)
    with file_jobs.torch_threads(args.threads):
        _stream(args, job, chunk_size)
    return 0


@dataclass(frozen=True)
class LineJob:
    """What translating a line file takes: the decoding options, the glossary's (source, target)
    pairs (constraints on every line where the source phrase occurs), and whether to --report."""

    options: DecodingOptions
    glossary: list[tuple[str, str]] | None = None
    report: bool = False


def read_glossary(path) -> list[tuple[str, str]]:
    """A glossary file: one 'source phrase<TAB>target phrase' per line (UTF-8); empty lines are skipped.

    Raises:
        DataError: naming file:line, for a line without exactly one tab or with an empty side, or a
            file that cannot be read.
    """
    try:  # a regular text file (untrusted.open_regular), no line past bounds.LINE_BYTES (untrusted.bounded_lines)
        with open_text_file(str(path), limit=MAX_READ_BYTES, hint="") as handle:
            text = b"".join(bounded_lines(handle, str(path))).decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot read the glossary: {err}") from None
    pairs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        sides = line.split("\t")
        if len(sides) != 2 or not sides[0].strip() or not sides[1].strip():
            raise DataError(f"{path}:{number}: expected 'source phrase<TAB>target phrase', got {line[:80]!r}")
        pairs.append((sides[0].strip(), sides[1].strip()))
    return pairs


def _say_unknown_terms(path, glossary: list[tuple[str, str]], pipeline) -> None:
    """A glossary entry whose target words the model's vocabulary lacks is forced as <unk>: say so."""
    for phrase, unknown in unknown_target_words(pipeline, list(dict.fromkeys(t for _, t in glossary))):
        print(f"attnmt translate: note: {path}: the target {phrase!r} has words the model's vocabulary lacks "
              f"({', '.join(unknown[:5])}): they cannot come out as typed (each is forced as <unk>)", file=sys.stderr)


def _stream(args, job: LineJob, chunk_size: int) -> None:
    """Translate stdin (or -i) to stdout (or -o) line by line, `chunk_size` lines per call."""
    from attnmt.commands import file_jobs

    with file_jobs.open_translator(args.run_dir, checkpoint=args.checkpoint, device=args.device, engine=args.engine,
                                   workers=args.workers, threads=args.threads) as translator, \
            open_input(args.input) as source, open_output(args.output) as target:
        chunk: list[str] = []
        done = 0  # lines translated before the chunk
        for line in read_lines(source, args.input or "<stdin>"):
            chunk.append(line)
            if len(chunk) >= chunk_size:
                target.writelines(_translate(translator, chunk, job, first_line=done + 1))
                target.flush()
                done, chunk = done + len(chunk), []
        if chunk:
            target.writelines(_translate(translator, chunk, job, first_line=done + 1))


def _work(translator: Translator | WorkerPool, job: LineJob, chunk_size: int) -> Work:
    """One shard's translation (sharding.py): its lines in chunks of `chunk_size`, as output lines.
    A bad combination of options is refused here, before the work folder is made."""
    _translate(translator, [], job)

    def work(columns: list[list[bytes]]) -> list[str]:
        lines = list(read_lines(columns[0]))
        return [out for start in range(0, len(lines), chunk_size)
                for out in _translate(translator, lines[start:start + chunk_size], job)]
    return work


def pharaoh(links: Sequence[tuple[int, int]]) -> str:
    """Links as Pharaoh text: "0-0 1-2 ..." (source-output)."""
    return " ".join(f"{src}-{tgt}" for src, tgt in links)


def _links(result, options: DecodingOptions) -> str:
    """With --alignments, a tab and the hypothesis' word alignment in Pharaoh format; else nothing."""
    return "\t" + pharaoh(result.alignment or []) if options.alignments else ""


UNSURE = 0.5  # --report names a line whose confidence is below this: less likely good than not


def report_line(result, source: str, where: str) -> str | None:
    """--report's line for a translation to look at (None for the others): one that may have left
    part of its source out (coverage: each flagged sentence's coverage, the source words with
    almost no attention, the length ratio), that the length bound cut, or whose confidence is below
    UNSURE; each with its confidence."""
    from attnmt.decoding.alignment import SPM_WORD_START, token_texts
    from attnmt.decoding.inputs import LENGTH_BOUND_NOTE

    unsure = result.confidence is not None and result.confidence < UNSURE
    if not (result.flagged or result.at_length_bound or unsure):
        return None
    subword = any(t.startswith(SPM_WORD_START) for t in result.source_tokens)
    words = token_texts(result.source_tokens, subword)
    parts = []
    for sentence in result.sentences:
        if not sentence.flagged:
            continue
        text = source[sentence.source[0]:sentence.source[1]]
        coverage = "n/a" if sentence.coverage is None else f"{sentence.coverage:.2f}"
        parts.append(f"sentence {text[:60]!r}: coverage {coverage}, output/input length "
                     f"{sentence.length_ratio:.2f}" +
                     (", almost no attention on: " + " ".join(words[j] for j in sentence.uncovered)
                      if sentence.uncovered else ""))
    said = []
    if parts:
        said.append("part of the source may be missing from the translation: " + "; ".join(parts))
    if result.at_length_bound:
        said.append(LENGTH_BOUND_NOTE)
    if result.confidence is not None:
        kind = "calibrated" if result.confidence_calibrated else "uncalibrated: the mean token probability"
        said.append(f"confidence {result.confidence:.2f} ({kind})")
    return f"attnmt translate: {where}: " + "; ".join(said)


def _translate(translator: Translator | WorkerPool, lines: list[str], job: LineJob,
               first_line: int | None = None) -> list[str]:
    """The output lines of `lines`: one per line, or with --n-best K lines and an empty one. With
    --report, each flagged line is named on stderr (by number when `first_line` is known)."""
    options = job.options
    constraints = [job.glossary] * len(lines) if job.glossary else None  # each pair applies where its source occurs
    try:
        results = translator.translate(lines, options, constraints=constraints)
    except ValueError as err:  # a bad combination of options: a user error, not a traceback
        raise AttnmtError(str(err)) from None
    out = []
    for i, (line, result) in enumerate(zip(lines, results)):
        where = f"line {first_line + i}" if first_line is not None else f"the line {line[:40]!r}"
        if job.report:
            note = report_line(result, line, where)
            if note is not None:
                print(note, file=sys.stderr)
        if result.withheld:  # below --min-confidence: its source is written instead
            print(f"attnmt translate: {where}: {result.warnings[-1]}", file=sys.stderr)
        if options.n_best == 1:
            out.append(output_line(result.text + _links(result, options)))
            continue
        for rank, alt in enumerate(result.alternatives, 1):
            out.append(output_line(f"{rank}\t{alt.score:.6f}\t{alt.text}" + _links(alt, options)))
        out.append("\n")
    return out
