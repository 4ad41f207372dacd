#!/usr/bin/env python3
"""Sentence segmenters compared: boundary accuracy per language and speed (docs/results.md,
"Sentence splitting").

Every segmenter runs behind attnmt's own line rule (`data.sentences.spans_by_line`: a line break
ends a sentence), so only the boundaries within a line differ. Sets:
  - hard: attnmt's hard cases in de, en, fr, cs (tests/support/sentence_cases.py);
  - golden: the "pragmatic segmenter" golden rules as pysbd ships and tests them: English from the
    installed pysbd wheel (benchmarks/english_golden_rules.py inside it), German and French from
    pysbd's tests/lang/test_deutsch.py and test_french.py in the folder given with --golden-dir
    (a checkout of pySBD's tests/lang; not copied into attnmt). Cases whose expected sentences are
    not the text's own characters (pysbd's cleaning rewrites some) are left out and counted.

Accuracy is over decision points: every place where the gold or the segmenter puts a boundary,
and every other place after a . ! ? or ... (closing quotes and brackets included) followed by
whitespace; a point is right when the segmenter and the gold agree on it. Speed: characters per
second over test_2016_flickr's German sentences joined into paragraphs of 4 (ATTNMT_DATA).

    benchmarks/quality/sentence_split.py [--golden-dir DIR] [--segmenters sentencex pysbd ...]

Only sentencex is attnmt's dependency; the others (pysbd, syntok, blingfire, sentence-splitter)
are installed by hand to compare. pysbd's wheel also installs a top-level `benchmarks` package
into site-packages: uninstall it after measuring, or `import benchmarks` outside this repository
finds pysbd's.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from attnmt.data.sentences import spans_by_line

REPO = Path(__file__).resolve().parents[2]
LANGS = ("de", "en", "fr", "cs")
CANDIDATE = re.compile(r"(?:[.!?]|\u2026)+[\"'\u201c\u201d\u201e\u00bb\u00ab\u2019)\]]*\s+(?=\S)")


def load_hard_cases() -> dict:
    spec = importlib.util.spec_from_file_location("sentence_cases", REPO / "tests" / "support" / "sentence_cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.HARD_CASES


def _lists_in(path: Path, names: tuple[str, ...]) -> list:
    """The literal lists assigned to `names` in a Python file, read without running it."""
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) in names for t in node.targets):
            found += ast.literal_eval(node.value)
    return found


def load_golden(golden_dir: Path | None) -> dict:
    golden = {}
    pysbd_spec = importlib.util.find_spec("pysbd")
    if pysbd_spec is not None:
        english = Path(pysbd_spec.origin).parents[1] / "benchmarks" / "english_golden_rules.py"
        if english.exists():
            golden["en"] = _lists_in(english, ("GOLDEN_EN_RULES",))
    if golden_dir is not None:
        golden["de"] = _lists_in(golden_dir / "test_deutsch.py", ("GOLDEN_DE_RULES_TEST_CASES",
                                                                    "DE_CLEAN_RULES_TEST_CASES"))
        golden["fr"] = _lists_in(golden_dir / "test_french.py", ("GOLDEN_FR_RULES_TEST_CASES",))
    return golden


def gold_starts(text: str, sentences: list[str]) -> set[int] | None:
    """Where the gold's sentences after the first start in `text`; None when they are not its own
    characters in order."""
    starts, position = [], 0
    for sentence in sentences:
        sentence = sentence.strip()
        if not sentence:
            continue
        at = text.find(sentence, position)
        if at < 0 or text[position:at].strip():
            return None
        starts.append(at)
        position = at + len(sentence)
    return set(starts[1:]) if not text[position:].strip() else None


def score(cases: list, segment, lang: str | None) -> tuple[int, int, int, list]:
    """(right decisions, decisions, cases used, the wrong cases) of one segmenter on one set; with
    `lang`, attnmt's corrections (`data.sentences.refine`) applied to its output."""
    right = total = used = 0
    wrong = []
    for text, sentences in cases:
        gold = gold_starts(text, sentences)
        if gold is None:
            continue
        used += 1
        predicted = {start for start, _ in spans_by_line(text, segment, lang)[1:]}
        candidates = gold | predicted | {m.end() for m in CANDIDATE.finditer(text)}
        good = sum((c in gold) == (c in predicted) for c in candidates)
        right, total = right + good, total + len(candidates)
        if good < len(candidates):
            wrong.append((text, [text[a:b] for a, b in spans_by_line(text, segment, lang)]))
    return right, total, used, wrong


def segmenters() -> dict:
    """name -> (lang -> a line segmenter, or None where it lacks the language)."""
    def sentencex_for(lang):
        from sentencex import segment
        return lambda line: segment(lang, line)

    def pysbd_for(lang):
        import pysbd
        try:
            seg = pysbd.Segmenter(language=lang, clean=False)
        except ValueError:  # a language it lacks (cs)
            return None
        return seg.segment

    def syntok_for(lang):
        from syntok import segmenter

        def segment(line):
            for paragraph in segmenter.analyze(line):
                for sentence in paragraph:
                    start, last = sentence[0].offset, sentence[-1]
                    yield line[start:last.offset + len(last.value)]
        return segment

    def blingfire_for(lang):
        import blingfire

        def segment(line):
            _, offsets = blingfire.text_to_sentences_and_offsets(line)
            return [line[a:b] for a, b in offsets]
        return segment

    def moses_for(lang):
        from sentence_splitter import SentenceSplitter
        splitter = SentenceSplitter(language=lang)
        return splitter.split

    return {"sentencex": sentencex_for, "pysbd": pysbd_for, "syntok": syntok_for, "blingfire": blingfire_for,
            "sentence-splitter": moses_for}


def paragraphs_for_speed() -> list[str]:
    from attnmt.data.corpus import multi30k_path, read_lines

    lines = read_lines(multi30k_path("test_2016_flickr", "de"))
    lines = [line if line.endswith((".", "!", "?")) else line + "." for line in lines]
    return [" ".join(lines[i:i + 4]) for i in range(0, len(lines), 4)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--golden-dir", type=Path, help="pySBD's tests/lang folder (test_deutsch.py, test_french.py)")
    parser.add_argument("--segmenters", nargs="+", default=list(segmenters()))
    parser.add_argument("--show-errors", action="store_true", help="print each case a segmenter gets wrong")
    parser.add_argument("--no-speed", action="store_true")
    args = parser.parse_args(argv)
    hard, golden = load_hard_cases(), load_golden(args.golden_dir)
    paragraphs = None if args.no_speed else paragraphs_for_speed()
    print(f"{'segmenter':24} {'set':7} " + " ".join(f"{lang:>16}" for lang in LANGS) + "   speed")
    for name, rules in [(name, rules) for name in args.segmenters for rules in (False, True)]:
        make = segmenters()[name]
        try:
            make("en")
        except ImportError as err:
            print(f"{name}: not installed ({err}); pip install it to compare")
            break
        label = name + (" + attnmt" if rules else "")
        for set_name, sets in (("hard", hard), ("golden", golden)):
            cells = []
            for lang in LANGS:
                segment = make(lang) if lang in sets else None
                if segment is None:
                    cells.append(f"{'-':>16}")
                    continue
                right, total, used, wrong = score(sets[lang], segment, lang if rules else None)
                cells.append(f"{100 * right / total:5.1f}% {right}/{total} ({used})".rjust(16))
                for text, got in wrong if args.show_errors else []:
                    print(f"  {label} {lang} {set_name}: {text!r}\n    -> {got}")
            speed = ""
            if set_name == "hard" and paragraphs is not None:
                segment = make("de")
                start = time.perf_counter()
                for paragraph in paragraphs:
                    spans_by_line(paragraph, segment, "de" if rules else None)
                seconds = time.perf_counter() - start
                speed = f"{sum(map(len, paragraphs)) / seconds / 1e3:8.0f} k chars/s"
            print(f"{label:24} {set_name:7} " + " ".join(cells) + "   " + speed)
    print("cells: accuracy, right/decisions (cases used); + attnmt: with data.sentences.refine's corrections")
    return 0


if __name__ == "__main__":
    sys.exit(main())
