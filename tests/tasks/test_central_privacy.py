"""Privacy of the central-DP blocks of seed 002, proven exactly on small examples.

The exponential-mechanism quantile (and so the private median) has a piecewise-constant
output density; it is computed exactly from the mechanism's own gap and score
functions for every data set of 4 values from {0, 1, 2, 3} and every neighbour (one
value replaced), and the largest density ratio must not exceed e^eps. AboveThreshold
must draw its threshold noise once per call, and cdp_blb_pct once per interval.
"""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from ldpsim.tasks.intervals.central_bootstrap import (
    CentralPercentileBootstrap,
    CentralVarianceBootstrap,
)
from ldpsim.tasks.intervals.central_privacy import (
    above_threshold,
    exponential_quantile,
    n_subsets,
    private_median,
    quantile_gaps,
    quantile_scores,
    resampled_quantiles,
)
from ldpsim.tasks.intervals.raw_data import sample_statistic
from ldpsim.tasks.mechanisms import Laplace
from ldpsim.tasks.models import Mean, Quantile
from ldpsim.tasks.streams.rng import state_of
from ldpsim.tasks.users import Users

VALUES = (0.0, 1.0, 2.0, 3.0)
RANGE = (-1.0, 4.0)
#: Points between every pair of breakpoints (the values and the range's ends).
PROBES = np.array([-0.5, 0.5, 1.5, 2.5, 3.5])


def rng(seed=0):
    return np.random.Generator(np.random.PCG64(seed))


def exact_density(data, tau, eps, counts=None):
    """The output density of exponential_quantile at PROBES, from its gap and score functions."""
    sorted_x = np.sort(np.asarray(data, dtype=float))
    counts = np.ones(len(sorted_x)) if counts is None else np.asarray(counts, dtype=float)
    left, widths = quantile_gaps(sorted_x, RANGE)
    below = np.concatenate([[0.0], np.cumsum(counts)])
    scores = quantile_scores(widths, below, tau, int(counts.sum()), eps)
    weights = np.exp(scores)  # width x exp(-(eps / 2) |offset|); 0 for empty gaps
    total = weights.sum()
    # The gap holding a probe that is no data value: the last one starting at or below it.
    gap = np.searchsorted(left, PROBES, side="right") - 1
    return weights[gap] / widths[gap] / total


def neighbours(data):
    for i, value in itertools.product(range(len(data)), VALUES):
        if value != data[i]:
            yield (*data[:i], value, *data[i + 1 :])


@pytest.mark.parametrize("tau", [0.5, 0.25, 0.9])
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_exponential_quantile_likelihood_ratio_is_at_most_e_eps(eps, tau):
    worst = 0.0
    for data in itertools.combinations_with_replacement(VALUES, 4):
        p = exact_density(data, tau, eps)
        assert np.all(p > 0) and math.isclose(float(np.sum(p)), 1.0)  # unit-width pieces
        for other in neighbours(data):
            worst = max(worst, float(np.max(p / exact_density(other, tau, eps))))
    # Neighbours do differ (the check is not vacuous), never by more than e^eps.
    assert 1.0 < worst <= math.exp(eps) * (1 + 1e-12), (worst, math.exp(eps))


def test_exponential_quantile_samples_its_exact_distribution():
    # 20000 draws on one data set: the frequency of each unit piece matches the exact
    # probability within 4.5 binomial sd.
    data = (0.0, 1.0, 1.0, 3.0)
    p = exact_density(data, 0.5, 1.0)
    draws = np.concatenate(
        [exponential_quantile(np.array(data), 0.5, 1.0, RANGE, rng(seed)) for seed in range(20000)]
    )
    freq = np.histogram(draws, bins=[-1, 0, 1, 2, 3, 4])[0] / draws.size
    assert np.all(np.abs(freq - p) <= 4.5 * np.sqrt(p * (1 - p) / draws.size)), (freq, p)


def test_resample_counts_give_the_mechanism_on_the_resample():
    # A resample with multiplicities (2, 0, 1, 1) of (0, 1, 2, 3) gets exactly the
    # distribution of the mechanism run on the data (0, 0, 2, 3).
    p_counts = exact_density((0.0, 1.0, 2.0, 3.0), 0.5, 1.0, counts=(2, 0, 1, 1))
    np.testing.assert_allclose(p_counts, exact_density((0.0, 0.0, 2.0, 3.0), 0.5, 1.0))
    draws = exponential_quantile(
        np.array([0.0, 1.0, 2.0, 3.0]), 0.5, 1.0, RANGE, rng(1), np.array([[2, 0, 1, 1]] * 7)
    )
    assert draws.shape == (7,) and np.all((draws >= RANGE[0]) & (draws <= RANGE[1]))


def test_private_median_is_the_exponential_quantile_at_one_half():
    values = np.array([3.0, 0.0, 1.0, 1.0])
    assert (
        private_median(values, 1.0, RANGE, rng(3))
        == exponential_quantile(np.sort(values), 0.5, 1.0, RANGE, rng(3))[0]
    )


class RecordingRng:
    """A Generator that records its Laplace draws (scale, size)."""

    def __init__(self, seed):
        self.rng = rng(seed)
        self.laplace_calls = []

    def laplace(self, loc=0.0, scale=1.0, size=None):
        self.laplace_calls.append((scale, size))
        return self.rng.laplace(loc, scale, size)

    def __getattr__(self, name):
        return getattr(self.rng, name)


def test_above_threshold_draws_the_threshold_noise_once():
    eps = 0.7
    recording = RecordingRng(0)
    above_threshold(np.arange(30.0), 15.0, eps, recording)
    threshold_draws = [c for c in recording.laplace_calls if c[0] == 2.0 / eps]
    assert threshold_draws == [(2.0 / eps, None)]  # one scalar draw
    assert (4.0 / eps, 30) in recording.laplace_calls  # one per query


def test_above_threshold_finds_the_crossing_without_noise_to_speak_of():
    counts = np.array([0, 1, 2, 10, 30, 50, 50])
    assert above_threshold(counts, 25.0, 1e6, rng(0)) == 4
    assert above_threshold(counts, 60.0, 1e6, rng(0)) is None


def laplace_users(model, eps: float, n: int) -> Users:
    """The users of a run of ``model`` under Laplace eps, n steps of one user, stream seed 9."""
    return Users(
        model=model,
        mechanism=Laplace(eps=eps),
        n=n,
        batch=1,
        c=1.0,
        gamma=0.51,
        theta0=(0.0,) * model.dim,
        start=state_of(rng(9)),
    )


def test_cdp_blb_pct_draws_one_threshold_noise_per_interval():
    # d = 2: the budget is split over the coordinates, one interval (one AboveThreshold)
    # each, at eps_int = eps / (2 d).
    users = laplace_users(Mean(d=2), 2.0, 3000)
    recording = RecordingRng(4)
    method = CentralPercentileBootstrap()
    method.estimate_interval(users, 0.9, recording)
    eps_int = 2.0 / (2 * 2)
    assert [c for c in recording.laplace_calls if c[0] == 2.0 / eps_int] == [
        (2.0 / eps_int, None)
    ] * 2


class CountingRng:
    """A Generator that counts its multinomial calls."""

    def __init__(self, seed):
        self.rng = rng(seed)
        self.multinomial_calls = 0

    def multinomial(self, *args, **kwargs):
        self.multinomial_calls += 1
        return self.rng.multinomial(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.rng, name)


@pytest.mark.parametrize(
    ("b", "n", "tau", "eps"),
    [(400, 40_000, 0.5, 0.5), (400, 40_000, 0.9, 2.0), (50, 300, 0.5, 4.0), (30, 1000, 0.9, 0.25)],
)
def test_resampled_quantiles_match_the_full_resampling(b, n, tau, eps):
    # The windowed draw (only the multiplicities near rank tau n) has the distribution
    # of drawing all Multinomial(n, 1/b) multiplicities and running the mechanism on
    # them: two-sample Kolmogorov-Smirnov on 4000 draws each, D below its 1e-4 critical
    # value sqrt(-ln(0.5e-4) / 2) sqrt(2 / 4000) = 0.0498. Observed D (p-value) with
    # these seeds: 0.017 (0.61), 0.024 (0.21), 0.018 (0.52), 0.015 (0.78).
    x = np.sort(rng(b).standard_normal(b))
    draws = 4000
    counting = CountingRng(2)
    windowed = resampled_quantiles(x, n, tau, eps, (-8.0, 8.0), draws, counting)
    counts = rng(4).multinomial(n, np.full(b, 1.0 / b), size=draws)
    full = exponential_quantile(x, tau, eps, (-8.0, 8.0), rng(3), counts)
    critical = math.sqrt(-math.log(0.5e-4) / 2) * math.sqrt(2 / draws)
    assert stats.ks_2samp(windowed, full).statistic < critical
    if b == 400:  # where the window is a small part of the cells, it is what is used
        assert counting.multinomial_calls == 0


@pytest.mark.parametrize("tau", [0.5, 0.9, None])
def test_little_bootstrap_roots_are_centred(tau):
    # SPEC 10.2's roots T_jr = sqrt(n) (thetahat_j - theta*_jr) must have mean 0, as the
    # real estimator's root has. Fresh resamples of each subset (200 each, independent
    # of the R = 50 behind thetahat_j) give roots whose grand mean over the s = 185
    # subsets must be 0 within 4 se, se = the sd of the s subset means / sqrt(s)
    # (subsets are independent given the data). With thetahat_j = x_(ceil(tau b)) the
    # quantile's roots sat half a gap off: mean -2.4 (tau 0.5) and -2.6 (tau 0.9)
    # at n = 1e4, eps_est = 0.5, se 0.18 and 0.33; the mean's centre must be the clipped
    # mean (data N(0.5, 1) in [-1, 1]: the unclipped mean gave 16.3, se 0.48).
    n, eps = 10_000, 0.5
    x = np.sort(rng(1).standard_normal(n) + (0.0 if tau is not None else 0.5))
    method = CentralPercentileBootstrap(R=50)
    data_range = (-8.0, 8.0) if tau is not None else (-1.0, 1.0)
    boot, centre = method.little_bootstraps(x, tau, eps, eps, rng(2), data_range)
    s, b = boot.shape[0], n // boot.shape[0]
    subsets = rng(2).permutation(n)[: s * b].reshape(s, b)  # the same partition
    fresh = np.empty((s, 200))
    for j in range(s):
        part = np.sort(x[subsets[j]])
        if tau is None:
            counts = rng(100 + j).multinomial(n, np.full(b, 1.0 / b), size=200)
            fresh[j] = method.private_statistic(part, tau, eps, data_range, rng(j), counts)
        else:
            fresh[j] = resampled_quantiles(part, n, tau, eps, data_range, 200, rng(j))
    subset_means = math.sqrt(n) * (centre - fresh.mean(axis=1))
    se = subset_means.std(ddof=1) / math.sqrt(s)
    assert abs(subset_means.mean()) < 4 * se, (subset_means.mean(), se)


def test_cdp_blb_mean_estimate_spends_eps_over_2d():
    # d = 2, eps = 2: the estimate gets eps / (2 d) = 0.5 per coordinate, so its
    # Laplace scale is (U - L) / (n eps_est) = 2 / (3000 x 0.5); the resampled private
    # means (size n, R = 50 per subset) use the same scale. A bug spending eps (scale
    # 2 / 6000) or eps / 2 (2 / 3000) fails.
    n, eps, d = 3000, 2.0, 2
    users = laplace_users(Mean(d=d), eps, n)
    recording = RecordingRng(4)
    method = CentralPercentileBootstrap()
    method.estimate_interval(users, 0.9, recording)
    scale = 2.0 / (n * eps / (2 * d))
    estimate_draws = [c for c in recording.laplace_calls if c[1] == (1,)]
    assert estimate_draws == [(pytest.approx(scale, rel=1e-12), (1,))] * d
    resample_draws = [c for c in recording.laplace_calls if c[1] == (method.R,)]
    assert resample_draws and all(c[0] == pytest.approx(scale, rel=1e-12) for c in resample_draws)


def test_cdp_blb_mean_estimate_has_the_laplace_variance_of_eps_over_2d():
    # The same from the output: on fixed data the estimate is the clipped mean plus
    # Laplace(b), b = 2 / (n eps / (2 d)); its variance 2 b^2 over 400 runs (of the
    # estimate alone: private_statistic, as estimate_interval calls it) is accepted
    # within 4 se, se = 2 b^2 sqrt(5 / 400) (Laplace kurtosis 6).
    n, eps, d = 200, 1.0, 2
    users = laplace_users(Mean(d=d), eps, n)
    method = CentralPercentileBootstrap()
    eps_est, eps_int = method.budgets(users)
    assert eps_est == eps_int == eps / (2 * d)
    column = np.sort(users.observations()[:, 0])
    generator = rng(5)
    runs = np.array(
        [
            method.private_statistic(column, None, eps_est, (-1.0, 1.0), generator)[0]
            for _ in range(400)
        ]
    )
    b = 2.0 / (n * eps / (2 * d))
    expected = 2 * b**2
    assert abs(runs.var() - expected) < 4 * expected * math.sqrt(5 / 400), (runs.var(), expected)
    assert abs(runs.mean() - column.mean()) < 4 * math.sqrt(expected / 400)


def test_cdp_blb_quantile_estimate_spends_eps_over_2(monkeypatch):
    # The quantile (d = 1) spends eps / 2 on its estimate's exponential mechanism and
    # eps / 2 in every resampled one (size n), eps / 2 on the interval (the private
    # median of cdp_blb_var, the subset count s).
    from ldpsim.tasks.intervals import central_bootstrap

    calls = []

    def recording(name, function):
        def wrapper(*args, **kwargs):
            calls.append((name, args))
            return function(*args, **kwargs)

        monkeypatch.setattr(central_bootstrap, name, wrapper)

    recording("exponential_quantile", central_bootstrap.exponential_quantile)
    recording("resampled_quantiles", central_bootstrap.resampled_quantiles)
    recording("private_median", central_bootstrap.private_median)
    recording("n_subsets", central_bootstrap.n_subsets)
    eps = 1.6
    users = laplace_users(Quantile(tau=0.5), eps, 2000)
    CentralVarianceBootstrap().estimate_interval(users, 0.9, rng(3))
    by_name = {name: [args for n, args in calls if n == name] for name, _ in calls}
    (estimate,) = by_name["exponential_quantile"]  # tau, eps after sorted_x
    assert estimate[1:3] == (0.5, eps / 2)
    assert all(args[3] == eps / 2 for args in by_name["resampled_quantiles"])  # n, tau, eps
    assert [args[1] for args in by_name["private_median"]] == [eps / 2]
    assert [args[1] for args in by_name["n_subsets"]] == [eps / 2]


def test_subset_count_and_sample_quantile_follow_their_formulas():
    # Direct checks of two formulas a mutation changed unseen but for the reference
    # stores: s = ceil(K ln n / eps), at most n (log10 instead of ln gave s = 35 for 81
    # and a cdp_blb_var interval 18 times longer), and the tau-quantile x_(ceil(tau m)),
    # numpy's inverted_cdf (floor(tau m) + 1 differs where tau m is an integer).
    assert n_subsets(10_000, 1.0, 10.0) == math.ceil(10.0 * math.log(10_000)) == 93
    assert n_subsets(100, 0.5, 10.0) == 93 and n_subsets(50, 0.01, 10.0) == 50
    rng = np.random.Generator(np.random.PCG64(5))
    for m in (1, 2, 10, 11, 400):
        x = rng.standard_normal((m, 3))
        for tau in (0.1, 0.25, 0.5, 0.9, 1.0):
            expected = np.quantile(x, tau, axis=0, method="inverted_cdf")
            np.testing.assert_array_equal(sample_statistic(x, tau), expected)
    assert np.array_equal(sample_statistic(x, None), x.mean(axis=0))
