"""Forced decoding in the open (issue 22 item 4): Translator.score gives each token's
log-probability and the attention, and they agree with what search reports for its own output."""

import numpy as np
import pytest

from attnmt.translator import Translator


@pytest.mark.parametrize("model", ["toy_run"])
def test_per_token_log_probs_and_attention_match_greedy_search(request, model):
    translator = Translator.load(request.getfixturevalue(model), device="cpu")
    sources = ["Hund rot haus .", "Katze blau .", "Mann frau kind ball ."]
    found = translator.translate(sources, beam_size=1)
    scored = translator.score(sources, [r.text for r in found])
    for result, score in zip(found, scored):
        assert len(score.token_log_probs) == score.num_tokens == len(result.tokens) + 1
        assert sum(score.token_log_probs) == pytest.approx(score.log_prob, abs=1e-5)
        assert score.log_prob == pytest.approx(result.score, abs=1e-4)  # greedy: score = log_prob
        assert all(lp <= 0 for lp in score.token_log_probs)
        assert score.attention.shape == (score.num_tokens, len(score.source_tokens))
        np.testing.assert_allclose(score.attention.sum(axis=1), 1.0, atol=1e-5)
        np.testing.assert_allclose(score.attention[:len(result.tokens)], result.attention, atol=1e-5)


def test_an_empty_source_has_no_token_scores(toy_run):
    [score] = Translator.load(toy_run, device="cpu").score([""], ["Dog ."])
    assert np.isnan(score.log_prob) and score.token_log_probs == [] and score.attention.shape == (0, 0)
