"""What a plugin interval method returns is checked, not assumed (a hunt of 2026-12-01).

``interval`` returns (lower, upper) of shape (d,) and ``intervals_batch`` of shape (R, d)
(docs/extending.md). Before, a scalar from ``interval`` filled every coordinate with one
interval, a longer array failed the whole chunk's replicates (every method's cells), and
a batched path returning (d, R) was stored transposed wherever a chunk had d rows: the
check before a run fell back to ``interval`` on its shape error and passed. The check
covered the first grid point only, so a batched path right at d = 1 and wrong in a
second coordinate went unchecked at d = 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from ldpsim.pipeline.api import check_batched_methods
from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.sweep import load_sweep
from ldpsim.tasks import normalize_spec, plugins, run_replicate
from ldpsim.tasks.chunk import (
    BatchDisagreement,
    BatchShapeError,
    check_batch_api,
    compute_chunk,
)
from ldpsim.tasks.grid_point import GridPointSetup
from ldpsim.tasks.intervals.base import IntervalMethod

HALF = 0.1


@dataclass(frozen=True, kw_only=True)
class Plain(IntervalMethod):
    """theta_bar +- 0.1, replicate by replicate."""

    name = "plain"

    def interval(self, stats, level, rng):
        return stats.theta_bar - HALF, stats.theta_bar + HALF


@dataclass(frozen=True, kw_only=True)
class Scalar(Plain):
    """Coordinate 0's interval as two floats: one value for every coordinate."""

    name = "scalar"

    def interval(self, stats, level, rng):
        lower, upper = Plain.interval(self, stats, level, rng)
        return float(lower[0]), float(upper[0])


@dataclass(frozen=True, kw_only=True)
class LongWherePositive(Plain):
    """One bound too many where theta_bar_0 > 0."""

    name = "long_where_positive"

    def interval(self, stats, level, rng):
        lower, upper = Plain.interval(self, stats, level, rng)
        if stats.theta_bar[0] > 0:
            return np.append(lower, 0.0), np.append(upper, 0.0)
        return lower, upper


@dataclass(frozen=True, kw_only=True)
class Transposed(Plain):
    """The right numbers, returned (d, R)."""

    name = "transposed"

    def intervals_batch(self, stats, level, rngs):
        return (stats.theta_bar - HALF).T, (stats.theta_bar + HALF).T


@dataclass(frozen=True, kw_only=True)
class Flat(Plain):
    """The right numbers, returned flat (R d,)."""

    name = "flat"

    def intervals_batch(self, stats, level, rngs):
        return (stats.theta_bar - HALF).ravel(), (stats.theta_bar + HALF).ravel()


@dataclass(frozen=True, kw_only=True)
class FirstCoordinateOnly(Plain):
    """A batched path right at d = 1: every coordinate gets coordinate 0's half-width
    times 1 + j (a slip that only a second coordinate shows)."""

    name = "first_coordinate_only"

    def intervals_batch(self, stats, level, rngs):
        half = HALF * (1.0 + np.arange(stats.dim))
        return stats.theta_bar - half, stats.theta_bar + half


@dataclass(frozen=True, kw_only=True)
class BatchRaises(Plain):
    """A batched path that raises for every chunk; ``interval`` works."""

    name = "batch_raises"

    def intervals_batch(self, stats, level, rngs):
        raise RuntimeError("no batch today")


@dataclass(frozen=True, kw_only=True)
class UpperFlat(Plain):
    """Right lower bounds, (R, d); the upper ones flat (R d,)."""

    name = "upper_flat"

    def intervals_batch(self, stats, level, rngs):
        return stats.theta_bar - HALF, (stats.theta_bar + HALF).ravel()


@dataclass(frozen=True, kw_only=True)
class ScalarEstimate(IntervalMethod):
    """A competitor (own_estimate) whose estimate is one float; its bounds are (d,)."""

    name = "scalar_estimate"
    own_estimate: ClassVar[bool] = True

    def estimate_interval(self, users, level, rng):
        return 0.5, np.full(2, -1.0), np.full(2, 1.0)


UNITS = (
    Plain,
    Scalar,
    LongWherePositive,
    Transposed,
    Flat,
    FirstCoordinateOnly,
    BatchRaises,
    UpperFlat,
    ScalarEstimate,
)
# WritesIntoStats (below) registers in its own test.


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    """The units above registered in this process only, for this test."""
    monkeypatch.setattr(plugins, "_REGISTERED", {kind: {} for kind in plugins.GROUPS})
    for unit in UNITS:
        plugins.register(unit)


def mean_spec(methods: dict, d: int = 2, **more):
    return normalize_spec(
        {"model": "mean", "d": d, "n": 2000, "seed": 5, "methods": methods, **more}
    )


def test_an_interval_of_another_shape_fails_its_own_cells_alone():
    reps = list(range(40))
    methods = {"plain": {}, "bm": {}, "scalar": {}, "long_where_positive": {}}
    setup = GridPointSetup.of(mean_spec(methods, checkpoints=[500]))
    out = compute_chunk(setup, reps)
    clean = compute_chunk(GridPointSetup.of(mean_spec({"plain": {}, "bm": {}})), reps)
    labels = list(methods)
    failed = out["method_failed"]  # (M, R, K)
    # The scalar fails every cell, with its reason; no coordinate gets another's interval.
    assert failed[labels.index("scalar")].all()
    assert np.isnan(out["lower"][labels.index("scalar")]).all()
    reason = out["errors"][reps[0]]["methods"]["scalar"]
    assert reason.startswith("ValueError at n = ") and "shape (2,)" in reason, reason
    assert "got () and ()" in reason, reason
    # The long one fails exactly the cells where theta_bar_0 > 0, at each point.
    positive = out["estimate"][..., 0] > 0  # (R, K)
    assert 5 <= positive.sum() <= positive.size - 5
    np.testing.assert_array_equal(failed[labels.index("long_where_positive")], positive)
    long = labels.index("long_where_positive")
    np.testing.assert_array_equal(out["lower"][long][~positive], out["lower"][0][~positive])
    # The others keep every cell, with the numbers of a chunk without the two.
    assert not failed[: labels.index("scalar")].any() and not out["failed"].any()
    for m in range(2):
        for name in ("lower", "upper"):
            np.testing.assert_array_equal(out[name][m][:, -1], clean[name][m], err_msg=name)


@pytest.mark.parametrize("label", ["transposed", "flat"])
def test_a_batched_path_of_another_shape_is_refused_before_a_run(label):
    rs = mean_spec({label: {}})
    with pytest.raises(BatchShapeError) as refused:
        check_batch_api(rs, range(20))
    message = str(refused.value)
    assert "\n" not in message
    assert f"'{label}'" in message and "(R, d) = (20, 2)" in message, message
    # With as many replicates as coordinates, (d, R) is (R, d): its numbers are refused.
    if label == "transposed":
        with pytest.raises(BatchDisagreement, match="disagrees with its interval"):
            check_batch_api(rs, range(2))


def test_a_batched_path_that_raises_is_not_refused_its_replicates_run_alone():
    # docs/extending.md: "A call that raises makes the run compute the chunk's replicates
    # with interval, one at a time." The check before a run passes such a method (both
    # ways give interval's numbers); only a wrong shape is refused. Re-raising any
    # exception of the batched call in the check (a mutation hunt, h16h) refused the
    # run, unnoticed by the task tests.
    rs = mean_spec({"batch_raises": {}, "plain": {}}, checkpoints=[500, 2000])
    assert check_batch_api(rs, range(20)) == 1
    out = compute_chunk(GridPointSetup.of(rs), range(6))
    assert not out["method_failed"].any() and not out["errors"]
    for name in ("lower", "upper"):
        np.testing.assert_array_equal(out[name][0], out[name][1], strict=True)


def test_one_bound_of_another_shape_is_refused_before_a_run():
    # Either array of another shape is refused, not only both (a mutation hunt, h16h:
    # with "and", upper bounds returned flat ended the check in an IndexError).
    with pytest.raises(BatchShapeError, match=r"'upper_flat'.*got \(20, 2\) and \(40,\)"):
        check_batch_api(mean_spec({"upper_flat": {}}), range(20))


def test_only_the_plugins_batched_paths_are_checked():
    # The built-in methods are known good and not checked (check_batched_methods'
    # docstring): the count is the plugins' (checking them too passed the tests, a
    # mutation hunt, h16h).
    assert check_batch_api(mean_spec({"bb": {}, "oracle": {}, "batch_raises": {}}), range(2)) == 1
    assert check_batch_api(mean_spec({"bb": {}, "sn": {}, "plain": {}}), range(2)) == 0


def test_a_competitors_estimate_of_another_shape_fails_its_cells():
    # A competitor (own_estimate) returns (estimate, lower, upper), each (d,); a float
    # estimate with bounds of the right shape was stored, one value in every coordinate,
    # as a success (a mutation hunt, h16h: the check of the estimate dropped, or of
    # all three arrays together).
    out = compute_chunk(GridPointSetup.of(mean_spec({"scalar_estimate": {}})), [0, 1])
    assert out["method_failed"].all() and np.isnan(out["method_estimate"]).all()
    reason = out["errors"][0]["methods"]["scalar_estimate"]
    assert reason == (
        "ValueError: estimate_interval of 'scalar_estimate' must return arrays of shape "
        "(2,) (one value per coordinate); got () and (2,) and (2,)."
    ), reason


@dataclass(frozen=True, kw_only=True)
class UsersMean(IntervalMethod):
    """A competitor: the users' raw mean +- 1, from estimate_interval alone."""

    name = "users_mean"
    own_estimate: ClassVar[bool] = True

    def estimate_interval(self, users, level, rng):
        centre = users.observations().mean(axis=0)
        return centre, centre - 1.0, centre + 1.0


@dataclass(frozen=True, kw_only=True)
class NoEstimateInterval(IntervalMethod):
    """Sets own_estimate and implements neither estimate_interval nor interval."""

    name = "no_estimate_interval"
    own_estimate: ClassVar[bool] = True


def test_a_competitor_plugin_implements_estimate_interval_alone():
    # docs/extending.md: a method with own_estimate = True implements
    # estimate_interval(users, level, rng) (the base class: "instead" of interval).
    # Registration refused it, asking for interval (a mutation hunt, h16h).
    plugins.register(UsersMean)
    out = compute_chunk(GridPointSetup.of(mean_spec({"users_mean": {}})), [0, 1])
    assert not out["method_failed"].any() and not out["errors"]
    estimate = out["method_estimate"][0]
    assert estimate.shape == (2, 2) and np.isfinite(estimate).all()
    np.testing.assert_array_equal(out["upper"][0] - estimate, 1.0)
    with pytest.raises(ValueError, match=r"does not implement estimate_interval\(users"):
        plugins.register(NoEstimateInterval)


def test_the_first_point_of_each_dimension_is_checked(tmp_path):
    sweep = tmp_path / "dims.toml"
    body = 'replicates = 4\nseed = 8\n[spec]\nmodel = "mean"\nn = 2000\n[grid]\nd = {}\n'
    sweep.write_text(body.format("[1, 2]") + "[methods.first_coordinate_only]\n")
    with pytest.raises(InputError, match=r"'first_coordinate_only'.*coordinate 1"):
        check_batched_methods(load_sweep(sweep))
    # At d = 1 alone it is right: nothing refused.
    sweep.write_text(body.format("[1]") + "[methods.first_coordinate_only]\n")
    check_batched_methods(load_sweep(sweep))


@dataclass(frozen=True, kw_only=True)
class WritesIntoStats(Plain):
    """Widens the oracle's covariance in place: every later chunk's oracle would change."""

    name = "writes_into_stats"

    def interval(self, stats, level, rng):
        stats.asymptotic_cov *= 4.0
        return Plain.interval(self, stats, level, rng)


def test_the_grid_points_shared_arrays_cannot_be_changed():
    # A hunt (2026-12-01): the set-up's arrays are shared by every chunk of a grid point
    # (and run_replicate's truth was the set-up's own): a write changed later numbers.
    plugins.register(WritesIntoStats)
    spec = mean_spec({"oracle": {}, "writes_into_stats": {}})
    setup = GridPointSetup.of(spec)
    first = compute_chunk(setup, [0, 1])
    second = compute_chunk(setup, [2, 3])
    alone = compute_chunk(GridPointSetup.of(mean_spec({"oracle": {}})), [2, 3])
    np.testing.assert_array_equal(second["upper"][0], alone["upper"][0])
    assert first["method_failed"][1].all() and second["method_failed"][1].all()
    assert "read-only" in first["errors"][0]["methods"]["writes_into_stats"]
    result = run_replicate(spec, 0)
    result.truth[:] += 1.0
    np.testing.assert_array_equal(run_replicate(spec, 0).truth, np.zeros(2))
