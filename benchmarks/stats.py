"""Small statistics helpers (no numpy needed)."""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float | None:
    """Linear-interpolated percentile, ``q`` in [0, 100]; ``None`` for no values."""
    data = sorted(values)
    if not data:
        return None
    if len(data) == 1:
        return data[0]
    pos = (len(data) - 1) * q / 100.0
    low, high = math.floor(pos), math.ceil(pos)
    return data[low] + (data[high] - data[low]) * (pos - low)


def median(values: Iterable[float]) -> float | None:
    return percentile(values, 50)


def p95(values: Iterable[float]) -> float | None:
    return percentile(values, 95)


def summary(
    values: Iterable[float], *, scale: float = 1.0, digits: int = 3
) -> dict[str, float | int | None]:
    """Median, p95, min, max and count of ``values`` multiplied by ``scale``."""
    data = [v * scale for v in values]

    def r(x: float | None) -> float | None:
        return None if x is None else round(x, digits)

    return {
        "median": r(median(data)),
        "p95": r(p95(data)),
        "min": r(min(data)) if data else None,
        "max": r(max(data)) if data else None,
        "n": len(data),
    }


def ratio(a: float | None, b: float | None, digits: int = 2) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return round(a / b, digits)
