"""Exponential back-off with jitter, as Kafka's ExponentialBackoff computes it.

reconnect.backoff.ms is the first wait, doubled per consecutive failure up to
reconnect.backoff.max.ms; each wait is scaled by a random factor in [1 - jitter,
1 + jitter] (0.2 in Kafka) so that many nodes do not reconnect in step, then capped.
"""

from __future__ import annotations

import math
import random


class ExponentialBackoff:
    def __init__(
        self,
        initial_s: float,
        max_s: float,
        *,
        multiplier: float = 2.0,
        jitter: float = 0.2,
        rng: random.Random | None = None,
    ) -> None:
        if initial_s < 0 or max_s < 0 or multiplier < 1 or not 0 <= jitter < 1:
            raise ValueError("back-off needs initial, max >= 0, multiplier >= 1, 0 <= jitter < 1")
        self.initial_s = initial_s
        self.max_s = max(max_s, initial_s)
        self.multiplier = multiplier
        self.jitter = jitter
        self._rng = rng or random.Random()
        ratio = self.max_s / initial_s if initial_s > 0 else 1.0
        self._exp_max = math.log(ratio) / math.log(multiplier) if ratio > 1 else 0.0

    def backoff(self, attempts: int) -> float:
        """The wait after `attempts` earlier failures (0 for the first failure)."""
        if self._exp_max == 0:
            return self.initial_s
        exponent = min(max(attempts, 0), self._exp_max)
        term: float = self.initial_s * self.multiplier**exponent
        if self.jitter > 0:
            term *= self._rng.uniform(1 - self.jitter, 1 + self.jitter)
        return min(term, self.max_s)
