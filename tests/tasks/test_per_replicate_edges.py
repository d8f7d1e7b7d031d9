"""Edges of the per-replicate computation that a mutation hunt of tasks/ found unseen.

Each test below failed on a plausible mutation (named in its comment) that every other
test of tests/tasks passed.
"""

import dataclasses
import math
import re

import numpy as np
import pytest

from ldpsim.tasks import intervals
from ldpsim.tasks.chunk import compute_chunk, run_chains, stacked_stats
from ldpsim.tasks.grid_point import GridPointSetup
from ldpsim.tasks.intervals import bootstrap
from ldpsim.tasks.intervals.batch_means import batch_bounds
from ldpsim.tasks.intervals.bootstrap import basic_interval, block_partition
from ldpsim.tasks.intervals.central_bootstrap import (
    CentralPercentileBootstrap,
    CentralVarianceBootstrap,
)
from ldpsim.tasks.intervals.critical_values import normal_quantile
from ldpsim.tasks.intervals.online_bootstrap import OnlineBootstrap
from ldpsim.tasks.intervals.oracle import Oracle, oracle_bounds
from ldpsim.tasks.intervals.self_normalized import simulate_abs_u
from ldpsim.tasks.spec import normalize_spec
from ldpsim.tasks.stats import floor_power, pairwise_sum
from ldpsim.tasks.streams.rng import state_of
from ldpsim.tasks.warnings import OutsideTheoryWarning


def rng(seed=0):
    return np.random.Generator(np.random.PCG64(seed))


@pytest.mark.parametrize(("n", "beta", "expected"), [(100, 0.1, (1, 100)), (2, 0.75, (1, 2))])
def test_a_block_of_one_step_where_n_to_the_beta_is_below_two(n, beta, expected):
    # l = floor(n^beta) is 1 while n^beta < 2: m = n blocks of one step (a floor of 2
    # for l refused bb at n = 2 and halved m at beta = 0.1).
    assert block_partition(n, beta) == expected
    assert intervals.REGISTRY["bb"](beta=beta).n_blocks(n) == expected[1]


@pytest.mark.parametrize(("x", "p", "expected"), [(10**5, 0.6, 1000), (2**10, 0.6, 64)])
def test_floor_power_of_an_exact_power_despite_rounding(x, p, expected):
    # 1e5 ** 0.6 is 999.9999999999998 in floating point: floor_power must still give
    # 1000 (without its 1e-12 margin bb's block length at n = 1e5, beta = 0.6 was 999).
    assert math.floor(x**p) == expected - 1  # the rounding the margin is for
    assert floor_power(x, p) == expected
    assert intervals.REGISTRY["bb"](beta=p).block_len(x) == expected


def test_bb_warns_from_gamma_equal_to_beta_on():
    # The theory needs gamma < beta, so gamma = beta is outside it (a warning from
    # gamma > beta only).
    with pytest.warns(OutsideTheoryWarning, match="gamma < beta"):
        intervals.REGISTRY["bb"](beta=0.75).check(1000, 0.75)


def test_bm_refuses_an_empty_burn_in_batch():
    # e_0 = floor(100 / 121) = 0 for M = 10, n = 100, gamma = 0.5 (e = 0, 3, 7, ...):
    # the boundaries increase, but bm needs e_0 >= 1 (checking e_0 >= 0 accepted it).
    with pytest.raises(ValueError, match=r"e_0 >= 1 .* got M = 10, e = \[0, 3, 7, 13\]"):
        batch_bounds(10, 100, 0.5)
    assert batch_bounds(9, 100, 0.5)[0] == 1  # floor(100 / 100)


@pytest.mark.parametrize("count", [129, 250, 500, 1001])
def test_pairwise_sum_splits_as_numpy_does(count):
    # numpy's pairwise sum splits a run of more than 128 items at a multiple of 8: the
    # same bits (an even split gave other bits at B = 500 draws of bb's sup-t band, d = 1).
    values = rng(count).standard_normal(count) * 10.0 ** rng(count + 1).integers(-8, 8, count)
    assert pairwise_sum(values) == np.sum(values)


class _Ones:
    """A stand-in stream whose normal draws are all 1."""

    def standard_normal(self, size):
        return np.ones(size)


@pytest.mark.parametrize("n_terms", [1, 5, 200])
def test_the_brownian_bridge_integral_keeps_its_tail_mean(n_terms):
    # With every Z_k = 1 the expansion's terms sum to sum_{k<=K} 1/(k pi)^2 and the rest
    # is replaced by its mean, so int B^2 = 1/6 exactly and |U| = sqrt(6) (dropping the
    # rest's mean gave sqrt(pi^2) = 3.14 at K = 1).
    draws = simulate_abs_u(3, _Ones(), n_terms=n_terms)
    np.testing.assert_allclose(draws, math.sqrt(6.0), rtol=1e-13)


def test_the_basic_bootstrap_interval_reflects_the_quantiles():
    # fang's interval is Efron's basic one, [est - q_hi, est - q_lo], not the
    # percentile one [est + q_lo, est + q_hi]: skewed deviations tell them apart.
    deviations = np.array([[-1.0], [0.0], [0.0], [0.0], [10.0]])
    estimate, lower, upper = basic_interval(np.array([5.0]), deviations, 0.9)
    q_lo, q_hi = np.quantile(deviations[:, 0], [0.05, 0.95])
    assert (q_lo, q_hi) == pytest.approx((-0.8, 8.0))
    assert estimate[0] == 5.0
    assert (lower[0], upper[0]) == pytest.approx((5.0 - 8.0, 5.0 + 0.8))


@pytest.fixture(scope="module")
def chunk_stats():
    """Five replicates of one grid point (d = 2), stacked."""
    rs = normalize_spec({"model": "mean", "d": 2, "n": 2000, "methods": {"bb": {"B": 50}}})
    setup = GridPointSetup.of(rs)
    return stacked_stats(setup, run_chains(setup, list(range(5)))[0])


@pytest.mark.parametrize("simultaneous", [False, True])
def test_bb_on_generators_bootstraps_each_row_from_its_own_stream(
    chunk_stats, monkeypatch, simultaneous
):
    # Where a chunk's streams are Generators only (``intervals_batch`` called with a
    # list of them), bb draws the multipliers a block of rows at a time
    # (MULTIPLIERS_HELD, 838 rows at B = 500, m = 5). Every row must get its own
    # stream's multipliers in every block: row 0's multipliers for every row, or the
    # first block's streams in the second block, passed every other test.
    method = intervals.REGISTRY["bb"](B=50, simultaneous=simultaneous)
    count, m = chunk_stats.count, method.n_blocks(chunk_stats.n)
    alone = [method.bounds(chunk_stats.rows([i]), 0.9, [rng(100 + i)]) for i in range(count)]
    monkeypatch.setattr(bootstrap, "MULTIPLIERS_HELD", 2 * method.B * m)  # 2 rows a block
    lower, upper, failed = method.bounds(chunk_stats, 0.9, [rng(100 + i) for i in range(count)])
    assert len({tuple(lo[0]) for lo, _, _ in alone}) == count  # the rows differ
    for i, (lo, hi, fail) in enumerate(alone):
        np.testing.assert_array_equal(lower[i], lo[0], err_msg=f"row {i}")
        np.testing.assert_array_equal(upper[i], hi[0], err_msg=f"row {i}")
        assert failed[i] == fail[0]


def test_fang_reads_its_quantiles_off_the_b_bootstrap_chains_alone(monkeypatch):
    # fang's draws are theta_bar*_b - theta_bar_0 for the B chains b = 1..B, not chain 0
    # itself (whose deviation, an exact 0, moved the quantiles when it was counted).

    averages = np.array([[1.0], [3.0], [4.0], [5.0]])  # chain 0, then B = 3 chains
    monkeypatch.setattr(OnlineBootstrap, "chain_averages", lambda self, users, rng: averages)
    estimate, lower, upper = OnlineBootstrap(B=3).estimate_interval(None, 0.5, None)
    q_lo, q_hi = np.quantile([2.0, 3.0, 4.0], [0.25, 0.75])  # 2.5 and 3.5
    assert estimate[0] == 1.0
    assert (lower[0], upper[0]) == (1.0 - q_hi, 1.0 - q_lo)


#: An eps_int so large that the private selections' noise does not matter.
NO_NOISE = 1e9


def test_cdp_blb_var_takes_the_sample_variance_of_the_draws():
    # sigma2_j = n x the sample variance (ddof 1) of a subset's R draws: at R = 2 and
    # n = 2, (a - b)^2, so 4 and 6 here, and the private median lies between them
    # (ddof 0 halved them: between 2 and 3).

    boot = np.array([[0.0, 2.0], [0.0, math.sqrt(6.0)]])
    half = CentralVarianceBootstrap().half_length(boot, np.zeros(2), 2, 0.9, NO_NOISE, rng(1))
    sigma2 = 2 * (half / normal_quantile(0.95)) ** 2
    assert 4.0 <= sigma2 <= 6.0


@pytest.mark.parametrize(("far", "t"), [(2.5, 2), (9.0, 3)])
def test_cdp_blb_pct_needs_more_than_level_of_the_roots_inside(far, t):
    # Two subsets of R = 2 roots each, one at h / 2 and one at ``far`` h: at level 0.5
    # a set passes once the share inside exceeds 0.5, so both roots must be in (t = 2
    # for far = 2.5 h; a share of 0.5 passing gave t = 0); where no set of the T = 4
    # holds them (far = 9 h), the largest set, t = T - 1 (not the smallest).

    method = CentralPercentileBootstrap(n_sets=4)

    n, level = 4, 0.5
    h = normal_quantile(0.75) * math.sqrt(method.V_max) / method.n_sets
    roots = np.array([[0.5 * h, far * h], [0.5 * h, far * h]])
    boot = -roots / math.sqrt(n)  # roots = |sqrt(n) (centre - boot)|, centre 0
    half = method.half_length(boot, np.zeros(2), n, level, NO_NOISE, rng(2))
    assert half == pytest.approx((t + 1) * h / math.sqrt(n), rel=1e-12)


def test_a_run_that_overflows_after_a_checkpoint_names_the_first_non_finite_point():
    # c = 1e6: the iterates overflow at step 59, after the checkpoint n = 10, whose
    # theta_bar is finite; the failure names n = 4000, the first point where theta_bar is
    # not finite (naming the first finite one, n = 10, passed every other test).

    spec = {"model": "mean", "mechanism": "none", "n": 4000, "c": 1e6, "gamma": 0.51}
    rs = normalize_spec({**spec, "checkpoints": [10, 4000], "methods": {"oracle": {}}})
    with np.errstate(all="ignore"):
        out = compute_chunk(GridPointSetup.of(rs), [0])
    assert out["failed"].tolist() == [True]
    error = out["errors"][0]["error"]
    assert error.startswith("NonFiniteRun: non-finite theta_bar at n = 4000: "), error
    assert "overflowed at step 59 " in error, error


def test_a_run_that_overflows_before_a_checkpoint_names_that_checkpoint_not_n():
    # The same run with the checkpoint n = 100 after the overflow at step 59: theta_bar
    # is not finite at 100 and at 4000, and the failure names 100, the first. Naming
    # the last point (a mutation hunt, h16h) passed every other test.
    spec = {"model": "mean", "mechanism": "none", "n": 4000, "c": 1e6, "gamma": 0.51}
    rs = normalize_spec({**spec, "checkpoints": [100, 4000], "methods": {"oracle": {}}})
    with np.errstate(all="ignore"):
        out = compute_chunk(GridPointSetup.of(rs), [0])
    error = out["errors"][0]["error"]
    assert error.startswith("NonFiniteRun: non-finite theta_bar at n = 100: "), error
    assert "overflowed at step 59 " in error, error


def test_a_batched_upper_bound_that_is_not_finite_fails_its_cell(monkeypatch):
    # A row whose lower bounds are finite but an upper one is not fails its cell (run
    # alone for its reason) like one with a bad lower bound; checking only the lower
    # bounds stored a NaN upper bound as a success, and no test saw it.

    def nan_upper_in_row_1(self, stats, level, rngs):
        lower, upper = oracle_bounds(stats, level)
        upper = upper.copy()
        upper[1, 0] = np.nan
        return lower, upper

    def alone(self, stats, level, rng):
        lower, upper = oracle_bounds(stats, level)
        return lower, upper if stats.theta_bar[0] != row_1_estimate else upper * np.nan

    rs = normalize_spec({"model": "mean", "n": 500, "methods": {"oracle": {}}})
    setup = GridPointSetup.of(rs)
    row_1_estimate = compute_chunk(setup, [0, 1, 2])["estimate"][1, 0]
    monkeypatch.setattr(Oracle, "intervals_batch", nan_upper_in_row_1)
    monkeypatch.setattr(Oracle, "interval", alone)
    out = compute_chunk(setup, [0, 1, 2])
    assert out["method_failed"][0].tolist() == [False, True, False]
    assert np.isnan(out["lower"][0, 1]).all() and np.isnan(out["upper"][0, 1]).all()
    assert "FloatingPointError: non-finite interval bound" in out["errors"][1]["error"]


def test_a_method_without_a_batched_path_fails_on_a_floating_point_error(monkeypatch):
    # A method computed replicate by replicate only keeps numpy raising throughout
    # (issue 23's rule): an overflow inside it fails the cell even where its bounds come
    # out finite (computed with errors ignored, the cell was a success).
    from ldpsim.tasks.intervals.base import IntervalMethod

    def overflowing(self, stats, level, rng):
        np.exp(np.array([1000.0]))  # an overflow whose result is not used
        return oracle_bounds(stats, level)

    monkeypatch.setattr(Oracle, "intervals_batch", IntervalMethod.intervals_batch)
    monkeypatch.setattr(Oracle, "interval", overflowing)
    rs = normalize_spec({"model": "mean", "n": 500, "methods": {"oracle": {}}})
    out = compute_chunk(GridPointSetup.of(rs), [0, 1])
    assert out["method_failed"][0].tolist() == [True, True]
    assert "FloatingPointError: overflow encountered in exp" in out["errors"][0]["error"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class _FailsAloneOnly(Oracle):
    """A plugin's method whose ``interval`` fails where theta_bar_0 > 0, and whose
    batched path gives every replicate the oracle's interval."""

    name = "fails_alone_only"

    def interval(self, stats, level, rng):
        if stats.theta_bar[0] > 0:
            raise ZeroDivisionError("alone")
        return oracle_bounds(stats, level)


def test_the_batch_check_refuses_a_batched_path_that_succeeds_where_interval_fails():
    # Disagreeing on which replicates fail is a disagreement: intervals_batch finite
    # where interval fails (NaN) is refused (comparing the finite bounds alone passed it).
    import ldpsim.tasks.chunk as chunk

    rs = normalize_spec({"model": "mean", "n": 500, "methods": {"oracle": {}}})
    rs = dataclasses.replace(rs, methods={"odd": _FailsAloneOnly()})
    estimates = compute_chunk(GridPointSetup.of(rs), range(4), methods=[])["estimate"]
    assert (estimates[:, 0] > 0).any() and (estimates[:, 0] <= 0).any()
    with pytest.raises(chunk.BatchDisagreement, match=r"'odd' .* disagrees with its interval"):
        chunk.check_batch_api(rs, range(4))


def test_laplace_at_infinite_eps_draws_no_noise():
    # Scale 0 (eps = inf): no draw at all, so that the data stream runs as without a
    # mechanism; drawing (and adding 0 x E) moved every later data point, and no test saw it.
    runs = []
    for mechanism in ({"mechanism": "laplace", "eps": math.inf}, {"mechanism": "none"}):
        rs = normalize_spec({"model": "mean", "n": 300, "methods": {"oracle": {}}, **mechanism})
        setup = GridPointSetup.of(rs)
        runs.append(setup.run_kernel(setup.cuts, np.array(state_of(rng(7)), dtype=np.uint64)))
    for with_laplace, without in zip(*runs, strict=True):
        np.testing.assert_array_equal(with_laplace, without)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Shifted(Oracle):
    """A plugin's method whose upper bounds lie near 1 or near 1001 (by the sign of
    theta_bar_0), and whose batched path moves each upper bound by ``shift`` of the
    largest bound's magnitude."""

    name = "shifted"
    shift: float = 0.0

    def interval(self, stats, level, rng):
        theta_bar = stats.theta_bar
        return theta_bar - 1.0, theta_bar + 1.0 + 1000.0 * (theta_bar[0] > 0)

    def intervals_batch(self, stats, level, rngs):
        theta_bar = stats.theta_bar
        upper = theta_bar + 1.0 + 1000.0 * (theta_bar[:, :1] > 0)
        return theta_bar - 1.0, upper + self.shift * np.abs(upper).max()


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_the_batch_check_allows_the_order_of_a_sum_of_the_largest_bound_and_no_more(backend):
    # BATCH_RTOL of the largest bound's magnitude, not of the smallest's, and not more;
    # on a GPU grid point too (its chains run on the CPU for the check: on the GPU
    # backend's launch, here without a GPU, every replicate failed both ways alike and
    # nothing was compared). Each went unnoticed in a mutation hunt (2026-12-03).
    import ldpsim.tasks.chunk as chunk

    rs = normalize_spec({"model": "mean", "n": 500, "backend": backend, "methods": {"oracle": {}}})
    estimates = compute_chunk(GridPointSetup.of(rs), range(4), methods=[])["estimate"]
    assert (estimates[:, 0] > 0).any() and (estimates[:, 0] <= 0).any()
    near = dataclasses.replace(rs, methods={"s": _Shifted(shift=0.5 * chunk.BATCH_RTOL)})
    assert chunk.check_batch_api(near, range(4)) == 1
    far = dataclasses.replace(rs, methods={"s": _Shifted(shift=2 * chunk.BATCH_RTOL)})
    with pytest.raises(chunk.BatchDisagreement, match=r"'s' .* upper bound of coordinate 0"):
        chunk.check_batch_api(far, range(4))


def test_the_batch_check_of_a_gpu_grid_point_needs_no_gpu(monkeypatch):
    # The check before a run computes a GPU grid point's chains on the CPU: the client
    # that runs it may have no GPU. Here the launch fails as it does there (in the tests
    # the CUDA simulator would run it); the disagreement must still be found. Checking
    # on the GPU backend (a mutation hunt, h16h) failed every replicate both ways alike,
    # compared nothing and passed the method, unnoticed under the simulator.
    import ldpsim.tasks.chunk as chunk

    def no_gpu(self, reps, times=None):
        raise RuntimeError("CUDA driver library cannot be found")

    monkeypatch.setattr(GridPointSetup, "run_gpu", no_gpu)
    rs = normalize_spec({"model": "mean", "n": 500, "backend": "gpu", "methods": {"oracle": {}}})
    far = dataclasses.replace(rs, methods={"s": _Shifted(shift=2 * chunk.BATCH_RTOL)})
    with pytest.raises(chunk.BatchDisagreement, match=r"'s' .* upper bound of coordinate 0"):
        chunk.check_batch_api(far, range(4))


def test_a_disagreement_names_the_replicate_not_its_row():
    # The replicates checked need not start at 0: the message names the replicate
    # (a row's position passed the tests, a mutation hunt, h16h).
    import ldpsim.tasks.chunk as chunk

    rs = normalize_spec({"model": "mean", "n": 500, "methods": {"oracle": {}}})
    far = dataclasses.replace(rs, methods={"s": _Shifted(shift=2 * chunk.BATCH_RTOL)})
    with pytest.raises(chunk.BatchDisagreement, match=r"on replicate (\d+),") as refused:
        chunk.check_batch_api(far, range(10, 14))
    assert 10 <= int(re.search(r"on replicate (\d+),", str(refused.value))[1]) < 14
