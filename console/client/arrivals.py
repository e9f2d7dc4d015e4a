"""Open-loop arrival schedules, precomputed on an absolute timeline, as ``vllm bench serve`` does.

``T_i = sum_{j<=i} g_j`` with ``g_j ~ Gamma(shape=beta, scale=1/(rate*beta))`` (beta = 1: Poisson;
beta = inf: constant spacing), rescaled so ``T_N = N / rate`` exactly (vLLM PR #21108: the raw sum
misses by 1-2 % and makes runs with different seeds disagree). The sender sleeps until
``start + T_i``; it never sleeps a relative gap, so lateness does not accumulate.
"""

from __future__ import annotations

import math
import random
from typing import Literal

Arrival = Literal["poisson", "gamma", "constant"]


def schedule(
    n: int, rate: float, *, arrival: Arrival = "poisson", burstiness: float = 1.0, seed: int = 0
) -> list[float]:
    """Absolute send offsets in seconds from the start, ascending, last == n / rate."""
    if n <= 0:
        return []
    if not rate > 0 or math.isinf(rate):
        raise ValueError("rate must be a positive finite number of requests per second")
    if arrival == "poisson":
        beta = 1.0
    elif arrival == "constant":
        beta = math.inf
    else:
        beta = burstiness
        if not beta > 0:
            raise ValueError("burstiness must be > 0")
    if math.isinf(beta):
        gaps = [1.0 / rate] * n
    else:
        rng = random.Random(seed)
        scale = 1.0 / (rate * beta)
        gaps = [rng.gammavariate(beta, scale) for _ in range(n)]
    out: list[float] = []
    total = 0.0
    for g in gaps:
        total += g
        out.append(total)
    factor = (n / rate) / total if total > 0 else 1.0
    return [t * factor for t in out]
