#!/usr/bin/env python3
"""attnmt's Argos package in the real consumers, against attnmt's own CTranslate2 engine
(docs/interop.md, "Argos Translate"): the same text and BLEU on Multi30k's test_2016_flickr,
paragraphs, the packaged splitter against attnmt's own, and LibreTranslate serving the package.

    benchmarks/interop/argos_compare.py --run runs/multi30k_transformer [--sentences 1000] \\
        [--json argos.json] [--work /tmp/argos-compare] [--no-libretranslate]

The run is exported twice: `attnmt export --quantization int8` (attnmt's engine) and `attnmt export
--format argos` (int8). argostranslate 1.11.0 and LibreTranslate 1.9.6 run from PyPI in their own
environments (benchmarks/interop/argos_env.sh), offline (benchmarks/interop/consumers.py).
argostranslate decodes with translate_batch(beam_size=max(1, ARGOS_BEAM_SIZE=4),
length_penalty=0.2, replace_unknowns=True, max_batch_size=32 tokens); attnmt's engine is asked
for the same: beam 4, length penalty 0.2, unknown words replaced (its length penalty is the GNMT
one, CTranslate2's is length^0.2: the rows say how often that changes a translation), and again
greedy against ARGOS_BEAM_SIZE=1. Paragraphs: four test sentences joined by a space, translated
whole by argostranslate (its splitter: the package's minisbd/de.onnx) and by attnmt
(split_sentences, its own splitter).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.common import command, environment, make_report, write_report
from benchmarks.interop import consumers


def same(a: list[str], b: list[str]) -> float:
    return round(100.0 * sum(x == y for x, y in zip(a, b)) / max(1, len(a)), 2)


def bleu(hyps: list[str], refs: list[str]) -> float:
    import sacrebleu

    return round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)


def paragraphs_of(sentences: list[str], size: int) -> list[str]:
    return [" ".join(sentences[i:i + size]) for i in range(0, len(sentences) - size + 1, size)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="a Transformer run with a joint sentencepiece vocabulary")
    parser.add_argument("--sentences", type=int, default=1000, help="test_2016_flickr sentences (default: all 1000)")
    parser.add_argument("--json", default=None, help="write the report here")
    parser.add_argument("--work", default=None, help="folder for the exports and the consumers' homes")
    parser.add_argument("--no-libretranslate", action="store_true")
    args = parser.parse_args(argv)

    from attnmt.data.corpus import load_multi30k
    from attnmt.data.sentences import split_sentences
    from attnmt.engines.ctranslate2_export import export_run
    from attnmt.interop.argos.export import export_argos
    from attnmt.interop.argos.splitter import compile_rules, splitter_onnx
    from attnmt.translator import Translator

    work = Path(args.work or tempfile.mkdtemp(prefix="argos-compare-"))
    work.mkdir(parents=True, exist_ok=True)
    test = load_multi30k("test_2016_flickr", "de", "en")
    sources, refs = test.src[:args.sentences], test.tgt[:args.sentences]
    ct2 = work / "ct2"
    if not ct2.exists():
        export_run(args.run, ct2, quantization="int8")
    package = work / "de_en.argosmodel"
    if not package.exists():
        export_argos(args.run, package)
    engine = Translator.load(ct2, engine="ctranslate2")
    import dataclasses

    # argostranslate gives the model the text as typed: attnmt's own reading of it (a model's lexicon:
    # search.restore_case, correct_spelling, complete_final_mark, short_phrases, where the config has them) is off
    as_typed = {k: False for k in ("restore_case", "correct_spelling", "complete_final_mark", "short_phrases")
                if hasattr(engine.cfg.search, k)}
    engine.cfg = dataclasses.replace(engine.cfg, search=dataclasses.replace(engine.cfg.search, **as_typed))
    python = consumers.env_python("argostranslate")
    results, notes = [], []

    def row(kind, ours, theirs, seconds_ours, seconds_theirs, **extra):
        found = {"kind": kind, "sentences": len(ours), "same_text_pct": same(ours, theirs),
                 "bleu_attnmt": bleu(ours, refs[:len(ours)]) if kind.startswith("sentences") else None,
                 "bleu_argos": bleu(theirs, refs[:len(theirs)]) if kind.startswith("sentences") else None,
                 "seconds_attnmt": round(seconds_ours, 2), "seconds_argos": round(seconds_theirs, 2), **extra}
        results.append(found)
        print(found, flush=True)
        return found

    from attnmt.decoding.inputs import LENGTH_BOUND_NOTE

    own_search = engine.engine.search_cfg
    # argostranslate's output budget: CTranslate2's default max_decoding_length, 256 tokens a sentence
    argos_search = dataclasses.replace(own_search, max_len_ratio=0.0, max_len_offset=256)
    for label, beam, settings in (("sentences, beam 4 (argostranslate's default)", 4, {}),
                                  ("sentences, greedy (ARGOS_BEAM_SIZE=1)", 1, {"ARGOS_BEAM_SIZE": "1"})):
        theirs = consumers.argos_translate(python, package, "de", "en", sources, home=work / f"home-{beam}",
                                           settings=settings)
        for budget, search in (("attnmt's budget (2 x source + 10 tokens)", own_search),
                               ("argostranslate's budget (256 tokens)", argos_search)):
            engine.engine.search_cfg = search
            start = time.perf_counter()
            found = engine.translate(sources, beam_size=beam, length_penalty=0.2, replace_unk=True)
            seconds = time.perf_counter() - start
            ours = [r.text for r in found]
            cut = sum(LENGTH_BOUND_NOTE in r.warnings and a != b for r, a, b in zip(found, ours, theirs["outputs"]))
            row(f"{label}, {budget}", ours, theirs["outputs"], seconds, theirs["seconds"],
                sentencizer=theirs["sentencizer"], downloaded=consumers.downloaded(work / f"home-{beam}"),
                differing_at_attnmts_budget=cut,
                differing=[(s, a, b) for s, a, b in zip(sources, ours, theirs["outputs"]) if a != b][:10])
        engine.engine.search_cfg = own_search

    paragraphs = paragraphs_of(sources, 4)
    engine.engine.search_cfg = argos_search
    start = time.perf_counter()
    ours = [r.text for r in engine.translate(paragraphs, beam_size=4, length_penalty=0.2, replace_unk=True,
                                             split_sentences=True)]
    seconds = time.perf_counter() - start
    engine.engine.search_cfg = own_search
    theirs = consumers.argos_translate(python, package, "de", "en", paragraphs, home=work / "home-p")
    sentence_wise = consumers.argos_translate(python, package, "de", "en", sources[:4 * len(paragraphs)],
                                              home=work / "home-s")["outputs"]
    joined = sum(t == " ".join(sentence_wise[4 * i:4 * i + 4]) for i, t in enumerate(theirs["outputs"]))
    # whole: as many sentences come back as went in (attnmt's splitter on the English)
    kept = sum(len(split_sentences(t, "en")) >= len(split_sentences(p, "de"))
               for p, t in zip(paragraphs, theirs["outputs"]))
    row("paragraphs of 4 sentences, beam 4, argostranslate's budget", ours, theirs["outputs"], seconds,
        theirs["seconds"], whole_pct=round(100.0 * kept / max(1, len(paragraphs)), 2),
        as_its_sentences_pct=round(100.0 * joined / max(1, len(paragraphs)), 2),
        differing=[(p, a, b) for p, a, b in zip(paragraphs, ours, theirs["outputs"]) if a != b][:10])

    model = work / "de.onnx"
    model.write_bytes(splitter_onnx(compile_rules("de")))
    for label, texts, lang in (("splitter: Multi30k paragraphs of 4", paragraphs, "de"),) + tuple(
            (f"splitter: attnmt's hard cases ({lang})", [t for t, _ in cases], lang)
            for lang, cases in load_hard_cases().items() if lang in ("de", "en")):
        if lang != "de":
            model = work / f"{lang}.onnx"
            model.write_bytes(splitter_onnx(compile_rules(lang)))
        found = consumers.minisbd_split(python, model, texts, home=work / f"home-split-{lang}")
        attnmt = [[t[a:b] for a, b in split_sentences(t, lang)] for t in texts]
        agree = sum(a == b for a, b in zip(found["outputs"], attnmt))
        results.append({"kind": label, "texts": len(texts), "same_split_pct": round(100.0 * agree / len(texts), 2),
                        "seconds_minisbd": round(found["seconds"], 2),
                        "differing": [(t, a, b) for t, a, b in zip(texts, found["outputs"], attnmt) if a != b][:10]})
        print(results[-1], flush=True)

    if not args.no_libretranslate:
        from libretranslatepy import LibreTranslateAPI

        lt = consumers.env_python("libretranslate")
        count = min(100, len(sources))
        expected = [r.text for r in engine.translate(sources[:count], beam_size=4, length_penalty=0.2,
                                                     replace_unk=True)]
        with consumers.libretranslate(lt, [package], ["de", "en"], home=work / "home-lt") as url:
            api = LibreTranslateAPI(url)
            start = time.perf_counter()
            served = [api.translate(text, "de", "en") for text in sources[:count]]
            seconds = time.perf_counter() - start
        results.append({"kind": "LibreTranslate 1.9.6 over HTTP (libretranslatepy)", "sentences": count,
                        "same_text_pct": same(expected, served), "seconds": round(seconds, 2),
                        "downloaded": consumers.downloaded(work / "home-lt")})
        print(results[-1], flush=True)
    report = make_report("argos_compare", command=command(__file__, argv), environment=environment("cpu"),
                         settings={"run": str(args.run), "sentences": len(sources), "work": str(work),
                                   "attnmt_search_off": sorted(as_typed)},
                         results=results, notes=notes)
    if args.json:
        write_report(args.json, report)
    return 0


def load_hard_cases() -> dict:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "tests" / "support" / "sentence_cases.py"
    spec = importlib.util.spec_from_file_location("sentence_cases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.HARD_CASES


if __name__ == "__main__":
    raise SystemExit(main())
