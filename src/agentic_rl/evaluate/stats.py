"""Small statistics for evaluation: Wilson intervals, unbiased pass@k, and tests for differences.

No scipy: the normal CDF comes from ``math.erf`` and binomial tails from ``math.comb``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence


def normal_cdf(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a success rate (95 % by default). ``n == 0`` gives ``(0.0, 1.0)``.

    Unlike the normal approximation it stays inside [0, 1] and is sensible at 0 or n successes.
    """
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem with ``n`` samples of which ``c`` passed: ``1 - C(n-c, k) / C(n, k)``.

    Requires ``k <= n`` (there is no unbiased estimate from fewer samples than ``k``).
    """
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per problem, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts.

    ``only_a``: pairs (same task and seed) that A solved and B did not; ``only_b`` the reverse. Under
    "no difference" each discordant pair is a fair coin, so the p-value is a binomial tail.
    """
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2.0 * tail)


def two_proportion_p(successes_a: int, n_a: int, successes_b: int, n_b: int) -> float:
    """Two-sided p-value of the pooled two-proportion z-test (for unpaired samples)."""
    if n_a == 0 or n_b == 0:
        return 1.0
    pooled = (successes_a + successes_b) / (n_a + n_b)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    if se == 0:
        return 1.0
    z = (successes_a / n_a - successes_b / n_b) / se
    return 2.0 * (1.0 - normal_cdf(abs(z)))


def paired_bootstrap_ci(diffs: Sequence[float], samples: int = 2000, seed: int = 0,
                        level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of paired differences (e.g. reward B − reward A)."""
    if not diffs:
        return 0.0, 0.0
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(samples))
    lo = means[int((1 - level) / 2 * (samples - 1))]
    hi = means[int((1 + level) / 2 * (samples - 1))]
    return lo, hi


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; ``nan`` for an empty sequence (so "no data" is never shown as 0)."""
    return sum(values) / len(values) if values else float("nan")
