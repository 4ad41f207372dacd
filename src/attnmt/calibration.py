"""`attnmt calibrate`: a model's confidence fitted on held-out data it never trained on, and how well
it ranks and calibrates (decoding/confidence.py holds the features and the map).

    calibration, report = calibrate(translator, [(sources, references, options)])   # held-out sentences
    calibration.save(run_folder)                                     # calibration.json, with the model

The report: the sentences, the threshold of "good" (the median sentence chrF), and, from a 5-fold
cross-validation on the same sentences (each fold scored by a map fitted on the other four), the
Pearson and Spearman correlation of confidence with sentence chrF, the expected calibration error
over ten bins, and how many of the least confident tenth are in the worst quarter by chrF.

Shapes: none.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from attnmt.decoding.confidence import FEATURES, Calibration
from attnmt.decoding.options import DecodingOptions

FOLDS = 5


def sentence_chrfs(hypotheses: Sequence[str], references: Sequence[str]) -> list[float]:
    import sacrebleu

    return [sacrebleu.sentence_chrf(h, [r]).score for h, r in zip(hypotheses, references)]


def translate_with_features(translator, sources: Sequence[str], options: DecodingOptions | None = None
                            ) -> tuple[list[str], list[dict[str, float]]]:
    """The translations of `sources` and each one's confidence features."""
    results = translator.translate(list(sources), options)
    return [r.text for r in results], [translator.confidence_features(r) for r in results]


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x))
    return ranks


def quality_of(confidences: Sequence[float], chrfs: Sequence[float], threshold: float) -> dict:
    """How well confidences rank and calibrate against sentence chrF (see the module docstring)."""
    c, y = np.asarray(confidences, dtype=np.float64), np.asarray(chrfs, dtype=np.float64)
    pearson = float(np.corrcoef(c, y)[0, 1]) if c.std() > 0 and y.std() > 0 else 0.0
    spearman = float(np.corrcoef(_ranks(c), _ranks(y))[0, 1]) if c.std() > 0 and y.std() > 0 else 0.0
    good = (y >= threshold).astype(np.float64)
    bins = np.minimum((c * 10).astype(int), 9)
    gaps = [(abs(c[bins == b].mean() - good[bins == b].mean()), int((bins == b).sum())) for b in range(10)
            if (bins == b).any()]
    ece = sum(gap * n for gap, n in gaps) / len(c)
    reliability = [{"bin": b / 10, "sentences": int((bins == b).sum()), "predicted": round(float(c[bins == b].mean()), 3),
                    "observed": round(float(good[bins == b].mean()), 3)} for b in range(10) if (bins == b).any()]
    tenth = max(1, len(c) // 10)
    least = np.argsort(c, kind="stable")[:tenth]
    worst = set(np.argsort(y, kind="stable")[:max(1, len(y) // 4)].tolist())
    precision = sum(int(i) in worst for i in least) / tenth
    return {"pearson": round(pearson, 4), "spearman": round(spearman, 4), "ece": round(float(ece), 4),
            "least_tenth_in_worst_quarter": round(precision, 4), "reliability": reliability}


def calibrate(translator, groups: Sequence[tuple[Sequence[str], Sequence[str], DecodingOptions | None]], *,
              features: Sequence[str] = FEATURES) -> tuple[Calibration, dict]:
    """The map fitted on every held-out sentence of `groups` (each: sources, their references, the
    options to decode them with: a multilingual model's directions pooled), and its cross-validated
    report.

    Raises:
        ValueError: fewer than 20 * FOLDS sentences, or a group whose sources and references differ in number.
    """
    rows, chrfs = [], []
    for sources, references, options in groups:
        if len(sources) != len(references):
            raise ValueError(f"{len(sources)} sources but {len(references)} references")
        texts, found = translate_with_features(translator, sources, options)
        rows += found
        chrfs += sentence_chrfs(texts, references)
    if len(rows) < 20 * FOLDS:
        raise ValueError(f"calibrating needs at least {20 * FOLDS} held-out sentences, got {len(rows)}")
    threshold = float(np.median(chrfs))
    folds = np.arange(len(rows)) % FOLDS
    held = np.zeros(len(rows))
    for k in range(FOLDS):
        train = [i for i in range(len(rows)) if folds[i] != k]
        fitted = Calibration.fit([rows[i] for i in train], [chrfs[i] for i in train], features=features,
                                 threshold=threshold)
        for i in np.flatnonzero(folds == k):
            held[i] = fitted.confidence(rows[i])
    calibration = Calibration.fit(rows, chrfs, features=features, threshold=threshold)
    report = {"sentences": len(rows), "threshold": round(threshold, 2),
              "mean_chrf": round(float(np.mean(chrfs)), 2), "cross_validated": quality_of(held, chrfs, threshold),
              "weights": {f: round(float(w), 4) for f, w in zip(calibration.features, calibration.weights)}}
    return calibration, report
