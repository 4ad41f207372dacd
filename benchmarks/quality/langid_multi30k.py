#!/usr/bin/env python3
"""Accuracy of language identification on Multi30k's test_2016_flickr sentences (de, fr, cs, en),
each identifier restricted to those four languages: the choice behind `attnmt serve`'s /detect
(docs/serving.md). `py3langid` is what the server uses (attnmt.server.langid.LanguageDetector);
`lingua` (lingua-language-detector) is the alternative it was chosen against; `lexicon` is how the
library reads a multilingual call that names no source language (a run's lexicons, data/lexicon.py's
Lexicons.identify).

    benchmarks/quality/langid_multi30k.py [--identifiers py3langid lingua lexicon] [--run RUN] [--words 0 3 2]
        [--typed clean lowercase ...] [--langs de fr cs en] [--json PATH]

--words N keeps each sentence's first N words (0: the whole sentence): short inputs are the hard case.
--typed T ... identifies the sentences typed another way first (robustness.py's variants: lowercase,
uppercase, no_diacritics, ...; default: as written).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path
from typing import Callable

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from attnmt.data.corpus import multi30k_path, read_lines
from benchmarks.common import command, environment, make_report, write_report

LANGS = ("de", "fr", "cs", "en")
IDENTIFIERS = ("py3langid", "lingua", "lexicon")


def load_identifier(name: str, langs: tuple[str, ...], run: str | None = None) -> Callable[[str], str]:
    """text -> language code, restricted to `langs` ("lexicon": a multilingual run's word counts,
    data/lexicon.py's Lexicons.identify, "?" where they know no word of the text)."""
    if name == "lexicon":
        from attnmt.data.lexicon import LEXICON_FILE, load_lexicon

        lexicons = load_lexicon(Path(run) / LEXICON_FILE)
        return lambda text: lexicons.identify(text, langs) or "?"
    if name == "py3langid":
        from attnmt.server.langid import LanguageDetector

        detector = LanguageDetector(list(langs))
        return lambda text: detector.detect(text)[0]["language"]
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    languages = {Language.from_iso_code_639_1(getattr(IsoCode639_1, code.upper())): code for code in langs}
    detector = LanguageDetectorBuilder.from_languages(*languages).with_preloaded_language_models().build()
    return lambda text: languages.get(detector.detect_language_of(text), "?")


def measure(name: str, sentences: dict[str, list[str]], words: list[int], typed: str = "clean",
            run: str | None = None) -> list[dict]:
    """One row per `words` setting: accuracy per language and overall, and the time it took."""
    from benchmarks.quality.robustness import variants

    start = time.perf_counter()
    guess = load_identifier(name, tuple(sentences), run)
    load_s = time.perf_counter() - start
    sentences = {lang: variants(texts)[typed] for lang, texts in sentences.items()}
    rows = []
    for n in words:
        cut = {lang: [" ".join(s.split()[:n]) if n else s for s in texts] for lang, texts in sentences.items()}
        start = time.perf_counter()
        right = {lang: sum(guess(s) == lang for s in texts) for lang, texts in cut.items()}
        total = sum(len(texts) for texts in cut.values())
        rows.append({"kind": "langid", "identifier": name, "typed": typed, "words": n, "sentences": total,
                     "accuracy": round(sum(right.values()) / total, 4),
                     "per_language": {lang: round(right[lang] / len(cut[lang]), 4) for lang in cut},
                     "load_s": round(load_s, 2), "classify_s": round(time.perf_counter() - start, 2)})
    rows[-1]["max_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="langid_multi30k", description=__doc__.split("\n\n")[0])
    p.add_argument("--identifiers", nargs="+", default=["py3langid"], choices=IDENTIFIERS)
    p.add_argument("--words", type=int, nargs="+", default=[0, 3, 2], help="first N words of each sentence (0 = all)")
    p.add_argument("--run", default=None, help="a multilingual run whose lexicons identify (--identifiers lexicon)")
    p.add_argument("--langs", nargs="+", default=list(LANGS), help="the languages to tell apart")
    p.add_argument("--typed", nargs="+", default=["clean"], help="the variants of robustness.py to identify")
    p.add_argument("--sentences", type=int, default=None, help="only the first N sentences per language")
    p.add_argument("--json", default="langid_multi30k.json", metavar="PATH")
    args = p.parse_args(argv)
    if min(args.words) < 0 or (args.sentences is not None and args.sentences < 1):
        print("langid_multi30k: error: --words must be >= 0 and --sentences >= 1", file=sys.stderr)
        return 2
    if "lexicon" in args.identifiers and args.run is None:
        print("langid_multi30k: error: --identifiers lexicon needs --run RUN", file=sys.stderr)
        return 2
    sentences = {lang: read_lines(multi30k_path("test_2016_flickr", lang))[: args.sentences] for lang in args.langs}
    rows = [row for name in args.identifiers for typed in args.typed
            for row in measure(name, sentences, args.words, typed, args.run)]
    for row in rows:
        print(f"{row['identifier']:10} {row['typed']:15} words {row['words'] or 'all':>3}: {100 * row['accuracy']:.1f}% of "
              f"{row['sentences']} {row['per_language']}")
    print("max RSS of this process (every identifier loaded so far):", rows[-1]["max_rss_mib"], "MiB")
    write_report(args.json, make_report("langid_multi30k", command=command(__file__, argv), environment=environment(),
                                        settings={"langs": args.langs, "run": args.run, "words": args.words,
                                                  "identifiers": args.identifiers, "typed": args.typed}, results=rows, notes=[]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
