"""Contract tests over every registered mechanism; privacy and noise of RR and Laplace."""

import dataclasses
import math

import numpy as np
import pytest

from ldpsim.tasks import mechanisms, models
from ldpsim.tasks.mechanisms.base import Mechanism
from ldpsim.tasks.mechanisms.randomized_response import keep_probability
from ldpsim.tasks.rng import as_state, state_of

NAMES = sorted(mechanisms.REGISTRY)
MODELS = [
    models.Quantile(tau=0.3),
    models.QuantileRegression(tau=0.8, coef=[0.0, 0.0, 1.0, -1.0]),
    models.Mean(d=2, loc=1.0),
]


def make(name, eps=0.7):
    cls = mechanisms.REGISTRY[name]
    return cls() if name == "none" else cls(eps=eps)


def privatize_many(mech, model, g0, n, seed):
    """n privatized copies of the fixed gradient g0, via the compiled callback."""
    return mech.privatize_copies(mech.params(model), g0, n, seed)


@pytest.mark.parametrize("name", NAMES)
def test_registry_entry(name):
    cls = mechanisms.REGISTRY[name]
    assert issubclass(cls, Mechanism)
    assert cls.name == name
    mech = cls()  # default construction works
    assert mech == cls()
    with pytest.raises(dataclasses.FrozenInstanceError):
        mech.eps = 2.0
    with pytest.raises(TypeError):
        cls(1.0)  # keyword-only


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("eps", "exc", "shown"),
    [
        (0, ValueError, "Got 0."),
        (-1.0, ValueError, "Got -1.0."),
        (math.nan, ValueError, "Got nan."),
        (-math.inf, ValueError, "Got -inf."),
        ("1", TypeError, "Got '1'."),
        (True, TypeError, "Got True."),
        (None, TypeError, "Got None."),
    ],
)
def test_eps_validation(name, eps, exc, shown):
    with pytest.raises(exc) as info:
        mechanisms.REGISTRY[name](eps=eps)
    msg = str(info.value)
    assert "'eps'" in msg and "(0, inf]" in msg and shown in msg and name in msg


@pytest.mark.parametrize("name", NAMES)
def test_eps_inf_is_accepted(name):
    mech = mechanisms.REGISTRY[name](eps=math.inf)
    assert not mech.is_private


def test_none_requires_infinite_eps():
    with pytest.raises(ValueError, match=r"'eps' parameter of none must be inf\. Got 1\.0"):
        mechanisms.NoPrivacy(eps=1.0)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_variance_params_and_privatize(name, model):
    mech = make(name)
    try:
        mech.check_model(model)
    except ValueError as exc:
        assert name == "randomized_response" and not model.binary_gradient
        assert repr(model.name) in str(exc)
        return
    d = model.dim
    var = mech.variance(model)
    assert var.shape == (d, d)
    assert np.array_equal(var, var.T) and np.all(np.linalg.eigvalsh(var) >= 0)
    params = mech.params(model)
    assert params.ndim == 1 and params.dtype == np.float64
    assert mech.sensitivity(model) > 0
    s = state_of(np.random.Generator(np.random.PCG64(0)))
    g = np.empty(d)
    s = type(model).sample_gradient(d, model.truth(), model.params(), s, g)
    type(mech).privatize(d, g, params, as_state(s))
    assert np.all(np.isfinite(g))


def test_randomized_response_refuses_non_binary_models():
    for model in MODELS[1:]:
        with pytest.raises(ValueError, match="randomized_response"):
            mechanisms.RandomizedResponse(eps=1.0).params(model)


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0])
def test_randomized_response_likelihood_ratio_is_exp_eps(eps):
    # P(report b | b) / P(report b | 1 - b) = p / (1 - p) = e^eps, p = e^eps / (1 + e^eps).
    # Both the closed form and the flip probability q = 1 - p that the kernel actually
    # uses (params[0]) must give e^eps to a few ulps, also for large eps where forming
    # q as 1 - p would cancel (relative error 2^-53 / q: 1e-3 at eps = 30).
    mech = mechanisms.RandomizedResponse(eps=eps)
    assert mech.likelihood_ratio() == pytest.approx(math.exp(eps), rel=1e-14)
    q = mech.params(models.Quantile())[0]
    assert (1 - q) / q == pytest.approx(math.exp(eps), rel=1e-14)
    # Via the keep probability p: p / (1 - p) has relative condition number ~ 1 / (1 - p),
    # so the tolerance is a few ulps times that.
    p = keep_probability(eps)
    assert p == pytest.approx(math.exp(eps) / (1 + math.exp(eps)), rel=1e-15)
    assert p / (1 - p) == pytest.approx(math.exp(eps), rel=8 * 2.0**-53 / (1 - p))


def test_randomized_response_without_privacy():
    mech = mechanisms.RandomizedResponse(eps=math.inf)
    assert mech.likelihood_ratio() == math.inf
    assert mech.params(models.Quantile())[0] == 0.0
    # Privacy is kept however large a finite eps is.
    assert mechanisms.RandomizedResponse(eps=700.0).params(models.Quantile())[0] > 0


@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
def test_randomized_response_report_law(eps):
    # SPEC 3.1 for the quantile gradient g = b - tau: the report is
    # ghat = (btilde - (1 - p)) / (2p - 1) - tau with btilde = b w.p. p, else 1 - b.
    # Checked: the two report values, the keep frequency (within 4 binomial se), the
    # unbiasedness E ghat = g (4 se) and the variance e^eps / (e^eps - 1)^2 (4 se of the
    # sample variance, from the fourth central moment).
    tau = 0.3
    model = models.Quantile(tau=tau)
    mech = mechanisms.RandomizedResponse(eps=eps)
    p = math.exp(eps) / (1 + math.exp(eps))
    values = {b: (b - (1 - p)) / (2 * p - 1) - tau for b in (0, 1)}
    n = 20_000
    for b in (0, 1):
        reports = privatize_many(mech, model, np.array([b - tau]), n, seed=b)[:, 0]
        is_one = np.isclose(reports, values[1], rtol=1e-13, atol=0)
        assert np.all(is_one | np.isclose(reports, values[0], rtol=1e-13, atol=0))
        kept = is_one.mean() if b == 1 else 1 - is_one.mean()
        assert abs(kept - p) <= 4 * math.sqrt(p * (1 - p) / n)
        var = math.exp(eps) / (math.exp(eps) - 1) ** 2
        assert abs(reports.mean() - (b - tau)) <= 4 * math.sqrt(var / n)
        mu4 = np.mean((reports - reports.mean()) ** 4)
        assert abs(reports.var(ddof=1) - var) <= 4 * math.sqrt((mu4 - var**2) / n)
        assert mech.variance(model)[0, 0] == pytest.approx(var, rel=1e-13)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_laplace_scale_and_unbiasedness(model, eps):
    # Noise L_j iid Laplace(0, b), b = Delta / eps with Delta the model's l1-sensitivity
    # (SPEC 3.2, 3.3). E|L| = b and sd|L| = b, so mean |ghat - g| is within 4 b / sqrt(N d)
    # of b; E L = 0 with sd sqrt(2) b, so the mean of ghat - g is within 4 sqrt(2) b / sqrt(N).
    mech = mechanisms.Laplace(eps=eps)
    delta = {"quantile": 1.0, "quantile_regression": 2 * 0.8 * 4, "mean": 2 * 2}[model.name]
    b = delta / eps
    assert mech.scale(model) == pytest.approx(b, rel=1e-15)
    assert mech.params(model)[0] == pytest.approx(b, rel=1e-15)
    np.testing.assert_allclose(mech.variance(model), 2 * b**2 * np.eye(model.dim), rtol=1e-15)
    n, d = 20_000, model.dim
    g0 = np.linspace(-0.5, 0.5, d)
    noise = privatize_many(mech, model, g0, n, seed=3) - g0
    assert abs(np.abs(noise).mean() - b) <= 4 * b / math.sqrt(n * d)
    assert np.all(np.abs(noise.mean(axis=0)) <= 4 * math.sqrt(2) * b / math.sqrt(n))
    # Coordinates are independent: the sample correlation is within 4 / sqrt(N) of 0.
    if d > 1:
        corr = np.corrcoef(noise.T)[np.triu_indices(d, 1)]
        assert np.all(np.abs(corr) <= 4 / math.sqrt(n))


@pytest.mark.parametrize("name", ["laplace", "randomized_response", "none"])
def test_infinite_eps_adds_no_noise(name):
    model = MODELS[0]
    mech = mechanisms.REGISTRY[name](eps=math.inf)
    for b in (0, 1):
        g0 = np.array([b - model.tau])
        out = privatize_many(mech, model, g0, 200, seed=5)
        np.testing.assert_allclose(out, np.broadcast_to(g0, out.shape), rtol=0, atol=1e-15)
    assert np.all(mech.variance(model) == 0)
