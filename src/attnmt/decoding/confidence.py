"""How likely a translation is to be good, from what the model already knows: features of each
result, and the map from them to a probability that `attnmt calibrate` fits on held-out data.

    features = result_features(result, lexicon)          # name -> value, no reference needed
    calibration = Calibration.fit(rows, chrfs)            # on the model's validation set
    calibration.confidence(features)                     # P(sentence chrF >= calibration.threshold)
    uncalibrated_confidence(features)                    # without a calibration: the mean token probability

The features (glass-box quality estimation: Fomicheva et al., TACL 2020; Bergamot's log-probability
QE, mozilla/translations inference/src/translator/quality_estimator.cpp):
    mean_logprob      the translation's log-probability per token (<eos> included)
    min_logprob       its least likely token's log-probability (the native engine; else the mean)
    beam_margin       the hypothesis' score minus the best other one's (the best's: over the second;
                      0 without a second)
    beam_agreement    the share of its words the other hypotheses hold (1 without others)
    length_ratio      output tokens / source tokens, as log
    attention_entropy the mean entropy of the output tokens' attention, over log(source tokens)
    coverage          decoding/coverage.py's figure (1 without attention)
    unknown_source    the share of the source's tokens that are no word of its training data (the
                      lexicon; a subword model's pieces count each: a rare word in pieces is unknown
                      there), or of <unk> tokens: a text in another language, a name, noise
    adequacy          the share of the source's words with a one-word entry in the phrase table
                      (data/phrases.py) of which the output holds a translation (every word of one of
                      that entry's); 1 without a table or such a word: a word left out or mistranslated
    cut               the input or the output was cut at a bound

"Good" is a sentence chrF at or above `threshold`: the median of the model's own validation
chrF (so half of its own held-out translations are good), a line each model draws for itself.
The map is a ridge regression of sentence chrF on the standardized features, then a logistic
curve from the predicted chrF to the probability of good (Platt scaling): the regression ranks,
the curve calibrates (predicted 0.3 means 30% of such translations were good on held-out data).
The curve is fitted on out-of-fold predictions (each fifth of the fit's sentences predicted by a
regression fitted on the other four), so it sees the regression as it reads sentences it never
fitted, not its own, slightly too good, in-sample fit. A curve, not the isotonic steps of format 1
(still read): the steps overfit a thousand sentences and tie their rankings within a step
(docs/results.md, "Confidence": calibration error 0.067 -> 0.047 on the same Transformer's test
set). A feature is read within the range it had in the fit (`low`, `high`): the regression is not
extrapolated. An n-best alternative's margin is negative, where every translation's the fit saw
is not, and a negative weight on it would otherwise make the worse alternative the more confident.

Shapes: none (one result's scalars).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from attnmt.data.phrases import PLAIN
from attnmt.decoding.alignment import SPM_WORD_START, token_texts
from attnmt.errors import DataError
from attnmt.files import read_json, write_json

FEATURES = ("mean_logprob", "min_logprob", "beam_margin", "beam_agreement", "length_ratio", "attention_entropy",
            "coverage", "unknown_source", "cut", "adequacy")
CALIBRATION_FILE = "calibration.json"
FORMAT = "attnmt-calibration/2"
STEPS_FORMAT = "attnmt-calibration/1"  # isotonic steps instead of the curve: still read
RIDGE = 1.0  # the regression's L2 penalty on standardized features
FOLDS = 5  # the out-of-fold predictions the curve is fitted on
ALNUM = re.compile(r"[^\W_]")  # a letter or digit: what str.isalnum() holds, one character


def _words(tokens: Sequence[str]) -> list[str]:
    text = " ".join(tokens).replace(" \u2581", " ").replace("\u2581", " ")
    return [w.lower() for w in text.split() if ALNUM.search(w)]


def _plain_words(tokens: Sequence[str]) -> list[str]:
    """The lower-cased plain words (phrases.PLAIN) of tokens: a subword model's pieces (a piece with
    the word mark opens a word) joined into their words (alignment.token_texts), a word model's
    tokens as they are."""
    words = token_texts(tokens, any(SPM_WORD_START in t for t in tokens))
    return [w.lower() for w in PLAIN.findall(" ".join(words))]  # one pass: no plain word spans a space


def adequacy(source: Sequence[str], tokens: Sequence[str], phrases) -> float:
    """The `adequacy` feature (the module docstring) of output `tokens` for `source` tokens, by
    `phrases` (a Phrases table; None: 1)."""
    table = phrases.word_translations if phrases is not None else {}
    entries = [table[w] for w in _plain_words(source) if w in table]
    if not entries:
        return 1.0
    output = set(_plain_words(tokens))
    return sum(any(words <= output for words in translations) for translations in entries) / len(entries)


def result_features(result, lexicon=None, *, rank: int = 0, coverage: float | None = None) -> dict[str, float]:
    """The features of one TranslationResult (see the module docstring), or of its n-best
    alternative `rank` (its own tokens, log-probability, attention and place among the beam's
    hypotheses; `coverage`: its own, measured by the caller; the source's features are shared)."""
    hyp = result if rank == 0 else result.alternatives[rank]
    log_prob = getattr(hyp, "log_prob", None)
    if log_prob is None:  # a result from before log_prob was kept: its score is per token, <eos> included
        log_prob = hyp.score * (len(hyp.tokens) + 1)
    cut = bool(result.warnings) or (rank == 0 and bool(getattr(result, "at_length_bound", False)))
    return features_of(hyp.tokens, log_prob, hyp.token_log_probs, result.source_tokens, hyp.attention,
                       coverage=result.coverage if rank == 0 else coverage,
                       beam_scores=getattr(result, "beam_scores", None) or [],
                       beam_tokens=getattr(result, "beam_tokens", None) or [], rank=rank, cut=cut, lexicon=lexicon)


def scored_features(result, lexicon=None, *, coverage: float | None = None) -> dict[str, float]:
    """The features of a forced decoding (a ScoreResult: a given translation of a given source),
    read as those of a search's lone hypothesis (no beam: margin 0, agreement 1); `coverage`: its
    own, measured by the caller."""
    tokens = list(result.target_tokens)
    attention = None if result.attention is None else result.attention[:len(tokens)]  # (len(tokens), src_len)
    return features_of(tokens, result.log_prob, result.token_log_probs, result.source_tokens, attention,
                       coverage=coverage, cut=bool(result.warnings), lexicon=lexicon)


def features_of(tokens: Sequence[str], log_prob: float, token_log_probs: Sequence[float] | None,
                source: Sequence[str], attention, *, coverage: float | None, beam_scores: Sequence[float] = (),
                beam_tokens: Sequence[Sequence[str]] = (), rank: int = 0, cut: bool = False,
                lexicon=None) -> dict[str, float]:
    """The features (the module docstring) of one hypothesis: its `tokens` and their `log_prob`
    (the sum, <eos> included), each token's log-probability where the engine has them, the
    `source` tokens, its `attention` (tgt_len, src_len) or None, its coverage; `beam_scores` and
    `beam_tokens`: every hypothesis of its beam, this one at `rank` (empty: no beam)."""
    n = len(tokens) + 1  # <eos>
    mean = log_prob / n
    minimum = min(token_log_probs) if token_log_probs else mean
    scores = list(beam_scores)
    rivals = [score for j, score in enumerate(scores) if j != rank]
    margin = scores[rank] - max(rivals) if rank < len(scores) and rivals else 0.0
    others = [set(_words(t)) for j, t in enumerate(beam_tokens) if j != rank]
    own = set(_words(tokens)) if others else set()
    agreement = (float(np.mean([len(own & o) / max(len(own), 1) for o in others])) if others and own else 1.0)
    ratio = math.log((len(tokens) + 1) / (len(source) + 1))
    entropy = 0.0
    if attention is not None and len(tokens) and len(source) > 1:
        weights = np.asarray(attention.dense() if hasattr(attention, "dense") else attention, dtype=np.float64)
        weights = np.clip(weights[:len(tokens), :len(source)], 1e-12, 1.0)
        entropy = float(-(weights * np.log(weights)).sum(axis=1).mean() / math.log(len(source)))
    words = _words(source)
    if lexicon is not None and words:
        unknown = sum(not lexicon.known(w) for w in words) / len(words)
    else:
        unknown = sum(t == "<unk>" for t in source) / max(len(source), 1)
    found = adequacy(source, tokens, getattr(lexicon, "phrases", None))
    return {"mean_logprob": float(mean), "min_logprob": float(minimum), "beam_margin": float(margin),
            "beam_agreement": agreement, "length_ratio": ratio, "attention_entropy": entropy,
            "coverage": 1.0 if coverage is None else float(coverage),
            "unknown_source": float(unknown), "cut": float(cut), "adequacy": found}


def uncalibrated_confidence(features: dict[str, float]) -> float:
    """Without a calibration: the geometric mean of the tokens' probabilities, in [0, 1]."""
    return float(math.exp(min(0.0, features["mean_logprob"])))


def _ridge(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The ridge regression's weights of y - mean(y) on standardized features z (n, features)."""
    gram = z.T @ z + RIDGE * np.eye(z.shape[1])
    return np.linalg.solve(gram, z.T @ (y - y.mean()))


def _out_of_fold(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each row's prediction by a regression fitted without its fold (row i in fold i % FOLDS)."""
    folds = np.arange(len(y)) % FOLDS
    predicted = np.empty(len(y))
    for k in range(FOLDS):
        held = folds == k
        predicted[held] = z[held] @ _ridge(z[~held], y[~held]) + y[~held].mean()
    return predicted


def _logistic(x: np.ndarray, good: np.ndarray) -> tuple[float, float]:
    """(slope, intercept) of P(good) = 1 / (1 + exp(-(slope * x + intercept))) by maximum likelihood
    (Newton's method on the standardized x, a unit L2 penalty on its slope so that separable data
    stays finite); a slope that comes out negative (more predicted chrF, fewer good) is read as no
    signal: slope 0, the observed rate (plus a half, so 0 and 1 stay finite)."""
    rate = (good.sum() + 0.5) / (len(good) + 1)
    flat = 0.0, float(math.log(rate / (1 - rate)))
    if good.all() or not good.any() or x.std() < 1e-9:
        return flat
    center, spread = x.mean(), x.std()
    u = (x - center) / spread
    a, b = flat
    for _ in range(100):
        p = 1 / (1 + np.exp(-(a * u + b)))
        w = p * (1 - p)
        gradient = np.array([((p - good) * u).sum() + a, (p - good).sum()])
        hessian = np.array([[(w * u * u).sum() + 1.0, (w * u).sum()], [(w * u).sum(), w.sum() + 1e-9]])
        step = np.linalg.solve(hessian, gradient)
        a, b = a - float(step[0]), b - float(step[1])
        if np.abs(step).max() < 1e-12:
            break
    if a <= 0:
        return flat
    return a / spread, b - a * center / spread


@dataclass
class Calibration:
    """The fitted map: the features' means and scales, the regression's weights and bias, the
    threshold of good, the curve from predicted chrF to P(good) (`slope`, `intercept`), and each
    feature's range in the fit (`low`, `high`; None in a file written before they were kept: not
    clamped). `steps`: a format-1 file's isotonic steps (breakpoints, values), read in place of the
    curve."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float
    threshold: float
    sentences: int
    slope: float = 0.0
    intercept: float = 0.0
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    steps: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def fit(cls, rows: Sequence[dict[str, float]], chrfs: Sequence[float], *, features: Sequence[str] = FEATURES,
            threshold: float | None = None) -> Calibration:
        """Fit on `rows` (result_features of each translation) and their sentence chrF."""
        if len(rows) < 20:
            raise ValueError(f"calibrating needs at least 20 translations, got {len(rows)}")
        x = np.array([[row[f] for f in features] for row in rows], dtype=np.float64)  # (n, features)
        y = np.asarray(chrfs, dtype=np.float64)
        mean, scale = x.mean(axis=0), x.std(axis=0)
        scale[scale < 1e-9] = 1.0
        z = (x - mean) / scale
        good = float(np.median(y)) if threshold is None else threshold
        slope, intercept = _logistic(_out_of_fold(z, y), (y >= good).astype(np.float64))
        return cls(tuple(features), mean, scale, _ridge(z, y), float(y.mean()), good, len(rows), slope, intercept,
                   low=x.min(axis=0), high=x.max(axis=0))

    def predicted_chrf(self, features: dict[str, float]) -> float:
        x = np.array([features[f] for f in self.features], dtype=np.float64)
        if self.low is not None:
            x = np.clip(x, self.low, self.high)  # within the fit's range: no extrapolation
        z = (x - self.mean) / self.scale
        return float(z @ self.weights + self.bias)

    def confidence(self, features: dict[str, float]) -> float:
        """P(sentence chrF >= threshold) for a translation with these features."""
        predicted = self.predicted_chrf(features)
        if self.steps is not None:
            breakpoints, values = self.steps
            return float(values[max(np.searchsorted(breakpoints, predicted, side="right") - 1, 0)])
        return float(1 / (1 + math.exp(-min(max(self.slope * predicted + self.intercept, -700.0), 700.0))))

    # ---- a file of the model

    def save(self, folder) -> None:
        write_json(folder / CALIBRATION_FILE, {
            "format": FORMAT if self.steps is None else STEPS_FORMAT, "features": list(self.features),
            "mean": self.mean.tolist(), "scale": self.scale.tolist(), "weights": self.weights.tolist(), "bias": self.bias,
            **({"slope": self.slope, "intercept": self.intercept} if self.steps is None else
               {"steps_x": self.steps[0].tolist(), "steps_y": self.steps[1].tolist()}),
            "threshold": self.threshold, "sentences": self.sentences,
            **({} if self.low is None else {"low": self.low.tolist(), "high": self.high.tolist()})})

    @classmethod
    def load(cls, path) -> Calibration:
        """Read calibration.json, every field checked.

        Raises:
            DataError: not a calibration of this format, naming the file and the field.
        """
        raw = read_json(path, error=DataError)
        if not isinstance(raw, dict) or raw.get("format") not in (FORMAT, STEPS_FORMAT):
            raise DataError(f"{path}: not an attnmt calibration ({FORMAT})")
        names = raw.get("features")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n in FEATURES for n in names):
            raise DataError(f"{path}: features must name some of {', '.join(FEATURES)}")

        def numbers(key: str, length: int | None) -> np.ndarray:
            value = raw.get(key)
            ok = (isinstance(value, list) and (length is None or len(value) == length) and len(value) > 0
                  and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value))
            if not ok:
                raise DataError(f"{path}: {key} must be a list of {length or 'some'} finite numbers")
            return np.array(value, dtype=np.float64)

        mean, scale, weights = (numbers(k, len(names)) for k in ("mean", "scale", "weights"))
        if (scale <= 0).any():
            raise DataError(f"{path}: scale must be positive")
        steps = None
        if raw["format"] == STEPS_FORMAT:
            steps_x = numbers("steps_x", None)
            steps_y = numbers("steps_y", len(steps_x))
            if (np.diff(steps_x) < 0).any() or (np.diff(steps_y) < -1e-12).any() or (steps_y < 0).any() \
                    or (steps_y > 1).any():
                raise DataError(f"{path}: the steps must be non-decreasing probabilities")
            steps = (steps_x, steps_y)
        for key in ("bias", "threshold") + (() if steps is not None else ("slope", "intercept")):
            if not isinstance(raw.get(key), (int, float)) or isinstance(raw.get(key), bool) or not math.isfinite(raw[key]):
                raise DataError(f"{path}: {key} must be a finite number")
        if steps is None and raw["slope"] < 0:
            raise DataError(f"{path}: slope must not be negative (more predicted chrF, less likely good)")
        if not isinstance(raw.get("sentences"), int) or raw["sentences"] < 1:
            raise DataError(f"{path}: sentences must be a positive integer")
        low = high = None
        if "low" in raw or "high" in raw:  # absent: a file written before the ranges were kept
            low, high = numbers("low", len(names)), numbers("high", len(names))
            if (low > high).any():
                raise DataError(f"{path}: low must not exceed high")
        return cls(tuple(names), mean, scale, weights, float(raw["bias"]), float(raw["threshold"]), raw["sentences"],
                   float(raw.get("slope", 0.0)), float(raw.get("intercept", 0.0)), low, high, steps)
