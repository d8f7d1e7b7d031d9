"""Coverage of every interval method on the linear mean model against what it should
give at that finite n: exact second moments and an independent simulation (SPEC 3.3, 5)."""

import math

import numpy as np
import pytest
from scipy import special
from scipy import stats as sps

from ldpsim.tasks import normalize_spec, run_replicate
from ldpsim.tasks.replicate import run_stats
from ldpsim.tasks.streams.seeding import data_stream


def prefix_sum_weights(n: int, c: float, gamma: float, ends) -> np.ndarray:
    """W with P_b = sum_{i <= b} W[k, i - 1] xi_i for b = ends[k], on the mean model.

    P_b = sum_{s <= b} (theta_s - theta*). With G = I the errors e_s = theta_s - theta*
    follow e_s = (1 - eta_s) e_{s-1} + eta_s xi_s, xi_s iid with covariance S, and e_0 is
    erased by eta_1 = c = 1 (or is 0 when theta_0 = theta*). So P_b = sum_i eta_i h_i xi_i
    with h_b = 1 and h_i = 1 + (1 - eta_{i+1}) h_{i+1}, and every statistic of the run that
    is linear in the iterates has an exact finite-n variance. eta_i = c i^-gamma exactly.
    """
    ends = np.asarray(ends, dtype=np.int64)
    eta = c * np.arange(1, n + 1, dtype=np.float64) ** -gamma
    weights = np.zeros((len(ends), n))
    h = np.zeros(len(ends))
    for i in range(n, 0, -1):  # i is 1-based: eta[i - 1] is eta_i
        decay = 1.0 - eta[i] if i < n else 0.0
        h = np.where(ends > i, 1.0 + decay * h, (ends == i).astype(float))
        weights[:, i - 1] = eta[i - 1] * h
    return weights


def finite_n_variance_ratio(n: int, c: float, gamma: float) -> float:
    """n Var(theta_bar_n) / Sigma exactly, for the mean model (-> 1, Polyak & Juditsky 1992)."""
    (w,) = prefix_sum_weights(n, c, gamma, [n])
    return float(np.sum(w**2) / n)


@pytest.mark.slow
@pytest.mark.parametrize(("mechanism", "d"), [("laplace", 2), ("none", 1)])
def test_mean_model_variance_matches_oracle(mechanism, d):
    # R = 1600 / d replicates of the d-dimensional mean model (coordinates independent,
    # so d R = 1600 draws of sqrt(n)(theta_bar_j - theta*_j) / sqrt(Sigma_jj)). theta_bar
    # is a weighted sum of n iid terms, so it is Gaussian to high accuracy and the pooled
    # variance ratio has MC sd sqrt(2 / (d (R - 1))) = 0.035. Finite-n bias: the exact
    # ratio at n = 2e4 is 1.0040 (finite_n_variance_ratio), so the empirical ratio must
    # be within 4 MC sds of 1.004 and within 15% of the oracle Sigma; the oracle's
    # coverage must match 2 Phi(z / sqrt(1.004)) - 1 within 4 binomial standard errors.
    # d = 2 and 1 (until 2026-11-30 d = 4 with R = 400): kernels other tests compile too
    # (a compile costs more CPU than the replicates).
    n, reps = 20_000, 1600 // d
    rho = finite_n_variance_ratio(n, 1.0, 0.51)
    assert 1.0 < rho < 1.01
    spec = {
        "model": "mean",
        "d": d,
        "loc": 0.3,
        "theta0": 0.3,
        "mechanism": mechanism,
        "n": n,
        "methods": {"oracle": {}},
        "seed": 2024,
    }
    rs = normalize_spec(spec)
    sigma = np.diag(rs.model.asymptotic_cov(rs.mechanism.variance(rs.model)))
    z = np.empty((reps, d))
    covered = np.empty((reps, d), dtype=bool)
    for rep in range(reps):
        result = run_replicate(rs, rep)
        z[rep] = math.sqrt(n) * (result.estimate - result.truth) / np.sqrt(sigma)
        covered[rep] = (result.lower["oracle"] < result.truth) & (
            result.truth < result.upper["oracle"]
        )
    ratio = float(np.mean(z.var(axis=0, ddof=1)))
    mc_sd = math.sqrt(2 / (d * (reps - 1)))
    assert abs(ratio - rho) <= 4 * mc_sd * rho, ratio
    assert abs(ratio - 1) <= 0.15, ratio
    # No bias: the mean of z is within 4 sd / sqrt(R d) of 0.
    assert abs(z.mean()) <= 4 * math.sqrt(rho / (reps * d))
    expected = 2 * sps.norm.cdf(sps.norm.ppf(0.95) / math.sqrt(rho)) - 1
    assert abs(covered.mean() - expected) <= 4 * math.sqrt(expected * (1 - expected) / (reps * d))


# The coverage study: the mean model, d = 2, n = 2e4, Laplace at eps = 1, 90% intervals,
# the paper's defaults (c = 1, gamma = 0.51, bb with B = 500, beta = 0.75, uniform
# multipliers, bm with M = m batches).
N, D, LOC, EPS, LEVEL = 20_000, 2, 0.3, 1.0, 0.9
GAMMA, BETA, B = 0.51, 0.75, 500
#: Exact (1 - alpha/2)-quantile of W(1) / sqrt(int (W - r W(1))^2) at 90% (SPEC 5.3).
SN_CRITICAL_VALUE_90 = 5.323


def partitions(n: int, gamma: float, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """bb's block ends (0, l, ..., m l) and bm's batch ends (e_0, ..., e_M = n), SPEC 5.1-5.2."""
    block_len = math.floor(n**beta)
    n_blocks = n // block_len
    big_n = n ** (1 - gamma) / (n_blocks + 1)
    batch_ends = [math.floor(((k + 1) * big_n) ** (1 / (1 - gamma))) for k in range(n_blocks)]
    return block_len * np.arange(n_blocks + 1), np.array([*batch_ends, n])


def reference_intervals(n_reps: int, rng: np.random.Generator) -> tuple[dict, np.ndarray]:
    """The four methods' 90% intervals on ``n_reps`` independent runs, and bb's Var*.

    A second implementation of the whole replicate, written from the SPEC alone and
    vectorised over replicates: the data are drawn by the inverse CDF of the truncated
    normal (the kernel rejects), the Laplace noise by numpy's sampler (the kernel signs
    an exponential), the step sizes are exact powers, and the intervals use the SPEC 5
    formulas on sums kept in plain float64 around theta* (no recentring). Returns
    {method: (lower, upper)}, bounds centred at theta* (the model is location-equivariant),
    and the bootstrap variance given the path, sum_j C_j^2 / (m l)^2; arrays of shape
    (n_reps, D).
    """
    scale = 2 * D / EPS  # Laplace b = Delta / eps, Delta = 2 d (SPEC 3.3)
    block_ends, batch_ends = partitions(N, GAMMA, BETA)
    ends = set(block_ends[1:].tolist()) | set(batch_ends.tolist())
    at_end = {}
    error = np.zeros((n_reps, D))  # theta_s - theta*
    prefix = np.zeros((n_reps, D))  # P_s = sum_{r <= s} (theta_r - theta*)
    sum_sq = np.zeros((n_reps, D))  # sum_s P_s^2
    sum_sp = np.zeros((n_reps, D))  # sum_s s P_s
    lo_cdf, hi_cdf = special.ndtr(-1.0), special.ndtr(1.0)
    chunk = 250
    for start in range(0, N, chunk):
        steps = np.arange(start + 1, min(start + chunk, N) + 1)
        u = rng.uniform(lo_cdf, hi_cdf, (len(steps), n_reps, D))
        xi = special.ndtri(u) - rng.laplace(0.0, scale, u.shape)  # X - theta* - L
        eta = steps.astype(float) ** -GAMMA
        for k, s in enumerate(steps):
            error += eta[k] * (xi[k] - error)  # theta_s = theta_{s-1} - eta_s (theta - X + L)
            prefix += error
            sum_sq += prefix * prefix
            sum_sp += s * prefix
            if s in ends:
                at_end[int(s)] = prefix.copy()
    theta_bar = prefix / N
    z = sps.norm.ppf(0.5 + LEVEL / 2)
    out = {}
    # oracle: Sigma = S = Var(X) + 2 b^2 (G = I).
    var_x = 1 - 2 * sps.norm.pdf(1.0) / (2 * sps.norm.cdf(1.0) - 1)
    half = z * math.sqrt((var_x + 2 * scale**2) / N)
    out["oracle"] = (theta_bar - half, theta_bar + half)
    # sn: V_n = n^-2 sum_s (P_s - s P_n / n)^2.
    sum_s2 = N * (N + 1) * (2 * N + 1) / 6
    v_n = (sum_sq - 2 * theta_bar * sum_sp + theta_bar**2 * sum_s2) / N**2
    half = SN_CRITICAL_VALUE_90 * np.sqrt(v_n / N)
    out["sn"] = (theta_bar - half, theta_bar + half)
    # bm: batch means after the burn-in batch (0, e_0].
    prefix_at = np.stack([at_end[int(e)] for e in batch_ends])  # (M + 1, reps, D)
    sizes = np.diff(batch_ends).astype(float)[:, None, None]
    means = np.diff(prefix_at, axis=0) / sizes
    pooled = (prefix_at[-1] - prefix_at[0]) / (N - batch_ends[0])
    sigma_hat = np.sum(sizes * (means - pooled) ** 2, axis=0) / len(sizes)
    half = z * np.sqrt(sigma_hat / N)
    out["bm"] = (theta_bar - half, theta_bar + half)
    # bb: theta*_r = (1/(m l)) sum_j e_j (S_j - l theta_bar), one set of multipliers per
    # replicate for both coordinates; basic interval [tb - q_hi, tb - q_lo].
    block_len, n_blocks = block_ends[1], len(block_ends) - 1
    prefix_at = np.stack([np.zeros((n_reps, D))] + [at_end[int(e)] for e in block_ends[1:]])
    centred = np.diff(prefix_at, axis=0) - block_len * theta_bar  # (m, reps, D)
    q_lo, q_hi = np.empty((2, n_reps, D))
    for first in range(0, n_reps, 500):  # 500 replicates' multipliers take 22 MB
        rows = slice(first, min(first + 500, n_reps))
        e = rng.uniform(-math.sqrt(3), math.sqrt(3), (rows.stop - first, B, n_blocks))
        boot = np.einsum("rbj,jrd->rbd", e, centred[:, rows]) / (n_blocks * block_len)
        q_lo[rows], q_hi[rows] = np.quantile(boot, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=1)
    out["bb"] = (theta_bar - q_hi, theta_bar - q_lo)
    return out, np.sum(centred**2, axis=0) / (n_blocks * block_len) ** 2


def bootstrap_variance_ratio(n: int, gamma: float, beta: float) -> float:
    """E[Var*(theta*_r)] / (Sigma / n) exactly, on the mean model with c = 1.

    Given the path, bb's theta*_r = (1/(m l)) sum_j e_j C_j, C_j = S_j - l theta_bar, has
    variance Var* = sum_j C_j^2 / (m l)^2 per coordinate (multipliers of variance 1). C_j
    is linear in the noise, so E[C_j^2] = Sigma ||w_j||^2 with w_j from
    :func:`prefix_sum_weights` (Sigma = S, as G = I).
    """
    block_ends, _ = partitions(n, gamma, beta)
    block_len, n_blocks = block_ends[1], len(block_ends) - 1
    weights = prefix_sum_weights(n, 1.0, gamma, [*block_ends, n])  # P_0 = 0 first
    centred = np.diff(weights[:-1], axis=0) - block_len * weights[-1] / n
    return float(n * np.sum(centred**2) / (n_blocks * block_len) ** 2)


def binomial_se(p: float, count: int) -> float:
    return math.sqrt(p * (1 - p) / count)


@pytest.mark.slow
def test_main_methods_coverage_and_bootstrap_variance():
    # 400 replicates through run_replicate (kernel, streaming statistics, every method)
    # against what the methods should give at this n: the coverage of a second,
    # independent implementation (reference_intervals, 4000 replicates) and, for bb's
    # bootstrap variance, its exact expectation (bootstrap_variance_ratio). The two
    # coordinates are independent (G = I, independent data and noise coordinates), so
    # each method gives R d = 800 coverage indicators here and 8000 in the reference.
    # bb's two coordinates share one set of multipliers, but given the path the shared
    # draws move each bootstrap quantile by ~1/sqrt(B) of its size, so the indicators
    # stay all but independent and the binomial standard errors hold. The tolerance is
    # 4 binomial se of the difference of the two estimates (each se from the reference
    # coverage p: sqrt(p (1 - p) / (R d)), 0.0106 at p = 0.9, and 0.0034 for the
    # reference).
    #
    # What they should give here, from the reference at 40000 replicates x 2 coordinates
    # (seed 1, binomial se 0.0011-0.0013; the coordinates' indicators are uncorrelated,
    # |r| < 0.006, bb's included): oracle 0.899 (exactly 2 Phi(z / sqrt(rho)) - 1 =
    # 0.8993 with rho = 1.004); sn 0.894, a little under 0.90 because the early iterates
    # vary more than the stationary ones; bm 0.844, M = 11 batches with E SigmaHat =
    # 0.873 Sigma (exact, from prefix_sum_weights), and a t_11 law with that bias gives
    # 0.847; bb 0.854, m = 11 blocks with E Var* = 0.935 Sigma / n, and a t_10 law with
    # that bias gives 0.856. Far from the 0.90 all four reach as n grows, so the test
    # compares with these, not with 0.90. This run (seed 77) gave oracle 0.900, sn
    # 0.895, bm 0.836, bb 0.848.
    reps, ref_reps = 400, 4000
    rs = normalize_spec(
        {
            "model": "mean",
            "d": D,
            "loc": LOC,
            "theta0": LOC,
            "mechanism": "laplace",
            "eps": EPS,
            "n": N,
            "level": LEVEL,
            "methods": {"bb": {"B": B, "beta": BETA}, "bm": {}, "sn": {}, "oracle": {}},
            "seed": 77,
        }
    )
    sigma = rs.model.asymptotic_cov(rs.mechanism.variance(rs.model))[0, 0]
    block_ends, _ = partitions(N, GAMMA, BETA)
    block_len, n_blocks = block_ends[1], len(block_ends) - 1
    covered = {label: np.empty((reps, D), dtype=bool) for label in rs.methods}
    boot_var_ratio = np.empty((reps, D))
    for rep in range(reps):
        result = run_replicate(rs, rep)
        assert result.failures == {}
        for label, cover in covered.items():
            lower, upper = result.lower[label], result.upper[label]
            cover[rep] = (lower < result.truth) & (result.truth < upper)
        stats = run_stats(rs, data_stream(rs.seed, rs.path_key(), rep))
        assert np.array_equal(stats.theta_bar, result.estimate)  # the same path
        centred = stats.deviation_sums(block_ends, stats.theta_bar)  # C_j, (m, d)
        boot_var = np.sum(centred**2, axis=0) / (n_blocks * block_len) ** 2
        boot_var_ratio[rep] = boot_var / (sigma / N)

    ref, ref_boot_var = reference_intervals(ref_reps, np.random.Generator(np.random.PCG64(1)))
    for label, (lower, upper) in ref.items():
        p_ref = float(np.mean((lower < 0) & (0 < upper)))
        p_run = float(covered[label].mean())
        se = math.hypot(binomial_se(p_ref, reps * D), binomial_se(p_ref, ref_reps * D))
        assert abs(p_run - p_ref) <= 4 * se, (label, p_run, p_ref, se)

    # The reference itself: its oracle coverage matches the exact finite-n value.
    rho = finite_n_variance_ratio(N, 1.0, GAMMA)
    exact = 2 * sps.norm.cdf(sps.norm.ppf(0.5 + LEVEL / 2) / math.sqrt(rho)) - 1
    p_ref = float(np.mean((ref["oracle"][0] < 0) & (0 < ref["oracle"][1])))
    assert abs(p_ref - exact) <= 4 * binomial_se(exact, ref_reps * D)

    # bb's bootstrap variance, averaged over the replicates, against Sigma / n: its exact
    # expectation is bootstrap_variance_ratio() Sigma / n (0.935 here, not 1: centring
    # at theta_bar, the n - m l iterates outside the blocks and the iterates' correlation
    # across block edges), within 4 MC sds of the mean of R d iid ratios (sd ~0.015;
    # this run: 0.905). The reference's Var* must match it too (sd ~0.005; 0.931).
    expected = bootstrap_variance_ratio(N, GAMMA, BETA)
    assert 0.9 < expected < 0.97
    for ratios in (boot_var_ratio, ref_boot_var / (sigma / N)):
        mc_sd = ratios.std(ddof=1) / math.sqrt(ratios.size)
        assert abs(ratios.mean() - expected) <= 4 * mc_sd, (ratios.mean(), expected, mc_sd)
