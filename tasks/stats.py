"""Streaming statistics of one LDP-SGD run, as the interval methods see them."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ldpsim.tasks.compile_lock import in_turn
from ldpsim.tasks.compiled import cached_njit


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
        out = np.empty((len(plan.first) - 1, self.dim))
        in_turn(_fill_deviation_sums)(self.snap_t, self.seg_shift, ref, *plan_arrays(plan), out)
        return out

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
        a = np.diagonal(self.snap_a[-1]) if self.full_matrix else self.snap_a[-1][:, 0]
        return normalizer_diagonal(self.n, self.snap_t[-1], self.snap_b[-1], a)

    def stacked(self) -> StackedStats:
        """These statistics as a chunk of one replicate (:class:`StackedStats`): what a
        method's batched path computes on, so that its per-replicate path is the same code."""
        return StackedStats(
            n=self.n,
            cuts=self.cuts,
            seg_dev=self.seg_dev[None],
            seg_shift=self.seg_shift[None],
            snap_t=self.snap_t[None],
            snap_b=self.snap_b[None],
            snap_a=self.snap_a[None],
            snap_theta=self.snap_theta[None],
            gamma=self.gamma,
            asymptotic_cov=self.asymptotic_cov,
        )


def normalizer_diagonal(
    n: int, snap_t: np.ndarray, snap_b: np.ndarray, a_diagonal: np.ndarray
) -> np.ndarray:
    """The diagonal of the self-normalizer V_n from the statistics at step n: T_n, b_n and
    the diagonal of A_n, each of shape (..., d) (one replicate, or a chunk's stacked).

    Elementwise, so one replicate's value is the same, bit for bit, alone or in a chunk.
    """
    s = float(n)
    u = snap_t / s
    c_s = s * (s + 1.0) * (2.0 * s + 1.0) / 6.0
    v = a_diagonal - u * snap_b - snap_b * u + c_s * (u * u)
    return (v + v) / (2.0 * s * s)


@dataclass(frozen=True, kw_only=True)
class StackedStats:
    """The streaming statistics of a chunk's replicates of one grid point, stacked.

    Every array of :class:`StreamingStats` with a leading axis of R replicates, as
    the kernel's outputs of a chunk come (``seg_dev`` (R, K, d), ``snap_a`` (R, K, d,
    d) or (R, K, d, 1), ...); ``n``, ``cuts``, ``gamma`` and ``asymptotic_cov`` are the
    grid point's. A method's batched path (``intervals_batch``) computes every
    replicate's interval from these in a few calls; :meth:`replicate` is one of them
    as :class:`StreamingStats`, what ``interval`` gets. Each quantity here is the one
    :class:`StreamingStats` gives, bit for bit, for each replicate.
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
    def count(self) -> int:
        """R, the number of replicates."""
        return self.seg_dev.shape[0]

    @property
    def dim(self) -> int:
        return self.seg_dev.shape[2]

    @functools.cached_property
    def theta_bar(self) -> np.ndarray:
        """Each replicate's Polyak-Ruppert average, (R, d) (read-only)."""
        theta_bar = self.seg_shift[:, -1] + self.snap_t[:, -1] / self.n
        theta_bar.flags.writeable = False
        return theta_bar

    @property
    def last_iterate(self) -> np.ndarray:
        """Each replicate's last iterate theta_n, (R, d)."""
        return self.snap_theta[:, -1]

    @property
    def full_matrix(self) -> bool:
        """Whether ``snap_a`` holds all of A (else only its diagonal)."""
        return self.snap_a.shape[3] == self.dim

    def _select(self, steps: slice, rows: slice | np.ndarray, n: int) -> StackedStats:
        # C-contiguous copies where a slice is not: the compiled sums then meet one
        # memory layout only (one compiled version, loaded once per process).
        def take(array: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(array[rows, steps])

        return StackedStats(
            n=int(n),
            cuts=self.cuts[steps],
            seg_dev=take(self.seg_dev),
            seg_shift=take(self.seg_shift),
            snap_t=take(self.snap_t),
            snap_b=take(self.snap_b),
            snap_a=take(self.snap_a),
            snap_theta=take(self.snap_theta),
            gamma=self.gamma,
            asymptotic_cov=self.asymptotic_cov,
        )

    def prefix(self, n: int) -> StackedStats:
        """The statistics of every replicate's first ``n`` steps; ``n`` must be a cut."""
        k = int(np.searchsorted(self.cuts, n))
        if k >= len(self.cuts) or self.cuts[k] != n:
            raise ValueError(f"Checkpoint {n} is not a cut of this run.")
        return self._select(slice(0, k + 1), slice(None), n)

    def rows(self, index: np.ndarray) -> StackedStats:
        """The replicates ``index`` (positions along the first axis) alone."""
        return self._select(slice(None), np.asarray(index, dtype=np.intp), self.n)

    def replicate(self, i: int) -> StreamingStats:
        """Replicate ``i`` as :class:`StreamingStats` (views, no copy)."""
        return StreamingStats(
            n=self.n,
            cuts=self.cuts,
            seg_dev=self.seg_dev[i],
            seg_shift=self.seg_shift[i],
            snap_t=self.snap_t[i],
            snap_b=self.snap_b[i],
            snap_a=self.snap_a[i],
            snap_theta=self.snap_theta[i],
            gamma=self.gamma,
            asymptotic_cov=self.asymptotic_cov,
        )

    def deviation_sums(self, bounds: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """:meth:`StreamingStats.deviation_sums` of every replicate, (R, parts, d), in one
        compiled call; ``ref`` is (R, d), (d,) or a scalar. Each replicate's sums are
        the ones it gives alone, bit for bit."""
        plan = partition_plan(self.cuts, np.asarray(bounds, dtype=np.int64))
        ref = np.ascontiguousarray(np.broadcast_to(ref, (self.count, self.dim)), dtype=np.float64)
        out = np.empty((self.count, len(plan.first) - 1, self.dim))
        in_turn(_fill_stacked_deviation_sums)(
            np.ascontiguousarray(self.snap_t),
            np.ascontiguousarray(self.seg_shift),
            ref,
            *plan_arrays(plan),
            out,
        )
        return out

    def self_normalizer_diagonal(self) -> np.ndarray:
        """Each replicate's :meth:`StreamingStats.self_normalizer_diagonal`, (R, d)."""
        last = self.snap_a[:, -1]
        a = np.diagonal(last, axis1=1, axis2=2) if self.full_matrix else last[:, :, 0]
        return normalizer_diagonal(self.n, self.snap_t[:, -1], self.snap_b[:, -1], a)


def plan_arrays(plan: PartitionPlan) -> tuple[np.ndarray, ...]:
    """The arrays of ``plan`` in the order the compiled sums take them."""
    return (
        plan.recentred,
        plan.recentred_cuts,
        plan.left,
        plan.right,
        plan.after_zero,
        plan.lengths,
        plan.first,
    )


@cached_njit()
def _fill_deviation_sums(
    snap_t, seg_shift, ref, recentred, recentred_cuts, left, right, after_zero, lengths, first, out
):
    """:meth:`StreamingStats.deviation_sums` of one replicate into ``out`` (parts, d), in
    one compiled call (a replicate's bm and bb each made a dozen numpy calls on arrays of
    a few rows: 15 us).

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
    for q in range(n_parts):
        a, b = first[q], first[q + 1]
        if b - a == 1:
            for j in range(d):  # element by element: a row assignment compiles numba's
                out[q, j] = pieces[a, j]  # broadcasting copy, seconds of a cold start
        else:
            sum_rows_as_numpy(pieces, a, b, out[q])


@cached_njit()
def _fill_stacked_deviation_sums(
    snap_t, seg_shift, ref, recentred, recentred_cuts, left, right, after_zero, lengths, first, out
):
    """:func:`_fill_deviation_sums` of every replicate of a chunk: ``snap_t``,
    ``seg_shift`` (R, K, d), ``ref`` (R, d), ``out`` (R, parts, d)."""
    for r in range(snap_t.shape[0]):
        _fill_deviation_sums(
            snap_t[r],
            seg_shift[r],
            ref[r],
            recentred,
            recentred_cuts,
            left,
            right,
            after_zero,
            lengths,
            first,
            out[r],
        )


@cached_njit()
def sum_rows_as_numpy(rows, a, b, out):
    """``out[:] = rows[a:b].sum(axis=0)`` in numpy's order of additions: one column is
    a contiguous run, which numpy sums pairwise (:func:`pairwise_sum`); several
    columns are added row by row."""
    d = rows.shape[1]
    if d > 1:
        for j in range(d):
            out[j] = rows[a, j]
        for i in range(a + 1, b):
            for j in range(d):
                out[j] += rows[i, j]
        return
    out[0] = pairwise_sum(rows[a:b, 0])


@cached_njit()
def pairwise_sum(values):
    """The sum of the 1-d array ``values`` as numpy's pairwise summation adds a contiguous
    run (``np.sum``, ``np.add.reduce``): fewer than 8 items one by one from 0.0; up to 128
    in eight partial sums, combined in pairs, and the rest one by one; more split in two
    halves (the first a multiple of 8 items long), each summed so, and the two added.

    The same bits as numpy for any length, and the same on every machine: numpy's order
    does not depend on the processor (unlike a BLAS kernel's).
    """
    n = values.shape[0]
    if n < 8:
        total = 0.0
        for i in range(n):
            total += values[i]
        return total
    if n <= 128:
        partial = np.empty(8)
        for j in range(8):
            partial[j] = values[j]
        i = 8
        while i < n - n % 8:
            for j in range(8):
                partial[j] += values[i + j]
            i += 8
        total = ((partial[0] + partial[1]) + (partial[2] + partial[3])) + (
            (partial[4] + partial[5]) + (partial[6] + partial[7])
        )
        while i < n:
            total += values[i]
            i += 1
        return total
    half = n // 2
    half -= half % 8
    return pairwise_sum(values[:half]) + pairwise_sum(values[half:])
