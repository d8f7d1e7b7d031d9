"""Base class of the confidence-interval methods."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ldpsim.tasks.stats import StackedStats, StreamingStats
from ldpsim.tasks.validation import reading_recorded

if TYPE_CHECKING:
    from ldpsim.tasks.mechanisms.base import Mechanism
    from ldpsim.tasks.models.base import Model
    from ldpsim.tasks.users import Users


def smallest_b() -> int:
    """The fewest bootstrap draws or chains a method takes (bb, np_boot, fang): 2, since
    one has no spread (B = 1 gave intervals of length 0); 1 in a store's recorded sweep
    (:func:`ldpsim.tasks.validation.recorded_specs`), as before."""
    return 1 if reading_recorded() else 2


@dataclass(frozen=True, kw_only=True)
class IntervalMethod:
    """A coordinatewise confidence-interval method built from streaming statistics.

    Subclasses set ``name`` and implement :meth:`interval`; methods that need segment
    sums also implement :meth:`cuts`, methods that draw random numbers set
    ``uses_rng = True`` (they then get their own stream, SPEC section 6), methods that
    need the whole matrix A set ``needs_full_matrix = True``.

    A competitor that spends the privacy budget differently (SPEC section 10) sets
    ``own_estimate = True`` and implements :meth:`estimate_interval` instead: it gets
    the replicate's users (:class:`ldpsim.tasks.users.Users`), not the LDP run's
    statistics, and returns its own point estimate with its interval.

    Parameters
    ----------
    intersect_constraint : bool
        Every method takes it. True: each interval [l_j, u_j] is intersected with
        [-r, r], where r is the radius of the l1 ball the model states theta* lies in
        (``Model.constraint_radius``; SPEC 11, seed 003). Since |theta*_j| <= r the
        intersection covers whenever the interval does, and it is never longer. An
        interval wholly outside [-r, r] becomes the nearer end point, -r or r, a
        zero-length interval (never l_j > u_j; :func:`ldpsim.tasks.l1_projection.
        intersect_with_ball`). Default False.
    """

    name: ClassVar[str]
    uses_rng: ClassVar[bool] = False
    #: True: the method computes its own estimate from the users (:meth:`estimate_interval`).
    own_estimate: ClassVar[bool] = False
    #: True for a method that reads off-diagonal entries of the self-normalizer's A
    #: (:meth:`StreamingStats.self_normalizer`): the kernel then keeps all of A, O(d^2)
    #: per step; otherwise only its diagonal (:meth:`StreamingStats.self_normalizer_diagonal`).
    needs_full_matrix: ClassVar[bool] = False
    #: Parameters added after stores were written with the method: left out of its
    #: stream key while at their default, so that existing streams stay as they were.
    late_params: ClassVar[tuple[str, ...]] = ("intersect_constraint",)

    intersect_constraint: bool = False

    def key(self) -> dict[str, Any]:
        """The parameters that key the method's own stream (SPEC section 6).

        All of them, except a parameter of :attr:`late_params` at its default.
        """
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        return {
            name: value
            for name, value in dataclasses.asdict(self).items()
            if not (name in self.late_params and value == defaults[name])
        }

    def cuts(self, n: int, gamma: float) -> np.ndarray:
        """Segment ends (in [1, n]) whose sums the method needs for a run of n steps."""
        return np.array([n], dtype=np.int64)

    def check(self, n: int, gamma: float) -> None:
        """Raise ValueError if the method cannot be computed for n steps and this gamma."""

    def check_setup(self, model: Model, mechanism: Mechanism, n: int, batch: int) -> None:
        """Raise ValueError if the method cannot run with this model, mechanism, n and
        batch (checked when the spec is normalized, before any work)."""

    def interval(
        self, stats: StreamingStats, level: float, rng: np.random.Generator | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return (lower, upper), each of shape (d,), at confidence ``level`` in (0, 1)."""
        raise NotImplementedError

    def intervals_batch(
        self, stats: StackedStats, level: float, rngs: Sequence[np.random.Generator] | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Optional: the intervals of a whole chunk of replicates at once.

        A method that implements it is computed by it in a run, one call per chunk
        (of up to thousands of replicates) instead of one :meth:`interval` per
        replicate; the built-in bb, bm, sn and the oracle do. It must give what
        :meth:`interval` gives for each replicate: before a run, the driver computes
        the first replicates of the sweep's first grid point both ways and refuses a
        method whose two ways disagree (:func:`has_batch`; docs/extending.md).

        Parameters
        ----------
        stats : StackedStats
            The chunk's statistics, every array with a leading axis of R replicates
            (``stats.theta_bar`` (R, d), ``stats.deviation_sums(bounds, ref)``
            (R, parts, d)); ``stats.replicate(i)`` is what :meth:`interval` gets.
        level : float
            Confidence level, in (0, 1).
        rngs : sequence of R Generators, or None
            Each replicate's own stream (``rngs[i]`` is the ``rng`` :meth:`interval`
            gets for replicate i), for a method with ``uses_rng``; else None.

        Returns
        -------
        (lower, upper), each of shape (R, d)
            A replicate whose bounds are not all finite (NaN) failed: that replicate's
            cell alone; :meth:`interval` is then called for it, so that its exception
            and traceback are recorded. An exception from this method makes the run
            compute the chunk's replicates by :meth:`interval`, one at a time.

        The default calls :meth:`interval` for each replicate (NaN where it raises);
        it is not what a run calls (:func:`has_batch`).
        """
        lower = np.full((stats.count, stats.dim), np.nan)
        upper = np.full((stats.count, stats.dim), np.nan)
        for i in range(stats.count):
            rng = None if rngs is None else rngs[i]
            try:
                with np.errstate(all="raise"):
                    lower[i], upper[i] = self.interval(stats.replicate(i), level, rng)
            except Exception:  # that replicate's cell alone
                continue
        return lower, upper

    def estimate_interval(
        self, users: Users, level: float, rng: np.random.Generator | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A competitor's (estimate, lower, upper), each of shape (d,), from ``users``."""
        raise NotImplementedError


def has_batch(method: IntervalMethod) -> bool:
    """Whether ``method`` computes a chunk's intervals in one call: its class implements
    :meth:`IntervalMethod.intervals_batch` (a competitor, with ``own_estimate``, never)."""
    if method.own_estimate:
        return False
    return type(method).intervals_batch is not IntervalMethod.intervals_batch
