"""Timing statistics for torch_bench.py, pure Python (no torch, no numpy).

The median's 95% confidence interval comes from order statistics, as in the engine's timer
(evaluator/timer_stats.cpp), so the two report comparable intervals: the number of samples below
the median is Binomial(n, 1/2); exact tail sums for n < 30, the normal approximation above.
"""

from __future__ import annotations

import math
from typing import Dict, List, Sequence, Tuple


def median(xs: Sequence[float]) -> float:
    v = sorted(x for x in xs if not math.isnan(x))
    if not v:
        raise ValueError("median of no samples")
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def median_ci_ranks(n: int) -> Tuple[int, int]:
    """1-based ranks (j, k) with [x_(j), x_(k)] a 95% CI of the median of n samples.

    For n <= 5 no pair of ranks reaches 95%, so the interval is the whole range.
    """
    if n < 1:
        raise ValueError("no samples")
    if n < 30:
        # Largest j with P(X <= j - 1) <= 0.025; the interval is [x_(j), x_(n+1-j)].
        p = 2.0 ** -n  # P(X = 0)
        cdf = p
        j = 1
        i = 1
        while cdf <= 0.025 and i < n:
            j = i
            p = p * (n - i + 1) / i
            cdf += p
            i += 1
        return j, n + 1 - j
    h = 0.98 * math.sqrt(n)
    half = n / 2
    j = int(max(1.0, math.floor(half - h)))
    k = int(min(float(n), math.ceil(half + h)))
    return j, k


def summarize(xs: Sequence[float]) -> Dict[str, float]:
    """n, median, ci_low, ci_high (95% CI of the median), mean, min, max; NaNs dropped."""
    v = sorted(x for x in xs if not math.isnan(x))
    if not v:
        raise ValueError("no samples to summarize")
    j, k = median_ci_ranks(len(v))
    return {
        "n": len(v),
        "median": median(v),
        "ci_low": v[j - 1],
        "ci_high": v[k - 1],
        "mean": sum(v) / len(v),
        "min": v[0],
        "max": v[-1],
    }


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float]) -> Dict[str, float]:
    """Median over pairs of numerator_i / denominator_i, with its 95% CI.

    Pairs are samples taken in the same round, so slow drifts of the GPU cancel. With
    numerator = another provider's times and denominator = a candidate's, the ratio is the
    candidate's speedup (> 1: the candidate is faster).
    """
    if len(numerator) != len(denominator):
        raise ValueError(f"paired_ratio: {len(numerator)} numerator samples but {len(denominator)} denominator samples")
    s = summarize([a / b for a, b in zip(numerator, denominator)])
    return {"n": s["n"], "ratio": s["median"], "ci_low": s["ci_low"], "ci_high": s["ci_high"]}


def geomean(xs: Sequence[float]) -> float:
    v = [x for x in xs if x > 0 and math.isfinite(x)]
    if not v:
        return float("nan")
    return math.exp(sum(math.log(x) for x in v) / len(v))


def round_robin_order(names: Sequence[str], sample: int) -> List[str]:
    """Providers in the order sample `sample` times them: rotated by one each sample, so no
    provider always runs first (on a cooler or warmer GPU)."""
    if not names:
        return []
    r = sample % len(names)
    return list(names[r:]) + list(names[:r])


def launches_per_batch(one_launch_ms: float, target_ms: float, lo: int = 1, hi: int = 2000) -> int:
    """Launches per timed batch so that a batch lasts about target_ms."""
    return int(min(hi, max(lo, math.ceil(target_ms / max(one_launch_ms, 1e-4)))))


def pool_sets(set_bytes: int, l2_bytes: int, l2_multiple: float = 2.0) -> int:
    """Input sets to rotate over so that the pool (sets x bytes one launch touches) exceeds
    l2_multiple x the L2 size; at least 2, so consecutive launches never share inputs."""
    if set_bytes <= 0:
        raise ValueError("set_bytes must be positive")
    return max(2, math.floor(l2_multiple * l2_bytes / set_bytes) + 1)


def sets_that_fit(set_memory: int, free_bytes: int, reserve_bytes: int, memory_fraction: float = 0.8) -> int:
    """How many sets of set_memory bytes fit in memory_fraction of the free memory after
    reserve_bytes (temporaries of the other providers); at least 1."""
    if set_memory <= 0:
        raise ValueError("set_memory must be positive")
    return max(1, int((memory_fraction * free_bytes - reserve_bytes) // set_memory))
