"""CTranslate2 and an imported Marian model: attnmt's export translates and scores as the native
engine does; CTranslate2's own converter (TransformersConverter) writes the same weights, and its
outputs differ from ours only through its `start_from_zero_embedding` decoder setting (shown by
turning that setting on in our export: the two then translate alike)."""

from __future__ import annotations

import pytest

from support import parts  # noqa: E402
parts.require_transformers()  # skips the module without the extra attnmt[hf]
ctranslate2 = pytest.importorskip("ctranslate2")

from support import marian_toy  # noqa: E402

from attnmt.engines.ctranslate2_export import build_spec, export_run  # noqa: E402
from attnmt.run_dir import RunDir  # noqa: E402
from attnmt.translator import Translator  # noqa: E402

SENTENCES = marian_toy.SENTENCES + [src for src, _ in marian_toy.toy.copy_pairs(12, seed=97)]
TARGETS = [tgt for _, tgt in marian_toy.toy.copy_pairs(len(SENTENCES), seed=96)]


def test_export_translates_and_scores_as_the_native_engine(marian_run, tmp_path):
    export_run(marian_run, tmp_path / "ct2")
    native = Translator.load(marian_run, device="cpu")
    ct2 = Translator.load(tmp_path / "ct2", engine="ctranslate2")
    for beam in (1, 4):
        ours = native.translate(SENTENCES, beam_size=beam, length_penalty=0.0)
        theirs = ct2.translate(SENTENCES, beam_size=beam, length_penalty=0.0)
        assert [r.tokens for r in theirs] == [r.tokens for r in ours]
    for a, b in zip(native.score(SENTENCES, TARGETS), ct2.score(SENTENCES, TARGETS)):
        assert abs(a.log_prob - b.log_prob) < 1e-4


def test_ctranslate2_converter_differs_only_by_its_zero_start(marian_folder, marian_run, tmp_path):
    from ctranslate2.converters import TransformersConverter

    TransformersConverter(str(marian_folder)).convert(str(tmp_path / "converter"))
    run = RunDir(marian_run)
    pipeline = run.pipeline()
    spec = build_spec(run.load_model(), pipeline)
    spec.decoder.start_from_zero_embedding = True  # the converter's setting for Marian
    spec.validate()
    spec.optimize(quantization="float32")
    (tmp_path / "zero-start").mkdir()
    spec.save(str(tmp_path / "zero-start"))
    # one thread each, as attnmt's engine loads them: CTranslate2's default (intra_threads=0, every
    # core) starts an OpenMP pool in this process, and the torchrun ranks later forked from it hang
    converter = ctranslate2.Translator(str(tmp_path / "converter"), intra_threads=1)
    zero_start = ctranslate2.Translator(str(tmp_path / "zero-start"), intra_threads=1)
    ours = Translator.load(marian_run, device="cpu")  # transformers' numbers (test_marian_exactness.py)
    sources = [pipeline.src_vocab.decode(pipeline.encode_source(s), strip_special=False) for s in SENTENCES]
    options = dict(beam_size=4, length_penalty=0.0, return_scores=True, max_decoding_length=30)
    a = converter.translate_batch(sources, **options)
    b = zero_start.translate_batch(sources, suppress_sequences=[["<pad>"]], **options)
    assert [r.hypotheses[0] for r in a] == [r.hypotheses[0] for r in b]
    assert max(abs(x.scores[0] - y.scores[0]) for x, y in zip(a, b)) < 1e-3  # the converter drops <pad>'s row
    # and that setting is what makes the converter's export score otherwise than transformers and attnmt
    targets = [pipeline.tgt_vocab.decode(pipeline.encode_target(t)) for t in TARGETS]
    theirs = [sum(r.log_probs) for r in converter.score_batch(sources, targets)]
    native = [r.log_prob for r in ours.score(SENTENCES, TARGETS)]
    assert max(abs(x - y) for x, y in zip(theirs, native)) > 1e-2
