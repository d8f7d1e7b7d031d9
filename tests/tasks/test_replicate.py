"""One replicate end to end: result contract, checkpoints, location equivariance and
memory (SPEC sections 2-5); its sampling distribution is in test_coverage.py."""

import dataclasses
import json
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from sgd_reference import reference_path

from ldpsim.tasks import ReplicateResult, compute_replicate, normalize_spec, run_replicate, warm_up
from ldpsim.tasks.grid_point import GridPointSetup, replicate_cuts
from ldpsim.tasks.replicate import run_stats


def streams(rs, seed=11):
    """Explicit data and method streams, identical for any two specs with equal labels."""
    data = np.random.Generator(np.random.PCG64(seed))
    methods = {
        label: np.random.Generator(np.random.PCG64([seed, i]))
        for i, label in enumerate(sorted(rs.methods))
    }
    return data, methods


def test_result_contract():
    coef = [0.5, -1.0, 2.0, 0.0]
    result = run_replicate({"model": "quantile_regression", "n": 20_000, "coef": coef}, rep=0)
    assert isinstance(result, ReplicateResult)
    assert result.estimate.shape == result.last.shape == result.truth.shape == (4,)
    assert np.array_equal(result.truth, coef)
    assert set(result.lower) == set(result.upper) == {"bb", "bm", "sn", "oracle"}
    for label in result.lower:
        assert result.lower[label].shape == (4,)
        assert np.all(result.lower[label] < result.upper[label])
    assert result.failures == {} and result.checkpoints is None
    assert {label: bool(f) for label, f in result.method_failed.items()} == dict.fromkeys(
        result.lower, False
    )
    assert result.seconds > 0
    again = pickle.loads(pickle.dumps(result))
    assert np.array_equal(again.estimate, result.estimate)


def test_a_spec_holding_arrays_is_set_up_from_its_values():
    # setup_of keeps set-ups by the spec's JSON (default=repr), and only for a spec that
    # JSON gives back: an array's JSON is its repr, a string. Without that check (a
    # mutation hunt, 2026-12-02, passed test_replicate, test_seeding, test_plugins) the
    # set-up was built from the string: TypeError "Got 'array([ 0.3, -0.2])'". A
    # replicate is a function of the spec's values: an array's is the list's.
    base = {"model": "mean", "d": 2, "mechanism": "laplace", "n": 200, "methods": {"oracle": {}}}
    for theta0 in ([0.3, -0.2], [0.5, 0.5]):
        listed = run_replicate({**base, "theta0": theta0}, rep=0)
        for _ in range(2):  # again: a set-up kept from the first call would do as well
            arrayed = run_replicate({**base, "theta0": np.array(theta0)}, rep=0)
            np.testing.assert_array_equal(arrayed.estimate, listed.estimate, strict=True)
            np.testing.assert_array_equal(arrayed.upper["oracle"], listed.upper["oracle"])


def test_a_replicate_number_that_is_no_int_at_least_0_is_refused():
    # Without run_replicate's own check (a mutation hunt, 2026-12-02, passed the task
    # tests) True ran as replicate 1, and -1, 1.5 and "3" raised numpy's or Python's
    # messages ("SeedSequence entropy must be >= 0").
    spec = {"model": "mean", "n": 200, "mechanism": "laplace", "methods": {"oracle": {}}}
    for rep in (-1, 1.5, True, "3"):
        with pytest.raises((TypeError, ValueError), match="The 'rep' parameter must be an int"):
            run_replicate(spec, rep)


def test_a_results_truth_is_the_callers_own():
    # run_replicate keeps a mapping's set-up for the next call (grid_point.setup_of): a
    # truth handed out as the set-up's own array, changed by its caller, was every later
    # replicate's truth (a mutation hunt, 2026-12-02: the copy left out passed the tests).
    spec = {"model": "quantile", "tau": 0.9, "n": 200, "methods": {"oracle": {}}}
    first = run_replicate(spec, 0)
    kept = first.truth.copy()
    first.truth[:] = 99.0
    np.testing.assert_array_equal(run_replicate(spec, 1).truth, kept)


def test_the_given_data_stream_is_advanced_as_if_it_had_drawn():
    # compute_replicate and run_stats draw from data_rng's state inline and write the
    # advanced state back (run_kernel's rule): two calls on one Generator are two
    # replicates, the second the one its state after the first gives. Without the write
    # back (a mutation hunt, 2026-12-02) the tests passed and both calls were one.
    rs = normalize_spec(
        {"model": "mean", "n": 200, "mechanism": "laplace", "methods": {"oracle": {}}}
    )
    data, methods = streams(rs)
    first = compute_replicate(rs, data, methods)
    after = np.random.Generator(np.random.PCG64())
    after.bit_generator.state = data.bit_generator.state
    second = compute_replicate(rs, data, streams(rs)[1])
    assert not np.array_equal(first.estimate, second.estimate)
    np.testing.assert_array_equal(
        compute_replicate(rs, after, streams(rs)[1]).estimate, second.estimate
    )
    data = streams(rs)[0]
    one = run_stats(rs, data).theta_bar.copy()
    assert not np.array_equal(run_stats(rs, data).theta_bar, one)


def test_the_methods_first_calls_are_timed_apart_and_change_nothing(monkeypatch):
    # The first replicate that calls a method in a process (for a model and mechanism)
    # calls it once before its timed pass, on a copy of its stream (bb's multipliers,
    # fang's users and draws): its values are those of a replicate whose methods had run.
    monkeypatch.setattr(warm_up, "WARMED_UP", set())
    rs = normalize_spec({"model": "quantile", "n": 3000, "methods": {"bb": {}, "fang": {"B": 3}}})
    setup = GridPointSetup.of(rs)
    first = compute_replicate(rs, *streams(rs), setup=setup)
    assert first.warm_up_seconds > 0 and len(warm_up.WARMED_UP) == 2
    again = compute_replicate(rs, *streams(rs), setup=GridPointSetup.of(rs))
    assert again.warm_up_seconds == 0.0  # another set-up of the same model: warm already
    for label in ("bb", "fang"):
        assert np.array_equal(first.lower[label], again.lower[label])
        assert np.array_equal(first.upper[label], again.upper[label])
        assert np.array_equal(first.method_estimate[label], again.method_estimate[label])


def test_a_competitors_replay_compiled_for_a_new_d_is_warmed_up_too(monkeypatch):
    # fang's replay is compiled per d (tasks.users.Users.loop_key): the first replicate
    # at d = 3 after one at d = 2 compiles it again, which is warm-up, not fang's time.
    monkeypatch.setattr(warm_up, "WARMED_UP", set())
    seconds = []
    for d in (2, 3, 3):
        spec = {"model": "mean", "d": d, "n": 200, "mechanism": "laplace"}
        rs = normalize_spec({**spec, "methods": {"fang": {"B": 2}}})
        seconds.append(compute_replicate(rs, *streams(rs)).warm_up_seconds)
    assert seconds[0] > 0 and seconds[1] > 0 and seconds[2] == 0.0


def test_checkpoints_shapes_and_failures():
    # At n = 3 the bootstrap has floor(3 / floor(3^0.75)) = 1 block: NaN and a reason,
    # while the other methods and the later checkpoints are computed.
    spec = {"model": "quantile", "n": 5000, "checkpoints": [3, 100, 1000]}
    result = run_replicate(spec, rep=0)
    assert result.checkpoints == (3, 100, 1000, 5000)
    assert result.estimate.shape == result.last.shape == (4, 1)
    assert np.all(np.isnan(result.lower["bb"][0])) and np.all(np.isnan(result.upper["bb"][0]))
    assert "bb" in result.failures and "n = 3" in result.failures["bb"]
    assert result.method_failed["bb"].tolist() == [True, False, False, False]
    assert not result.method_failed["oracle"].any()
    assert np.all(np.isfinite(result.lower["bb"][1:]))
    assert np.all(np.isfinite(result.lower["oracle"]))


def test_last_iterates_are_the_path_at_the_checkpoints():
    # An independent recomputation: the plain-Python reference loop on the same data
    # stream gives theta_k at every checkpoint k, and its mean the average at n.
    rs = normalize_spec({"model": "mean", "d": 2, "n": 1500, "checkpoints": [10, 700]})
    result = compute_replicate(rs, *streams(rs))
    path = reference_path(rs, streams(rs)[0])
    assert np.array_equal(result.last, path[[9, 699, 1499]])
    np.testing.assert_allclose(result.estimate[-1], path.mean(axis=0), rtol=1e-12)
    without = compute_replicate(dataclasses.replace(rs, checkpoints=None), *streams(rs))
    assert np.array_equal(without.last, path[-1])


def test_cuts_hold_every_partition_and_stay_small():
    rs = normalize_spec({"model": "quantile", "n": 10**8, "checkpoints": [10**6]})
    cuts = replicate_cuts(rs)
    assert cuts[-1] == 10**8 and 10**6 in cuts
    for method in rs.methods.values():
        for point in (10**6, 10**8):
            assert np.all(np.isin(method.cuts(point, rs.gamma), cuts))
    assert np.all(np.isin(2 ** np.arange(27), cuts))  # recentring points
    assert len(cuts) < 1000  # O(n^(1-beta) + log n): memory does not grow with n


@pytest.mark.parametrize(
    ("base", "start"),
    [
        pytest.param({"model": "quantile", "tau": 0.7, "n": 10**6}, 0.0, id="quantile"),
        pytest.param({"model": "mean", "d": 2, "n": 10**6, "eps": 2.0}, 0.0, id="mean-d2"),
        # theta_0 far from theta*: the kernel's first centre is theta_0, so only the
        # recentring on the running mean keeps the sums free of cancellation. The mean
        # model forgets theta_0 at step 1 (eta_1 = c = 1 and G = I).
        pytest.param(
            {"model": "mean", "d": 2, "n": 10**6, "eps": 2.0}, -1000.0, id="mean-d2-far-start"
        ),
    ],
)
def test_location_equivariance(base, start):
    # Data and theta_0 shifted by +1000 give every interval shifted by 1000 with the same
    # length. The shifted run sees the same random numbers (same streams) and differs only
    # by the rounding of 1000 + x (~1e-13). Sums of theta_i - theta_0 ~ 1000 accumulated
    # without recentring over n = 1e6 steps lose ~11 of 16 digits of the self-normalizer
    # (its terms are ~n^3 1000^2 / 3 against a result ~n^2 Sigma), which the 1e-6 relative
    # tolerance on the lengths catches (SPEC 4).
    shift = 1000.0
    rs0 = normalize_spec({**base, "loc": 0.0, "theta0": start})
    rs1 = normalize_spec({**base, "loc": shift, "theta0": start + shift})
    r0 = compute_replicate(rs0, *streams(rs0))
    r1 = compute_replicate(rs1, *streams(rs1))
    assert r0.failures == {} and r1.failures == {}
    np.testing.assert_allclose(r1.truth - shift, r0.truth, rtol=0, atol=1e-12)
    for label in rs0.methods:
        length0 = r0.upper[label] - r0.lower[label]
        length1 = r1.upper[label] - r1.lower[label]
        np.testing.assert_allclose(length1, length0, rtol=1e-6, atol=0, err_msg=label)
        for bound0, bound1 in ((r0.lower, r1.lower), (r0.upper, r1.upper)):
            assert np.all(np.abs(bound1[label] - shift - bound0[label]) <= 1e-6 * length0), label
    assert np.all(np.abs(r1.estimate - shift - r0.estimate) <= 1e-6 * length0)


MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, resource, time
    from ldpsim.tasks import run_replicate

    def peak_kib():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux

    spec = {"model": "quantile", "tau": 0.5, "eps": 1.0}
    warm = run_replicate({**spec, "n": 10**5}, rep=0)  # compile and touch every code path
    before = peak_kib()
    start = time.perf_counter()
    result = run_replicate({**spec, "n": 10**8}, rep=0)
    print(json.dumps({
        "before_kib": before,
        "after_kib": peak_kib(),
        "seconds": time.perf_counter() - start,
        "failures": result.failures,
        "finite": bool(all(
            abs(v) < float("inf") for side in (result.lower, result.upper)
            for bounds in side.values() for v in bounds
        )),
        "covers": bool(result.lower["oracle"][0] < result.truth[0] < result.upper["oracle"][0]),
    }))
    """
)


@pytest.mark.slow
def test_memory_does_not_grow_with_n():
    # SPEC 2: never store the path. A replicate at n = 1e8 must raise the peak resident
    # set by less than 50 MB over a warmed-up process (the path alone would be 800 MB).
    proc = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["failures"] == {} and out["finite"]
    growth_mb = (out["after_kib"] - out["before_kib"]) * 1024 / 1e6
    assert growth_mb < 50, out
