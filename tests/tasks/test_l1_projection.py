"""The l1-ball projection of the estimate and seed 003's Lemma 3.1 (SPEC 11)."""

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ldpsim.tasks.l1_projection import intersect_with_ball, project_l1_ball
from ldpsim.tasks.replicate import run_replicate
from ldpsim.tasks.spec import normalize_spec

vectors = hnp.arrays(
    np.float64, st.integers(1, 40), elements=st.floats(-100, 100, allow_subnormal=False)
)
radii = st.floats(0.01, 50.0)


@settings(max_examples=200, deadline=None)
@given(v=vectors, radius=radii)
@example(v=np.array([2.0] + [2.220446049250313e-16] * 7), radius=2.0)
@example(v=np.array([1e17, 0.3]), radius=1.0)  # 1e17 - 1 rounds to 1e17 (a hunt found it)
@example(v=np.array([-1e17, 1e17, 5.0]), radius=1.0)  # ... with the largest tied
def test_projection_is_the_soft_threshold_onto_the_sphere(v, radius):
    x = project_l1_ball(v, radius)
    if np.abs(v).sum() <= radius:
        assert np.array_equal(x, v)  # inside: unchanged
        return
    # Outside: on the sphere ||x||_1 = r, x = sign(v) max(|v| - lambda, 0) for one
    # lambda > 0 (the KKT conditions of min ||x - v||_2 over the ball, which make x the
    # unique projection).
    assert np.abs(x).sum() == pytest.approx(radius, rel=1e-9, abs=1e-12)
    assert np.all(np.sign(x) * np.sign(v) >= 0)
    kept = x != 0
    shrink = np.abs(v) - np.abs(x)
    lam = shrink[kept].mean()
    # lambda >= 0; it rounds to 0 where ||v||_1 exceeds r by less than v's resolution
    # (v = (2, 7 x 2.2e-16), r = 2: x = (2, 0, ...), hypothesis found it).
    assert lam >= 0
    np.testing.assert_allclose(shrink[kept], lam, rtol=0, atol=1e-9 * (1 + np.abs(v).max()))
    assert np.all(np.abs(v[~kept]) <= lam * (1 + 1e-9) + 1e-12)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), radius=radii)
def test_lemma_3_1_for_any_point_in_the_ball(data, radius):
    # Seed 003, Lemma 3.1: for theta* in the l1 ball of radius r and any theta_bar, the
    # projection theta_tilde satisfies ||theta_tilde - theta*||_2^2 <= 2 r
    # ||theta_bar - theta*||_inf; and it is never farther from theta* than theta_bar
    # (a projection onto a convex set containing theta*).
    d = data.draw(st.integers(1, 30))
    unit = st.floats(-1, 1, allow_subnormal=False)
    direction = data.draw(hnp.arrays(np.float64, d, elements=unit))
    scale = data.draw(st.floats(0, 1))
    norm = np.abs(direction).sum()
    # Divided by the norm first (entries of at most 1): radius / norm overflowed to inf
    # where the norm was the smallest normal double (hypothesis found 2.2e-308).
    truth = direction / norm * (scale * radius) if norm > 0 else direction
    error = data.draw(hnp.arrays(np.float64, d, elements=st.floats(-50, 50)))
    estimate = truth + error
    projected = project_l1_ball(estimate, radius)
    lhs = np.sum((projected - truth) ** 2)
    assert lhs <= 2 * radius * np.max(np.abs(estimate - truth)) * (1 + 1e-9) + 1e-12
    assert lhs <= np.sum((estimate - truth) ** 2) * (1 + 1e-9) + 1e-12


def test_lemma_3_1_on_every_replicate():
    # sparse_mean d = 1000, s = 4 (r = M s = 4), sparse Laplace, n = 2e4, 8 replicates:
    # ||theta_bar||_1 is about 1000 * 0.08 * 0.8 = 64 > r, so the projection binds; on
    # every replicate Lemma 3.1 holds and the projection's l2 error is below the
    # average's (observed on reps 0-2: ||.||_2^2 0.21-0.23 against 6.1-6.4, with the
    # bound 2 r ||.||_inf = 1.9-2.1).
    spec = {"model": "sparse_mean", "d": 1000, "sparsity": 4, "coef": 0.5, "eps": 1.0}
    spec = {**spec, "n": 20_000, "methods": {"oracle": {}}}
    radius = normalize_spec(spec).model.constraint_radius()
    assert radius == 4.0
    for rep in range(8):
        result = run_replicate(spec, rep)
        truth, estimate, projected = result.truth, result.estimate, result.projected
        assert np.abs(truth).sum() <= radius and np.abs(estimate).sum() > radius
        assert np.abs(projected).sum() == pytest.approx(radius, rel=1e-12)
        lhs = np.sum((projected - truth) ** 2)
        assert lhs <= 2 * radius * np.max(np.abs(estimate - truth))
        assert lhs < np.sum((estimate - truth) ** 2)


def test_intersection_with_the_ball_is_never_negative():
    # Cut to [-2, 2]: inside stays, a straddling bound is cut, an interval wholly outside
    # becomes the nearest end point (length 0, not upper < lower).
    lower = np.array([-1.0, -3.0, 2.5, -9.0, -5.0])
    upper = np.array([1.0, 0.5, 4.0, -2.5, 5.0])
    cut_lower, cut_upper = intersect_with_ball(lower, upper, 2.0)
    np.testing.assert_array_equal(cut_lower, [-1.0, -2.0, 2.0, -2.0, -2.0])
    np.testing.assert_array_equal(cut_upper, [1.0, 0.5, 2.0, -2.0, 2.0])
    assert np.all(cut_upper >= cut_lower)


def test_intersected_intervals():
    # intersect_constraint cuts each interval to [-r, r] and changes nothing else: at
    # n = 2000 the oracle's half-length 1.645 sqrt(128 / 2000) = 0.42 is far below r = 4,
    # so only a d = 1000, s = 1 spec (r = 1) with eps = 0.2 binds: Laplace noise variance
    # 2 (2 / 0.2)^2 = 200, half-length 1.645 sqrt(200 / 2000) = 0.52 around averages of
    # sd 0.32, so about one coordinate in eight reaches past -1 or 1.
    spec = {"model": "sparse_mean", "d": 1000, "sparsity": 1, "eps": 0.2, "n": 2000}
    methods = {"oracle": {}, "cut": {"method": "oracle", "intersect_constraint": True}}
    result = run_replicate({**spec, "methods": methods}, 0)
    lower, upper = result.lower["oracle"], result.upper["oracle"]
    assert np.any(lower < -1) and np.any(upper > 1)
    np.testing.assert_array_equal(result.lower["cut"], np.clip(lower, -1.0, 1.0))
    np.testing.assert_array_equal(result.upper["cut"], np.clip(upper, -1.0, 1.0))
    assert result.projected.shape == (1000,)
    assert math.isclose(np.abs(result.projected).sum(), 1.0, rel_tol=1e-12)
    # A model without an l1 ball stores no projection and refuses the option.
    assert (
        run_replicate({"model": "mean", "d": 2, "n": 100, "methods": {"oracle": {}}}, 0).projected
        is None
    )
    with pytest.raises(ValueError, match="states none"):
        normalize_spec({"model": "mean", "n": 100, "methods": {"cut": methods["cut"]}})
    with pytest.raises(TypeError, match="true or false"):
        normalize_spec({**spec, "methods": {"oracle": {"intersect_constraint": 1}}})


def test_a_stack_of_points_projects_as_each_point_alone():
    # The chunk's estimates are projected in whole-array operations: row by row the
    # same bits as one point alone, points inside the ball, beyond 2**53 r and with
    # tied largest coordinates included.
    rng = np.random.default_rng(5)
    points = rng.standard_normal((40, 3, 12)) * 10 ** rng.uniform(-2, 2, (40, 3, 1))
    points[0, 0, 0] = 1e17
    points[1, 1, :2] = -9.0
    stacked = project_l1_ball(points, 1.5)
    alone = np.array([[project_l1_ball(point, 1.5) for point in row] for row in points])
    assert stacked.tobytes() == alone.tobytes()
    assert (np.abs(stacked).sum(axis=-1) <= 1.5 * (1 + 1e-12)).all()
