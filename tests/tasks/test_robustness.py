"""Numerical robustness of a replicate: location equivariance at n = 1e7 for shifts 1e3
and 1e6, and no non-finite bound without a recorded failure under stressful specs."""

import functools
import warnings

import numpy as np
import pytest

from ldpsim.tasks import compute_replicate, normalize_spec, run_replicate
from ldpsim.tasks.diagnose import NonFiniteRun
from ldpsim.tasks.warnings import OutsideTheoryWarning

N = 10**7
BASES = {
    "quantile": {"model": "quantile", "tau": 0.7, "n": N},
    "mean-d2": {"model": "mean", "d": 2, "n": N, "eps": 2.0},
}


def streams(rs, seed=7):
    """PCG64(seed) for the data; PCG64([seed, i]) for every method that draws numbers."""
    data = np.random.Generator(np.random.PCG64(seed))
    methods = {
        label: np.random.Generator(np.random.PCG64([seed, i]))
        for i, label in enumerate(sorted(rs.methods))
        if rs.methods[label].uses_rng
    }
    return data, methods


@functools.cache
def run(key, shift, start):
    rs = normalize_spec({**BASES[key], "loc": shift, "theta0": start + shift})
    return compute_replicate(rs, *streams(rs))


# (key, shift, start, relative tolerance). start is theta_0 - loc. Observed at seed 7
# (max over methods and bounds of |bound_1 - shift - bound_0| / length_0, and of
# |length_1 / length_0 - 1|):
#   quantile, shift 1e3: 3.7e-8; shift 1e6: 1.9e-5 (sn's length 5.9e-6).
#   quantile, theta_0 = loc - 1000: 2.4e-8 / 9.8e-6 (the run has not forgotten theta_0
#       at n = 1e7: theta_bar - loc = -20.4, so bb's interval is ~40 long).
#   mean d = 2, either start: 8.2e-11 at 1e3, 6.1e-8 at 1e6.
# The quantile model at shift 1e6 cannot meet 1e-6: x = 1e6 + z and theta carry only
# ~10 fractional digits (ulp 1.2e-10), so 1{x <= theta} resolves near-ties differently
# from the unshifted run and the two paths diverge by a few hundred ulps of 1e6
# (theta_bar differs by 5.6e-8 against an interval length of 3.2e-3). That is the
# resolution of the data themselves, not cancellation in the statistics (which the mean
# model, with a continuous gradient, shows to hold to 6e-8 at the same shift).
CASES = [
    ("quantile", 1e3, 0.0, 1e-6),
    ("quantile", 1e6, 0.0, 1e-4),
    ("quantile", 1e3, -1000.0, 1e-6),
    ("quantile", 1e6, -1000.0, 1e-4),
    ("mean-d2", 1e3, 0.0, 1e-6),
    ("mean-d2", 1e6, 0.0, 1e-6),
    ("mean-d2", 1e3, -1000.0, 1e-6),
    ("mean-d2", 1e6, -1000.0, 1e-6),
]


@pytest.mark.parametrize(("key", "shift", "start", "tol"), CASES)
def test_location_equivariance_at_1e7(key, shift, start, tol):
    # Same streams for the base and the shifted spec (loc and theta_0 both shifted):
    # every method's interval is shifted by exactly `shift` with the same length, up to
    # tol x length; the estimate likewise (against the shortest interval).
    r0, r1 = run(key, 0.0, start), run(key, shift, start)
    assert r0.failures == {} and r1.failures == {}
    np.testing.assert_allclose(r1.truth - shift, r0.truth, rtol=0, atol=1e-9)
    shortest = np.inf
    for label in r0.lower:
        length0 = r0.upper[label] - r0.lower[label]
        length1 = r1.upper[label] - r1.lower[label]
        assert np.all(length0 > 0), label
        shortest = np.minimum(shortest, length0)
        np.testing.assert_allclose(length1, length0, rtol=tol, atol=0, err_msg=label)
        for b0, b1 in ((r0.lower, r1.lower), (r0.upper, r1.upper)):
            err = np.abs(b1[label] - shift - b0[label])
            assert np.all(err <= tol * length0), (label, err / length0)
    err = np.abs(r1.estimate - shift - r0.estimate)
    assert np.all(err <= tol * shortest), err / shortest


STRESS = [
    # bb and bm cannot be computed at the first checkpoints.
    pytest.param({"model": "quantile", "n": 5000, "checkpoints": [2, 3, 5, 10, 50]}, id="tiny"),
    pytest.param({"model": "mean", "d": 2, "n": 10**4, "theta0": 1e12}, id="theta0-1e12"),
    # Overflow: theta explodes to inf / nan.
    pytest.param({"model": "mean", "d": 2, "n": 10**4, "theta0": 1e300, "c": 1e10}, id="overflow"),
    pytest.param({"model": "quantile", "n": 10**4, "eps": 1e-3}, id="rr-eps-1e-3"),
    pytest.param({"model": "quantile_regression", "n": 10**4, "eps": 1e-3}, id="lap-eps-1e-3"),
    pytest.param({"model": "quantile", "n": 100, "level": 0.999}, id="level-0.999"),
    pytest.param(
        {"model": "mean", "d": 2, "n": 10**4, "level": 0.999, "eps": 1e-3, "c": 1e3},
        id="huge-noise-and-step",
    ),
    pytest.param(
        {"model": "quantile_regression", "n": 300, "eps": 1e-3, "checkpoints": [4, 16]},
        id="qr-tiny-noisy",
    ),
]


def assert_failures_recorded(result):
    for label in result.lower:
        finite = np.all(np.isfinite(result.lower[label])) and np.all(
            np.isfinite(result.upper[label])
        )
        if not finite:
            assert result.failures.get(label), label
        # Non-finite bounds are NaN (never inf), and a recorded failure is not silent.
        assert not np.any(np.isinf(result.lower[label])), label
        assert not np.any(np.isinf(result.upper[label])), label
    # A non-finite estimate never comes back: the replicate fails (NonFiniteRun).
    assert np.all(np.isfinite(result.estimate))


@pytest.mark.parametrize("spec", STRESS)
def test_no_unrecorded_non_finite_bound(spec):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of these specs is outside the theory
        try:
            result = run_replicate(spec, rep=0)
        except NonFiniteRun as exc:  # the overflowing spec: a failed replicate, explained
            assert "overflowed" in str(exc)
            return
    assert_failures_recorded(result)
    for label, reason in result.failures.items():
        assert label in result.lower and isinstance(reason, str) and reason


def test_stress_specs_do_fail_where_expected():
    # The checks above are not vacuous: these specs do produce recorded failures.
    tiny = run_replicate(STRESS[0].values[0], rep=0)
    assert {"bb", "bm"} <= set(tiny.failures)
    assert "n = 2" in tiny.failures["bm"] and "n = 3" in tiny.failures["bb"]
    # n = 3: l = 2, m = 1 block (bb fails); n = 2: l = 1, m = 2 (bb is computed).
    assert np.all(np.isnan(tiny.lower["bb"][1])) and np.all(np.isfinite(tiny.lower["bb"][0]))
    assert np.all(np.isnan(tiny.lower["bm"][0])) and np.all(np.isfinite(tiny.lower["bb"][-1]))
    # A run whose iterates overflow fails the replicate, with the step size to lower.
    with pytest.raises(NonFiniteRun, match=r"overflowed at step 1 .*: lower c \(1e\+10\)"):
        run_replicate(STRESS[2].values[0], rep=0)


@pytest.mark.parametrize("gamma", [1.0, 0.4])
def test_outside_theory_gamma_records_failures(gamma):
    # gamma = 1 and gamma <= 1/2 warn (OutsideTheoryWarning; bb also warns for
    # gamma >= beta). bm needs gamma < 1, so it is left out at gamma = 1.
    methods = {"bb": {}, "sn": {}, "oracle": {}} if gamma == 1.0 else None
    spec = {"model": "quantile", "n": 10**4, "gamma": gamma, "checkpoints": [3, 100]}
    if methods:
        spec["methods"] = methods
    with pytest.warns(OutsideTheoryWarning):
        result = run_replicate(spec, rep=0)
    assert_failures_recorded(result)
    assert "bb" in result.failures  # 1 block at n = 3
