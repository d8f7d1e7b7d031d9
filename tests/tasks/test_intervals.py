"""Contract tests over every registered interval method, plus the bootstrap multipliers.

The competitors that compute their own estimate from the users (``own_estimate``,
SPEC 10) have their contract tests in test_competitors.py.
"""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as sps

from ldpsim.tasks import intervals
from ldpsim.tasks.intervals.base import IntervalMethod
from ldpsim.tasks.intervals.batch_means import batch_bounds, batch_sizes
from ldpsim.tasks.intervals.bootstrap import sidak_band, sup_t_band, t_interval
from ldpsim.tasks.replicate import compute_replicate, run_replicate, run_stats
from ldpsim.tasks.spec import normalize_spec
from ldpsim.tasks.streams.multipliers import draw_multipliers

ALL_NAMES = sorted(intervals.REGISTRY)
#: The methods built from the LDP run's streaming statistics.
NAMES = [name for name in ALL_NAMES if not intervals.REGISTRY[name].own_estimate]
N = 20_000


@pytest.fixture(scope="module")
def stats():
    """Real streaming statistics: quantile regression, d = 4, every method's cuts."""
    spec = {
        "model": "quantile_regression",
        "n": N,
        "methods": {name: {} for name in NAMES},
    }
    return run_stats(normalize_spec(spec), np.random.Generator(np.random.PCG64(2)))


def rng(seed=0):
    return np.random.Generator(np.random.PCG64(seed))


@pytest.mark.parametrize("name", ALL_NAMES)
def test_registry_entry(name):
    cls = intervals.REGISTRY[name]
    assert issubclass(cls, IntervalMethod)
    assert cls.name == name  # a stable name equal to its registry key
    method = cls()  # default construction works
    assert method == cls() and hash(method) == hash(cls())
    assert dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen
    for field in dataclasses.fields(cls):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(method, field.name, getattr(method, field.name))
        with pytest.raises(TypeError):
            cls(getattr(method, field.name))  # keyword-only


@pytest.mark.parametrize("name", NAMES)
def test_cuts_are_a_valid_partition(name):
    method = intervals.REGISTRY[name]()
    for n in (N, 10**6, 10**8 + 7):
        method.check(n, 0.51)
        cuts = method.cuts(n, 0.51)
        assert cuts.dtype == np.int64 and cuts.ndim == 1
        assert np.all(np.diff(cuts) > 0)
        assert cuts[0] >= 1 and cuts[-1] <= n


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("level", [0.5, 0.9, 0.95])
def test_interval_on_real_stats(name, stats, level):
    method = intervals.REGISTRY[name]()
    lo, hi = method.interval(stats, level, rng())
    d = stats.dim
    assert lo.shape == (d,) and hi.shape == (d,)
    assert np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))
    assert np.all(lo < hi)
    # Every method's interval is a neighbourhood of the estimate, of the oracle's order
    # of width (a factor 10 either way is far outside sampling variability at n = 2e4).
    assert np.all((lo < stats.theta_bar) & (stats.theta_bar < hi))
    oracle = intervals.Oracle().interval(stats, level, None)
    ratio = (hi - lo) / (oracle[1] - oracle[0])
    assert np.all((ratio > 0.1) & (ratio < 10)), ratio
    # Reproducible given the stream, and random only if the method says so.
    lo2, hi2 = method.interval(stats, level, rng())
    assert np.array_equal(lo, lo2) and np.array_equal(hi, hi2)
    lo3, _ = method.interval(stats, level, rng(1))
    assert np.array_equal(lo, lo3) != method.uses_rng


@pytest.mark.parametrize("name", NAMES)
def test_interval_grows_with_level(name, stats):
    method = intervals.REGISTRY[name]()
    lo90, hi90 = method.interval(stats, 0.9, rng())
    lo99, hi99 = method.interval(stats, 0.99, rng())
    assert np.all(hi99 - lo99 > hi90 - lo90)


@pytest.mark.parametrize("name", [n for n in NAMES if not intervals.REGISTRY[n].uses_rng])
def test_symmetric_methods_are_centred(name, stats):
    lo, hi = intervals.REGISTRY[name]().interval(stats, 0.9, None)
    np.testing.assert_allclose((lo + hi) / 2, stats.theta_bar, rtol=0, atol=1e-14)


def test_bootstrap_forms_mirror_each_other(stats):
    # basic = [tb - q_hi, tb - q_lo], percentile = [tb + q_lo, tb + q_hi] (SPEC 5.1),
    # with the same multipliers: the two intervals are reflections about theta_bar.
    basic = intervals.BlockBootstrap(form="basic").interval(stats, 0.9, rng(4))
    pct = intervals.BlockBootstrap(form="percentile").interval(stats, 0.9, rng(4))
    tb = stats.theta_bar
    np.testing.assert_allclose(basic[0] - tb, tb - pct[1], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(basic[1] - tb, tb - pct[0], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("kind", ["uniform", "rademacher", "gaussian", "mammen"])
def test_multipliers_have_mean_zero_variance_one(kind):
    # iid draws: the mean of e is within 4 sd(e) / sqrt(N) of 0 and the mean of e^2
    # within 4 sd(e^2) / sqrt(N) of 1 (sds estimated from the draws; sd(e^2) = 0 for
    # Rademacher, whose e^2 is exactly 1).
    n = 10**6
    e = draw_multipliers(kind, (1000, 1000), rng(8)).ravel()
    assert abs(e.mean()) <= 4 * e.std() / math.sqrt(n)
    assert abs(np.mean(e**2) - 1.0) <= 4 * np.std(e**2) / math.sqrt(n) + 1e-12
    if kind == "rademacher":
        assert set(np.unique(e)) == {-1.0, 1.0}
    if kind == "uniform":
        assert np.all(np.abs(e) <= math.sqrt(3))
    if kind == "mammen":
        # E e^3 = 1 for Mammen's two-point law.
        assert abs(np.mean(e**3) - 1.0) <= 4 * np.std(e**3) / math.sqrt(n)


def _batch_and_block_counts(methods: dict, n: int) -> tuple[int, int]:
    rs = normalize_spec({"model": "quantile", "n": n, "methods": methods})
    return rs.methods["bm"].batches(n), rs.methods["bb"].n_blocks(n)


@pytest.mark.parametrize("beta", [0.6, 0.75, 0.85])
@pytest.mark.parametrize("n", [1000, 12_345, 10**6, 10**8])
def test_bm_default_batch_count_is_bb_block_count(beta, n):
    # SPEC 5.2: default M = m, the block count of the bb of the same spec; by hand,
    # m = floor(n / floor(n^beta)) (n^beta exact for n = 1e6, 1e8 and beta = 0.75).
    m = n // math.floor(n**beta * (1 + 1e-12))
    assert _batch_and_block_counts({"bb": {"beta": beta}, "bm": {}}, n) == (m, m)


def test_bm_default_batch_count_without_bb_or_with_several():
    n = 10**8
    # No bb: the count of bb's default beta 0.75: 100 blocks of 10**6 steps.
    rs = normalize_spec({"model": "quantile", "n": n, "methods": {"bm": {}}})
    assert rs.methods["bm"].batches(n) == 100
    # Two bb variants with one beta (other multiplier law): one block count,
    # floor(1e8 / floor(1e8^0.6)) = floor(1e8 / 63095) = 1584.
    methods = {"bb": {"beta": 0.6}, "bb_gauss": {"method": "bb", "beta": 0.6}, "bm": {}}
    rs = normalize_spec({"model": "quantile", "n": n, "methods": methods})
    assert rs.methods["bm"].batches(n) == 1584
    # Two betas: ambiguous, unless bm says what it wants.
    methods["bb_gauss"]["beta"] = 0.75
    with pytest.raises(
        ValueError, match=r"different block lengths .* 'n_batches' or 'beta' of 'bm'"
    ):
        normalize_spec({"model": "quantile", "n": n, "methods": methods})
    for own in ({"n_batches": 40}, {"beta": 0.75}):
        spec = {"model": "quantile", "n": n, "methods": {**methods, "bm": own}}
        assert normalize_spec(spec).methods["bm"].batches(n) == own.get("n_batches", 100)


def test_bm_refuses_fewer_than_two_batches():
    # A hunt (h21a): M = 1 leaves no spread between batches (SPEC 5.2 needs M >= 2). Its
    # boundaries would increase from e_0 >= 1 (n = 1e4, gamma = 0.51: e = (2429, 10000),
    # by hand), so only the M >= 2 check refuses it; beta = 0.99 gives M = floor(1000 /
    # floor(1000^0.99)) = floor(1000 / 933) = 1 by default.
    with pytest.raises(ValueError, match=r"'n_batches' parameter of bm .* got M = 1"):
        batch_bounds(1, 10_000, 0.51)
    with pytest.raises(ValueError, match=r"got M = 1"):
        intervals.BatchMeans(beta=0.99).check(1000, 0.51)
    assert batch_bounds(2, 10_000, 0.51).tolist() == [1062, 4371, 10_000]


def test_bm_cached_boundaries_are_read_only():
    # A hunt (h21a): batch_bounds and batch_sizes are cached (lru_cache), so a caller
    # that wrote into the returned array would change every later replicate's batches.
    for array in (batch_bounds(5, 10_000, 0.51), batch_sizes(5, 10_000, 0.51)):
        assert not array.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 0
    assert not intervals.BatchMeans(n_batches=5).bounds(10_000, 0.51).flags.writeable


@pytest.mark.parametrize("beta", [0, 1, -0.1, 1.5])
def test_bm_beta_must_lie_in_the_open_unit_interval(beta):
    # A hunt (h21a): beta is a block-length exponent, floor(n^beta) in [1, n] (a mutant
    # that widened the accepted range survived).
    with pytest.raises(ValueError, match=r"'beta' parameter of bm must be a float in \(0, 1\)"):
        intervals.BatchMeans(beta=beta)
    assert intervals.BatchMeans(beta=0.001).beta == 0.001
    assert intervals.BatchMeans(beta=0.999).beta == 0.999


# ---------------------------------------------------------------------------------------
# Simultaneous (sup-t) bands of the bootstrap.


@pytest.mark.parametrize(("d", "rho"), [(1, 0.0), (20, 0.0), (20, 0.6)])
def test_sup_t_band_covers_jointly_at_its_level(d, rho):
    # Draws of a Gaussian error with unequal sds and equicorrelation rho: the band's
    # critical value c from B = 4000 draws must give P(|Z_j| <= c sd_j for all j) = level
    # for a fresh Z. That probability, at the estimated c, has sd about
    # sqrt(level (1 - level) / B) = 0.0047 (the error of an empirical quantile), and it is
    # measured on 2e5 fresh draws (sd 0.0007): tolerance 4 * 0.0048. For d = 20 the
    # marginal z_{0.95} = 1.645 would cover jointly 0.9^20 = 0.12 of the time (rho = 0).
    level, b = 0.9, 4000
    rng = np.random.Generator(np.random.PCG64(17))
    scales = np.linspace(0.5, 3.0, d)
    cov = (rho * np.ones((d, d)) + (1 - rho) * np.eye(d)) * np.outer(scales, scales)
    draws = rng.multivariate_normal(np.zeros(d), cov, size=b)
    centre = np.linspace(-1.0, 1.0, d)
    lower, upper = sup_t_band(centre, draws, level)
    half = (upper - lower) / 2
    np.testing.assert_allclose((upper + lower) / 2, centre, rtol=0, atol=1e-12)
    sd = draws.std(axis=0, ddof=1)
    critical = half / sd
    np.testing.assert_allclose(critical, critical[0], rtol=1e-12)  # one c for all j
    fresh = rng.multivariate_normal(np.zeros(d), cov, size=200_000)
    covered = np.all(np.abs(fresh) <= half, axis=1).mean()
    assert abs(covered - level) <= 4 * 0.0048, covered
    if d == 1:  # a single coordinate: the band is the symmetric interval
        assert critical[0] == pytest.approx(np.quantile(np.abs(draws[:, 0]) / sd[0], level))


@pytest.mark.parametrize(("d", "n_blocks"), [(1, 10), (20, 10), (100, 31)])
def test_sidak_band_covers_jointly_at_its_level(d, n_blocks):
    # A path of n = m l iid normal vectors with independent coordinates of unequal sds:
    # (theta_bar_j - theta_j) / sd_j is sqrt(m / (m - 1)) t_{m-1} exactly, so the band
    # covers each coordinate with probability level^(1/d) and all of them with
    # probability level exactly. 10,000 paths: binomial se sqrt(0.09 / 10000) = 0.003,
    # tolerance 4 se = 0.012. The normal quantile in place of t would cover 0.58
    # jointly at d = 20, m = 10 (0.65 with the factor sqrt(m / (m - 1)); computed with
    # scipy), and t without that factor 0.868: all outside the tolerance.
    level, block_len, reps = 0.9, 3, 10_000
    rng = np.random.Generator(np.random.PCG64(23))
    scales = np.linspace(0.5, 3.0, d)
    theta = np.linspace(-1.0, 1.0, d)
    covered = 0
    for _ in range(reps):
        path = theta + scales * rng.standard_normal((n_blocks * block_len, d))
        centre = path.mean(axis=0)
        centred = path.reshape(n_blocks, block_len, d).sum(axis=1) - block_len * centre
        lower, upper = sidak_band(centre, centred, block_len, level)
        covered += bool(np.all((lower <= theta) & (theta <= upper)))
    assert abs(covered / reps - level) <= 4 * math.sqrt(level * (1 - level) / reps), covered


def test_bb_with_band_sidak_is_the_sidak_band_of_its_blocks():
    # bb with band = "sidak" returns sidak_band of its own m blocks of length l (divisor
    # m l), rebuilt here from the same run's statistics; bit for bit. Its sd_j is the
    # conditional sd the bootstrap draws estimate: the sup-t band of B = 20,000 draws has
    # half-lengths c' sd*_j with sd*_j within relative sd 1 / sqrt(2 B) = 0.005 of sd_j,
    # so half_j / sd_j is one constant times (1 + 0.005 Z_j), and the range of 10 such
    # ratios is below 2 * 4 sd (a wrong divisor, say n for m l, moves none of this but
    # fails the first check).
    n, level = 20_000, 0.9
    spec = {
        "model": "sparse_mean",
        "d": 10,
        "sparsity": 2,
        "eps": 1.0,
        "n": n,
        "methods": {
            "sidak": {"method": "bb", "simultaneous": True, "band": "sidak"},
            "draws": {"method": "bb", "simultaneous": True, "B": 20_000},
        },
    }
    rs = normalize_spec(spec)
    stats = run_stats(rs, np.random.Generator(np.random.PCG64(5)))
    block_len, n_blocks = rs.methods["sidak"].block_len(n), rs.methods["sidak"].n_blocks(n)
    bounds = block_len * np.arange(n_blocks + 1)
    centred = stats.deviation_sums(bounds, stats.theta_bar)
    lower, upper = sidak_band(stats.theta_bar, centred, block_len, level)
    result = compute_replicate(
        rs, np.random.Generator(np.random.PCG64(5)), {"draws": np.random.default_rng(6)}
    )
    np.testing.assert_array_equal(result.lower["sidak"], lower)
    np.testing.assert_array_equal(result.upper["sidak"], upper)
    sd = np.sqrt(np.sum(centred**2, axis=0)) / (n_blocks * block_len)
    half = (result.upper["draws"] - result.lower["draws"]) / 2
    ratios = half / sd
    assert np.ptp(ratios) / np.mean(ratios) <= 2 * 4 / math.sqrt(2 * 20_000), ratios


def test_t_form_covers_at_its_level_on_normal_blocks():
    # 10,000 paths of m = 10 (and 31) iid normal blocks of length l = 3, one coordinate:
    # (theta_bar - theta) / sd is sqrt(m / (m - 1)) t_{m-1} exactly, so the t form covers
    # with probability 0.9 exactly. Tolerance 4 binomial se = 4 sqrt(0.09 / 10000) = 0.012.
    # What it replaces fails it: the normal quantile with the same sd covers
    # 0.847 at m = 10 and 0.884 at m = 31 (both beyond 0.012; computed with scipy), and
    # t without the factor sqrt(m / (m - 1)) covers 0.884 at m = 10.
    level, block_len, reps = 0.9, 3, 10_000
    rng = np.random.Generator(np.random.PCG64(41))
    for n_blocks in (10, 31):
        covered = 0
        for _ in range(reps):
            path = 0.7 + 2.0 * rng.standard_normal(n_blocks * block_len)
            centre = path.mean(keepdims=True)
            centred = path.reshape(n_blocks, block_len).sum(axis=1)[:, None] - block_len * centre
            lower, upper = t_interval(centre, centred, block_len, level)
            covered += bool(lower[0] <= 0.7 <= upper[0])
        assert abs(covered / reps - level) <= 4 * math.sqrt(level * (1 - level) / reps), (
            n_blocks,
            covered,
        )


def test_bb_form_t_is_the_t_interval_of_its_blocks():
    # bb with form = "t" returns, bit for bit, theta_bar_j +- sqrt(m / (m - 1))
    # t_{m-1}(0.95) sd_j computed directly from the same run's m blocks of length l; at
    # d = 1 it is Sidak's band; it draws no multipliers (the stream is left untouched).
    n, level = 20_000, 0.9
    spec = {
        "model": "quantile_regression",
        "n": n,
        "methods": {"t": {"method": "bb", "form": "t"}},
    }
    rs = normalize_spec(spec)
    stats = run_stats(rs, np.random.Generator(np.random.PCG64(5)))
    method = rs.methods["t"]
    block_len, n_blocks = method.block_len(n), method.n_blocks(n)
    blocks = stats.deviation_sums(block_len * np.arange(n_blocks + 1), stats.theta_bar)
    sd = np.sqrt((blocks**2).sum(axis=0)) / (n_blocks * block_len)
    critical = math.sqrt(n_blocks / (n_blocks - 1)) * sps.t.ppf(0.95, n_blocks - 1)
    stream = np.random.default_rng(6)
    lower, upper = method.interval(stats, level, stream)
    np.testing.assert_allclose(lower, stats.theta_bar - critical * sd, rtol=1e-13)
    np.testing.assert_allclose(upper, stats.theta_bar + critical * sd, rtol=1e-13)
    assert stream.random() == np.random.default_rng(6).random()
    one = sidak_band(stats.theta_bar[:1], blocks[:, :1], block_len, level)
    assert (one[0][0], one[1][0]) == (lower[0], upper[0])


def test_form_t_keeps_the_other_streams():
    # A new value of an existing parameter: the keys of 'basic' and 'percentile' are as
    # before (form is keyed), and 't' keys its own.
    assert intervals.BlockBootstrap().key()["form"] == "basic"
    assert intervals.BlockBootstrap(form="t").key()["form"] == "t"
    with pytest.raises(ValueError, match="form"):
        intervals.BlockBootstrap(form="student")


def test_sidak_band_fails_on_a_zero_sd():
    centred = np.array([[1.0, 0.0], [-1.0, 0.0]])
    with pytest.raises(FloatingPointError, match="sd is 0"):
        sidak_band(np.zeros(2), centred, 5, 0.9)


def test_simultaneous_option_leaves_the_marginal_stream_alone():
    # A parameter added later keys the stream only when set (IntervalMethod.late_params).
    plain = intervals.BlockBootstrap()
    assert "simultaneous" not in plain.key()
    assert intervals.BlockBootstrap(simultaneous=True).key()["simultaneous"] is True
    with pytest.raises(TypeError, match="true or false"):
        intervals.BlockBootstrap(simultaneous="yes")
    assert "band" not in intervals.BlockBootstrap(simultaneous=True).key()
    assert intervals.BlockBootstrap(simultaneous=True, band="sidak").key()["band"] == "sidak"
    with pytest.raises(ValueError, match=r"band.*only to a simultaneous band"):
        intervals.BlockBootstrap(band="sidak")
    with pytest.raises(ValueError, match="band"):
        intervals.BlockBootstrap(simultaneous=True, band="bonferroni")


@pytest.mark.slow
def test_bootstrap_band_joint_coverage():
    # sparse_mean d = 10, s = 2, sparse Laplace, n = 1e5, c = 5, bb with beta = 0.6
    # (m = 100 blocks), R = 200: the band's joint coverage within 4 binomial se
    # (sqrt(0.09 / 200) = 0.021) of the nominal 0.9. Its marginal intervals' joint
    # coverage is far below (0.9^10 = 0.35 for exact marginal intervals). At this n the
    # bootstrap's own variance is low (bb's marginal coverage 0.875, observed), which the
    # band inherits: observed joint coverage 0.855 (z = -2.1); marginal bb 0.26 jointly.
    reps = 200
    spec = {
        "model": "sparse_mean",
        "d": 10,
        "sparsity": 2,
        "eps": 1.0,
        "n": 100_000,
        "c": 5.0,
        "methods": {
            "band": {"method": "bb", "beta": 0.6, "simultaneous": True},
            "bb": {"beta": 0.6},
        },
    }
    joint = {"band": 0, "bb": 0}
    for rep in range(reps):
        result = run_replicate(spec, rep)
        for label in joint:
            lo, hi = result.lower[label], result.upper[label]
            joint[label] += bool(np.all((lo <= result.truth) & (result.truth <= hi)))
    se = math.sqrt(0.9 * 0.1 / reps)
    assert abs(joint["band"] / reps - 0.9) <= 4 * se, joint
    assert joint["bb"] / reps < 0.9 - 4 * se  # marginal intervals are not a band


@pytest.mark.parametrize(
    ("name", "params", "high"),
    [
        ("bb", {}, 10**6),
        ("bb", {"simultaneous": True}, 10**6),
        ("np_boot", {}, 10**6),
        ("fang", {}, 10**4),
    ],
)
def test_one_bootstrap_draw_is_refused(name, params, high):
    # B = 1: one draw has no spread. Before: accepted; bb's basic and percentile forms
    # and np_boot / fang stored intervals of length 0 as successes, the sup-t band
    # failed every replicate (ZeroDivisionError). B = 2 runs.
    with pytest.raises(ValueError) as info:
        intervals.REGISTRY[name](B=1, **params)
    assert str(info.value) == f"The 'B' parameter of {name} must be an int in [2, {high}]. Got 1."
    spec = {"model": "mean", "n": 200, "mechanism": "none", "methods": {name: {"B": 2, **params}}}
    result = run_replicate(spec, 0)
    assert not result.failures and np.all(result.upper[name] - result.lower[name] > 0), result


@pytest.mark.parametrize("batch", [1, 4])
def test_the_oracle_divides_by_the_mini_batch(batch):
    # Each step averages s privatized gradients, so Sigma = G^-1 (S + V) G^-1 / s (SPEC 2,
    # 3): the half-length is z sqrt(Sigma_jj / n) with n the steps. Computed here from the
    # model's and mechanism's parts, not asymptotic_cov. A replicate that dropped the
    # batch (a mutation that no test caught) gave a half-length twice this at s = 4.
    spec = {"model": "quantile", "tau": 0.5, "eps": 1.0, "n": 10_000, "batch": batch}
    result = run_replicate({**spec, "methods": {"oracle": {}}}, 3)
    rs = normalize_spec(spec)
    g_inv = np.linalg.inv(rs.model.jacobian())
    total = rs.model.gradient_cov() + rs.mechanism.variance(rs.model)
    sigma = g_inv @ total @ g_inv.T / batch
    half = sps.norm.ppf(0.5 + rs.level / 2) * np.sqrt(np.diag(sigma) / spec["n"])
    np.testing.assert_allclose(
        (result.upper["oracle"] - result.lower["oracle"]) / 2, half, rtol=1e-12
    )
