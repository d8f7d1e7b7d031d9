"""Contract tests over every registered model, and the SPEC 3 closed forms."""

import dataclasses
import math

import numpy as np
import pytest
from corner_gradients import corner_gradients
from scipy import stats
from scipy.spatial import distance

from ldpsim.tasks import mechanisms, models
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.models.quantile_regression import truncated_variance
from ldpsim.tasks.streams.rng import state_of

NAMES = sorted(models.REGISTRY)
# Non-default instances: every model at a second parameter value, so the contract is
# not only checked where it happens to be simplest (tau = 0.5, d = 1).
VARIANTS = {
    "quantile": [{}, {"tau": 0.9}, {"tau": 0.05, "loc": -3.0}],
    "quantile_regression": [{}, {"tau": 0.9, "coef": [1.0, -2.0]}, {"coef": [0.5]}],
    "mean": [{}, {"d": 3, "loc": 2.5}],
    # Shapes below 1 exercise the gamma sampler's boost (U^(1/a)).
    "bounded_mean": [{}, {"a": 0.5, "b": 0.3}, {"a": 30.0, "b": 1.5}],
    "huber_regression": [
        {},
        {"d": 1, "huber_c": 0.5, "sigma": 1.0},
        {"d": 2, "weights": "none", "clip": 2.0},
    ],
    "logistic_regression": [{}, {"d": 1}, {"d": 3, "weights": "none", "clip": 1.0}],
    # The sparse models' defaults (d = 1000, 100) are too large for the d x d checks.
    "sparse_mean": [
        {"d": 5, "sparsity": 2, "coef": 0.3},
        {"d": 6, "sparsity": 3, "magnitude": 2.0, "coef": [0.5, -0.5, 1.0, 0.0, -1.0, 0.2]},
        {"d": 1, "sparsity": 1, "coef": -0.4},
    ],
    "one_hot_quantile_regression": [
        {"d": 4, "tau": 0.3, "coef": [1.0, -1.0, 0.0, 2.0]},
        {"d": 5, "probs": [0.1, 0.2, 0.3, 0.15, 0.25], "coef": 1.5},
    ],
}
INSTANCES = [
    pytest.param(models.REGISTRY[name](**kw), id=f"{name}-{i}")
    for name in NAMES
    for i, kw in enumerate(VARIANTS.get(name, [{}]))
]


def test_every_model_has_variants():
    assert set(VARIANTS) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_registry_entry(name):
    cls = models.REGISTRY[name]
    assert issubclass(cls, Model)
    assert cls.name == name
    assert dataclasses.is_dataclass(cls)
    model = cls()  # default construction works
    assert model == cls()  # and is a value
    assert hash(model) == hash(cls())


@pytest.mark.parametrize("name", NAMES)
def test_frozen_and_keyword_only(name):
    cls = models.REGISTRY[name]
    model = cls()
    field = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(model, field, getattr(model, field))
    with pytest.raises(TypeError):
        cls(getattr(model, field))  # positional arguments are refused


@pytest.mark.parametrize("model", INSTANCES)
def test_shapes_and_symmetry(model):
    d = model.dim
    assert isinstance(d, int) and d >= 1
    truth = model.truth()
    assert truth.shape == (d,) and truth.dtype == np.float64
    assert np.all(np.isfinite(truth))
    params = model.params()
    assert params.ndim == 1 and params.dtype == np.float64
    for mat in (model.jacobian(), model.gradient_cov()):
        assert mat.shape == (d, d)
        assert np.array_equal(mat, mat.T)
        assert np.linalg.eigvalsh(mat).min() >= -1e-14 * np.abs(mat).max()
    assert np.linalg.eigvalsh(model.jacobian()).min() > 0  # theta* is a strict minimum
    assert model.l1_sensitivity() > 0
    assert 0 < model.l2_sensitivity() <= model.l1_sensitivity()


def applicable_noise(model):
    """Noise covariances of every mechanism that can privatize ``model`` (plus none)."""
    out = {"zero": np.zeros((model.dim, model.dim))}
    for name, cls in mechanisms.REGISTRY.items():
        if name == "none":
            continue
        for label, mech in (
            (name, cls(**{cls.budget_param: 0.5})),
            (f"{name}-per-user", cls(budget_range=[0.5, 2.0])),
        ):
            try:
                mech.check_model(model)
            except ValueError:
                continue
            out[label] = mech.variance(model)
    return out


@pytest.mark.parametrize("model", INSTANCES)
def test_asymptotic_cov(model):
    g_inv = np.linalg.inv(model.jacobian())
    for name, noise in applicable_noise(model).items():
        sigma = model.asymptotic_cov(noise)
        assert sigma.shape == (model.dim, model.dim), name
        assert np.array_equal(sigma, sigma.T), name
        assert np.linalg.eigvalsh(sigma).min() > 0, name
        expected = g_inv @ (model.gradient_cov() + noise) @ g_inv.T  # G^-1 S G^-1
        np.testing.assert_allclose(sigma, expected, rtol=1e-12, atol=0)
        # A mini-batch of s averages s independent privatized gradients.
        np.testing.assert_allclose(model.asymptotic_cov(noise, batch=4), sigma / 4, rtol=1e-14)


@pytest.mark.parametrize("model", INSTANCES)
def test_sample_gradient_callable_from_python(model):
    thetas = (model.truth(), model.truth() + 0.5, np.zeros(model.dim), np.full(model.dim, 1e6))
    for k, theta in enumerate(thetas):
        g = np.full(model.dim, np.nan)
        s = state_of(np.random.Generator(np.random.PCG64(k)))
        type(model).sample_gradient(model.dim, theta, model.params(), s, g)
        assert np.all(np.isfinite(g))


@pytest.mark.parametrize("model", INSTANCES)
def test_gradient_within_sensitivity(model):
    # Models with their own Delta1 (box-shaped gradient sets): the l1 size of the box
    # spanned by the sampled gradients, a stronger check than pairwise distances. Models
    # with the default Delta1 = sqrt(p) Delta2 (round gradient sets, whose box is larger
    # than their l1 diameter) or a sparse gradient (whose box is the dense one): the
    # largest pairwise l1 distance.
    delta = model.l1_sensitivity()
    truth = model.truth()
    box = (
        type(model).l1_sensitivity is not Model.l1_sensitivity
        and model.gradient_sparsity() is None
    )
    for k, theta in enumerate((truth, truth + 0.3, truth - 2.0, np.zeros(model.dim))):
        if box:
            gap = model.max_l1_gradient_gap(theta, n_samples=5000, seed=k)
        else:
            gap = distance.pdist(model.sample_gradients(theta, 2000, seed=k), "cityblock").max()
        assert 0 < gap <= delta * (1 + 1e-12)


L2_CASES = [
    models.Quantile(tau=0.3),
    *(
        models.QuantileRegression(tau=t, coef=[0.0] * d)
        for t in (0.5, 0.8, 0.1)
        for d in (1, 2, 4, 6)
    ),
    *(models.Mean(d=d, loc=1.5) for d in (1, 2, 5)),
]
SPARSE_CASES = [
    *(
        models.SparseMean(d=d, sparsity=s, magnitude=m)
        for d, s, m in ((1, 1, 1.0), (4, 1, 2.0), (4, 2, 1.0), (5, 3, 0.5), (6, 6, 1.0))
    ),
    *(
        models.OneHotQuantileRegression(d=d, tau=t)
        for d in (1, 2, 5)
        for t in (0.5, 0.65, 0.8, 0.1)  # sqrt(2) m < 1 at 0.5 and 0.65, > 1 at 0.8, 0.1
    ),
]


@pytest.mark.parametrize("model", L2_CASES + SPARSE_CASES, ids=lambda m: f"{m.name}-d{m.dim}")
def test_l2_sensitivity_is_the_diameter_of_the_corners(model):
    # Delta2 (derived in each model) equals the largest l2 distance between two corner
    # gradients, found by enumeration: quantile 1, mean 2 sqrt(d), quantile_regression
    # max(sqrt(d), 2 max(tau, 1 - tau) sqrt(d - 1)), sparse_mean 2 M sqrt(s),
    # one_hot_quantile_regression max(1, sqrt(2) max(tau, 1 - tau)) (1 for d = 1).
    grads = corner_gradients(model)
    dist = np.sqrt(((grads[:, None, :] - grads[None, :, :]) ** 2).sum(axis=2))
    if isinstance(model, models.OneHotQuantileRegression) and model.dim == 1:
        assert dist.max() == 1.0 <= model.l2_sensitivity()  # one category: no pair of two
        return
    assert model.l2_sensitivity() == pytest.approx(dist.max(), rel=1e-14)


@pytest.mark.parametrize("model", SPARSE_CASES, ids=lambda m: f"{m.name}-d{m.dim}")
def test_sparse_sensitivities_against_enumeration(model):
    # SPEC 11: Delta1 = 2 M s is the l1 diameter of the gradient set (attained; for the
    # one-hot model with d = 1 only |1 - 0| = 1 <= 2 m is reachable), and the dense
    # sensitivities are those of the box [-M, M]^d, which contains every gradient.
    grads = corner_gradients(model)
    l1 = np.abs(grads[:, None, :] - grads[None, :, :]).sum(axis=2).max()
    if isinstance(model, models.OneHotQuantileRegression) and model.dim == 1:
        assert l1 == 1.0 <= model.l1_sensitivity()
    else:
        assert model.l1_sensitivity() == pytest.approx(l1, rel=1e-14)
    bound = (
        model.magnitude if isinstance(model, models.SparseMean) else max(model.tau, 1 - model.tau)
    )
    assert np.abs(grads).max() == pytest.approx(bound, rel=1e-15)
    assert model.dense_l1_sensitivity() == pytest.approx(2 * bound * model.dim, rel=1e-15)
    assert model.dense_l2_sensitivity() == pytest.approx(2 * bound * math.sqrt(model.dim))
    assert model.gradient_sparsity() == (
        model.sparsity if isinstance(model, models.SparseMean) else 1
    )
    assert (np.count_nonzero(grads, axis=1) == model.gradient_sparsity()).all()


@pytest.mark.parametrize("model", INSTANCES)
def test_gradient_within_l2_sensitivity(model):
    # Sampled gradients: the largest pairwise l2 distance is at most Delta2.
    truth = model.truth()
    for k, theta in enumerate((truth, truth + 0.3, np.zeros(model.dim))):
        grads = model.sample_gradients(theta, 2000, seed=k)
        gram = grads @ grads.T
        sq = np.diag(gram)[:, None] + np.diag(gram)[None, :] - 2 * gram
        assert 0 < math.sqrt(max(sq.max(), 0.0)) <= model.l2_sensitivity() * (1 + 1e-12)


def test_l1_sensitivity_defaults_to_sqrt_p_delta2():
    # Seed 004, Example 1: a model that states only Delta2 has Delta1 = sqrt(p) Delta2.
    for model in L2_CASES:
        assert Model.l1_sensitivity(model) == pytest.approx(
            math.sqrt(model.dim) * model.l2_sensitivity(), rel=1e-15
        )


@pytest.mark.parametrize("model", INSTANCES)
def test_truth_and_gradient_cov_by_simulation(model):
    # E g(X, theta) = 0 and Cov g(X, theta) = gradient_cov() at theta = limit() (theta*,
    # or theta_C for a clipped gradient), each within 4 Monte-Carlo standard errors
    # computed from the draws themselves (iid, so se = sd / sqrt(N)).
    n = 40_000
    g = model.sample_gradients(model.limit(), n, seed=11)
    se_mean = g.std(axis=0, ddof=1) / math.sqrt(n)
    assert np.all(np.abs(g.mean(axis=0)) <= 4 * se_mean)
    centred = g - g.mean(axis=0)
    products = centred[:, :, None] * centred[:, None, :]
    cov = products.mean(axis=0)
    se_cov = products.std(axis=0, ddof=1) / math.sqrt(n)
    assert np.all(np.abs(cov - model.gradient_cov()) <= 4 * se_cov + 1e-12)


def test_quantile_closed_forms():
    # SPEC 3.1: theta* = loc + Phi^-1(tau), G = phi(Phi^-1(tau)), S = tau(1 - tau).
    model = models.Quantile(tau=0.9, loc=2.0)
    z = stats.norm.ppf(0.9)
    assert model.truth()[0] == pytest.approx(2.0 + z, rel=1e-15)
    assert model.jacobian()[0, 0] == pytest.approx(stats.norm.pdf(z), rel=1e-15)
    assert model.gradient_cov()[0, 0] == pytest.approx(0.09, rel=1e-15)
    assert model.gradient_range() == pytest.approx((-0.9, 0.1), rel=1e-15)


def test_spec_oracle_length_check():
    # SPEC 3.1: tau = 0.5, eps = 1, n = 1e6 -> 90% oracle length 2 * 1.6449 * sqrt(Sigma / n)
    # = 0.00892 (Sigma = (1/4 + e/(e-1)^2) / phi(0)^2).
    model = models.Quantile(tau=0.5)
    mech = mechanisms.RandomizedResponse(eps=1.0)
    sigma = model.asymptotic_cov(mech.variance(model))[0, 0]
    e = math.e
    assert sigma == pytest.approx((0.25 + e / (e - 1) ** 2) / stats.norm.pdf(0) ** 2, rel=1e-13)
    length = 2 * stats.norm.ppf(0.95) * math.sqrt(sigma / 1e6)
    assert round(length, 5) == 0.00892


def test_quantile_regression_closed_forms():
    # SPEC 3.2: v = 1 - 2 phi(1) / (2 Phi(1) - 1) = 0.291125, Sigma_X = diag(1, v, ..., v),
    # G = f_e(0) Sigma_X, Delta = 2 max(tau, 1 - tau) * d.
    variance = truncated_variance()
    assert variance == pytest.approx(0.291125, abs=5e-7)
    model = models.QuantileRegression(tau=0.3, coef=[0.0, 0.0, 1.0, -1.0])
    sigma_x = np.diag([1.0, variance, variance, variance])
    np.testing.assert_allclose(model.jacobian(), stats.norm.pdf(stats.norm.ppf(0.3)) * sigma_x)
    np.testing.assert_allclose(model.gradient_cov(), 0.21 * sigma_x)
    assert model.l1_sensitivity() == pytest.approx(2 * 0.7 * 4)
    assert np.array_equal(model.truth(), [0.0, 0.0, 1.0, -1.0])
    assert model.params()[1] == stats.norm.ppf(0.3)


def test_mean_closed_forms():
    # SPEC 3.3: theta* = E X = loc (symmetric truncation), G = I, S = v I, Delta = 2 d.
    model = models.Mean(d=3, loc=-1.5)
    assert np.array_equal(model.truth(), [-1.5, -1.5, -1.5])
    assert np.array_equal(model.jacobian(), np.eye(3))
    np.testing.assert_allclose(model.gradient_cov(), truncated_variance() * np.eye(3), rtol=1e-15)
    assert model.l1_sensitivity() == 6.0


@pytest.mark.parametrize("model", [models.Quantile, models.Mean])
def test_a_location_beyond_a_million_is_refused(model):
    # loc + Z is rounded to a multiple of ulp(loc): from loc = 1e16 on every draw was loc
    # (variance 0), at 1e15 the variance of X - loc was 10% off, while the oracle kept
    # the model's. Accepted before ("any finite float"); now [-1e6, 1e6].
    for loc in (1e6, -1e6):
        assert model(loc=loc).truth()[0] == loc  # tau = 0.5: theta* = loc for both
    for loc in (1.0000001e6, -1e8, 1e16):
        with pytest.raises(ValueError) as info:
            model(loc=loc)
        assert str(info.value) == (
            f"The 'loc' parameter of {model.name} must be a float in [-1e+06, 1e+06]. Got {loc!r}."
        )


def test_the_mean_models_draws_keep_their_law_at_the_largest_location():
    # At loc = 1e6 (ulp 1.2e-10) X - loc has the model's variance, within 4 se.
    edge = models.Mean(loc=1e6)
    x = 1e6 - edge.sample_gradients(np.array([1e6]), 20_000, seed=5)[:, 0]  # g = theta - X
    squares = (x - 1e6) ** 2
    se = squares.std(ddof=1) / math.sqrt(x.size)
    assert abs(squares.mean() - edge.gradient_cov()[0, 0]) <= 4 * se
