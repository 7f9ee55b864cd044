"""Counter-based randomness: the same (seed, keys) always give the same numbers.

The emulator never keeps a random generator in its state; every random draw is a hash of
the fleet seed, the device and the simulated time, so a run is reproducible from the seed
and a restarted worker continues exactly where the last one stopped.
"""

from __future__ import annotations

import math
from statistics import NormalDist

_MASK = (1 << 64) - 1
_NORMAL = NormalDist()


def mix(*keys: int) -> int:
    """A 64-bit hash of integer keys (splitmix64 finaliser, chained)."""
    h = 0x9E3779B97F4A7C15
    for k in keys:
        h = (h ^ (k & _MASK)) * 0xBF58476D1CE4E5B9 & _MASK
        h = (h ^ (h >> 31)) * 0x94D049BB133111EB & _MASK
        h ^= h >> 29
    return h


def mix_on(h: int, k: int) -> int:
    """``mix(*keys, k)`` from ``h = mix(*keys)``: draws that share leading keys (a device
    and a time step) hash those once."""
    h = (h ^ (k & _MASK)) * 0xBF58476D1CE4E5B9 & _MASK
    h = (h ^ (h >> 31)) * 0x94D049BB133111EB & _MASK
    return h ^ (h >> 29)


def unit(h: int) -> float:
    """A hash as a float in [0, 1)."""
    return (h >> 11) * (1.0 / (1 << 53))


def uniform(*keys: int) -> float:
    """A float in [0, 1)."""
    return unit(mix(*keys))


def normal(*keys: int) -> float:
    return _normal_of(uniform(*keys))


def _normal_of(u: float) -> float:
    return _NORMAL.inv_cdf(min(max(u, 1e-12), 1 - 1e-12))


def poisson(mean: float, *keys: int) -> int:
    """A Poisson draw by inverse CDF (small means) or a normal approximation (large)."""
    return poisson_of(mean, mix(*keys)) if mean > 0 else 0


def poisson_of(mean: float, h: int) -> int:
    """`poisson` from the hash ``h`` of its keys."""
    if mean <= 0:
        return 0
    if mean > 40:
        return max(0, round(mean + math.sqrt(mean) * _normal_of(unit(h))))
    u = unit(h)
    k, p = 0, math.exp(-mean)
    cdf = p
    while u > cdf and k < 200:
        k += 1
        p *= mean / k
        cdf += p
    return k


def string_key(text: str) -> int:
    """A stable integer for a string (Python's hash() is salted per process)."""
    h = 0xCBF29CE484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001B3) & _MASK
    return h
