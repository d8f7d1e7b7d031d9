"""Streaming statistics of one LDP-SGD run, as the interval methods see them."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numba import njit


def floor_power(x: float, p: float) -> int:
    """floor(x ** p) robust to rounding: exact powers such as (1e8)**0.75 give 1e6."""
    return math.floor(x**p * (1.0 + 1e-12))


@dataclass(frozen=True)
class PartitionPlan:
    """Where :meth:`StreamingStats.deviation_sums` finds its pieces; depends on the cuts
    and the partition only, so it is worked out once per grid point and method."""

    recentred: np.ndarray  # positions k < K - 1 of cuts that are powers of two
    recentred_cuts: np.ndarray  # those cuts, float64, shape (., 1)
    left: np.ndarray  # each piece's start, as a position among the cuts
    right: np.ndarray  # each piece's end
    after_zero: np.ndarray  # (pieces, 1): the piece starts after step 0
    lengths: np.ndarray  # (pieces, 1), float64
    first: np.ndarray  # first piece of each part, and the number of pieces
    split_parts: tuple[int, ...]  # the parts made of more than one piece


@functools.lru_cache(maxsize=256)
def _partition_plan(cuts_bytes: bytes, bounds_bytes: bytes) -> PartitionPlan:
    cuts = np.frombuffer(cuts_bytes, dtype=np.int64)
    bounds = np.frombuffer(bounds_bytes, dtype=np.int64)
    if np.any(np.diff(bounds) <= 0):
        raise ValueError("Partition bounds must increase strictly.")
    idx = np.searchsorted(cuts, bounds)
    inner = bounds > 0
    if np.any(idx[inner] >= len(cuts)) or np.any(cuts[idx[inner]] != bounds[inner]):
        raise ValueError("Partition bounds must be cuts of the run.")
    recentred = (cuts & (cuts - 1)) == 0
    k = np.flatnonzero(recentred[:-1])
    points = np.union1d(bounds, cuts[recentred & (cuts > bounds[0]) & (cuts < bounds[-1])])
    kp = np.searchsorted(cuts, points)
    first = np.searchsorted(points, bounds)
    return PartitionPlan(
        recentred=k,
        recentred_cuts=cuts[k, None].astype(np.float64),
        left=kp[:-1],
        right=kp[1:],
        after_zero=points[:-1, None] > 0,
        lengths=np.diff(points).astype(np.float64)[:, None],
        first=first,
        split_parts=tuple(int(j) for j in np.flatnonzero(np.diff(first) > 1)),
    )


def partition_plan(cuts: np.ndarray, bounds: np.ndarray) -> PartitionPlan:
    """The :class:`PartitionPlan` of ``bounds`` (int64, increasing) among ``cuts``; cached.

    Raises
    ------
    ValueError
        A bound other than 0 is not a cut.
    """
    cuts = np.ascontiguousarray(cuts, dtype=np.int64)
    bounds = np.ascontiguousarray(bounds, dtype=np.int64)
    return _partition_plan(cuts.tobytes(), bounds.tobytes())


@dataclass(frozen=True, kw_only=True)
class StreamingStats:
    """What a replicate keeps of its SGD path (SPEC section 4), never the path itself.

    Segment k covers the iterates (cuts[k-1], cuts[k]] (cuts[-1] := 0).

    Attributes
    ----------
    n : int
        Number of SGD steps these statistics describe (= cuts[-1]).
    cuts, seg_dev, seg_shift, snap_t, snap_b, snap_a, snap_theta
        Kernel outputs, see :func:`ldpsim.tasks.kernel.sgd.ldp_sgd`; ``snap_a`` has shape
        (K, d, d), or (K, d, 1) (the diagonal of A alone) when no method needed more.
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
    snap_theta: np.ndarray
    gamma: float
    asymptotic_cov: np.ndarray

    @property
    def dim(self) -> int:
        return self.seg_dev.shape[1]

    @functools.cached_property
    def theta_bar(self) -> np.ndarray:
        """Polyak-Ruppert average (1/n) sum theta_i (computed once; read-only)."""
        theta_bar = self.seg_shift[-1] + self.snap_t[-1] / self.n
        theta_bar.flags.writeable = False
        return theta_bar

    @property
    def last_iterate(self) -> np.ndarray:
        """The last iterate theta_n."""
        return self.snap_theta[-1]

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
            snap_theta=self.snap_theta[sl],
            gamma=self.gamma,
            asymptotic_cov=self.asymptotic_cov,
        )

    def deviation_sums(self, bounds: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """Sums of (theta_i - ref) over (bounds[j-1], bounds[j]], j = 1..len(bounds)-1.

        ``bounds`` must be increasing, start at 0 or a cut, and consist of cuts. Each sum
        is formed from the running sums T at its two ends and at the recentring points
        (powers of two) inside it, around the centre in force there, so it keeps full
        precision however far ``ref`` and theta* lie from 0, and it does not depend on
        which other cuts the run recorded (SPEC 6: adding a method changes nothing else).
        """
        plan = partition_plan(self.cuts, np.asarray(bounds, dtype=np.int64))
        ref = np.ascontiguousarray(ref, dtype=np.float64)
        if ref.shape != (self.dim,):  # a scalar, as numpy's broadcasting took it
            # Not for every call: broadcast_to costs 4 us, twice a replicate.
            ref = np.ascontiguousarray(np.broadcast_to(ref, (self.dim,)))
        return _deviation_sums(
            self.snap_t,
            self.seg_shift,
            ref,
            plan.recentred,
            plan.recentred_cuts,
            plan.left,
            plan.right,
            plan.after_zero,
            plan.lengths,
            plan.first,
        )

    @property
    def full_matrix(self) -> bool:
        """Whether ``snap_a`` holds all of A (else only its diagonal, shape (K, d, 1))."""
        return self.snap_a.shape[2] == self.dim

    def self_normalizer(self) -> np.ndarray:
        """V_n = n^-2 sum_s s^2 (theta_bar_s - theta_bar_n)(theta_bar_s - theta_bar_n)'.

        Needs the whole matrix A (a method with ``needs_full_matrix``); see
        :meth:`self_normalizer_diagonal` for its diagonal alone.

        Raises
        ------
        ValueError
            The run kept only the diagonal of A.

        References
        ----------
        Lee, Liao, Seo & Shin (2022), AAAI; Liu, Hu, Ding & Kong (2023), ICML.
        """
        if not self.full_matrix:
            raise ValueError(
                "The run kept only the diagonal of the self-normalizer's A; a method that "
                "needs the whole matrix must set needs_full_matrix = True."
            )
        s = float(self.n)
        u = self.snap_t[-1] / s
        b = self.snap_b[-1]
        c_s = s * (s + 1.0) * (2.0 * s + 1.0) / 6.0
        v = self.snap_a[-1] - np.outer(u, b) - np.outer(b, u) + c_s * np.outer(u, u)
        return (v + v.T) / (2.0 * s * s)

    def self_normalizer_diagonal(self) -> np.ndarray:
        """The diagonal of :meth:`self_normalizer`, shape (d,); O(d) from either form of A.

        The same operations in the same order as the diagonal of the full V_n, so the
        two agree bit for bit.
        """
        s = float(self.n)
        u = self.snap_t[-1] / s
        b = self.snap_b[-1]
        c_s = s * (s + 1.0) * (2.0 * s + 1.0) / 6.0
        a = np.diagonal(self.snap_a[-1]) if self.full_matrix else self.snap_a[-1][:, 0]
        v = a - u * b - b * u + c_s * (u * u)
        return (v + v) / (2.0 * s * s)


@njit(cache=True)
def _deviation_sums(
    snap_t, seg_shift, ref, recentred, recentred_cuts, left, right, after_zero, lengths, first
):
    """:meth:`StreamingStats.deviation_sums` in one compiled call (a replicate's bm and
    bb each made a dozen numpy calls on arrays of a few rows: 15 us).

    The same operations in the same order as the numpy expressions it replaces, so the
    same bits: T just after cut k around the centre of the next segment (the kernel
    recentres after cuts that are powers of two, T -> T - s delta); each piece
    T(right) - T(left) + length (shift(right) - ref), T_0 = 0; a part's pieces summed as
    numpy's ``sum(axis=0)`` sums them (pairwise for one coordinate, row by row for
    more: :func:`sum_rows_as_numpy`).
    """
    d = snap_t.shape[1]
    t_after = snap_t.copy()
    for i in range(recentred.shape[0]):
        k = recentred[i]
        for j in range(d):
            t_after[k, j] -= recentred_cuts[i, 0] * (seg_shift[k + 1, j] - seg_shift[k, j])
    n_pieces = left.shape[0]
    pieces = np.empty((n_pieces, d))
    for p in range(n_pieces):
        r = right[p]
        for j in range(d):
            start = t_after[left[p], j] if after_zero[p, 0] else 0.0
            pieces[p, j] = snap_t[r, j] - start + lengths[p, 0] * (seg_shift[r, j] - ref[j])
    n_parts = first.shape[0] - 1
    out = np.empty((n_parts, d))
    for q in range(n_parts):
        a, b = first[q], first[q + 1]
        if b - a == 1:
            out[q] = pieces[a]
        else:
            sum_rows_as_numpy(pieces, a, b, out[q])
    return out


@njit(cache=True)
def sum_rows_as_numpy(rows, a, b, out):
    """``out[:] = rows[a:b].sum(axis=0)`` in numpy's order of additions: one column is
    a contiguous run, which numpy sums pairwise (:func:`_pairwise_sum`); several
    columns are added row by row."""
    d = rows.shape[1]
    if d > 1:
        for j in range(d):
            out[j] = rows[a, j]
        for i in range(a + 1, b):
            for j in range(d):
                out[j] += rows[i, j]
        return
    out[0] = _pairwise_sum(rows, a, b - a)


@njit(cache=True)
def _pairwise_sum(rows, a, n):
    """The sum of rows[a:a + n, 0] as numpy's pairwise summation adds it, for n <= 128:
    fewer than 8 items one by one from 0.0; more in eight partial sums, combined in
    pairs, and the rest one by one. (numpy splits longer runs in halves; a part of a
    partition has at most 65 pieces, one more than the powers of two inside it.)"""
    if n > 128:
        raise ValueError("more than 128 pieces in a part of the partition")
    if n < 8:
        total = 0.0
        for i in range(a, a + n):
            total += rows[i, 0]
        return total
    partial = np.empty(8)
    for j in range(8):
        partial[j] = rows[a + j, 0]
    i = 8
    while i < n - n % 8:
        for j in range(8):
            partial[j] += rows[a + i + j, 0]
        i += 8
    total = ((partial[0] + partial[1]) + (partial[2] + partial[3])) + (
        (partial[4] + partial[5]) + (partial[6] + partial[7])
    )
    while i < n:
        total += rows[a + i, 0]
        i += 1
    return total
