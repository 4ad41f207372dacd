"""Steering and inspecting through both engines (issue 22): word alignments and target prefixes
give the same results from the native engine and from a CTranslate2 export of the same run."""

import json

import pytest

pytest.importorskip("ctranslate2")

from attnmt.cli import main  # noqa: E402
from attnmt.commands.translate import pharaoh  # noqa: E402
from attnmt.engines.ctranslate2_export import export_run  # noqa: E402
from attnmt.translator import Translator  # noqa: E402

pytestmark = pytest.mark.learned  # asserts what a small training learned (make test-seeds)


@pytest.fixture(scope="module")
def trained_pair(prenorm_run, tmp_path_factory):
    """The trained reversal Transformer, natively and exported (attention of the last layer)."""
    out = tmp_path_factory.mktemp("steer") / "ct2"
    export_run(prenorm_run, out)
    return Translator.load(prenorm_run, device="cpu"), Translator.load(out, engine="ctranslate2"), out


def _test_sources(run_dir, n=30):
    corpus = json.loads((run_dir / "config.json").read_text())["data"]["test"]
    return open(corpus + ".de", encoding="utf-8").read().splitlines()[:n]


def test_alignments_agree_between_engines(trained_pair, prenorm_run):
    native, ct2, _ = trained_pair
    sources = _test_sources(prenorm_run)
    a = native.translate(sources, beam_size=1, layer=-1, alignments=True)  # the exported layer
    b = ct2.translate(sources, beam_size=1, alignments=True)
    assert [r.tokens for r in a] == [r.tokens for r in b]
    assert [r.alignment for r in a] == [r.alignment for r in b]


def test_cli_alignments_with_ctranslate2(trained_pair, prenorm_run, tmp_path):
    _, ct2, export = trained_pair
    src = tmp_path / "in.de"
    src.write_text("\n".join(_test_sources(prenorm_run, 5)) + "\n")
    out = tmp_path / "out.en"
    assert main(["translate", str(export), "--engine", "ctranslate2", "-i", str(src), "-o", str(out),
                 "--alignments", "--beam", "1"]) == 0
    results = ct2.translate(_test_sources(prenorm_run, 5), beam_size=1, alignments=True)
    assert out.read_text().splitlines() == [f"{r.text}\t{pharaoh(r.alignment)}" for r in results]


@pytest.mark.parametrize("beam", [1, 4])
def test_prefixes_agree_between_engines(trained_pair, prenorm_run, beam):
    native, ct2, _ = trained_pair
    sources = _test_sources(prenorm_run)
    # prefixes: the first one or two words of the reversed source's translation, some of them wrong
    prefixes = [None if i % 4 == 0 else " ".join(["dog", "house"][: 1 + i % 2]) for i in range(len(sources))]
    # alpha 0: the two beam searches stop alike only without a length penalty (engines/ctranslate2.py).
    # With alpha 1 and beam 4 one trained toy model gave a sentence where the native search stopped
    # before a longer hypothesis CTranslate2 found (-0.753 against -0.768). Even at alpha 0 they can
    # stop apart on a near tie: training seed 3 gave one such sentence of 30 at beam 4 (seeds 1, 2:
    # none), so greedy must agree on every sentence and a beam on nearly all.
    a = native.translate(sources, beam_size=beam, target_prefix=prefixes, layer=-1, length_penalty=0.0)
    b = ct2.translate(sources, beam_size=beam, target_prefix=prefixes, length_penalty=0.0)
    for prefix, x, y in zip(prefixes, a, b):
        if prefix:
            assert x.tokens[:len(prefix.split())] == prefix.split()
            assert y.tokens[:len(prefix.split())] == prefix.split()
    same = [x.tokens == y.tokens for x, y in zip(a, b)]
    assert sum(same) >= (1.0 if beam == 1 else 0.9) * len(sources), same
    for x, y, s in zip(a, b, same):
        if s:
            assert x.score == pytest.approx(y.score, abs=1e-3)


def test_token_log_probs_agree_between_engines(trained_pair, prenorm_run):
    native, ct2, _ = trained_pair
    sources = _test_sources(prenorm_run, 10)
    targets = [r.text for r in native.translate(sources, beam_size=1)]
    for a, b in zip(native.score(sources, targets), ct2.score(sources, targets)):
        assert a.token_log_probs == pytest.approx(b.token_log_probs, abs=1e-4)
        assert a.attention.shape == (a.num_tokens, len(a.source_tokens)) and b.attention is None
