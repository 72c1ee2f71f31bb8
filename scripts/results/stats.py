"""The statistics the results side judges samples by: how many times slower a run is than its reference (with its
one-sided rank test), and whether a cell's samples still fell while timed. scipy does the tests; verify
(scripts/results/verify.py), the report and the reference's checks call them from here.
"""

import math
import statistics
from collections.abc import Sequence
from typing import Any

from scipy.stats import kendalltau, mannwhitneyu

from shared.timing import MIN_SAMPLES


def ratio_estimate(measured: Sequence[float], reference: Sequence[float]) -> float:
    """The Hodges-Lehmann estimate of how many times slower `measured` is than `reference`: the median of every
    pairwise ratio (the estimator that goes with the rank test). Robust to a bimodal cell: a run that visits both modes
    as the reference did gets ×1, not the ratio of whichever mode its median fell in."""
    return statistics.median(m / e for m in measured for e in reference)


def rank_test(reference_samples: Sequence[float], m: Sequence[float], factor: float, ratio: float) -> float | None:
    """The one-sided Mann-Whitney U p-value, in the direction of `ratio`, of the measured samples `m` (divided by the
    explained factor) against the reference's pooled samples; None with fewer than MIN_SAMPLES on a side."""
    if len(reference_samples) < MIN_SAMPLES or len(m) < MIN_SAMPLES:
        return None
    return float(
        mannwhitneyu([v / factor for v in m], reference_samples, alternative="greater" if ratio > 1 else "less").pvalue
    )


FALLING_ALPHA = 0.01  # samples that fall with time at this significance (one-sided Kendall τ) were still settling


def still_falling(values: Any) -> tuple[float, float] | None:
    """(τ, p) where a cell's post-warm-up samples still fall with time: Kendall's τ of each sample against its place
    in the run, one-sided (falling), p < FALLING_ALPHA, over at least MIN_SAMPLES samples. The warm-up rule ends at
    two windows that agree (shared/timing.py); a cell that then keeps getting faster was not yet steady, and its
    median overstates its steady time. None where the samples do not fall (or are too few to say)."""
    values = [v for v in values if number(v) is not None] if isinstance(values, list) else []
    if len(values) < MIN_SAMPLES:
        return None
    tau, p = kendalltau(range(len(values)), values, alternative="less")
    return (float(tau), float(p)) if p < FALLING_ALPHA else None


def number(value: Any) -> float | None:
    """A finite number from a record as a float, else None (missing, text, NaN, infinity): what arithmetic and the
    plot may use. The record itself keeps what it said; the submission checker names non-finite figures."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None
