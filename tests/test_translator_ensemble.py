"""Ensembles through the Python API (Translator.load of several runs): an ensemble of one run is
the run, of a run with itself the run; two differently seeded toy models score at least as well
as the worse; runs whose vocabularies differ, and the CTranslate2 engine, are refused."""

import numpy as np
import pytest
import torch

from attnmt.cli import main
from attnmt.data.corpus import corpus_spec, load_corpus
from attnmt.errors import AttnmtError
from attnmt.translator import Translator

from support import toy

SENTENCES = ["Hund katze haus .", "Rot blau .", "Mann frau kind ball wasser .", "Baum .", ""]


def assert_same_translations(a, b, *, exact: bool):
    assert [r.text for r in a] == [r.text for r in b]
    for ra, rb in zip(a, b):
        assert [alt.tokens for alt in ra.alternatives] == [alt.tokens for alt in rb.alternatives]
        scores_a, scores_b = [alt.score for alt in ra.alternatives], [alt.score for alt in rb.alternatives]
        if exact:
            assert scores_a == scores_b
            np.testing.assert_array_equal(ra.attention, rb.attention)
        else:
            np.testing.assert_allclose(scores_a, scores_b, atol=1e-4)
            np.testing.assert_allclose(ra.attention, rb.attention, atol=1e-5)


@pytest.mark.parametrize("beam,n_best", [(1, 1), (3, 3)])
def test_an_ensemble_of_one_run_and_of_a_run_with_itself_is_the_run(toy_seed_runs, beam, n_best):
    run = toy_seed_runs[0]
    alone = Translator.load(run, device="cpu")
    expected = alone.translate(SENTENCES, beam_size=beam, n_best=n_best)
    one = Translator.load([run], device="cpu")
    assert_same_translations(one.translate(SENTENCES, beam_size=beam, n_best=n_best), expected, exact=True)
    twice = Translator.load([run, run], device="cpu")
    assert_same_translations(twice.translate(SENTENCES, beam_size=beam, n_best=n_best), expected, exact=False)
    targets = [r.text for r in expected]
    np.testing.assert_allclose([s.log_prob for s in twice.score(SENTENCES, targets)],
                               [s.log_prob for s in alone.score(SENTENCES, targets)], atol=1e-4)


def test_two_seeds_together_score_at_least_as_well_as_the_worse(toy_seed_runs):
    members = [Translator.load(run, device="cpu") for run in toy_seed_runs]
    ensemble = Translator.load(toy_seed_runs, device="cpu")
    reports = [t.evaluate("test", beam_size=3) for t in members]
    together = ensemble.evaluate("test", beam_size=3)
    assert together["bleu"] >= min(r["bleu"] for r in reports)
    assert together["chrf"] >= min(r["chrf"] for r in reports)
    # log of the mean probability >= mean log-probability (Jensen), sentence by sentence
    test = load_corpus(corpus_spec(ensemble.cfg.data), "test")
    member_logp = np.array([[s.log_prob for s in t.score(test.src, test.tgt)] for t in members])
    ensemble_logp = np.array([s.log_prob for s in ensemble.score(test.src, test.tgt)])
    assert np.all(ensemble_logp >= member_logp.mean(axis=0) - 1e-4)
    assert together["ppl"] <= np.exp(np.mean([np.log(r["ppl"]) for r in reports])) + 0.01


def test_attention_is_the_members_mean(toy_seed_runs):
    ensemble = Translator.load(toy_seed_runs, device="cpu")
    result = ensemble.translate(["Hund katze ."], beam_size=1)[0]
    np.testing.assert_allclose(result.attention.sum(axis=1), 1.0, rtol=1e-5)
    members = [Translator.load(run, device="cpu").model for run in toy_seed_runs]
    ids = [2] + ensemble.pipeline.tgt_vocab.encode(result.tokens)  # <bos> and the tokens, teacher forced
    src = torch.tensor([ensemble.pipeline.encode_source("Hund katze .")])
    mask, lengths, tgt_in = torch.ones_like(src, dtype=torch.bool), torch.tensor([src.shape[1]]), torch.tensor([ids])
    weights = [m(src, mask, lengths, tgt_in).attention[0] for m in members]  # (tgt_len, src_len)
    mean = (sum(weights) / 2).detach().numpy()[: len(result.tokens)]  # one row per token shown
    np.testing.assert_allclose(result.attention, mean, atol=1e-5)


def test_runs_with_different_vocabularies_are_refused_naming_the_difference(toy_seed_runs, tmp_path):
    config = toy_seed_runs[0].parent / "toy.yaml"
    other = tmp_path / "small_vocab"
    overrides = ["data.max_vocab=12", "train.epochs=1", "data.train_subset=32", "train.eval_max_sentences=4"]
    assert main(["train", str(config), "--run-dir", str(other)] + toy.sets(overrides)) == 0
    with pytest.raises(AttnmtError, match=r"cannot ensemble .*run-seed1 and .*small_vocab: their target vocabularies "
                                          r"differ \(\d+ and 16 tokens; .*\)"):
        Translator.load([toy_seed_runs[0], other], device="cpu")


def test_the_ctranslate2_engine_refuses_an_ensemble(toy_seed_runs):
    with pytest.raises(AttnmtError, match="an ensemble of 2 models needs the native engine"):
        Translator.load(toy_seed_runs, engine="ctranslate2")
