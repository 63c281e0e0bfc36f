"""Distribution-free confidence bounds for percentiles (binomial order statistics).

With n samples, the k-th smallest one lies at or above the true q-quantile with probability
P(Binomial(n, q) <= k - 1), whatever the latency distribution. The upper bound of a percentile
is the smallest such order statistic reaching the confidence level. As in MLPerf's early
stopping, the bound must leave at least one sample above it (the sample maximum alone is not
trusted), so p99 at 99 % confidence needs 662 samples and p90 needs 64.
"""

from __future__ import annotations

import math

CONFIDENCE = 0.99


def upper_bound_rank(n: int, q: float, confidence: float = CONFIDENCE) -> int | None:
    """1-based rank of the order statistic bounding the q-quantile from above, or None when
    n samples are too few."""
    if n < 2 or not 0.0 < q < 1.0:
        return None
    alpha = 1.0 - confidence
    log_q, log_not_q = math.log(q), math.log1p(-q)
    log_n_fact = math.lgamma(n + 1)
    spread = math.sqrt(n * q * (1.0 - q))
    k = min(n, math.ceil(n * q + 12.0 * spread + 12.0))  # P(X >= k) beyond this is negligible
    tail = 0.0
    while k >= 1:
        pmf = math.exp(log_n_fact - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                       + k * log_q + (n - k) * log_not_q)
        if tail + pmf > alpha:
            break
        tail += pmf
        k -= 1
    rank = k + 1
    return rank if rank <= n - 1 else None


def min_samples(q: float, confidence: float = CONFIDENCE) -> int:
    """The fewest samples for which the q-quantile has an upper bound."""
    n = 2
    while upper_bound_rank(n, q, confidence) is None:
        n += 1
    return n
