#!/usr/bin/env python3
"""Case read back: attnmt's lexicon (data/lexicon.py) against Moses' truecaser (sacremoses'
MosesTruecaser, the recaser of Moses' scripts), both counted on the same training sentences, on
held-out sentences typed in small letters or in capitals; each word of the output against the
sentence as written (docs/results.md, "What people type"). No model is involved.

    benchmarks/quality/truecasing.py [--split test_2016_flickr] [--lang de] [--json report.json]

Moses' truecaser gets what it is made for: the text tokenized by Moses' tokenizer, in small
letters (it reads a word by its small letters either way), then each sentence's first word
upper case as the text is written (a truecaser writes a sentence's first word in its own case;
detruecasing capitalizes it). attnmt's lexicon reads the typed text itself, slips left as they
are (`correct_spelling` off: only the case is compared). Scored: the share of words written as
in the original, of all words and of the words each got wrong, and the share of sentences with
every word right.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.common import command, environment, make_report, write_report  # noqa: E402

WORD = re.compile(r"[^\W\d_]+")


def words(text: str) -> list[str]:
    return WORD.findall(text)


def moses_reader(train: list[str], lang: str):
    """A function from a typed text to Moses' truecaser's reading of it, capitalized at sentence starts."""
    from sacremoses import MosesTokenizer, MosesTruecaser

    tokenizer = MosesTokenizer(lang=lang)
    truecaser = MosesTruecaser()
    truecaser.train([tokenizer.tokenize(s, escape=False) for s in train], possibly_use_first_token=False)

    def read(text: str) -> str:
        tokens = truecaser.truecase(" ".join(tokenizer.tokenize(text.lower(), escape=False)))
        out, start = [], True
        for token in tokens:
            out.append(token[:1].upper() + token[1:] if start and WORD.match(token) else token)
            if WORD.match(token):
                start = False
            if token in (".", "!", "?"):
                start = True
        return " ".join(out)

    return read


def attnmt_reader(train: list[str]):
    from attnmt.data.lexicon import Lexicon

    lexicon = Lexicon.from_sentences(s.split() for s in train)
    return lambda text: lexicon.normalize(text, spelling=False).text


def score(outputs: list[str], originals: list[str]) -> dict:
    right = total = whole = 0
    for output, original in zip(outputs, originals):
        got, want = words(output), words(original)
        if len(got) != len(want):  # a tokenizer that split a word differently: compare in order as far as both go
            want = want[:len(got)]
        hits = sum(g == w for g, w in zip(got, want))
        right += hits
        total += len(want)
        whole += hits == len(want)
    return {"words_right": round(right / total, 4), "words_wrong": total - right,
            "sentences_right": round(whole / len(originals), 4)}


def run(args) -> dict:
    from attnmt.data.corpus import corpus_spec, load_corpus
    from attnmt.config import DataConfig

    spec = corpus_spec(DataConfig(src_lang=args.lang, tgt_lang="en" if args.lang != "en" else "de"))
    train = load_corpus(spec, "train").src
    held = load_corpus(spec, args.split).src
    readers = {}
    for name, make in (("Moses truecaser (sacremoses)", lambda: moses_reader(train, args.lang)),
                       ("attnmt lexicon", lambda: attnmt_reader(train))):
        start = time.perf_counter()
        readers[name] = (make(), time.perf_counter() - start)
    results = []
    for typed, change in (("lowercase", str.lower), ("uppercase", str.upper)):
        texts = [change(s) for s in held]
        for name, (read, trained) in readers.items():
            start = time.perf_counter()
            outputs = [read(t) for t in texts]
            row = {"typed": typed, "reader": name, **score(outputs, held),
                   "seconds": round(time.perf_counter() - start, 2), "count_seconds": round(trained, 2)}
            results.append(row)
            print(f"{typed:<10} {name:<30} words right {row['words_right']:.2%} ({row['words_wrong']} wrong), "
                  f"sentences right {row['sentences_right']:.2%}, {row['seconds']} s", flush=True)
    return make_report("truecasing", command=command(__file__, args.argv), environment=environment(),
                       settings={"split": args.split, "lang": args.lang, "train_sentences": len(train),
                                 "sentences": len(held)}, results=results)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--lang", default="de", help="the language of Multi30k read (its train counted)")
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    args = parser.parse_args(argv)
    args.argv = argv if argv is not None else sys.argv[1:]
    report = run(args)
    if args.json:
        write_report(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
