"""Streaming statistics of one LDP-SGD run, as the interval methods see them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def floor_power(x: float, p: float) -> int:
    """floor(x ** p) robust to rounding: exact powers such as (1e8)**0.75 give 1e6."""
    return math.floor(x**p * (1.0 + 1e-12))


@dataclass(frozen=True, kw_only=True)
class StreamingStats:
    """What a replicate keeps of its SGD path (SPEC section 4), never the path itself.

    Segment k covers the iterates (cuts[k-1], cuts[k]] (cuts[-1] := 0).

    Attributes
    ----------
    n : int
        Number of SGD steps these statistics describe (= cuts[-1]).
    cuts, seg_dev, seg_shift, snap_t, snap_b, snap_a
        Kernel outputs, see :func:`tasks.sgd.ldp_sgd`.
    gamma : float
        Step-size exponent of the run (batch means and the bootstrap's theory use it).
    asymptotic_cov : ndarray (d, d)
        The model's exact Sigma (used only by the oracle).
    """

    n: int
    cuts: np.ndarray
    seg_dev: np.ndarray
    seg_shift: np.ndarray
    snap_t: np.ndarray
    snap_b: np.ndarray
    snap_a: np.ndarray
    gamma: float
    asymptotic_cov: np.ndarray

    @property
    def dim(self) -> int:
        return self.seg_dev.shape[1]

    @property
    def theta_bar(self) -> np.ndarray:
        """Polyak-Ruppert average (1/n) sum theta_i."""
        return self.seg_shift[-1] + self.snap_t[-1] / self.n

    def prefix(self, n: int) -> StreamingStats:
        """The statistics of the first ``n`` steps; ``n`` must be one of the cuts."""
        k = int(np.searchsorted(self.cuts, n))
        if k >= len(self.cuts) or self.cuts[k] != n:
            raise ValueError(f"Checkpoint {n} is not a cut of this run.")
        sl = slice(0, k + 1)
        return StreamingStats(
            n=int(n),
            cuts=self.cuts[sl],
            seg_dev=self.seg_dev[sl],
            seg_shift=self.seg_shift[sl],
            snap_t=self.snap_t[sl],
            snap_b=self.snap_b[sl],
            snap_a=self.snap_a[sl],
            gamma=self.gamma,
            asymptotic_cov=self.asymptotic_cov,
        )

    def deviation_sums(self, bounds: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """Sums of (theta_i - ref) over (bounds[j-1], bounds[j]], j = 1..len(bounds)-1.

        ``bounds`` must be increasing, start at 0 or a cut, and consist of cuts. Sums
        are formed segment by segment around each segment's centre, so they keep full
        precision however far ``ref`` and theta* lie from 0.
        """
        bounds = np.asarray(bounds, dtype=np.int64)
        lengths = np.diff(np.concatenate([[0], self.cuts]))
        contrib = self.seg_dev + lengths[:, None] * (self.seg_shift - ref)
        idx = np.searchsorted(self.cuts, bounds)
        inner = bounds > 0
        if np.any(idx[inner] >= len(self.cuts)) or np.any(self.cuts[idx[inner]] != bounds[inner]):
            raise ValueError("Partition bounds must be cuts of the run.")
        starts = np.where(inner, idx + 1, 0)[:-1]
        stops = idx[1:] + 1
        out = np.empty((len(bounds) - 1, self.dim))
        for j, (a, b) in enumerate(zip(starts, stops, strict=True)):
            out[j] = contrib[a:b].sum(axis=0)
        return out

    def self_normalizer(self) -> np.ndarray:
        """V_n = n^-2 sum_s s^2 (theta_bar_s - theta_bar_n)(theta_bar_s - theta_bar_n)'.

        References
        ----------
        Lee, Liao, Seo & Shin (2022), AAAI; Liu, Hu, Ding & Kong (2023), ICML.
        """
        s = float(self.n)
        u = self.snap_t[-1] / s
        b = self.snap_b[-1]
        c_s = s * (s + 1.0) * (2.0 * s + 1.0) / 6.0
        v = self.snap_a[-1] - np.outer(u, b) - np.outer(b, u) + c_s * np.outer(u, u)
        return (v + v.T) / (2.0 * s * s)
