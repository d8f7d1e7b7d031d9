"""Streaming statistics and the intervals built on them against a two-pass computation
on the stored path (SPEC sections 4 and 5)."""

import dataclasses
import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps
from sgd_reference import reference_path

from ldpsim.tasks.intervals.self_normalized import SelfNormalized, critical_value
from ldpsim.tasks.replicate import (
    checkpoint_stream,
    compute_replicate,
    needs_full_matrix,
    run_stats,
)
from ldpsim.tasks.spec import normalize_spec
from ldpsim.tasks.stats import partition_plan, sum_rows_as_numpy

N = 10_000
SEED = 7
BOOT_SEED = 99
# Relative tolerance for the streaming-vs-two-pass comparison. Both sides do O(n)
# float64 additions of terms of similar size, so they differ by ~n * 2^-53 = 1e-12
# relative to the size of the terms; 1e-9 leaves room for the cancellation inside
# deviation sums (the terms are ~1000x larger than some block sums) and no more.
RTOL = 1e-9

CASES = {
    "quantile-rr": {"model": "quantile", "tau": 0.9, "eps": 1.0},
    "qr-laplace-d4": {"model": "quantile_regression", "tau": 0.5, "eps": 1.0},
    "mean-laplace-d2": {"model": "mean", "d": 2, "loc": 3.0, "theta0": 0.0},
}
METHODS = {
    "bb": {},
    "bm": {"beta": 0.75},  # explicit: the two bb betas leave bm's default M ambiguous
    "sn": {},
    "oracle": {},
    "bb_pct": {"method": "bb", "B": 200, "beta": 0.6, "form": "percentile"},
    "bb_sim": {"method": "bb", "B": 300, "simultaneous": True},
}
CHECKPOINT = N // 3


def close(actual, expected, rtol=RTOL):
    """Relative closeness with the scale of the whole array (entries may be ~0)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    scale = max(np.max(np.abs(expected)), 1e-300)
    return actual.shape == expected.shape and np.max(np.abs(actual - expected)) <= rtol * scale


@pytest.fixture(scope="module", params=list(CASES))
def run(request):
    spec = {**CASES[request.param], "n": N, "methods": METHODS, "checkpoints": [CHECKPOINT]}
    rs = normalize_spec(spec)
    path = reference_path(rs, np.random.Generator(np.random.PCG64(SEED)))
    stats = run_stats(rs, np.random.Generator(np.random.PCG64(SEED)))
    return rs, path, stats


def block_sums(path, bounds, ref):
    """Two-pass: sums of (theta_i - ref) over (bounds[j-1], bounds[j]]."""
    return np.array([(path[a:b] - ref).sum(axis=0) for a, b in itertools.pairwise(bounds)])


def direct_self_normalizer(path):
    """V_n = n^-2 sum_s s^2 (theta_bar_s - theta_bar_n)(theta_bar_s - theta_bar_n)'."""
    n = len(path)
    s = np.arange(1, n + 1)[:, None]
    dev = s * (np.cumsum(path, axis=0) / s - path.mean(axis=0))
    return dev.T @ dev / n**2


def test_theta_bar_and_cuts(run):
    _, path, stats = run
    # The cuts are replicate_cuts(rs), which must be a valid partition of 1..N.
    assert np.all(np.diff(stats.cuts) > 0) and stats.cuts[0] >= 1 and stats.cuts[-1] == N
    assert close(stats.theta_bar, path.mean(axis=0))
    for point in (CHECKPOINT, 4096):
        assert close(stats.prefix(point).theta_bar, path[:point].mean(axis=0))


def test_segment_sums_against_path(run):
    _, path, stats = run
    lengths = np.diff(np.concatenate([[0], stats.cuts]))
    seg = stats.seg_dev + lengths[:, None] * stats.seg_shift
    assert close(seg, block_sums(path, np.concatenate([[0], stats.cuts]), 0.0))


def test_bootstrap_block_sums(run):
    rs, path, stats = run
    bb = rs.methods["bb"]
    block_len = math.floor(N**0.75)  # SPEC 5.1: l = floor(n^beta), m = floor(n / l)
    n_blocks = N // block_len
    assert (bb.block_len(N), bb.n_blocks(N)) == (block_len, n_blocks)
    bounds = block_len * np.arange(n_blocks + 1)
    ref = path.mean(axis=0)
    expected = block_sums(path, bounds, ref)  # S_j - l theta_bar
    assert close(stats.deviation_sums(bounds, stats.theta_bar), expected)
    # Any reference point, including a far one, gives the same sums up to l * shift.
    far = ref + 1e3
    assert close(stats.deviation_sums(bounds, far), block_sums(path, bounds, far))


def batch_bounds(n, gamma, n_batches):
    """SPEC 5.2: e_k = floor(((k+1) N)^(1/(1-gamma))), N = n^(1-gamma)/(M+1), e_M = n."""
    big_n = n ** (1 - gamma) / (n_batches + 1)
    e = [math.floor(((k + 1) * big_n) ** (1 / (1 - gamma))) for k in range(n_batches + 1)]
    e[-1] = n
    return np.array(e)


def numpy_deviation_sums(stats, bounds, ref):
    """The numpy expressions that ``deviation_sums`` computed before it was compiled."""
    plan = partition_plan(stats.cuts, np.asarray(bounds, dtype=np.int64))
    t_after = stats.snap_t.copy()
    k = plan.recentred
    t_after[k] -= plan.recentred_cuts * (stats.seg_shift[k + 1] - stats.seg_shift[k])
    start = np.where(plan.after_zero, t_after[plan.left], 0.0)
    right = plan.right
    pieces = stats.snap_t[right] - start + plan.lengths * (stats.seg_shift[right] - ref)
    out = pieces[plan.first[:-1]]
    for j in plan.split_parts:
        out[j] = pieces[plan.first[j] : plan.first[j + 1]].sum(axis=0)
    return out


def test_compiled_deviation_sums_keep_numpys_bits(run):
    # The compiled sums repeat numpy's operations in numpy's order: the intervals of
    # stores written before keep their bits (tests/reference holds whole sweeps).
    rs, _, stats = run
    rng = np.random.default_rng(4)
    for sub in (stats, stats.prefix(CHECKPOINT)):
        partitions = [rs.methods["bm"].bounds(sub.n, rs.gamma)]
        for label in ("bb", "bb_pct"):  # blocks of floor(n^0.75) and floor(n^0.6)
            bb = rs.methods[label]
            partitions.append(bb.block_len(sub.n) * np.arange(bb.n_blocks(sub.n) + 1))
        for bounds in partitions:
            for ref in (sub.theta_bar, sub.theta_bar + rng.standard_normal(sub.dim) * 1e3, 2.5):
                expected = numpy_deviation_sums(sub, bounds, ref)
                np.testing.assert_array_equal(sub.deviation_sums(bounds, ref), expected)
    with pytest.raises(ValueError, match="increase strictly"):
        stats.deviation_sums(np.array([0, 100, 100]), stats.theta_bar)


@pytest.mark.parametrize("columns", [1, 2, 5])
def test_numpy_sum_order(columns):
    # numpy sums one column pairwise (eight partial sums from 8 items on) and several
    # columns row by row; the compiled sum repeats both, up to the 128 items of a part.
    rng = np.random.default_rng(columns)
    for count in [*range(1, 20), 31, 64, 65, 127, 128]:
        scales = 10.0 ** rng.integers(-8, 8, (count + 2, 1))
        rows = rng.standard_normal((count + 2, columns)) * scales
        out = np.empty(columns)
        sum_rows_as_numpy(rows, 1, 1 + count, out)
        np.testing.assert_array_equal(out, rows[1 : 1 + count].sum(axis=0))


def test_batch_means_sums(run):
    rs, path, stats = run
    m = N // math.floor(N**0.75)  # default M = the bootstrap's block count
    e = batch_bounds(N, rs.gamma, m)
    # floor() of an exact integer power may land one below; bm guards against it.
    assert np.max(np.abs(rs.methods["bm"].bounds(N, rs.gamma) - e)) <= 1
    e = rs.methods["bm"].bounds(N, rs.gamma)
    ref = path.mean(axis=0)
    assert close(stats.deviation_sums(e, stats.theta_bar), block_sums(path, e, ref))


def test_self_normalizer(run):
    # No built-in method needs the whole matrix A: the kernel keeps its diagonal.
    rs, path, stats = run
    assert stats.full_matrix == (rs.model.dim == 1)
    diagonal = stats.self_normalizer_diagonal()
    assert close(diagonal, np.diag(direct_self_normalizer(path)))
    point = CHECKPOINT
    assert close(
        stats.prefix(point).self_normalizer_diagonal(),
        np.diag(direct_self_normalizer(path[:point])),
    )
    if rs.model.dim > 1:
        with pytest.raises(ValueError, match="only the diagonal"):
            stats.self_normalizer()
    # Asked for, the whole matrix; its diagonal is the diagonal-only run's, bit for bit.
    asking = dataclasses.replace(rs, methods={**rs.methods, "full": FullMatrixSN()})
    full = run_stats(asking, np.random.Generator(np.random.PCG64(SEED)))
    v = full.self_normalizer()
    assert np.array_equal(v, v.T)
    assert close(v, direct_self_normalizer(path))
    assert close(full.prefix(point).self_normalizer(), direct_self_normalizer(path[:point]))
    assert np.array_equal(full.self_normalizer_diagonal(), diagonal)
    assert np.array_equal(np.diag(v), diagonal)
    for name in ("seg_dev", "seg_shift", "snap_t", "snap_b", "snap_theta"):
        assert np.array_equal(getattr(full, name), getattr(stats, name))


def direct_intervals(rs, path, level, boot_rngs):
    """Every method's interval computed from the stored path by the SPEC formulas."""
    n = len(path)
    theta_bar = path.mean(axis=0)
    alpha = 1 - level
    z = sps.norm.ppf(1 - alpha / 2)
    out = {}
    # 5.1 bb: theta*_r = (1/(m l)) sum_j e_j (S_j - l theta_bar), e_j ~ U(-sqrt3, sqrt3).
    for label in ("bb", "bb_pct", "bb_sim"):
        method = rs.methods[label]
        block_len = math.floor(n**method.beta)
        m = n // block_len
        centred = (
            np.array([path[j * block_len : (j + 1) * block_len].sum(axis=0) for j in range(m)])
            - block_len * theta_bar
        )
        e = boot_rngs[label].uniform(-math.sqrt(3), math.sqrt(3), (method.B, m))
        boot = e @ centred / (m * block_len)
        q_lo, q_hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2], axis=0)
        if method.simultaneous:
            # Sup-t band: sd_j over the draws, c = the level quantile of the largest
            # studentized draw, computed here draw by draw.
            sd = np.array([np.std(boot[:, j], ddof=1) for j in range(boot.shape[1])])
            t_max = [max(abs(boot[r, j]) / sd[j] for j in range(len(sd))) for r in range(method.B)]
            c = np.quantile(t_max, level)
            out[label] = (theta_bar - c * sd, theta_bar + c * sd)
        elif method.form == "basic":
            out[label] = (theta_bar - q_hi, theta_bar - q_lo)
        else:
            out[label] = (theta_bar + q_lo, theta_bar + q_hi)
    # 5.2 bm.
    e = rs.methods["bm"].bounds(n, rs.gamma)
    means = np.array([path[a:b].mean(axis=0) for a, b in itertools.pairwise(e)])
    sizes = np.diff(e)
    pooled = sizes @ means / (n - e[0])
    sigma_hat = ((means - pooled) * sizes[:, None]).T @ (means - pooled) / len(sizes)
    half = z * np.sqrt(np.diag(sigma_hat) / n)
    out["bm"] = (theta_bar - half, theta_bar + half)
    # 5.3 sn.
    half = critical_value(level) * np.sqrt(np.diag(direct_self_normalizer(path)) / n)
    out["sn"] = (theta_bar - half, theta_bar + half)
    # 5.4 oracle: Sigma = G^-1 S G^-1 from the units' closed forms.
    model = rs.model
    g_inv = np.linalg.inv(model.jacobian())
    s = (model.gradient_cov() + rs.mechanism.variance(model)) / rs.batch
    half = z * np.sqrt(np.diag(g_inv @ s @ g_inv.T) / n)
    out["oracle"] = (theta_bar - half, theta_bar + half)
    return out


def test_intervals_against_two_pass(run):
    rs, path, _ = run

    def boot_streams():
        return {
            k: np.random.Generator(np.random.PCG64([BOOT_SEED, i])) for i, k in enumerate(METHODS)
        }

    result = compute_replicate(rs, np.random.Generator(np.random.PCG64(SEED)), boot_streams())
    assert result.failures == {}
    assert result.checkpoints == (CHECKPOINT, N)
    # Each bb draws its multipliers from its own stream at n and from the child stream
    # of that stream keyed by the checkpoint below n; the direct computation does the same.
    for k, point in enumerate(result.checkpoints):
        rngs = boot_streams()
        if point != N:
            rngs = {label: checkpoint_stream(rng, point) for label, rng in rngs.items()}
        expected = direct_intervals(rs, path[:point], rs.level, rngs)
        assert close(result.estimate[k], path[:point].mean(axis=0))
        for label, (lo, hi) in expected.items():
            length = np.max(hi - lo)
            assert np.all(hi > lo)
            assert np.max(np.abs(result.lower[label][k] - lo)) <= RTOL * length, (point, label)
            assert np.max(np.abs(result.upper[label][k] - hi)) <= RTOL * length, (point, label)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FullMatrixSN(SelfNormalized):
    """sn from the whole V_n, as a method that reads off-diagonal entries would."""

    needs_full_matrix = True

    def interval(self, stats, level, rng):
        half = critical_value(level) * np.sqrt(np.diag(stats.self_normalizer()) / stats.n)
        return stats.theta_bar - half, stats.theta_bar + half


def test_a_method_that_needs_the_full_matrix_gets_it():
    # The kernel keeps all of A when one requested method says so; sn's interval from the
    # full V_n then equals the diagonal-only sn bit for bit (the same operations).
    rs = normalize_spec({**CASES["qr-laplace-d4"], "n": N, "methods": {"sn": {}}})
    assert not needs_full_matrix(rs)
    both = dataclasses.replace(rs, methods={"sn": rs.methods["sn"], "full": FullMatrixSN()})
    assert needs_full_matrix(both)
    result = compute_replicate(both, np.random.Generator(np.random.PCG64(SEED)), {})
    assert np.array_equal(result.lower["full"], result.lower["sn"])
    assert np.array_equal(result.upper["full"], result.upper["sn"])
    alone = compute_replicate(rs, np.random.Generator(np.random.PCG64(SEED)), {})
    assert np.array_equal(alone.lower["sn"], result.lower["sn"])


def test_the_batched_sn_reads_the_diagonal_of_the_full_matrix():
    # Where the chunk keeps all of A, sn's batched path reads its diagonal: it equals
    # the full V_n's diagonal that FullMatrixSN's interval reads, replicate by
    # replicate, bit for bit. The chunk's column 0 instead (a mutation hunt, h16h)
    # passed the tests, which compared the full matrix on one replicate alone only: a
    # row made NaN by it is run again alone, right, but a row it leaves finite is
    # stored wrong (at d = 2 some of these six).
    from ldpsim.tasks.chunk import compute_chunk
    from ldpsim.tasks.grid_point import GridPointSetup
    from ldpsim.tasks.replicate import run_replicate

    rs = normalize_spec({**CASES["mean-laplace-d2"], "n": 2000, "methods": {"sn": {}}})
    both = dataclasses.replace(rs, methods={"sn": rs.methods["sn"], "full": FullMatrixSN()})
    setup = GridPointSetup.of(both)
    out = compute_chunk(setup, range(6))
    assert not out["method_failed"].any()
    for rep in range(6):
        alone = run_replicate(setup, rep)
        for name in ("lower", "upper"):
            np.testing.assert_array_equal(out[name][0, rep], getattr(alone, name)["full"])
