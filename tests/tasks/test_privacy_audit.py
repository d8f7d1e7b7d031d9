"""Empirical privacy audits of every mechanism on every model it applies to.

The closed forms (RR's likelihood ratio p / (1 - p) = e^eps, the Laplace scale
Delta / eps) are checked in test_mechanisms.py. Here the compiled ``privatize``
callbacks are run many times on the two most distant inputs a user can have, the
frequencies of the reports are compared in common bins, and the ratio of the two
empirical probabilities is checked against e^eps with a binomial error bound. Each
audit is also shown to have power: noise calibrated to 2 eps instead of eps is caught.
The Gaussian mechanisms (gaussian, gdp) are audited as hypothesis tests: at the two
gradients farthest apart in l2, every threshold test on the reports' projection onto
their difference (the Neyman-Pearson tests for isotropic Gaussian noise) must have
errors (alpha, beta) above the mu-GDP trade-off curve, or inside the (eps, delta)
region, up to a Monte-Carlo tolerance; the same audit catches half the noise.
Finally the sensitivity Delta behind the noise is property-tested on the models'
own gradient samplers (hypothesis) and at the analytic worst case. Where a model's Delta
is only an upper bound (the two farthest gradients are closer than Delta), the audits
compare with the privacy the noise actually gives at that pair.
"""

import itertools
import math

import numpy as np
import pytest
from corner_gradients import corner_gradients
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.spatial import ConvexHull, distance

from ldpsim.tasks import mechanisms, models
from ldpsim.tasks.intervals import OnlineBootstrap
from ldpsim.tasks.mechanisms.nprr import nprr_keep_probability, nprr_privatize

EPS = [0.5, 1.0, 2.0]

#: One instance of every model, as the audits use them.
MODELS = {
    "quantile": models.Quantile(tau=0.3),
    "quantile_regression": models.QuantileRegression(tau=0.5, coef=[0.0, 0.0, 1.0, -1.0]),
    "quantile_regression_tau08": models.QuantileRegression(tau=0.8, coef=[0.0, 0.0, 1.0, -1.0]),
    "mean": models.Mean(d=2, loc=1.0),
    # Sparse gradients (SPEC 11), the Laplace and Gaussian noise calibrated to s, not d.
    "sparse_mean": models.SparseMean(d=3, sparsity=2, magnitude=1.0, coef=0.2),
    "one_hot_quantile_regression": models.OneHotQuantileRegression(d=3, tau=0.7),
    "bounded_mean": models.BoundedMean(a=2.0, b=5.0),
    # Gaussian covariates (SPEC 9) at d = 1, Mallows weights or clipping: their sup points
    # are derived in corner_gradients (logistic_corners, huber_corners).
    "logistic_regression": models.LogisticRegression(d=1),
    "logistic_regression_clip": models.LogisticRegression(d=1, weights="none", clip=0.5),
    "huber_regression": models.HuberRegression(d=1),
    "huber_regression_clip": models.HuberRegression(d=1, weights="none", clip=1.0),
}

#: Per entry of MODELS: (l1 diameter, Delta1, l2 diameter, Delta2), the diameters those of
#: the closure of the gradient set (the farthest corner_gradients), the Deltas the ones the
#: model must state. Derivations in test_sensitivity_worst_case_is_analytic and in
#: corner_gradients; the Deltas are pinned, so that a wrong Delta fails even where the
#: audit could not see it (a Delta2 of 2.75 for logistic's 2 sqrt 2 is 3% too little
#: noise in mu).
_C = 1.345  # huber_c
SENSITIVITIES = {
    "quantile": (1.0, 1.0, 1.0, 1.0),
    "quantile_regression": (4.0, 4.0, 2.0, 2.0),
    "quantile_regression_tau08": (4.8, 6.4, 1.6 * math.sqrt(3), 1.6 * math.sqrt(3)),
    "mean": (4.0, 4.0, 2 * math.sqrt(2), 2 * math.sqrt(2)),
    "sparse_mean": (4.0, 4.0, 2 * math.sqrt(2), 2 * math.sqrt(2)),
    "one_hot_quantile_regression": (1.4, 1.4, 1.0, 1.0),
    "bounded_mean": (1.0, 1.0, 1.0, 1.0),
    "logistic_regression": (4.0, 4.0, 2 * math.sqrt(2), 2 * math.sqrt(2)),
    "logistic_regression_clip": (math.sqrt(2), math.sqrt(2), 1.0, 1.0),
    "huber_regression": (
        4 * _C,
        math.sqrt(3) * math.sqrt(8 * _C**2 + _C**4 / 4),
        2 * math.sqrt(2) * _C,
        math.sqrt(8 * _C**2 + _C**4 / 4),
    ),
    "huber_regression_clip": (3.208504271324132, 2 * math.sqrt(3), 2.0, 2.0),
}

#: The entries audited at every budget (EPS, GDP_MU, GAUSSIAN_CASES). The others are
#: audited at one budget each (eps = 1, mu = 1, (eps, delta) = (0.9, 1e-3)), to keep
#: this file's runtime low: the budget only scales the noise, which the audits of
#: EVERY_BUDGET check at every budget; what a model brings is its pair of gradients and
#: its Delta, the same at every budget.
EVERY_BUDGET = {
    "quantile",
    "quantile_regression",
    "quantile_regression_tau08",
    "mean",
    "sparse_mean",
    "one_hot_quantile_regression",
}


def budget_cases(budgets, single):
    """(key, *budget) for every entry of MODELS: every budget for EVERY_BUDGET, else single.

    A budget is a number (eps, mu) or a tuple ((eps, delta)).
    """

    def flat(budget):
        return budget if isinstance(budget, tuple) else (budget,)

    return [
        (key, *flat(budget))
        for key in MODELS
        for budget in (budgets if key in EVERY_BUDGET else [single])
    ]


#: Mechanisms with an empirical audit in this file; a newly registered mechanism
#: makes test_every_mechanism_is_audited fail until it gets one.
AUDITED = {"randomized_response", "laplace", "gaussian", "gdp", "none"}


def draws(mech, params, g0, n, seed):
    return mech.privatize_copies(params, g0, n, seed)


def applies(mech, model):
    try:
        mech.check_model(model)
        mech.params(model)
    except ValueError:
        return False
    return True


def ratio_bound(k1, k0, n1, n0, z):
    """Point estimate of p1 / p0 and a relative tolerance from a normal bound at z sd.

    p_hat has relative sd sqrt((1 - p) / (n p)); the ratio's relative error is at most
    the sum of the two (first order), so |ratio_hat / ratio - 1| <= tol with
    tol = z (sd_rel(p1) + sd_rel(p0)) except with probability < 2 P(Z > z).
    """
    p1, p0 = k1 / n1, k0 / n0
    tol = z * (math.sqrt((1 - p1) / (n1 * p1)) + math.sqrt((1 - p0) / (n0 * p0)))
    return p1 / p0, tol


def test_every_mechanism_is_audited():
    assert set(mechanisms.REGISTRY) <= AUDITED
    # Every registered model has an entry in MODELS (keyed by its name, or its name and a
    # suffix for a variant), so a newly registered model fails here until it is audited.
    for key, model in MODELS.items():
        assert type(model) is models.REGISTRY[model.name], key
        assert key == model.name or key.startswith(f"{model.name}_"), key
    assert {model.name for model in MODELS.values()} == set(models.REGISTRY)
    assert set(SENSITIVITIES) == set(MODELS)
    # Every (mechanism, model) pair that the registry allows is covered below.
    pairs = {
        (name, key)
        for name, cls in mechanisms.REGISTRY.items()
        for key, model in MODELS.items()
        if applies(cls(), model)
    }
    assert ("randomized_response", "quantile") in pairs
    assert {(name, key) for name in ("laplace", "gaussian", "gdp") for key in MODELS} <= pairs
    assert not any(name == "randomized_response" and key != "quantile" for name, key in pairs)


def test_none_claims_no_privacy():
    # The identity has eps = inf and adds nothing: it makes no privacy claim to audit.
    for model in MODELS.values():
        mech = mechanisms.NoPrivacy()
        assert not mech.is_private and math.isinf(mech.eps)
        g0 = np.linspace(-0.3, 0.7, model.dim)
        out = draws(mech, mech.params(model), g0, 100, seed=0)
        assert np.array_equal(out, np.broadcast_to(g0, out.shape))


# ---------------------------------------------------------------------------------------
# Randomized response: empirical likelihood ratio of each report value.

RR_N = 1_000_000  # draws per input
RR_Z = 4.0  # sd per probability


def rr_audit(model, params, n, seed):
    """Empirical P(report = r | g = hi) / P(report = r | g = lo) for r = the two reports.

    Returns {r: (ratio_hat, tol)} oriented so that the ratio is >= 1 in expectation
    (report_1 is likelier under hi, report_0 under lo).
    """
    lo, hi = model.gradient_range()
    mech = mechanisms.RandomizedResponse(eps=1.0)  # only its compiled callback is used
    out_hi = draws(mech, params, [hi], n, seed)[:, 0]
    out_lo = draws(mech, params, [lo], n, seed + 1)[:, 0]
    q, scale = params[0], params[3]
    report_1, report_0 = lo + scale * (1 - q), lo + scale * (0 - q)
    for out in (out_hi, out_lo):  # only the two report values occur
        assert np.all((out == report_1) | (out == report_0))
    k1_hi, k1_lo = np.count_nonzero(out_hi == report_1), np.count_nonzero(out_lo == report_1)
    return {
        "report_1": ratio_bound(k1_hi, k1_lo, n, n, RR_Z),
        "report_0": ratio_bound(n - k1_lo, n - k1_hi, n, n, RR_Z),
    }


@pytest.mark.parametrize("tau", [0.3, 0.5])
@pytest.mark.parametrize("eps", EPS)
def test_randomized_response_empirical_ratio(eps, tau):
    # N = 1e6 draws per input. Relative tolerance on each ratio: 4 sd on each probability,
    # summed: tol = 4 (sqrt(q / (N p)) + sqrt(p / (N q))), q = 1 / (1 + e^eps):
    # eps = 0.5: 0.00825, eps = 1: 0.00902, eps = 2: 0.01234 (observed |ratio / e^eps - 1|
    # <= 0.003 for every eps, tau and report value with these seeds).
    model = models.Quantile(tau=tau)
    mech = mechanisms.RandomizedResponse(eps=eps)
    p, q = 1 / (1 + math.exp(-eps)), 1 / (1 + math.exp(eps))
    expected_tol = RR_Z * (math.sqrt(q / (RR_N * p)) + math.sqrt(p / (RR_N * q)))
    assert expected_tol < {0.5: 0.00826, 1.0: 0.00903, 2.0: 0.01235}[eps]
    for r, (ratio, tol) in rr_audit(model, mech.params(model), RR_N, seed=17).items():
        assert tol == pytest.approx(expected_tol, rel=0.05)
        # Both directions: the ratio equals e^eps, so it neither exceeds the privacy
        # bound nor falls short of it (the mechanism is exactly as private as claimed).
        assert abs(ratio / math.exp(eps) - 1) <= tol, (r, ratio, math.exp(eps), tol)


@pytest.mark.parametrize("eps", EPS)
def test_randomized_response_audit_has_power(eps):
    # A mechanism claiming eps but flipping with the probability of eps' = 2 eps has
    # ratio e^(2 eps): the same audit (N = 1e6, 4 sd) rejects the claim.
    model = models.Quantile(tau=0.3)
    wrong = mechanisms.RandomizedResponse(eps=2 * eps).params(model)
    for r, (ratio, tol) in rr_audit(model, wrong, RR_N, seed=23).items():
        assert ratio > math.exp(eps) * (1 + tol), r
        assert ratio == pytest.approx(math.exp(2 * eps), rel=tol)


# ---------------------------------------------------------------------------------------
# NPRR (SPEC 12.1): the reports of a data point, not of a gradient. Its likelihood ratio
# is largest between x = 0 and x = 1 at the end points of the grid, where it is exactly
# 1 + (G + 1) r / (1 - r) = e^eps.

NPRR_N = 1_000_000  # draws per input


def nprr_audit(privatize, grid, seed):
    """Per report value z: (ratio_hat, tol) of max over the pairs (0, 1), (1, 0), (0.5, 0),
    (0.5, 1) of P(z | x) / P(z | x'), and whether the ratio at the end points was seen."""
    counts = {}
    for k, x in enumerate((0.0, 1.0, 0.5)):
        z = privatize(np.full(NPRR_N, x), rng=np.random.default_rng(seed + k))
        counts[x] = np.bincount(np.rint(z * grid).astype(np.int64), minlength=grid + 1)
    out = {}
    for value in range(grid + 1):
        best = (0.0, 0.0)
        for x, other in ((0.0, 1.0), (1.0, 0.0), (0.5, 0.0), (0.5, 1.0)):
            ratio, tol = ratio_bound(counts[x][value], counts[other][value], NPRR_N, NPRR_N, 4.0)
            best = max(best, (ratio, tol))
        out[value] = best
    return out


@pytest.mark.parametrize("grid", [1, 4])
@pytest.mark.parametrize("eps", EPS)
def test_nprr_empirical_ratio(eps, grid):
    # N = 1e6 draws per input; relative tolerance 4 (sd_rel(p1) + sd_rel(p0)) per report
    # value (0.006-0.02 at the end points). Every report's ratio is at most e^eps within
    # its tolerance, and at the end points it is e^eps within it (attained: exactly eps).
    audit = nprr_audit(
        lambda x, rng: nprr_privatize(x, eps=eps, grid=grid, rng=rng), grid, seed=31
    )
    for value, (ratio, tol) in audit.items():
        assert ratio <= math.exp(eps) * (1 + tol), (value, ratio, tol)
    for value in (0, grid):
        ratio, tol = audit[value]
        assert abs(ratio / math.exp(eps) - 1) <= tol, (value, ratio, tol)


@pytest.mark.parametrize("eps", EPS)
def test_nprr_audit_has_power(eps):
    # r calibrated to 2 eps while eps is claimed: ratio e^(2 eps) at the end points, far
    # beyond e^eps (1 + tol). And the pitfall of SPEC 12.1 at G = 4: noise drawn as
    # round(4 V) / 4 with V ~ Uniform(0, 1) gives the end points half weight, so the ratio
    # there is 1 + 2 G r / (1 - r) (e^1.32 instead of e at eps = 1): caught as well.
    grid = 4
    wrong = 2 * eps
    audit = nprr_audit(
        lambda x, rng: nprr_privatize(x, eps=wrong, grid=grid, rng=rng), grid, seed=37
    )
    ratio, tol = audit[0]
    assert ratio > math.exp(eps) * (1 + tol)
    assert ratio == pytest.approx(math.exp(2 * eps), rel=tol)
    keep = nprr_keep_probability(eps, grid)

    def half_weight_ends(x, rng):
        rounded = nprr_privatize(x, eps=1000.0, grid=grid, rng=rng)  # r = 1: rounding alone
        noise = np.rint(grid * rng.random(x.shape[0])) / grid
        return np.where(rng.random(x.shape[0]) < keep, rounded, noise)

    ratio, tol = nprr_audit(half_weight_ends, grid, seed=41)[0]
    assert ratio > math.exp(eps) * (1 + tol), (ratio, tol)
    assert ratio == pytest.approx(1 + 2 * grid * keep / (1 - keep), rel=tol)


# ---------------------------------------------------------------------------------------
# Laplace: worst-case neighbouring gradients and a binned likelihood-ratio audit.


def most_distant_pair(model):
    grads = corner_gradients(model)
    dist = np.abs(grads[:, None, :] - grads[None, :, :]).sum(axis=2)
    i, j = np.unravel_index(np.argmax(dist), dist.shape)
    return grads[i], grads[j], float(dist[i, j])


def most_distant_pair_l2(model):
    grads = corner_gradients(model)
    dist = np.sqrt(((grads[:, None, :] - grads[None, :, :]) ** 2).sum(axis=2))
    i, j = np.unravel_index(np.argmax(dist), dist.shape)
    return grads[i], grads[j], float(dist[i, j])


@pytest.mark.parametrize("key", list(MODELS))
def test_sensitivity_worst_case_is_analytic(key):
    # The l1-diameter of the gradient set is attained at the extreme covariates (+-1):
    # quantile 1; quantile_regression max(d, 2 (d - 1) max(tau, 1 - tau)) (w differing
    # gives 1 + (d - 1) (tau + 1 - tau) = d; w equal gives 2 (d - 1) max |w|), i.e. 4 at
    # tau = 0.5 (= Delta = 4, tight) and 4.8 at tau = 0.8 (< Delta = 6.4, conservative);
    # mean 2 d = 4 (= Delta); sparse_mean 2 M s = 4 (one support, opposite signs);
    # one_hot_quantile_regression 2 max(tau, 1 - tau) = 1.4 (two categories, both -tau);
    # bounded_mean 1 (x = 0 against x = 1). The regressions at d = 1 (corner_gradients):
    # logistic (Mallows) 4 = sqrt(2) Delta2 and clipped 2 sqrt(2) C = sqrt(2), both tight;
    # huber (Mallows) 4 c = 5.38 < sqrt(3) Delta2 = 6.77, clipped 3.2085 < 2 sqrt(3) C.
    # The l2-diameters equal Delta2 except for huber with Mallows weights, 2 sqrt(2) c =
    # 3.804 < sqrt(8 c^2 + c^4 / 4) = 3.910 (SENSITIVITIES).
    model = MODELS[key]
    l1, delta1, l2, delta2 = SENSITIVITIES[key]
    _, _, diameter = most_distant_pair(model)
    _, _, diameter_l2 = most_distant_pair_l2(model)
    rel = 1e-12 if key == "huber_regression_clip" else 1e-14  # a 1-D search (corners)
    assert diameter == pytest.approx(l1, rel=rel)
    assert diameter_l2 == pytest.approx(l2, rel=1e-14)
    assert diameter <= model.l1_sensitivity() * (1 + 1e-14)
    assert diameter_l2 <= model.l2_sensitivity() * (1 + 1e-14)
    assert model.l1_sensitivity() == pytest.approx(delta1, rel=1e-14)
    assert model.l2_sensitivity() == pytest.approx(delta2, rel=1e-14)


def regression_gradient_grid(model):
    """A d = 1 regression's gradients (the closure of their set) on a grid of (r, z).

    x = (1, z); r is logistic's residual in [-1, 1] (its closure over theta: for z != z'
    some theta gives any two residuals) or Huber's psi in [-c, c]; the formulas of the
    models' docstrings (weights, then clipping).
    """
    z = np.concatenate([np.linspace(-4.0, 4.0, 801), np.tan(np.linspace(-1.55, 1.55, 201))])
    if isinstance(model, models.LogisticRegression):
        r = np.linspace(-1.0, 1.0, 201)
    else:
        root = math.sqrt(model.kappa())
        r = np.concatenate([np.linspace(-model.huber_c, model.huber_c, 201), [root, -root]])
    r, z = (a.ravel() for a in np.meshgrid(r, z))
    sq = 1.0 + z * z
    w = np.minimum(1.0, 2.0 / sq) if model.weights == "mallows" else np.ones_like(sq)
    if isinstance(model, models.LogisticRegression):
        grads = (w * r)[:, None] * np.stack([np.ones_like(z), z], axis=1)
    else:
        grads = w[:, None] * np.stack([-r, -r * z, 0.5 * (model.kappa() - r * r)], axis=1)
    if model.clip is not None:
        norm = np.linalg.norm(grads, axis=1, keepdims=True)
        grads *= np.minimum(1.0, model.clip / np.maximum(norm, 1e-300))
    return grads


def l2_diameter(points, rows=256):
    """max ||p - q||_2 over the points, in blocks of rows (no n^2 array)."""
    sq = np.einsum("ij,ij->i", points, points)
    best = 0.0
    for start in range(0, len(points), rows):
        block = points[start : start + rows]
        gap = sq[start : start + rows, None] + sq[None, :] - 2.0 * block @ points.T
        best = max(best, float(gap.max()))
    return math.sqrt(best)


@pytest.mark.parametrize(
    "key",
    [
        "logistic_regression",
        "logistic_regression_clip",
        "huber_regression",
        "huber_regression_clip",
    ],
)
def test_regression_corners_are_the_sup_points(key):
    # The corners of the regressions are derived, not enumerated (corner_gradients): on a
    # grid of 2e5 data points (and residuals) no two gradients are farther apart than the
    # corners in l1 (exactly, over the 2^(p - 1) sign directions), and the grid comes
    # within 1e-3 of them. In l2 likewise over the grid's convex hull with Mallows weights;
    # a clipped gradient has norm <= C, so there the l2 diameter is at most 2C, which
    # the corners attain.
    model = MODELS[key]
    grads = regression_gradient_grid(model)
    l1 = max(
        np.ptp(grads @ np.array([1.0, *signs]))
        for signs in itertools.product((-1.0, 1.0), repeat=model.dim - 1)
    )
    if model.clip is None:
        l2 = l2_diameter(grads[ConvexHull(grads).vertices])
    else:
        assert np.linalg.norm(grads, axis=1).max() <= model.clip * (1 + 1e-12)
        l2 = 2 * model.clip
    for found, (_, _, corner) in (
        (l1, most_distant_pair(model)),
        (l2, most_distant_pair_l2(model)),
    ):
        assert corner * (1 - 1e-3) <= found <= corner * (1 + 1e-12), (found, corner)


LAPLACE_N = 300_000  # draws per input
LAPLACE_Z = 5.0  # sd per probability (several hundred bins: Bonferroni)
MIN_COUNT = 1_000  # a bin is audited when both inputs put at least this many draws in it
N_QUANTILE_BINS = 40  # 1-D bins per coordinate (quantiles of the pooled sample)


def binned_counts(out_a, out_b, g_a, g_b):
    """Counts of both samples in common bins, as (name, counts_a, counts_b) triples.

    joint: per coordinate the three cells (-inf, min), [min, max], (max, inf) of the two
    inputs' j-th values (3^d cells; the outer cells carry the worst-case ratio exactly);
    1-D: per coordinate, bins at the quantiles of the pooled sample; sign: the joint sign
    pattern (2^d cells).
    """
    lo, hi = np.minimum(g_a, g_b), np.maximum(g_a, g_b)
    d = len(g_a)
    found = []

    def cells(out):
        code = np.zeros(len(out), dtype=np.int64)
        for j in range(d):
            code = 3 * code + (out[:, j] >= lo[j]).astype(np.int64) + (out[:, j] > hi[j])
        return np.bincount(code, minlength=3**d)

    found.append(("joint", cells(out_a), cells(out_b)))
    for j in range(d):
        edges = np.quantile(
            np.concatenate([out_a[:, j], out_b[:, j]]),
            np.linspace(0, 1, N_QUANTILE_BINS + 1)[1:-1],
        )
        ca = np.bincount(np.searchsorted(edges, out_a[:, j]), minlength=N_QUANTILE_BINS)
        cb = np.bincount(np.searchsorted(edges, out_b[:, j]), minlength=N_QUANTILE_BINS)
        found.append((f"coord{j}", ca, cb))

    def signs(out):
        return np.bincount((out > 0).astype(np.int64) @ (2 ** np.arange(d)), minlength=2**d)

    found.append(("sign", signs(out_a), signs(out_b)))
    return found


def laplace_audit(model, scale, n, seed):
    """Binned audit of Laplace noise of the given scale on the most distant pair.

    Returns (max ratio_hat, the bin-wise tolerance at that bin, max over bins of
    ratio_hat / (1 + tol), number of audited bins), over both orientations of every bin.
    """
    g_a, g_b, _ = most_distant_pair(model)
    mech = mechanisms.Laplace(eps=1.0)  # only its compiled callback is used
    params = np.array([scale])
    out_a = draws(mech, params, g_a, n, seed)
    out_b = draws(mech, params, g_b, n, seed + 1)
    best, best_tol, lcb, audited = 0.0, 0.0, 0.0, 0
    for _name, ca, cb in binned_counts(out_a, out_b, g_a, g_b):
        for k1, k0 in itertools.chain(zip(ca, cb, strict=True), zip(cb, ca, strict=True)):
            if min(k1, k0) < MIN_COUNT:
                continue
            audited += 1
            ratio, tol = ratio_bound(int(k1), int(k0), n, n, LAPLACE_Z)
            lcb = max(lcb, ratio / (1 + tol))
            if ratio > best:
                best, best_tol = ratio, tol
    return best, best_tol, lcb, audited


@pytest.mark.parametrize(("key", "eps"), budget_cases(EPS, 1.0))
def test_laplace_empirical_audit(key, eps):
    # N = 3e5 draws per input at the two most distant gradients (l1 distance D, see
    # test_sensitivity_worst_case_is_analytic). For every bin where both inputs put
    # >= 1000 draws, ratio_hat <= e^eps (1 + tol) with tol = 5 (sd_rel(p1) + sd_rel(p0))
    # (tol <= 5 * 2 / sqrt(1000) = 0.32 at the smallest audited bin, ~0.02-0.05 at the
    # bins where the maximum is attained). The outer joint cells have ratio exactly
    # e^(eps D / Delta), so the audit also sees the bound attained: the observed maximum
    # is within its tolerance of e^(eps D / Delta) (= e^eps except quantile_regression
    # at tau = 0.8, where D / Delta = 4.8 / 6.4 = 0.75, huber_regression, 5.38 / 6.77 =
    # 0.794, and huber_regression_clip, 3.2085 / 3.4641 = 0.926).
    # Observed at seed 101 with N = 4e5 (max ratio_hat vs e^(eps D / Delta), eps = 0.5 / 1 / 2):
    # quantile 1.683/1.649, 2.786/2.718, 7.518/7.389; quantile_regression (tau 0.5)
    # 1.640/1.649, 2.721/2.718, 7.379/7.389; tau 0.8 1.465/1.455, 2.127/2.117,
    # 4.525/4.482; mean 1.663/1.649, 2.750/2.718, 7.561/7.389; max over bins of
    # ratio_hat / (1 + tol) <= 0.98 e^eps everywhere. The entries audited at eps = 1 only
    # (N = 3e5, seed 101): bounded_mean 2.809/2.718 (tol 0.126), logistic_regression and
    # its clip variant 2.721/2.718 (the same pair up to scale), huber_regression
    # 2.217/2.213, huber_regression_clip 2.519/2.525; ratio_hat / (1 + tol) <= 0.97 e.
    model = MODELS[key]
    mech = mechanisms.Laplace(eps=eps)
    assert mech.scale(model) == model.l1_sensitivity() / eps
    _, _, diameter = most_distant_pair(model)
    assert diameter == pytest.approx(SENSITIVITIES[key][0], rel=1e-12)
    assert diameter <= model.l1_sensitivity() * (1 + 1e-14)  # else eps is not kept
    best, tol, lcb, audited = laplace_audit(model, mech.scale(model), LAPLACE_N, seed=101)
    assert audited >= 20
    assert lcb <= math.exp(eps), (best, tol, lcb)
    attained = math.exp(eps * diameter / model.l1_sensitivity())
    assert abs(best / attained - 1) <= tol, (best, attained, tol)


@pytest.mark.parametrize(
    "key",
    ["quantile", "quantile_regression", "mean", "sparse_mean", "one_hot_quantile_regression"],
)
@pytest.mark.parametrize("eps", EPS)
def test_laplace_audit_has_power(key, eps):
    # Noise calibrated to eps' = 2 eps (scale Delta / (2 eps)) while eps is claimed: the
    # same audit finds bins whose ratio exceeds e^eps beyond their tolerance.
    model = MODELS[key]
    scale = model.l1_sensitivity() / (2 * eps)
    best, tol, lcb, _ = laplace_audit(model, scale, LAPLACE_N, seed=202)
    assert lcb > math.exp(eps), (best, tol, lcb)


# ---------------------------------------------------------------------------------------
# Gaussian and GDP: hypothesis-testing audits at the two gradients farthest apart in l2.
#
# With isotropic Gaussian noise the likelihood ratio of a report r under g_a and g_b
# depends on r only through t = u'(r - g_a), u = (g_b - g_a) / D, D = ||g_b - g_a||_2, so
# the most powerful tests of "the user holds g_a" against g_b reject when t > c. For
# thresholds c at K quantiles of the pooled t's, alpha_hat(c) = #{t_a > c} / N (type I)
# and beta_hat(c) = #{t_b <= c} / N (type II), from independent samples of N reports.
#
# Tolerances. alpha_hat and beta_hat are independent binomial proportions. For a
# constraint h(alpha, beta) >= 0 the audit computes the z-score h(alpha_hat, beta_hat) / se
# with the delta-method se = sqrt(h_alpha^2 alpha (1 - alpha) / N + h_beta^2 beta (1 - beta) / N)
# (plug-in), and allows z >= -AUDIT_Z. With K = 200 thresholds in two orientations (400
# one-sided checks, Bonferroni) AUDIT_Z = 4.5 bounds the chance of a false alarm by
# 400 P(Z > 4.5) = 1.4e-3 per audit. Only points where each of the four counts
# (N alpha, N (1 - alpha), N beta, N (1 - beta)) is at least AUDIT_MIN_COUNT are audited,
# so that the normal approximation holds (and no plug-in se is 0).

AUDIT_Z = 4.5
N_THRESHOLDS = 200
AUDIT_MIN_COUNT = 100


def error_pairs(mech, params, model, n, seed):
    """(alpha_hat, beta_hat, D) of the threshold tests on the projection, both orientations.

    The second orientation (rejecting g_b when t <= c) swaps the roles of the two
    samples: alpha' = #{t_b <= c} / N, beta' = #{t_a > c} / N.
    """
    g_a, g_b, dist = most_distant_pair_l2(model)
    u = (g_b - g_a) / dist
    t_a = (draws(mech, params, g_a, n, seed) - g_a) @ u
    t_b = (draws(mech, params, g_b, n, seed + 1) - g_a) @ u
    pooled = np.concatenate([t_a, t_b])
    cuts = np.quantile(pooled, np.linspace(0.001, 0.999, N_THRESHOLDS))
    alpha = 1 - np.searchsorted(np.sort(t_a), cuts, side="right") / n
    beta = np.searchsorted(np.sort(t_b), cuts, side="right") / n
    alpha, beta = np.concatenate([alpha, beta]), np.concatenate([beta, alpha])
    counts = n * np.minimum(np.minimum(alpha, 1 - alpha), np.minimum(beta, 1 - beta))
    keep = counts >= AUDIT_MIN_COUNT
    assert keep.sum() >= 50, keep.sum()  # enough of the curve is audited
    return alpha[keep], beta[keep], dist


def gdp_z_scores(alpha, beta, mu, n):
    """z-scores of beta_hat - G_mu(alpha_hat), G_mu(a) = Phi(Phi^-1(1 - a) - mu).

    dG_mu / da = -phi(z_a - mu) / phi(z_a) = -exp(mu z_a - mu^2 / 2), z_a = Phi^-1(1 - a).
    """
    z_a = stats.norm.isf(alpha)
    curve = stats.norm.cdf(z_a - mu)
    slope = np.exp(mu * z_a - mu**2 / 2)
    se = np.sqrt(beta * (1 - beta) / n + slope**2 * alpha * (1 - alpha) / n)
    return (beta - curve) / se


def eps_delta_z_scores(alpha, beta, eps, delta, n):
    """z-scores of alpha_hat + e^eps beta_hat - (1 - delta) (>= 0 for (eps, delta)-DP,
    Kairouz, Oh & Viswanath 2015); the other inequality is the other orientation."""
    se = np.sqrt(alpha * (1 - alpha) / n + math.exp(2 * eps) * beta * (1 - beta) / n)
    return (alpha + math.exp(eps) * beta - (1 - delta)) / se


GDP_N = 200_000  # reports per input
GDP_MU = [0.5, 1.0, 2.0]


@pytest.mark.parametrize(("key", "mu"), budget_cases(GDP_MU, 1.0))
def test_gdp_audit(key, mu):
    # Noise sd Delta2 / mu at the two gradients farthest apart, D apart: the test's errors
    # lie ON G_mu' with mu' = mu D / Delta2, the privacy that pair gets. D = Delta2 (so
    # mu' = mu) wherever Delta2 is attained; only huber_regression (Mallows) has D < Delta2
    # (3.804 / 3.910: mu' = 0.973 mu). The audit checks both sides: no point below G_mu
    # beyond the tolerance (the privacy claimed) and none off G_mu' (the noise is what
    # Delta2 / mu says, no more, no less). Observed with these seeds: z in [-2.53, 2.88]
    # over the 358 to 396 audited points of every (model, mu); huber_regression: z in
    # [-1.42, 1.88] against G_mu', min z 0.17 against G_mu.
    model = MODELS[key]
    mech = mechanisms.GaussianDP(mu=mu)
    alpha, beta, dist = error_pairs(mech, mech.params(model), model, GDP_N, seed=31)
    assert dist == pytest.approx(SENSITIVITIES[key][2], rel=1e-14)
    assert dist <= model.l2_sensitivity() * (1 + 1e-14)
    assert gdp_z_scores(alpha, beta, mu, GDP_N).min() >= -AUDIT_Z
    z = gdp_z_scores(alpha, beta, mu * dist / model.l2_sensitivity(), GDP_N)
    assert z.min() >= -AUDIT_Z, z.min()
    assert z.max() <= AUDIT_Z, z.max()


@pytest.mark.parametrize("key", ["quantile", "quantile_regression_tau08", "mean"])
@pytest.mark.parametrize("mu", GDP_MU)
def test_gdp_audit_has_power(key, mu):
    # Noise calibrated for 2 mu (half the sd) while mu is claimed: the errors lie on
    # G_2mu, far below G_mu (at alpha = 0.1 and mu = 1: beta = 0.236 against 0.611),
    # and the same audit finds points below G_mu by more than its tolerance. Observed:
    # min z = -123 (mu = 0.5), -218 (mu = 1), -198 (mu = 2); against G_2mu |z| <= 2.97.
    model = MODELS[key]
    mech = mechanisms.GaussianDP(mu=2 * mu)
    alpha, beta, _ = error_pairs(mech, mech.params(model), model, GDP_N, seed=37)
    z = gdp_z_scores(alpha, beta, mu, GDP_N)
    assert z.min() < -AUDIT_Z, z.min()
    # ... and they do lie on G_2mu: the audit measures the privacy actually given.
    assert np.abs(gdp_z_scores(alpha, beta, 2 * mu, GDP_N)).max() <= AUDIT_Z


GAUSSIAN_N = 1_000_000  # reports per input
#: (eps, delta) where noise for 2 eps truly violates (eps, delta): the exact delta of
#: half the noise at eps is 0.0038, 0.0083 and 0.0228 (Balle & Wang), 9 to 24 se above
#: delta at N = 1e6. (The classical calibration is conservative: e.g. at eps = 0.3,
#: delta = 0.05 the exact delta of half the noise is 0.013 < delta, so there twice the
#: budget is still (eps, delta)-DP and no audit could object.)
GAUSSIAN_CASES = [(0.5, 1e-3), (0.9, 1e-3), (0.9, 1e-2)]


@pytest.mark.parametrize(("key", "eps", "delta"), budget_cases(GAUSSIAN_CASES, (0.9, 1e-3)))
def test_gaussian_audit(key, eps, delta):
    # Every test's errors satisfy alpha + e^eps beta >= 1 - delta (both orientations),
    # within the tolerance; and they lie on the trade-off curve G_mu with
    # mu = eps / sqrt(2 ln(1.25 / delta)) D / Delta2 = D / sd (the noise is what the
    # formula says, no more: the classical calibration is exactly mu-GDP at D = Delta2;
    # D < Delta2 only for huber_regression, see test_gdp_audit). Observed: min z of the
    # (eps, delta) constraint 13.2 to 16.4 at delta = 1e-3 and 48 at 1e-2 (the
    # calibration is conservative); |z| <= 2.06 against G_mu.
    model = MODELS[key]
    mech = mechanisms.Gaussian(eps=eps, delta=delta)
    alpha, beta, dist = error_pairs(mech, mech.params(model), model, GAUSSIAN_N, seed=41)
    assert dist == pytest.approx(SENSITIVITIES[key][2], rel=1e-14)
    assert dist <= model.l2_sensitivity() * (1 + 1e-14)
    z = eps_delta_z_scores(alpha, beta, eps, delta, GAUSSIAN_N)
    assert z.min() >= -AUDIT_Z, z.min()
    mu = eps / math.sqrt(2 * math.log(1.25 / delta)) * dist / model.l2_sensitivity()
    assert np.abs(gdp_z_scores(alpha, beta, mu, GAUSSIAN_N)).max() <= AUDIT_Z


@pytest.mark.parametrize("key", ["quantile", "quantile_regression_tau08", "mean"])
@pytest.mark.parametrize(("eps", "delta"), GAUSSIAN_CASES)
def test_gaussian_audit_has_power(key, eps, delta):
    # Noise calibrated for 2 eps (half the sd) while (eps, delta) is claimed: the same
    # audit finds a test with alpha + e^eps beta < 1 - delta beyond its tolerance.
    # Observed min z: -11.0 to -12.1 at (0.5, 1e-3) (alpha + e^eps beta = 0.996 against
    # 1 - delta = 0.999), -22.6 to -23.6 at (0.9, 1e-3), -26.1 to -27.3 at (0.9, 1e-2).
    model = MODELS[key]
    mech = mechanisms.Gaussian(eps=2 * eps, delta=delta)
    alpha, beta, _ = error_pairs(mech, mech.params(model), model, GAUSSIAN_N, seed=43)
    z = eps_delta_z_scores(alpha, beta, eps, delta, GAUSSIAN_N)
    assert z.min() < -AUDIT_Z, z.min()


def test_gdp_per_user_budgets_audit():
    # Users with mu_i ~ Uniform(1, 2), budgets not revealed: the reports are a mixture
    # over mu_i, at least as private as the largest budget, so the audit at mu = 2
    # passes. They are less private than mu = 1, which the audit at mu = 1 detects
    # (users do get budgets above 1). Observed: min z 13.3 against G_2, -112 against G_1.
    model = MODELS["mean"]
    mech = mechanisms.GaussianDP(budget_range=[1.0, 2.0])
    alpha, beta, _ = error_pairs(mech, mech.params(model), model, GDP_N, seed=47)
    assert gdp_z_scores(alpha, beta, 2.0, GDP_N).min() >= -AUDIT_Z
    assert gdp_z_scores(alpha, beta, 1.0, GDP_N).min() < -AUDIT_Z


# ---------------------------------------------------------------------------------------
# The gradient bound behind Delta holds for every sample the models generate.

N_GRADIENTS = 1_000


def sample_gradients(model, theta, seed):
    return model.sample_gradients(theta, N_GRADIENTS, seed)


def assert_within_sensitivity(model, grads):
    # The largest pairwise l1 distance is at most the sum of the coordinate ranges.
    spread = float(np.sum(grads.max(axis=0) - grads.min(axis=0)))
    assert np.all(np.isfinite(grads))
    assert spread <= model.l1_sensitivity(), (spread, model)
    return spread


taus = st.floats(0.01, 0.99)
seeds = st.integers(0, 2**32 - 1)
locs = st.floats(-1e6, 1e6)


@settings(max_examples=30, deadline=None)
@given(tau=taus, loc=locs, offset=st.floats(-3.0, 3.0), seed=seeds)
def test_quantile_gradients_within_range(tau, loc, offset, seed):
    model = models.Quantile(tau=tau, loc=loc)
    grads = sample_gradients(model, [loc + offset], seed)
    lo, hi = model.gradient_range()
    assert np.all((grads == lo) | (grads == hi))
    assert_within_sensitivity(model, grads)
    assert model.max_l1_gradient_gap(np.array([loc + offset]), 500, seed) <= 1.0


@settings(max_examples=30, deadline=None)
@given(
    tau=taus,
    coef=st.lists(st.floats(-5.0, 5.0), min_size=1, max_size=6),
    jitter=st.floats(-2.0, 2.0),
    seed=seeds,
)
def test_quantile_regression_gradients_within_sensitivity(tau, coef, jitter, seed):
    model = models.QuantileRegression(tau=tau, coef=coef)
    theta = np.array(coef) + jitter
    grads = sample_gradients(model, theta, seed)
    # g = w x with w in {1 - tau, -tau}, x_0 = 1, |x_j| <= 1.
    assert np.all((grads[:, 0] == 1 - tau) | (grads[:, 0] == -tau))
    assert np.all(np.abs(grads) <= max(tau, 1 - tau))
    assert_within_sensitivity(model, grads)


@settings(max_examples=30, deadline=None)
@given(
    d=st.integers(1, 5),
    loc=locs,
    offset=st.floats(-10.0, 10.0),
    seed=seeds,
)
def test_mean_gradients_within_sensitivity(d, loc, offset, seed):
    # |theta - loc| <= 10 keeps theta - x exact enough; for |theta| >> 2^53 ulps the
    # rounding of theta - x alone could widen the float range (see the report).
    model = models.Mean(d=d, loc=loc)
    theta = np.full(d, loc + offset)
    grads = sample_gradients(model, theta, seed)
    assert np.all(np.abs(grads - (theta - loc)) <= 1.0 + 1e-9 * max(1.0, abs(loc)))
    assert_within_sensitivity(model, grads)


# ---------------------------------------------------------------------------------------
# fang: each of a user's B + 1 answers at eps / (B + 1).


@pytest.mark.parametrize("B", [2, 3])
def test_fang_answers_spend_eps_over_b_plus_one(B):
    # fang privatizes every answer of every chain with the parameters of
    # OnlineBootstrap.chain_mechanism (what its compiled chains are given). The audits
    # above, run on them, find the per-answer ratio e^(eps / (B + 1)) and not more; the
    # B + 1 answers of a user compose to eps (sequential composition). Tolerances as in
    # the RR and Laplace audits (4 and 5 sd).
    eps = 2.0
    per_answer = eps / (B + 1)
    fang = OnlineBootstrap(B=B)
    model = models.Quantile(tau=0.3)
    rr = fang.chain_mechanism(mechanisms.RandomizedResponse(eps=eps))
    for r, (ratio, tol) in rr_audit(model, rr.params(model), RR_N, seed=29).items():
        assert abs(ratio / math.exp(per_answer) - 1) <= tol, (r, ratio, tol)
    laplace = fang.chain_mechanism(mechanisms.Laplace(eps=eps))
    best, tol, lcb, audited = laplace_audit(model, laplace.scale(model), LAPLACE_N, seed=31)
    assert audited >= 20
    assert lcb <= math.exp(per_answer), (best, tol, lcb)
    assert abs(best / math.exp(per_answer) - 1) <= tol, (best, math.exp(per_answer), tol)


def assert_within_sparse_sensitivities(model, grads):
    # Pairwise distances (the box of a sparse gradient set is the dense one, d / s larger).
    l1 = distance.pdist(grads, "cityblock").max()
    l2 = distance.pdist(grads, "euclidean").max()
    assert np.all(np.isfinite(grads))
    assert l1 <= model.l1_sensitivity() * (1 + 1e-12), (l1, model)
    assert l2 <= model.l2_sensitivity() * (1 + 1e-12), (l2, model)
    assert np.all(np.count_nonzero(grads, axis=1) <= model.gradient_sparsity())


@settings(max_examples=30, deadline=None)
@given(
    d=st.integers(1, 12),
    data=st.data(),
    magnitude=st.floats(0.01, 100.0),
    mu=st.floats(-1.0, 1.0),
    seed=seeds,
)
def test_sparse_mean_gradients_within_sensitivity(d, data, magnitude, mu, seed):
    sparsity = data.draw(st.integers(1, d), label="sparsity")
    model = models.SparseMean(d=d, sparsity=sparsity, magnitude=magnitude, coef=mu)
    # At theta = 0, g = -X exactly: s coordinates +-M, zeros elsewhere.
    grads = sample_gradients(model, np.zeros(d), seed)
    assert np.all(np.count_nonzero(grads, axis=1) == sparsity)
    assert np.all((grads == 0) | (np.abs(grads) == magnitude))
    assert_within_sparse_sensitivities(model, grads)
    # At another theta the gradients differ from each other as the X do.
    theta = data.draw(st.floats(-10.0, 10.0), label="theta")
    shifted = sample_gradients(model, np.full(d, theta), seed)
    assert distance.pdist(shifted, "cityblock").max() <= model.l1_sensitivity() * (1 + 1e-12)


@settings(max_examples=30, deadline=None)
@given(
    d=st.integers(1, 12),
    tau=taus,
    coef=st.floats(-5.0, 5.0),
    jitter=st.floats(-2.0, 2.0),
    seed=seeds,
)
def test_one_hot_quantile_regression_gradients_within_sensitivity(d, tau, coef, jitter, seed):
    model = models.OneHotQuantileRegression(d=d, tau=tau, coef=coef)
    grads = sample_gradients(model, np.full(d, coef + jitter), seed)
    # g = w e_C, w in {1 - tau, -tau}: one non-zero coordinate.
    assert np.all(np.count_nonzero(grads, axis=1) == 1)
    values = grads.sum(axis=1)
    assert np.all((values == 1 - tau) | (values == -tau))
    assert_within_sparse_sensitivities(model, grads)
