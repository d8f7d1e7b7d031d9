"""The competitors of SPEC 10 (fang, np_boot, cdp_blb_var, cdp_blb_pct): contract,
the users they see, validation and the memory cap, and coverage at moderate n."""

import dataclasses
import math
import warnings

import numpy as np
import pytest

from ldpsim.tasks import intervals, models, normalize_spec, run_replicate
from ldpsim.tasks.grid_point import replicate_cuts
from ldpsim.tasks.intervals.nonprivate_bootstrap import bootstrap_quantiles
from ldpsim.tasks.intervals.online_bootstrap import split_mechanism
from ldpsim.tasks.intervals.raw_data import public_range
from ldpsim.tasks.mechanisms import Gaussian, Laplace, RandomizedResponse
from ldpsim.tasks.replicate import run_kernel
from ldpsim.tasks.streams.rng import standard_exponential, state_of
from ldpsim.tasks.users import Users

#: SPEC 10's competitors; nprr (SPEC 12, the bounded mean only) has its tests in test_nprr.py.
COMPETITORS = sorted(
    name for name, cls in intervals.REGISTRY.items() if cls.own_estimate and name != "nprr"
)
#: The two models every competitor supports, with a mechanism each.
SETUPS = {
    "quantile": {"model": "quantile", "tau": 0.5, "mechanism": "randomized_response"},
    "mean": {"model": "mean", "mechanism": "laplace"},
}


def rng(seed=0):
    return np.random.Generator(np.random.PCG64(seed))


def as_state(values) -> tuple:
    """A PCG64 state as the compiled callbacks take it: 4 numpy uint64."""
    return tuple(np.uint64(v) for v in values)


def users_for(spec, seed=5):
    rs = normalize_spec({"n": 3000, "methods": {"bb": {}}, **spec})
    return rs, rs.users(state_of(rng(seed)))


def test_the_competitors_are_registered():
    assert COMPETITORS == ["cdp_blb_pct", "cdp_blb_var", "fang", "np_boot"]
    assert all(intervals.REGISTRY[name].uses_rng for name in COMPETITORS)


@pytest.mark.parametrize("setup", list(SETUPS))
@pytest.mark.parametrize("name", COMPETITORS)
def test_estimate_interval_contract(name, setup):
    _, users = users_for({**SETUPS[setup], "eps": 4.0})
    method = intervals.REGISTRY[name]()
    estimate, lo, hi = method.estimate_interval(users, 0.9, rng(1))
    for value in (estimate, lo, hi):
        assert value.shape == (1,) and np.all(np.isfinite(value))
    assert np.all(lo < hi)
    # Reproducible given the stream, and random.
    again = method.estimate_interval(users, 0.9, rng(1))
    assert all(np.array_equal(a, b) for a, b in zip((estimate, lo, hi), again, strict=True))
    other = method.estimate_interval(users, 0.9, rng(2))
    assert not np.array_equal(lo, other[1])
    # A wider level gives a wider interval from the same stream.
    _, lo99, hi99 = method.estimate_interval(users, 0.99, rng(1))
    assert np.all(hi99 - lo99 > hi - lo)


@pytest.mark.parametrize(
    ("spec", "batch"),
    [
        (SETUPS["quantile"], 1),
        ({"model": "quantile", "tau": 0.9, "mechanism": "laplace", "eps": 0.5}, 3),
        ({"model": "mean", "d": 2, "loc": 1.0, "mechanism": "laplace"}, 1),
        ({"model": "mean", "mechanism": "none"}, 2),
    ],
)
def test_replay_walks_the_ldp_runs_stream(spec, batch):
    # The replay of the users' raw data draws exactly the numbers the LDP run drew
    # (observations and, skipped, their privacy noise): both end at the same state.
    rs, users = users_for({**spec, "batch": batch})
    data = rng(5)
    run_kernel(rs, replicate_cuts(rs), data)
    state = users.stream()
    x = users.loop("observations")(
        rs.model.params(), rs.mechanism.params(rs.model), users.count, state
    )
    assert x.shape == (rs.n * batch, rs.model.dim)
    assert tuple(int(v) for v in state) == tuple(int(v) for v in state_of(data))
    np.testing.assert_array_equal(x, users.observations())  # and the public call agrees


def test_quantile_public_range_is_not_symmetric_about_the_truth():
    # [loc - 6, loc + 10]: a curator does not know the truth (loc at tau = 0.5).
    model = models.Quantile(tau=0.5, loc=2.0)
    low, high = public_range(model)
    assert (low, high) == (-4.0, 12.0)
    assert (low + high) / 2 != model.truth()[0]
    assert public_range(models.Mean(loc=2.0)) == (1.0, 3.0)  # the mean's box


def test_observations_are_replayed_once_and_read_only():
    # np_boot and both cdp_blb methods share one replay per replicate.
    _, users = users_for(SETUPS["mean"])
    first = users.observations()
    assert users.observations() is first
    assert not first.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        first[0, 0] = 1.0
    # A new Users (another replicate) replays afresh.
    again = dataclasses.replace(users).observations()
    assert again is not first and np.array_equal(again, first)


@pytest.mark.parametrize("key", ["quantile", "mean"])
def test_observations_are_the_gradients_data(key):
    # Without noise draws, user i's raw x and gradient come from the same numbers:
    # mean: g(x, 0) = -x; quantile: g(x, theta) = 1{x <= theta} - tau.
    model = {"quantile": models.Quantile(tau=0.3, loc=0.5), "mean": models.Mean(d=3)}[key]
    spec = {"model": key, **({"tau": 0.3, "loc": 0.5} if key == "quantile" else {"d": 3})}
    _, users = users_for({**spec, "mechanism": "none"}, seed=11)
    x = users.observations()
    theta = np.full(model.dim, 0.2)
    grads = model.sample_gradients(theta if key == "quantile" else 0 * theta, users.count, 11)
    if key == "mean":
        np.testing.assert_array_equal(x, -grads)
    else:
        np.testing.assert_array_equal(x[:, 0] <= 0.2, grads[:, 0] > 0)


@pytest.mark.parametrize(
    ("spec", "batch"),
    [
        ({"model": "mean", "d": 2, "loc": 0.4, "mechanism": "laplace", "eps": 1.0}, 3),
        ({"model": "quantile", "tau": 0.3, "mechanism": "randomized_response"}, 2),
    ],
)
def test_replay_sees_each_users_data_through_the_privacy_noise(spec, batch):
    # The stream walked user by user as the LDP run walks it (the gradient's draws at
    # theta = 0, which do not depend on theta, then the privacy noise at the run's
    # parameters): every replayed observation is the one behind that user's gradient
    # before noise (mean: x = -g(x, 0); quantile: x <= 0 iff g(x, 0) = 1 - tau > 0),
    # not only the last state.
    rs, users = users_for({**spec, "batch": batch})
    model, d = rs.model, rs.model.dim
    privatize, run_params = rs.mechanism.callback(), rs.mechanism.params(model)
    state, g = as_state(users.start), np.empty(d)
    raw = np.empty((users.count, d))
    for i in range(users.count):
        state = as_state(type(model).sample_gradient(d, np.zeros(d), model.params(), state, g))
        raw[i] = g
        state = as_state(privatize(d, g, run_params, state))
        assert not np.array_equal(g, raw[i]) or rs.mechanism.name == "none"
    x = users.observations()
    if rs.model.name == "mean":
        np.testing.assert_array_equal(x, -raw)
    else:
        np.testing.assert_array_equal(x <= 0.0, raw > 0.0)
    end = users.stream()
    users.loop("observations")(model.params(), run_params, users.count, end)
    assert tuple(int(v) for v in end) == tuple(int(v) for v in state)


def test_fang_chain_zero_is_the_ldp_run_without_noise():
    # Same users, same steps: with no privacy noise, fang's chain 0 is the LDP run
    # (the step sizes are computed as c i^-gamma instead of by the kernel's series,
    # which agree to ~1e-15 relative; the averages to far better than 1e-9).
    spec = {"model": "mean", "loc": 0.7, "mechanism": "none", "n": 5000, "c": 0.5, "gamma": 0.6}
    result = run_replicate({**spec, "methods": {"fang": {"B": 3}, "oracle": {}}}, 4)
    np.testing.assert_allclose(result.method_estimate["fang"], result.estimate, rtol=0, atol=1e-9)
    assert np.array_equal(result.method_estimate["oracle"], result.estimate)


def test_fang_splits_eps_over_its_chains():
    # Each user answers B + 1 chains at eps / (B + 1): sequential composition gives eps.
    method = intervals.OnlineBootstrap(B=49)
    laplace = method.chain_mechanism(Laplace(eps=2.0))
    assert laplace.eps == pytest.approx(2.0 / 50)
    rr = method.chain_mechanism(RandomizedResponse(eps=1.0))
    assert rr.eps == pytest.approx(1.0 / 50)
    model = models.Quantile()
    assert rr.params(model)[0] == pytest.approx(1 / (1 + math.exp(1.0 / 50)))
    with pytest.raises(ValueError, match="pure eps-LDP"):
        split_mechanism(Laplace(budget_range=(1.0, 2.0)), 3)


def test_fang_refuses_to_split_an_eps_delta_budget():
    # A hunt (h21a): gaussian's budget is eps (with delta): eps / (B + 1) alone is not a
    # split of (eps, delta) over B + 1 answers, so fang refuses it, with the reason.
    with pytest.raises(ValueError, match="would need delta split too"):
        split_mechanism(Gaussian(eps=1.0), 3)


def test_fang_fails_a_replicate_whose_chains_overflowed(monkeypatch):
    # A hunt (h21a): a non-finite chain average (overflowed iterates) fails the replicate
    # instead of giving an interval from it.
    averages = np.array([[1.0], [np.inf], [2.0], [3.0]])
    monkeypatch.setattr(intervals.OnlineBootstrap, "chain_averages", lambda *args: averages)
    with pytest.raises(FloatingPointError, match="non-finite chain average"):
        intervals.OnlineBootstrap(B=3).estimate_interval(None, 0.9, None)


@pytest.mark.parametrize(
    ("mechanism", "eps"), [("randomized_response", 1e-3), ("laplace", 1e-150)]
)
def test_fang_refuses_a_split_budget_its_mechanism_cannot_run(mechanism, eps):
    # eps / (B + 1) below the mechanism's floor (RR: 1e-6; Laplace on the quantile: its
    # noise variance overflows below 1.06e-154) while eps itself is fine. Before: accepted,
    # then a ZeroDivisionError in every replicate (exit 1, a store made).
    spec = {"model": "quantile", "n": 100, "mechanism": mechanism, "eps": eps}
    normalize_spec({**spec, "methods": {"fang": {"B": 10}}})
    with pytest.raises(ValueError) as info:
        normalize_spec({**spec, "methods": {"fang": {"B": 10_000}}})
    message = str(info.value)
    assert message.startswith(
        f"fang answers each of its B + 1 = 10001 chains at eps / (B + 1) = {eps:g} / 10001 = "
        f"{eps / 10001:g}, which {mechanism} refuses; raise eps or lower B. The 'eps' "
        f"parameter of {mechanism} must be a float in ["
    ), message


def reference_chains(users: Users, method, noise_start) -> np.ndarray:
    """users_loop.chains written out in plain Python over the same compiled callbacks.

    The LDP run's noise is skipped with the replicate's mechanism; every chain's
    answers are privatized with ``method.chain_mechanism`` (eps / (B + 1)); chain b >= 1
    steps with an Exp(1) multiplier drawn after its batch's noise.
    """
    model, d = users.model, users.model.dim
    sample_gradient, project = type(model).sample_gradient, type(model).project
    privatize = users.mechanism.callback()
    run_params = users.mechanism.params(model)
    chain_params = method.chain_mechanism(users.mechanism).params(model)
    n_chains = method.B + 1
    theta = np.tile(np.array(users.theta0, dtype=np.float64), (n_chains, 1))
    total = np.zeros((n_chains, d))
    state, noise = as_state(users.start), as_state(noise_start)
    g = np.empty(d)
    for i in range(1, users.n + 1):
        eta = users.c * float(i) ** (-users.gamma)
        starts = []
        for _ in range(users.batch):
            starts.append(state)
            state = as_state(sample_gradient(d, theta[0], model.params(), state, g))
            state = as_state(privatize(d, g, run_params, state))
        for b in range(n_chains):
            gsum = np.zeros(d)
            for user in starts:
                sample_gradient(d, theta[b], model.params(), user, g)
                noise = as_state(privatize(d, g, chain_params, noise))
                gsum += g
            weight = 1.0
            if b > 0:
                weight, noise = standard_exponential(noise)
                noise = as_state(noise)
            step = eta * weight / users.batch
            for j in range(d):
                theta[b, j] = project(d, j, theta[b, j] - step * gsum[j], model.params())
            total[b] += theta[b]
    return total / users.n


@pytest.mark.parametrize(
    "spec",
    [
        {"model": "mean", "d": 2, "loc": 0.3, "mechanism": "laplace", "eps": 2.0},
        {"model": "mean", "mechanism": "laplace", "eps": 1.0},
        {"model": "quantile", "tau": 0.7, "mechanism": "randomized_response", "eps": 1.5},
    ],
)
def test_fang_chains_match_a_plain_python_loop(spec):
    # The compiled chains (B = 2, batch 2, n = 50) against the loop written out: the
    # same callbacks in the same order, so bit for bit equal. A kernel that privatized
    # the chains with the LDP run's parameters (eps instead of eps / 3) would differ.
    _, users = users_for({**spec, "batch": 2})
    users = dataclasses.replace(users, n=50)
    method = intervals.OnlineBootstrap(B=2)
    compiled = method.chain_averages(users, rng(8))
    reference = reference_chains(users, method, state_of(rng(8)))
    np.testing.assert_array_equal(compiled, reference)
    assert not np.allclose(compiled[0], compiled[1])  # the chains differ


def test_fang_chain_zero_answers_have_the_split_noise_variance():
    # One step (n = 1, batch 1, theta0 = 0) of the mean model: chain 0's average is
    # -c ghat, and ghat - (-x) is its privacy noise, Laplace(Delta1 (B + 1) / eps), of
    # variance 2 (Delta1 (B + 1) / eps)^2 = 2 (4 x 3 / 1)^2 = 288 for d = 2, B = 2,
    # eps = 1 (at eps it would be 32). 4000 runs x 2 coordinates: the sample variance's
    # se is var sqrt((kurtosis - 1) / N) = var sqrt(5 / 8000) = 2.5 %; accepted within
    # 4 se.
    rs, users = users_for({"model": "mean", "d": 2, "mechanism": "laplace", "eps": 1.0})
    users = dataclasses.replace(users, n=1, theta0=(0.0, 0.0))
    method = intervals.OnlineBootstrap(B=2)
    x = users.observations()[0]
    noise_rng = rng(12)
    runs = 4000
    noise = np.empty((runs, 2))
    for r in range(runs):
        chain0 = method.chain_averages(users, noise_rng)[0]
        noise[r] = -chain0 / users.c + x
    expected = 2.0 * (rs.model.l1_sensitivity() * 3 / 1.0) ** 2
    se = expected * math.sqrt(5 / noise.size)
    assert abs(noise.var() - expected) < 4 * se, (noise.var(), expected, se)
    assert abs(noise.mean()) < 4 * math.sqrt(expected / noise.size)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({"model": "logistic_regression", "methods": {"np_boot": {}}}, "works for the models"),
        ({"model": "huber_regression", "methods": {"cdp_blb_var": {}}}, "works for the models"),
        ({"model": "mean", "mechanism": "gdp", "methods": {"fang": {}}}, "pure eps-LDP"),
        (
            {"model": "mean", "mechanism": "gaussian", "delta": 1e-6, "methods": {"fang": {}}},
            "delta split too",
        ),
        (
            {"model": "mean", "budget_range": [1, 2], "methods": {"cdp_blb_pct": {}}},
            "finite, fixed eps",
        ),
        ({"model": "mean", "mechanism": "none", "methods": {"cdp_blb_var": {}}}, "finite"),
        ({"model": "mean", "checkpoints": [500], "methods": {"np_boot": {}}}, "checkpoints"),
        ({"model": "mean", "methods": {"cdp_blb_var": {"data_range": [1, 0]}}}, "L < U"),
        ({"model": "mean", "methods": {"fang": {"B": 0}}}, "'B' parameter of fang"),
    ],
)
def test_competitor_setups_refused_when_the_spec_is_checked(spec, words):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=words):
            normalize_spec({"n": 1000, **spec})


@pytest.mark.parametrize("name", ["np_boot", "cdp_blb_var", "cdp_blb_pct"])
def test_raw_data_methods_refuse_n_above_their_cap(name):
    # Refused when the spec is checked (before any work), by users = n x batch.
    spec = {"model": "mean", "methods": {name: {}}}
    with pytest.raises(ValueError, match=r"holds the raw data.*above its 'max_n' = 10000000"):
        normalize_spec({**spec, "n": 10**7 + 1})
    with pytest.raises(ValueError, match="20000000 users"):
        normalize_spec({**spec, "n": 10**7, "batch": 2})
    normalize_spec({**spec, "n": 10**7})  # at the cap: accepted
    raised = {"model": "mean", "methods": {name: {"max_n": 10**8}}, "n": 5 * 10**7}
    assert normalize_spec(raised).n == 5 * 10**7
    # fang holds no raw data: no cap.
    assert normalize_spec({"model": "mean", "methods": {"fang": {}}, "n": 10**9}).n == 10**9


def coverage(spec, methods, replicates):
    rs = normalize_spec({**spec, "methods": methods, "seed": 3})
    hits = {label: 0 for label in methods}
    for rep in range(replicates):
        result = run_replicate(rs, rep)
        for label in methods:
            hits[label] += bool(
                result.lower[label][0] <= result.truth[0] <= result.upper[label][0]
            )
    return {label: count / replicates for label, count in hits.items()}


@pytest.mark.parametrize(
    "spec",
    [
        {"model": "mean", "mechanism": "laplace", "eps": 8.0},
        {"model": "quantile", "tau": 0.5, "mechanism": "laplace", "eps": 8.0},
    ],
)
def test_raw_data_methods_cover_at_large_n_eps(spec):
    # n eps = 3.2e4: the central methods' noise is small next to the sampling error, so
    # both cdp_blb methods should cover as the non-private np_boot does, and the mean's
    # near 0.9. R = 200 replicates: se = sqrt(0.09 / 200) = 0.021; np_boot (and the
    # mean's cdp_blb) accepted within 3.5 se of 0.9 (0.074), the quantile's cdp_blb
    # within 3.5 sqrt(2) se (0.105) of np_boot's coverage (a difference of two
    # coverages on the same data; its se is at most sqrt(2) se). Observed (seed 3):
    # mean 0.905 / 0.915 / 0.925, quantile 0.860 / 0.855 / 0.815 (np_boot / var / pct).
    # The median's bootstrap is discrete and a little short at n = 4000, the bag of
    # little bootstraps' more so (subsets of b = 190 points): with its roots centred at
    # their mean (the plug-in thetahat_j) cdp_blb_pct measured 0.860 at n = 4000 and
    # 0.865 at n = 16000 with seed 11 (cdp_blb_var 0.890, 0.870; 200 replicates each,
    # with the former range loc +- 8).
    methods = {"np_boot": {}, "cdp_blb_var": {}, "cdp_blb_pct": {}}
    observed = coverage({**spec, "n": 4000}, methods, 200)
    se = math.sqrt(0.09 / 200)
    assert abs(observed["np_boot"] - 0.9) <= 3.5 * se, observed
    for label in ("cdp_blb_var", "cdp_blb_pct"):
        if spec["model"] == "mean":
            assert abs(observed[label] - 0.9) <= 3.5 * se, (label, observed)
        else:
            assert abs(observed[label] - observed["np_boot"]) <= 3.5 * math.sqrt(2) * se, (
                label,
                observed,
            )


def test_fang_covers_without_noise():
    # With eps = inf (no noise to split) fang is the online bootstrap of Fang, Xu & Yang,
    # valid as n grows. R = 200: accepted within 3.5 se of 0.9 (observed at n = 4000,
    # seed 3: mean 0.865, quantile 0.875).
    observed = coverage({"model": "mean", "mechanism": "none", "n": 4000}, {"fang": {}}, 200)
    assert abs(observed["fang"] - 0.9) <= 3.5 * math.sqrt(0.09 / 200), observed


def test_competitors_change_no_other_methods_numbers():
    # Their replays start from a copy of the data stream's state and their own noise
    # comes from their own streams: bb, bm, sn and the oracle are bit-identical with or
    # without them, and every method's estimate and compute time is recorded.
    base = {"model": "quantile", "tau": 0.9, "eps": 2.0, "n": 4000, "seed": 5}
    plain = {"bb": {}, "bm": {}, "sn": {}, "oracle": {}}
    competitors = {name: {} for name in COMPETITORS}
    alone = run_replicate({**base, "methods": plain}, 2)
    beside = run_replicate({**base, "methods": {**plain, **competitors}}, 2)
    assert np.array_equal(alone.estimate, beside.estimate)
    assert np.array_equal(alone.last, beside.last)
    for label in plain:
        assert np.array_equal(alone.lower[label], beside.lower[label]), label
        assert np.array_equal(alone.upper[label], beside.upper[label]), label
        assert np.array_equal(beside.method_estimate[label], beside.estimate)
    for label in [*plain, *competitors]:
        assert beside.method_seconds[label].shape == () and beside.method_seconds[label] > 0
    for label in competitors:
        assert not np.array_equal(beside.method_estimate[label], beside.estimate), label


def exact_quantile_cdf(m: int, k: int) -> np.ndarray:
    """P(J <= j), j = 0..m: the k-th order statistic of a resample of m distinct sorted
    values is at most the j-th iff at least k of the m draws are, Binomial(m, j / m)."""
    return np.array(
        [
            sum(math.comb(m, i) * (j / m) ** i * (1 - j / m) ** (m - i) for i in range(k, m + 1))
            for j in range(m + 1)
        ]
    )


@pytest.mark.parametrize("tau", [0.1, 0.5, 0.9])
def test_np_boot_quantile_draws_follow_the_resampled_order_statistic(tau):
    # A hunt (h21a): the law of x*_(ceil(tau m)) is inverted at the method's uniforms,
    # here from binomial sums by hand (math.comb). 2e4 plain resamples agree with that
    # law within 4 binomial sds per atom (so the inversion is of the right law).
    m, size = 7, 20_000
    sorted_x = np.linspace(-1.0, 2.0, m)
    k = math.ceil(tau * m)
    cdf = exact_quantile_cdf(m, k)
    u = rng(3).random(size)
    expected = sorted_x[np.searchsorted(cdf, u, side="left") - 1]
    np.testing.assert_array_equal(bootstrap_quantiles(sorted_x, tau, size, rng(3)), expected)
    plain = np.sort(sorted_x[rng(4).integers(0, m, (size, m))], axis=1)[:, k - 1]
    pmf = np.diff(cdf)
    counts = np.array([np.sum(plain == value) for value in sorted_x])
    assert np.all(np.abs(counts - size * pmf) <= 4 * np.sqrt(size * pmf * (1 - pmf)) + 1)


@pytest.mark.parametrize(
    "spec",
    [
        {"model": "mean", "d": 2, "loc": 1.0, "mechanism": "laplace"},
        {"model": "quantile", "tau": 0.9, "mechanism": "laplace"},
    ],
)
def test_np_boot_is_the_basic_interval_of_the_plain_bootstrap(spec):
    # A hunt (h21a): np_boot's numbers from the users' raw data, recomputed: the mean's
    # B resamples of n rows (both coordinates from the same rows), the quantile's
    # x*_(ceil(tau n)) by the exact law above; [est - q_(1-a/2), est - q_(a/2)].
    _, users = users_for({**spec, "n": 400})
    x = users.observations()
    n, b, level = x.shape[0], 50, 0.8
    stream = rng(7)
    if spec["model"] == "mean":
        estimate = x.mean(axis=0)
        boot = np.array([x[stream.integers(0, n, n)].mean(axis=0) for _ in range(b)])
    else:
        k = math.ceil(0.9 * n)
        estimate = np.sort(x[:, 0])[k - 1 : k]
        cdf = exact_quantile_cdf(n, k)
        boot = np.sort(x[:, 0])[np.searchsorted(cdf, stream.random(b), side="left") - 1, None]
    q_lo, q_hi = np.quantile(boot - estimate, [0.1, 0.9], axis=0)
    got = intervals.NonprivateBootstrap(B=b).estimate_interval(users, level, rng(7))
    assert got[0].shape == (x.shape[1],)
    np.testing.assert_allclose(got[0], estimate, rtol=1e-14)
    np.testing.assert_allclose(got[1], estimate - q_hi, rtol=1e-12)
    np.testing.assert_allclose(got[2], estimate - q_lo, rtol=1e-12)
