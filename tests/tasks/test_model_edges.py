"""Edges of the built-in models that the contract tests of test_models.py left open:
the Jacobian G of the models without a quadrature, and the ends of their parameter ranges.
"""

import math

import numpy as np
import pytest
from simulated_jacobian import jacobian_by_simulation

from ldpsim.tasks import models
from ldpsim.tasks.l1_projection import project_l1_ball

#: The models whose G is a closed form (SPEC 3, 11, 12); the regressions' quadrature is
#: checked the same way in test_regression_models.py.
CLOSED_FORM = [
    models.Mean(d=2, loc=0.5),
    models.BoundedMean(a=2.0, b=5.0),
    models.Quantile(tau=0.8, loc=-1.0),
    models.QuantileRegression(tau=0.3, coef=[0.5, 1.0, -1.0]),
    models.SparseMean(d=4, sparsity=2, magnitude=1.5, coef=[0.5, -0.5, 0.0, 1.0]),
    models.OneHotQuantileRegression(d=3, tau=0.6, probs=[0.2, 0.3, 0.5], coef=[1.0, 0.0, -1.0]),
]


@pytest.mark.parametrize("model", CLOSED_FORM, ids=lambda m: m.name)
def test_jacobian_by_simulation(model):
    # G = d E g / d theta at the limit: central differences of the simulated mean gradient
    # on common random numbers (the same seed, so the same data on both sides), within
    # 4 Monte-Carlo se plus the O(h^2) bias of the difference (below 2e-3 at h = 0.05:
    # the densities' second derivatives are O(1)). The linear models' differences are
    # exact. Caught a mean or sparse_mean gradient of the wrong sign (x - theta) and a
    # quantile_regression residual without its intercept, which every other model test
    # passed (their E g = 0 and Cov g at theta* are unchanged).
    jac, se = jacobian_by_simulation(model, model.limit(), 100_000, seed=7, h=0.05)
    assert np.all(np.abs(jac - model.jacobian()) <= 4 * se + 2e-3)


def test_the_ends_of_the_mean_models_ranges():
    # mean: d in [1, 64]; bounded_mean: a, b in (0, 1000], the upper end included.
    assert models.Mean(d=64).dim == 64
    with pytest.raises(ValueError) as info:
        models.Mean(d=65)
    assert str(info.value) == "The 'd' parameter of mean must be an int in [1, 64]. Got 65."
    edge = models.BoundedMean(a=1000.0, b=1000.0)
    assert edge.truth()[0] == 0.5
    assert edge.gradient_cov()[0, 0] == pytest.approx(0.25 / 2001, rel=1e-15)
    for key in ("a", "b"):
        with pytest.raises(ValueError) as info:
            models.BoundedMean(**{key: 1000.5})
        assert str(info.value) == (
            f"The '{key}' parameter of bounded_mean must be a float in (0, 1000]. Got 1000.5."
        )


@pytest.mark.parametrize("cls", [models.LogisticRegression, models.HuberRegression])
@pytest.mark.parametrize("clip", [0.0, -1.0])
def test_a_clip_of_zero_or_below_is_refused(cls, clip):
    # SPEC 9.5: C > 0 (Delta2 = 2C; a negative C gave a negative noise scale).
    with pytest.raises(ValueError) as info:
        cls(d=2, weights="none", clip=clip)
    assert str(info.value) == (
        f"The 'clip' parameter of {cls.name} must be a float in (0, inf). Got {clip!r}."
    )


@pytest.mark.parametrize(
    ("probs", "shown"),
    [([0.5, 0.5, 0.0], "minimum 0 and sum 1."), ([0.5, 0.5, 1e-7], "sum 1.0000001.")],
)
def test_category_probabilities_must_be_positive_and_sum_to_one(probs, shown):
    # SPEC 11: pi_j > 0 (G = f diag(pi) is inverted), summing to 1 within 1e-9.
    with pytest.raises(ValueError) as info:
        models.OneHotQuantileRegression(d=3, probs=probs)
    assert str(info.value).endswith(shown), str(info.value)


def test_the_l1_ball_needs_a_positive_radius():
    for radius in (0.0, -1.0):
        with pytest.raises(ValueError, match="radius must be > 0"):
            project_l1_ball(np.ones(3), radius)


def test_max_l1_gradient_gap_is_the_l1_size_of_the_box():
    # mean, d = 3: g = theta - X with X in [loc - 1, loc + 1]^3; the sampled box's l1 size
    # (the sum of the coordinates' ranges) nears Delta1 = 2 d = 6, not one range (2).
    gap = models.Mean(d=3).max_l1_gradient_gap(np.zeros(3), 20_000, seed=1)
    assert 5.5 < gap <= 6.0


@pytest.mark.parametrize("model", [models.Quantile(tau=0.3, loc=-1.0), models.Quantile()])
def test_the_quantile_models_data_are_normal_with_unit_scale(model):
    # E g(theta) = P(X <= theta) - tau = Phi(theta - loc) - tau, X ~ N(loc, 1) (SPEC 3.1):
    # checked in both tails and the middle, within 4 Monte-Carlo se. A draw of scale 1.02
    # moves Phi at 2 by 2.1e-3, 14 se at n = 1e6; the Jacobian above sees only the
    # density at theta*, which moves 2%, inside its allowance.
    n = 1_000_000
    tau, loc = model.tau, model.loc
    for shift in (-2.0, -0.7, 0.4, 2.0):
        gradients = model.sample_gradients(np.array([loc + shift]), n, seed=11)[:, 0]
        expected = 0.5 * math.erfc(-shift / math.sqrt(2.0)) - tau
        se = math.sqrt((expected + tau) * (1.0 - expected - tau) / n)
        assert abs(gradients.mean() - expected) <= 4 * se, shift
