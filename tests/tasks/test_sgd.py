"""The compiled LDP-SGD kernel against the plain-Python reference loop."""

import numpy as np
import pytest
from sgd_reference import reference_path

from ldpsim.tasks.kernel.step_sizes import ETA_EXACT_BELOW, eta_schedule
from ldpsim.tasks.replicate import run_kernel
from ldpsim.tasks.spec import normalize_spec

SEED = 20240611

# The reference mirrors every floating-point operation of the callbacks in the same
# order, numba compiles without fastmath (no reassociation, no FMA contraction) and
# tasks.rng reproduces numpy's PCG64 streams bit for bit (tests/tasks/test_rng.py), so
# the compiled iterates must equal the Python ones EXACTLY (np.array_equal), not just
# to some ulps.
# Any reordering of draws (e.g. noise before data) or of arithmetic shows up here.
CASES = {
    "quantile-rr": {"model": "quantile", "tau": 0.3, "eps": 1.0},
    "quantile-rr-batch3": {"model": "quantile", "tau": 0.9, "eps": 0.5, "batch": 3},
    # Started away from the truth, with the competitors' tests' Laplace kernel (the
    # mechanism "none" at d = 1: the sparse mean and the one-hot regression below).
    "quantile-laplace": {"model": "quantile", "mechanism": "laplace", "theta0": 2.0},
    "qr-laplace-d4": {
        "model": "quantile_regression",
        "tau": 0.5,
        "coef": [0.0, 0.0, 1.0, -1.0],
        "mechanism": "laplace",
        "eps": 1.0,
    },
    "mean-laplace-d2": {"model": "mean", "d": 2, "loc": 0.25, "mechanism": "laplace", "eps": 2.0},
    # The d = 1 loop hands theta and the parameters over as tuples: models that index
    # their parameter vector (mean: the truncation box; quantile regression: tau,
    # Phi^-1(tau) and the coefficient) must give the same numbers through it.
    "mean-laplace-d1": {"model": "mean", "d": 1, "loc": -0.4, "mechanism": "laplace", "eps": 2.0},
    "qr-laplace-d1": {
        "model": "quantile_regression",
        "tau": 0.3,
        "coef": [0.5],
        "mechanism": "laplace",
        "eps": 1.0,
    },
    "qr-laplace-d1-batch2": {
        "model": "quantile_regression",
        "tau": 0.7,
        "coef": [-1.0],
        "mechanism": "laplace",
        "eps": 0.5,
        "batch": 2,
    },
    # Gaussian noise, and per-user budgets: the budget is drawn before each user's noise.
    "mean-gaussian-d2": {"model": "mean", "d": 2, "mechanism": "gaussian", "eps": 0.5},
    # Step sizes other than the default's: past step 512 the kernel's own ratio series
    # (step_sizes.eta_series of gamma), which a kernel with gamma's default would miss.
    "mean-laplace-d2-gamma075-c05": {
        "model": "mean",
        "d": 2,
        "mechanism": "laplace",
        "gamma": 0.75,
        "c": 0.5,
    },
    "quantile-gdp-per-user": {"model": "quantile", "mechanism": "gdp", "budget_range": [1, 2]},
    "logistic-gaussian-per-user-d5": {
        "model": "logistic_regression",
        "mechanism": "gaussian",
        "budget_range": [0.2, 0.9],
        "delta": 1e-3,
    },
    "quantile-rr-per-user-batch2": {
        "model": "quantile",
        "tau": 0.2,
        "budget_range": [0.5, 3.0],
        "batch": 2,
    },
    "mean-laplace-per-user-d2": {
        "model": "mean",
        "d": 2,
        "mechanism": "laplace",
        "budget_range": [1.0, 2.0],
    },
    "mean-laplace-one-budget-d2": {
        "model": "mean",
        "d": 2,
        "mechanism": "laplace",
        "budget_range": [1, 1],
    },
    # SPEC 9: the robust regressions, with Mallows weights or clipping, at the built-in
    # sweeps' 5 covariates (logistic also 3) and their mechanisms, whose loops their
    # tests compile anyway (each mechanism, "none" too, is a loop of its own; a compile
    # is 5 to 7 CPU-seconds in `make test`). The gdp calibration is checked here
    # (huber-mallows-gdp-d5), not again with the quantile regression; per-user Gaussian
    # budgets at d > 1 with the logistic regression. The gdp noise (sd 2 Delta2) drives
    # sigma below the 1e-3 floor (at least at the first step): the projection is
    # exercised (test_huber_floor_is_hit).
    "huber-mallows-gdp-d5": {"model": "huber_regression", "mechanism": "gdp", "mu": 0.5},
    "huber-mallows-none-d5": {"model": "huber_regression", "mechanism": "none"},
    "huber-clip-laplace-d5": {
        "model": "huber_regression",
        "weights": "none",
        "clip": 2.0,
        "eps": 2.0,
        "huber_c": 1.0,
        "sigma": 0.5,
    },
    "huber-clip-gaussian-d5-batch2": {
        "model": "huber_regression",
        "weights": "none",
        "clip": 3.0,
        "mechanism": "gaussian",
        "eps": 0.9,
        "batch": 2,
        "theta0": 0.5,
    },
    "logistic-mallows-laplace-d5": {"model": "logistic_regression", "eps": 2.0},
    "logistic-mallows-gaussian-d5": {
        "model": "logistic_regression",
        "mechanism": "gaussian",
        "eps": 0.8,
    },
    "logistic-clip-gdp-d3": {
        "model": "logistic_regression",
        "d": 3,
        "weights": "none",
        "clip": 1.0,
        "mechanism": "gdp",
        "mu": 1.0,
    },
    "logistic-clip-laplace-d5": {
        "model": "logistic_regression",
        "weights": "none",
        "clip": 0.5,
        "eps": 4.0,
        "c": 3.0,
    },
    # SPEC 11: sparse gradients (Floyd's subset sampler, a categorical covariate) with
    # the sparse and the dense calibration; s = d and d = 1 are the edge cases. d = 16
    # is above sgd.CONSTANT_D_MAX: the loop that reads d from theta0.
    "sparse-mean-laplace-d16": {
        "model": "sparse_mean",
        "d": 16,
        "sparsity": 2,
        "coef": [0.5, -0.5, 1.0, 0.0, -1.0, 0.2, 0.3, -0.3, 0.0, 0.7, 0.1, -0.1, 0, 0, 0, 0.4],
    },
    "sparse-mean-gaussian-dense-d10": {
        "model": "sparse_mean",
        "d": 10,
        "sparsity": 10,
        "magnitude": 2.0,
        "mechanism": "gaussian",
        "calibration": "dense",
        "eps": 0.5,
    },
    "sparse-mean-none-d1": {
        "model": "sparse_mean",
        "d": 1,
        "sparsity": 1,
        "coef": 0.3,
        "mechanism": "none",
    },
    "one-hot-qr-laplace-d5": {
        "model": "one_hot_quantile_regression",
        "d": 5,
        "tau": 0.3,
        "coef": [1.0, -1.0, 0.0, 2.0, 0.5],
        "probs": [0.1, 0.2, 0.3, 0.15, 0.25],
        "c": 5.0,
    },
    "one-hot-qr-none-d1": {"model": "one_hot_quantile_regression", "d": 1, "mechanism": "none"},
}


def last_iterate(rs, n, seed):
    """theta_n from the compiled kernel, run for exactly n steps on a fresh stream."""
    theta, *_ = run_kernel(rs, [n], np.random.Generator(np.random.PCG64(seed)))
    return theta


@pytest.mark.parametrize("case", CASES)
def test_kernel_iterates_equal_reference_loop(case):
    n_max = 2000
    rs = normalize_spec({**CASES[case], "n": n_max, "methods": {"oracle": {}}})
    path = reference_path(rs, np.random.Generator(np.random.PCG64(SEED)))
    assert np.all(np.isfinite(path))
    assert len(np.unique(path[:, 0])) > n_max // 10  # the path actually moves
    # Every n in 1..2000: the kernel returns only theta_n, so rerun it per n.
    kernel = np.array([last_iterate(rs, n, SEED) for n in range(1, n_max + 1)])
    mismatch = np.flatnonzero(~np.all(kernel == path, axis=1))
    assert mismatch.size == 0, f"first differing step {mismatch[:1] + 1}"


def test_huber_floor_is_hit_and_kept():
    # The case above with heavy noise: the first step takes sigma below 0, the floor puts
    # it at 1e-3, and the kernel's iterate there is the floored value.
    rs = normalize_spec({**CASES["huber-mallows-gdp-d5"], "n": 2000, "methods": {"oracle": {}}})
    path = reference_path(rs, np.random.Generator(np.random.PCG64(SEED)))
    assert path[:, -1].min() == 1e-3
    hit = int(np.argmin(path[:, -1]))
    assert np.array_equal(last_iterate(rs, hit + 1, SEED), path[hit])


@pytest.mark.parametrize("case", CASES)
def test_recorded_last_iterates_equal_reference_loop(case):
    # snap_theta[k] is theta at step cuts[k]: one kernel run records the last iterate
    # at every cut (powers of two, where the sums are recentred, and others).
    n_max = 2000
    cuts = np.array([1, 2, 3, 7, 64, 100, 511, 512, 513, 1000, 1999, 2000])
    rs = normalize_spec({**CASES[case], "n": n_max, "methods": {"oracle": {}}})
    path = reference_path(rs, np.random.Generator(np.random.PCG64(SEED)))
    theta, *_, snap_theta = run_kernel(rs, cuts, np.random.Generator(np.random.PCG64(SEED)))
    assert snap_theta.shape == (len(cuts), rs.model.dim)
    assert np.array_equal(snap_theta, path[cuts - 1])
    assert np.array_equal(snap_theta[-1], theta)


def test_kernel_leaves_the_stream_where_numpy_would():
    # The kernel draws from a copy of the generator's state and writes it back: the
    # generator continues exactly as if numpy itself had drawn the kernel's numbers.
    rs = normalize_spec({**CASES["quantile-rr-batch3"], "n": 300, "methods": {"oracle": {}}})
    after_kernel = np.random.Generator(np.random.PCG64(SEED))
    run_kernel(rs, [300], after_kernel)
    after_reference = np.random.Generator(np.random.PCG64(SEED))
    reference_path(rs, after_reference)
    assert after_kernel.bit_generator.state == after_reference.bit_generator.state
    assert np.array_equal(after_kernel.random(5), after_reference.random(5))


def test_kernel_uses_the_given_stream():
    rs = normalize_spec({**CASES["qr-laplace-d4"], "n": 500, "methods": {"oracle": {}}})
    a = last_iterate(rs, 500, SEED)
    assert np.array_equal(a, last_iterate(rs, 500, SEED))
    assert not np.array_equal(a, last_iterate(rs, 500, SEED + 1))


@pytest.mark.parametrize(("c", "gamma"), [(1.0, 0.51), (0.5, 0.75), (3.0, 1.0), (1.0, 0.3)])
def test_eta_schedule_matches_exact_power(c, gamma):
    n = 10**6
    eta = eta_schedule(n, c, gamma)
    exact = c * np.arange(1, n + 1, dtype=np.float64) ** -gamma
    assert eta.shape == (n,)
    # Each step past the exact head multiplies by a ratio whose 5-term series is exact
    # to below 1e-16 (step_sizes.fill_ratios) and which, like the product, is rounded
    # once (2^-53 each); at most 255 such steps chain up before the next exact resync:
    # 255 * (1e-16 + 2 * 2^-53) = 8.2e-14, and the resync's and the reference's pow add
    # a few 2^-53, inside the documented 1e-13 (step_sizes.next_eta). Clean code is
    # below 7e-15 here; a5's sign flipped gives 1.6e-13 at gamma = 0.51 and 1.7e-13 at
    # gamma = 0.3.
    assert np.max(np.abs(eta / exact - 1.0)) < 1e-13
    # Below ETA_EXACT_BELOW the kernel uses the pow itself.
    head = ETA_EXACT_BELOW - 1
    assert np.allclose(eta[:head], exact[:head], rtol=4e-16, atol=0)


@pytest.mark.parametrize(
    ("case", "theta0"),
    [
        pytest.param("quantile-laplace", [2.0], id="d1"),
        pytest.param("mean-laplace-d2", [3.0, -5.0], id="d2"),
        pytest.param("qr-laplace-d4", [1.0, 2.0, -3.0, 4.0], id="d4"),
    ],
)
def test_raw_statistics_are_sums_of_the_reference_path_about_their_centres(case, theta0):
    # ldp_sgd's documented outputs, recomputed from the plain-Python path: the centre
    # of segment k is theta_0 for k = 0, then the mean of theta_1..theta_p at the last
    # power of two p before the segment (SPEC 4's shift); T, b and the diagonal of A are
    # the sums about that centre, the segment sums those of its steps. theta_0 != 0, so a
    # centre started at 0, or the running mean miscounted, shows here.
    n = 300
    cuts = np.array([1, 2, 3, 4, 5, 8, 13, 16, 17, 64, 100, 128, 256, 299, 300])
    rs = normalize_spec({**CASES[case], "theta0": theta0, "n": n, "methods": {"oracle": {}}})
    path = reference_path(rs, np.random.Generator(np.random.PCG64(SEED)))
    _, seg_dev, seg_shift, snap_t, snap_b, snap_a, _ = run_kernel(
        rs, cuts, np.random.Generator(np.random.PCG64(SEED))
    )
    for k, s in enumerate(cuts):
        before = cuts[k - 1] if k else 0
        p = 2 ** int(np.log2(before)) if before else 0
        centre = path[:p].mean(axis=0) if p else np.array(theta0, dtype=np.float64)
        np.testing.assert_allclose(seg_shift[k], centre, rtol=1e-13, atol=1e-13, err_msg=k)
        dev = path[:s] - seg_shift[k]
        t = np.cumsum(dev, axis=0)
        r = np.arange(1, s + 1)[:, None]
        size = np.cumsum(np.abs(dev), axis=0)  # the sums of |terms|: rounding scales
        want = [dev[before:].sum(axis=0), t[-1], (r * t).sum(axis=0), (t * t).sum(axis=0)]
        scales = [np.abs(dev[before:]).sum(axis=0), size[-1], (r * size).sum(0), (size**2).sum(0)]
        got = [seg_dev[k], snap_t[k], snap_b[k], snap_a[k][:, 0]]  # A's diagonal: column 0
        for name, g, w, sc in zip(("seg_dev", "T", "b", "diag A"), got, want, scales, strict=True):
            assert np.all(np.abs(g - w) <= 1e-12 * sc), (k, name, g, w)
