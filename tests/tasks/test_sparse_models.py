"""SPEC 11 (seed 003): sparse gradients, sparsity-aware calibration and the exact oracle."""

import math

import numpy as np
import pytest
from scipy import stats

from ldpsim.tasks import mechanisms, models
from ldpsim.tasks.replicate import run_replicate
from ldpsim.tasks.spec import normalize_spec

LEVEL = 0.9
Z = stats.norm.ppf(0.5 + LEVEL / 2)


def oracle_half_length(spec, n):
    """z sqrt(Sigma_jj / n) for every coordinate, Sigma as the replicate gives the oracle."""
    rs = normalize_spec({**spec, "n": n, "methods": {"oracle": {}}})
    sigma = rs.model.asymptotic_cov(rs.mechanism.variance(rs.model), rs.batch)
    return Z * np.sqrt(np.diag(sigma) / n)


SPEC_CHECK = {"model": "sparse_mean", "d": 1000, "sparsity": 4, "magnitude": 1.0, "eps": 1.0}


def test_spec_check_numbers():
    # SPEC 11: d = 1000, s = 4, M = 1, eps = 1. Laplace scale Delta1 / eps = 2 M s = 8,
    # variance 2 * 8^2 = 128 (dense: 2 * 2000^2 = 8e6); Var X_j = (s/d)(1 - (s/d) mu^2)
    # = 0.004 at mu = 0, so Sigma_jj = 128.004 and the 90% half-length at n = 1e6 is
    # 1.6449 sqrt(128.004 / 1e6) = 0.018610 (dense: 1.6449 sqrt(8e6 / 1e6) = 4.652).
    rs = normalize_spec({**SPEC_CHECK, "n": 10})
    assert rs.mechanism.calibration == "sparse"  # the default, recorded
    assert np.array_equal(np.diag(rs.mechanism.variance(rs.model)), np.full(1000, 128.0))
    half = oracle_half_length(SPEC_CHECK, 10**6)
    assert half.shape == (1000,) and np.ptp(half) == 0
    assert round(float(half[0]), 4) == 0.0186
    assert half[0] == pytest.approx(Z * math.sqrt(128.004 / 1e6), rel=1e-12)
    dense = oracle_half_length({**SPEC_CHECK, "calibration": "dense"}, 10**6)
    assert round(float(dense[0]), 2) == 4.65
    # The ratio of the two is the ratio of the sensitivities, d / s = 250, up to Var X.
    assert dense[0] / half[0] == pytest.approx(250, rel=1e-4)


def test_explicit_sparse_keys_the_same_stream_as_the_default():
    default = normalize_spec({**SPEC_CHECK, "n": 10})
    explicit = normalize_spec({**SPEC_CHECK, "n": 10, "calibration": "sparse"})
    assert default.path_key() == explicit.path_key()
    assert (
        default.path_key()
        != normalize_spec({**SPEC_CHECK, "n": 10, "calibration": "dense"}).path_key()
    )


@pytest.mark.parametrize("sparsity", [1, 2, 4, 8, 14, 15, 16, 32])
def test_laplace_gaussian_crossover(sparsity):
    # SPEC 11: per coordinate, Laplace 8 M^2 s^2 / eps^2 and Gaussian
    # 8 M^2 s ln(1.25 / delta) / eps^2 (classical calibration); Laplace wins iff
    # s < ln(1.25 / delta) = 14.04 at delta = 1e-6.
    model = models.SparseMean(d=64, sparsity=sparsity, magnitude=1.5)
    laplace = mechanisms.Laplace(eps=0.7).variance(model)[0, 0]
    gaussian = mechanisms.Gaussian(eps=0.7, delta=1e-6).variance(model)[0, 0]
    m2 = 1.5**2 / 0.7**2
    assert laplace == pytest.approx(8 * m2 * sparsity**2, rel=1e-14)
    assert gaussian == pytest.approx(8 * m2 * sparsity * math.log(1.25e6), rel=1e-14)
    assert round(math.log(1.25e6), 2) == 14.04
    assert (laplace < gaussian) == (sparsity < 14.04)


def test_dense_calibration_uses_d():
    model = models.SparseMean(d=50, sparsity=3, magnitude=2.0)
    for cls, sensitivity in ((mechanisms.Laplace, 2 * 2.0 * 50), (mechanisms.Gaussian, None)):
        mech = cls(eps=1.0, calibration="dense")
        expected = sensitivity or 2 * 2.0 * math.sqrt(50)
        assert mech.sensitivity(model) == pytest.approx(expected, rel=1e-15)
    one_hot = models.OneHotQuantileRegression(d=20, tau=0.8)
    assert mechanisms.Laplace(calibration="dense").sensitivity(one_hot) == pytest.approx(32.0)
    assert mechanisms.Laplace(calibration="sparse").sensitivity(one_hot) == pytest.approx(1.6)


@pytest.mark.parametrize(
    ("spec", "exc", "shown"),
    [
        ({"model": "mean", "d": 2, "calibration": "sparse"}, ValueError, "declare"),
        ({"model": "sparse_mean", "calibration": "tight"}, ValueError, "'sparse', 'dense'"),
        ({"model": "sparse_mean", "calibration": "dense", "mechanism": "gdp"}, ValueError, "gdp"),
        ({"model": "sparse_mean", "d": 10, "sparsity": 11}, ValueError, "[1, 10]"),
        ({"model": "sparse_mean", "coef": 1.5}, ValueError, "[-1, 1]"),
        (
            {"model": "sparse_mean", "d": 3, "sparsity": 1, "coef": [0.1, 0.2]},
            ValueError,
            "3 finite",
        ),
        ({"model": "sparse_mean", "magnitude": 0.0}, ValueError, "magnitude"),
        (
            {"model": "one_hot_quantile_regression", "d": 2, "probs": [0.5, 0.6]},
            ValueError,
            "summing to 1",
        ),
        ({"model": "one_hot_quantile_regression", "d": 6000}, ValueError, "5000"),
        (
            {"model": "one_hot_quantile_regression", "d": 2, "probs": 0.5},
            TypeError,
            "single value 0.5",
        ),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(spec, exc, shown):
    with pytest.raises(exc) as info:
        normalize_spec({**spec, "n": 100})
    assert shown in str(info.value)


# The empirical law of sqrt(n)(theta_bar - theta*) against the oracle's Sigma.
#
# z_jr = sqrt(n)(theta_bar_jr - theta*_j) / sqrt(Sigma_jj) over d coordinates and R
# replicates; sqrt(mean z^2) estimates the ratio of the empirical sd to the oracle's.
# The coordinates are nearly independent (the noise is, and the data's correlation is
# below 1e-5 of the variance here), so with N = d R terms its Monte-Carlo se is about
# 1 / sqrt(2 N), and the se of the mean of z is 1 / sqrt(N).


def pooled_z(spec, n, reps):
    z = []
    for rep in range(reps):
        result = run_replicate({**spec, "n": n, "methods": {"oracle": {}}}, rep)
        half = (result.upper["oracle"] - result.lower["oracle"]) / 2
        sd = half / Z * math.sqrt(n)  # the oracle's sqrt(Sigma_jj)
        z.append(math.sqrt(n) * (result.estimate - result.truth) / sd)
    return np.concatenate(z)


def test_sparse_mean_sd_matches_the_oracle():
    # d = 1000, s = 4, sparse Laplace, n = 2e4, 4 replicates: N = 4000 terms, se of the
    # sd ratio 1 / sqrt(8000) = 0.011; the tolerance is 4 se (0.045), inside the issue's
    # 10% (the coordinates are nearly independent: the noise is, and the data's
    # correlation is -(s/d)^2 mu^2 / Var X_j < 1e-4); theta_0 = 0 is
    # 0.002 from theta* (coef 0.5), far below the sd of theta_bar (0.08), and the linear
    # recursion (G = I) has no other finite-n bias of that order. Observed sd ratios:
    # 0.973 on these replicates (0-3), 1.003 on replicates 4-15 (se 0.0065) and 0.986
    # at n = 1e5 (replicates 0-3, se 0.011).
    spec = {**SPEC_CHECK, "coef": 0.5}
    z = pooled_z(spec, 20_000, 4)
    assert z.shape == (4000,)
    assert abs(math.sqrt(np.mean(z**2)) - 1) <= 4 / math.sqrt(2 * z.size)
    assert abs(z.mean()) <= 4 / math.sqrt(z.size)


def test_one_hot_quantile_regression_sd_matches_the_oracle():
    # d = 5 uniform categories, tau = 0.5, sparse Laplace at eps = 4 (Delta1 = 1,
    # variance 0.125 per coordinate), c = 5 so that c f pi_j = 0.4 (the curvature is
    # f / d), started at theta*: n = 2e5 and 200 replicates give N = 1000 terms, se of
    # the sd ratio 1 / sqrt(2000) = 0.022, so 10% is 4.5 se. The model approaches its
    # limit slowly where the noise is large against the curvature f pi_j (the iterates
    # leave the region where the mean gradient is linear): measured sd ratios 1.19 at
    # eps = 2, n = 1e5, 1.01 at n = 1e6 (d = 5, c = 5); 1.34 at d = 10, c = 10, n = 1e6;
    # here 1.005 (400 replicates, se 0.016).
    coef = [0.5 * j for j in range(5)]
    spec = {
        "model": "one_hot_quantile_regression",
        "d": 5,
        "tau": 0.5,
        "coef": coef,
        "theta0": coef,
        "eps": 4.0,
        "c": 5.0,
    }
    z = pooled_z(spec, 200_000, 200)
    assert z.shape == (1000,)
    assert abs(math.sqrt(np.mean(z**2)) - 1) <= 0.10
    assert abs(z.mean()) <= 4 / math.sqrt(z.size)
