"""The step sizes eta_i = c i^-gamma of the LDP-SGD kernel, without a pow per step."""

from __future__ import annotations

import numpy as np
from numba import njit

from ldpsim.tasks.compiled import cached_njit
from ldpsim.tasks.kernel.pointers import address, keep_alive
from ldpsim.tasks.streams.rng import unlikely

#: Steps below this index use the exact step size c * i**-gamma.
ETA_EXACT_BELOW = 512
#: Above it, the exact value is recomputed whenever ``i & ETA_RESYNC_MASK == 0``.
ETA_RESYNC_MASK = 255


@cached_njit(inline="always")
def eta_series(gamma):
    """Coefficients a1..a5 of (1 - y)^gamma = 1 + a1 y + ... + a5 y^5 + O(y^6)."""
    a1 = -gamma
    a2 = gamma * (gamma - 1.0) / 2.0
    a3 = -gamma * (gamma - 1.0) * (gamma - 2.0) / 6.0
    a4 = gamma * (gamma - 1.0) * (gamma - 2.0) * (gamma - 3.0) / 24.0
    a5 = -gamma * (gamma - 1.0) * (gamma - 2.0) * (gamma - 3.0) * (gamma - 4.0) / 120.0
    return a1, a2, a3, a4, a5


@cached_njit(error_model="numpy")  # no zero-division check: it would block SIMD
def fill_ratios(fi0, ratios, a1, a2, a3, a4, a5):
    """ratios[m] = (1 - 1/i)^gamma = eta_i / eta_{i-1} for i = fi0 + m, m = 1..255."""
    # By a 5-term series (truncation error < 1e-16 for i >= 512). The terms are
    # independent across steps, so this loop runs in SIMD lanes once per 256 steps and
    # the kernel's step needs a single multiply.
    for m in range(1, ETA_RESYNC_MASK + 1):
        y = 1.0 / (fi0 + m)
        ratios[m] = 1.0 + y * (a1 + y * (a2 + y * (a3 + y * (a4 + y * a5))))


@cached_njit(inline="always")
def fill_exact(c, gamma, exact):
    """exact[i] = c i^-gamma for i = 1 .. ETA_EXACT_BELOW - 1 (``exact[0]`` unused): the
    steps :func:`next_eta` reads from this table, computed once per kernel call rather
    than once per chain (a pow costs more than the rest of a step). The same
    expression on the same floats as a chain's own pow, so the same bits."""
    fi = 0.0
    for i in range(1, ETA_EXACT_BELOW):
        fi += 1.0
        exact[i] = c * fi ** (-gamma)


@njit(inline="always")
def next_eta(i, fi, eta, c, gamma, exact, ratios, a1, a2, a3, a4, a5):
    """eta_i = c i^-gamma from eta = eta_{i-1}, without a pow per step.

    Exact below step 512 (read from ``exact``, :func:`fill_exact`'s table, a pointer)
    and at every multiple of 256, eta_{i-1} (1 - 1/i)^gamma in between; relative error
    below 1e-13 overall. fi == float(i), carried by the caller (no int -> float
    conversion per step); ratios is a 256-slot buffer (pointer) refilled at each
    multiple of 256; a1..a5 come from :func:`eta_series`.
    """
    m = i & ETA_RESYNC_MASK
    if unlikely(i < ETA_EXACT_BELOW or m == 0):
        if i < ETA_EXACT_BELOW:
            return exact[i]
        fill_ratios(fi, ratios, a1, a2, a3, a4, a5)  # ratios are read from step 513 on
        return c * fi ** (-gamma)
    return eta * ratios[m]


@njit  # not cached: numba's cache would miss changes in tasks.rng's intrinsics
def eta_schedule(n, c, gamma):
    """Step sizes eta_1..eta_n exactly as the kernel computes them (for tests)."""
    a1, a2, a3, a4, a5 = eta_series(gamma)
    ratios, exact = np.empty(ETA_RESYNC_MASK + 1), np.empty(ETA_EXACT_BELOW)
    fill_exact(c, gamma, exact)
    ratios_p, exact_p = address(ratios), address(exact)
    out = np.empty(n)
    eta = 0.0
    for i in range(1, n + 1):
        eta = next_eta(i, float(i), eta, c, gamma, exact_p, ratios_p, a1, a2, a3, a4, a5)
        out[i - 1] = eta
    keep_alive(ratios, exact)
    return out
