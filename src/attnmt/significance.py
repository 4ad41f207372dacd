"""Is one system really better than another? Paired significance tests through sacreBLEU, and the
spread of a score over training seeds.

    compare_systems   BLEU and chrF of each system on one test set, and for each system against
                      the first: paired bootstrap resampling (Koehn 2004) and approximate
                      randomization (Riezler and Maxwell 2005), both sacreBLEU's own
                      (sacrebleu.significance.PairedTest, as `sacrebleu --paired-bs/--paired-ar`)
    seed_spread       mean and sample standard deviation of scores over runs (seeds)

What comes from sacreBLEU and what is added here:
    * scores, signatures, p-values and each system's bootstrap mean and 95% half-width are
      PairedTest's, with its seed (SACREBLEU_SEED, default 12345) and sample counts;
    * the 95% interval of the *difference* (system - first system), which PairedTest does not
      return, is read from the same resamples: sacreBLEU's own draw of indices with its seed, its
      sufficient statistics and its score function per resample, and the 2.5% / 97.5% order
      statistics picked as sacrebleu.significance.estimate_ci picks them;
    * when the observed difference is exactly 0 (e.g. identical translations) the p-value is 1,
      since no difference was seen. sacreBLEU counts resampled differences strictly above the
      observed one (multeval's rule), which gives its minimum, 1 / (samples + 1), in that case.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Mapping, Sequence

import numpy as np

__all__ = ["Comparison", "PairedResult", "Spread", "compare_systems", "seed_spread"]

BOOTSTRAP_SAMPLES = 1000  # sacreBLEU's defaults (--paired-bs-n, --paired-ar-n)
RANDOMIZATION_TRIALS = 10000


@dataclass(frozen=True)
class PairedResult:
    """One system against the first (the baseline) on one metric.

    Attributes:
        difference: score - baseline score (positive: this system scores higher).
        ci_low, ci_high: 95% paired-bootstrap interval of the difference.
        p_bootstrap: paired bootstrap resampling p-value (two-sided, sacreBLEU).
        p_randomization: approximate randomization p-value (two-sided, sacreBLEU).
        mean, half_width: sacreBLEU's bootstrap mean of this system's score and its 95% half-width.
    """

    difference: float
    ci_low: float
    ci_high: float
    p_bootstrap: float
    p_randomization: float
    mean: float
    half_width: float


@dataclass(frozen=True)
class Comparison:
    """Systems scored on one test set; `paired[i - 1][metric]` compares system i with system 0.

    Attributes:
        systems: names, the baseline first.
        scores: metric name ("BLEU", "chrF2") -> one corpus score per system.
        signatures: metric name -> sacreBLEU signature of the scores and of each test.
    """

    systems: list[str]
    sentences: int
    scores: dict[str, list[float]]
    paired: list[dict[str, PairedResult]]
    signatures: dict[str, dict[str, str]]

    def to_dict(self) -> dict:
        return asdict(self)


def _metrics() -> dict:
    from sacrebleu.metrics import BLEU, CHRF

    return {"BLEU": BLEU(), "chrF": CHRF()}  # PairedTest names them by their score: BLEU, chrF2


def _check_systems(systems: Sequence[tuple[str, Sequence[str]]], refs: Sequence[str]) -> None:
    if len(systems) < 2:
        raise ValueError(f"a comparison needs at least two systems; got {len(systems)}")
    for name, hyps in systems:
        if len(hyps) != len(refs):
            raise ValueError(f"{name}: {len(hyps)} translations for {len(refs)} references")
    if not refs:
        raise ValueError("no references: nothing to compare on")


def _run_paired_test(systems, refs, test_type: str, n_samples: int):
    """sacreBLEU's PairedTest: (its seed, signatures {metric: str}, {metric: [Result per system]}); a seed of
    0 means unseeded there (SACREBLEU_SEED=none), as in difference_interval."""
    from sacrebleu.significance import PairedTest

    test = PairedTest([(name, list(hyps)) for name, hyps in systems], _metrics(), [list(refs)],
                      test_type=test_type, n_samples=n_samples)
    signatures, results = test()
    results.pop("System")
    return test._seed, {name: str(sig) for name, sig in signatures.items()}, results


def difference_interval(metric, base_hyps: Sequence[str], hyps: Sequence[str], refs: Sequence[str], *,
                        n_samples: int, seed: int | None) -> tuple[float, float]:
    """95% interval of score(hyps) - score(base_hyps) over sacreBLEU's paired bootstrap resamples.

    The resamples are the ones sacrebleu.significance._paired_bs_test draws with `seed`; each
    score comes from the metric's own sufficient statistics, as there.
    """
    base = np.array(metric._extract_corpus_statistics(list(base_hyps), [list(refs)]), dtype="float32")
    system = np.array(metric._extract_corpus_statistics(list(hyps), [list(refs)]), dtype="float32")
    rng = np.random.default_rng(seed)
    idxs = rng.choice(len(hyps), size=(n_samples, len(hyps)), replace=True)  # (samples, sentences)
    diffs = np.sort([metric._compute_score_from_stats(system[i].sum(0)).score
                     - metric._compute_score_from_stats(base[i].sum(0)).score for i in idxs])
    lower = n_samples // 40  # estimate_ci's 2.5% order statistic
    return float(diffs[lower]), float(diffs[n_samples - lower - 1])


def compare_systems(systems: Sequence[tuple[str, Sequence[str]]], refs: Sequence[str], *,
                    bootstrap_samples: int = BOOTSTRAP_SAMPLES,
                    randomization_trials: int = RANDOMIZATION_TRIALS) -> Comparison:
    """BLEU and chrF (cased, detokenized, sacreBLEU defaults) of each system, and each system
    after the first against the first: paired bootstrap and approximate randomization.

    Args:
        systems: (name, translations) pairs, the baseline first; one translation per reference.
        refs: one reference per sentence.

    Raises:
        ValueError: fewer than two systems, no references, or a system with another line count.
    """
    _check_systems(systems, refs)
    seed, bs_signatures, bs = _run_paired_test(systems, refs, "bs", bootstrap_samples)
    _, ar_signatures, ar = _run_paired_test(systems, refs, "ar", randomization_trials)
    metrics = dict(zip(bs, _metrics().values()))  # "BLEU", "chrF2" -> a fresh metric
    scores = {name: [r.score for r in results] for name, results in bs.items()}
    paired = []
    for i in range(1, len(systems)):
        found = {}
        for name, metric in metrics.items():
            difference = scores[name][i] - scores[name][0]
            low, high = difference_interval(metric, systems[0][1], systems[i][1], refs,
                                            n_samples=bootstrap_samples, seed=seed or None)
            same = difference == 0  # nothing observed: p = 1 (see the module docstring)
            found[name] = PairedResult(difference, low, high, 1.0 if same else bs[name][i].p_value,
                                       1.0 if same else ar[name][i].p_value, float(bs[name][i].mean),
                                       float(bs[name][i].ci))
        paired.append(found)
    signatures = {name: {"score": str(metric.get_signature()), "bootstrap": bs_signatures[name],
                         "randomization": ar_signatures[name]} for name, metric in metrics.items()}
    return Comparison([name for name, _ in systems], len(refs), scores, paired, signatures)


@dataclass(frozen=True)
class Spread:
    """A score over n runs: mean and sample standard deviation (n - 1; None for one run)."""

    n: int
    mean: float
    sd: float | None
    values: list[float]


def seed_spread(reports: Sequence[Mapping[str, float]], keys: Sequence[str] = ("bleu", "chrf")) -> dict[str, Spread]:
    """Mean and sample standard deviation of each of `keys` over the runs' score reports.

    Raises:
        ValueError: no report, or a report without one of `keys` (names it and the key).
    """
    if not reports:
        raise ValueError("no scores to summarize")
    spread = {}
    for key in keys:
        values = []
        for i, report in enumerate(reports):
            value = report.get(key)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"report {i + 1} has no finite {key!r} score")
            values.append(float(value))
        array = np.array(values, dtype=np.float64)
        sd = float(array.std(ddof=1)) if len(values) > 1 else None
        spread[key] = Spread(len(values), float(array.mean()), sd, values)
    return spread
