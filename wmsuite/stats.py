"""Small statistics shared by the evaluation commands.

    low, high = wilson_interval(successes=41, n=50)    # 95% interval of a success rate
"""

from __future__ import annotations

import math


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion `successes / n` (z = 1.96: 95%).

    Unlike the normal approximation it stays inside [0, 1] and is not degenerate at 0 or n
    successes, which matters for the small episode counts of robot evaluations.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, n={n}], got {successes}")
    if z <= 0:
        raise ValueError(f"z must be > 0, got {z}")
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # clamped to contain p: rounding puts the bound a hair inside it at 0 or n successes
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))
