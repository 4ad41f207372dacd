#!/usr/bin/env python
"""Accuracy of py3langid and lingua on Multi30k test_2016_flickr in de, fr, cs and en, each
identifier restricted to those four languages (docs/serving.md, POST /detect). Needs ATTNMT_DATA
(the folder of test_2016_flickr.LANG.gz) and both packages:

    benchmarks/speed/langid_multi30k.py {py3langid,lingua} [low]     # WORDS=N: first N words only
"""
import gzip, os, time, sys, resource
langs = ["de", "fr", "cs", "en"]
data = {l: gzip.open(os.path.join(os.environ["ATTNMT_DATA"], f"test_2016_flickr.{l}.gz"), "rt", encoding="utf-8").read().splitlines() for l in langs}
W = int(os.environ.get("WORDS", "0"))
if W: data = {l: [" ".join(s.split()[:W]) for s in v] for l, v in data.items()}
which = sys.argv[1]
t0 = time.perf_counter()
if which == "py3langid":
    from py3langid.langid import LanguageIdentifier, MODEL_FILE
    ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    ident.set_languages(langs)
    guess = lambda s: ident.classify(s)[0]
else:
    from lingua import Language, LanguageDetectorBuilder
    m = {"de": Language.GERMAN, "fr": Language.FRENCH, "cs": Language.CZECH, "en": Language.ENGLISH}
    det = LanguageDetectorBuilder.from_languages(*m.values()).with_preloaded_language_models().build()
    inv = {v: k for k, v in m.items()}
    guess = lambda s: inv.get(det.detect_language_of(s))
    if len(sys.argv) > 2:
        det = LanguageDetectorBuilder.from_languages(*m.values()).with_preloaded_language_models().with_low_accuracy_mode().build()
load = time.perf_counter() - t0
t0 = time.perf_counter()
right = {l: sum(guess(s) == l for s in data[l]) for l in langs}
secs = time.perf_counter() - t0
n = sum(len(v) for v in data.values())
print(which, sys.argv[2:], f"load {load:.2f}s", f"classify {n} in {secs:.1f}s", {l: f"{right[l]/len(data[l]):.4f}" for l in langs},
      f"overall {sum(right.values())/n:.4f}", f"maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f} MiB")
