#!/usr/bin/env python3
"""What Moses tokenization before subwords changes: the multimodal MT papers (Wu et al. 2021 and
others) train on Multi30k text lowercased and Moses-tokenized before BPE; attnmt's sentencepiece
reads the text as it is. Both ways are run on the same training sentences with attnmt's own pieces
(data.tokenizers.MosesTokenizer, train_sentencepiece) and compared: how often Moses'
detokenizer gives the sentence back, and how often the two subword models cut a sentence into
the same pieces once word-boundary marks are set aside (a raw-text model writes "mann" "." where
the other writes "mann" "▁."; which of the two the text had is a matter of detokenizing).

    benchmarks/quality/moses_before_bpe.py [--pair en-de] [--vocab-size 8000] [--cased] [--sentences N] [--json PATH] [--quiet]

No training: a few seconds on one core.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from attnmt.data.corpus import multi30k_path, read_lines
from attnmt.data.tokenizers import MosesTokenizer, SentencePieceTokenizer, train_sentencepiece
from benchmarks.common import command, environment, make_report, run_main

BOUNDARY = "\u2581"  # sentencepiece's word-boundary mark


def pieces_without_boundaries(tokenizer: SentencePieceTokenizer, text: str) -> tuple[str, ...]:
    """The pieces of `text` with the word-boundary mark taken off (a lone mark dropped)."""
    stripped = (piece.replace(BOUNDARY, "") for piece in tokenizer.tokenize(text))
    return tuple(piece for piece in stripped if piece)


def compare(texts: dict[str, list[str]], vocab_size: int, lowercase: bool, cache_dir: Path) -> list[dict]:
    """One row per language: Moses' round trip, tokens per sentence, and the two subword models'
    agreement; the subword models are joint over the languages, as attnmt's spm_joint."""
    moses = {lang: MosesTokenizer(lang) for lang in texts}
    raw = {lang: [s.lower() if lowercase else s for s in sents] for lang, sents in texts.items()}
    tokenized = {lang: [" ".join(moses[lang].tokenize(s)) for s in sents] for lang, sents in raw.items()}
    models = {}
    for name, corpus in (("raw", raw), ("moses", tokenized)):
        model = train_sentencepiece([s for sents in corpus.values() for s in sents], vocab_size=vocab_size,
                                    cache_dir=cache_dir / name)
        models[name] = SentencePieceTokenizer(model)
    rows = []
    for lang in texts:
        raw_pieces = [pieces_without_boundaries(models["raw"], s) for s in raw[lang]]
        moses_pieces = [pieces_without_boundaries(models["moses"], s) for s in tokenized[lang]]
        n = len(raw[lang])
        rows.append({
            "kind": "segmentation", "lang": lang, "sentences": n, "lowercase": lowercase, "vocab_size": vocab_size,
            "moses_round_trip": round(sum(moses[lang].detokenize(t.split()) == s
                                          for t, s in zip(tokenized[lang], raw[lang])) / n, 4),
            "words_per_sentence": round(statistics.mean(len(s.split()) for s in raw[lang]), 2),
            "moses_tokens_per_sentence": round(statistics.mean(len(t.split()) for t in tokenized[lang]), 2),
            "pieces_per_sentence_raw": round(statistics.mean(map(len, raw_pieces)), 2),
            "pieces_per_sentence_moses": round(statistics.mean(map(len, moses_pieces)), 2),
            "same_pieces": round(sum(a == b for a, b in zip(raw_pieces, moses_pieces)) / n, 4),
        })
    return rows


def run_bench(args, argv) -> dict:
    """Read the pair's training text, compare both ways; the report."""
    texts = {lang: read_lines(multi30k_path("train", lang))[: args.sentences] for lang in args.pair.split("-")}
    with tempfile.TemporaryDirectory(prefix="moses_before_bpe-") as tmp:
        rows = compare(texts, args.vocab_size, not args.cased, Path(tmp))
    return make_report("moses_before_bpe", command=command(__file__, argv), environment=environment(),
                       settings={"pair": args.pair, "vocab_size": args.vocab_size, "lowercase": not args.cased,
                                 "sentences": args.sentences}, results=rows, notes=[])


def format_table(report: dict) -> str:
    return "\n".join(
        f"{row['lang']}: {row['sentences']} sentences; Moses detokenizes {100 * row['moses_round_trip']:.2f}% "
        f"back; words {row['words_per_sentence']}, Moses tokens {row['moses_tokens_per_sentence']}, "
        f"pieces raw {row['pieces_per_sentence_raw']} / Moses first {row['pieces_per_sentence_moses']}; "
        f"the same pieces in {100 * row['same_pieces']:.2f}% of sentences" for row in report["results"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="moses_before_bpe", description=__doc__.split("\n\n")[0])
    p.add_argument("--pair", default="en-de", help="two Multi30k languages, SRC-TGT (default en-de)")
    p.add_argument("--vocab-size", type=int, default=8000, help="joint sentencepiece size (default 8000)")
    p.add_argument("--cased", action="store_true", help="keep case (default: lowercased, as the papers)")
    p.add_argument("--sentences", type=int, default=None, help="only the first N training sentences")
    p.add_argument("--json", default="moses_before_bpe.json", metavar="PATH", help="the report ('': none)")
    p.add_argument("--quiet", action="store_true", help="no table, warnings only")
    args = p.parse_args(argv)
    langs = args.pair.split("-")
    if len(langs) != 2 or not all(langs) or langs[0] == langs[1]:
        print(f"moses_before_bpe: error: --pair {args.pair!r} must be two different languages, SRC-TGT",
              file=sys.stderr)
        return 2
    if args.vocab_size < 100 or (args.sentences is not None and args.sentences < 1):
        print("moses_before_bpe: error: --vocab-size must be >= 100 and --sentences >= 1", file=sys.stderr)
        return 2
    return run_main("moses_before_bpe", args, argv, run_bench, format_table)


if __name__ == "__main__":
    raise SystemExit(main())
