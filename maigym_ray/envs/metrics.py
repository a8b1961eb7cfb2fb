"""Latency histograms and counters for the environment manager (plain Python)."""

from __future__ import annotations

import bisect
from collections import deque
from typing import Any

BUCKETS_S: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class LatencyHistogram:
    """Cumulative bucket counts (Prometheus style) plus a window of recent samples for percentiles."""

    def __init__(self, window: int = 4096) -> None:
        self.counts = [0] * (len(BUCKETS_S) + 1)
        self.total = 0
        self.sum_s = 0.0
        self._recent: deque[float] = deque(maxlen=window)

    def observe(self, seconds: float) -> None:
        """Records one latency."""
        self.counts[bisect.bisect_left(BUCKETS_S, seconds)] += 1
        self.total += 1
        self.sum_s += seconds
        self._recent.append(seconds)

    def percentile(self, q: float) -> float:
        """The q-quantile (0..1) of the recent window; 0.0 when empty."""
        if not self._recent:
            return 0.0
        xs = sorted(self._recent)
        return xs[min(len(xs) - 1, int(q * len(xs)))]

    def summary(self) -> dict[str, Any]:
        """Count, mean, p50, p95 and the bucket counts keyed by upper bound."""
        return {
            "count": self.total,
            "mean_s": self.sum_s / self.total if self.total else 0.0,
            "p50_s": self.percentile(0.5),
            "p95_s": self.percentile(0.95),
            "buckets": {str(b): c for b, c in zip((*BUCKETS_S, "inf"), self.counts, strict=True)},
        }
