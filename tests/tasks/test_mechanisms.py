"""Contract tests over every registered mechanism; calibration and noise of each one;
per-user budgets and the closed forms of their averaged noise variance."""

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import integrate

from ldpsim.tasks import mechanisms, models
from ldpsim.tasks.mechanisms.base import Mechanism
from ldpsim.tasks.mechanisms.gaussian import gaussian_delta
from ldpsim.tasks.mechanisms.nprr import nprr_keep_probability
from ldpsim.tasks.mechanisms.randomized_response import (
    SMALLEST_EPS,
    finite_flip_probability,
    flip_probability,
    keep_probability,
    mean_privacy_variance,
)
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.spec import normalize_spec, unit_params
from ldpsim.tasks.streams.rng import as_state, state_of
from ldpsim.tasks.warnings import OutsideTheoryWarning

NAMES = sorted(mechanisms.REGISTRY)
MODELS = [
    models.Quantile(tau=0.3),
    models.QuantileRegression(tau=0.8, coef=[0.0, 0.0, 1.0, -1.0]),
    models.Mean(d=2, loc=1.0),
]


def make(name, budget=0.7, **params):
    """The mechanism ``name`` with its privacy parameter (eps or mu) set to ``budget``."""
    cls = mechanisms.REGISTRY[name]
    return cls() if name == "none" else cls(**{cls.budget_param: budget}, **params)


def make_per_user(name, budget_range=(0.5, 2.0), **params):
    return mechanisms.REGISTRY[name](budget_range=budget_range, **params)


#: Every mechanism that draws a budget per user.
PER_USER = [name for name in NAMES if name != "none"]


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
    assert cls.budget_param in unit_params(cls) and "budget_range" in unit_params(cls)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(mech, cls.budget_param, 2.0)
    with pytest.raises(TypeError):
        cls(1.0)  # keyword-only


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("budget", "exc", "shown"),
    [
        (0, ValueError, "Got 0."),
        (-1.0, ValueError, "Got -1.0."),
        (math.nan, ValueError, "Got nan."),
        (-math.inf, ValueError, "Got -inf."),
        ("1", TypeError, "Got '1'."),
        (True, TypeError, "Got True."),
    ],
)
def test_budget_validation(name, budget, exc, shown):
    # eps for every mechanism but gdp, whose privacy parameter is mu.
    cls = mechanisms.REGISTRY[name]
    with pytest.raises(exc) as info:
        cls(**{cls.budget_param: budget})
    msg = str(info.value)
    # Randomized response names its own range for a number below it (0 and less too).
    below = name == "randomized_response" and shown in ("Got 0.", "Got -1.0.", "Got -inf.")
    allowed = "[1e-06, inf]" if below else "(0, inf]"
    assert f"'{cls.budget_param}'" in msg and allowed in msg and shown in msg and name in msg


@pytest.mark.parametrize("name", PER_USER)
def test_budget_defaults_to_one(name):
    cls = mechanisms.REGISTRY[name]
    assert getattr(cls(), cls.budget_param) == 1.0
    assert cls() == cls(**{cls.budget_param: None}) == cls(**{cls.budget_param: 1})


@pytest.mark.parametrize("name", NAMES)
def test_infinite_budget_is_accepted(name):
    cls = mechanisms.REGISTRY[name]
    mech = cls(**{cls.budget_param: math.inf})
    assert not mech.is_private


def test_none_requires_infinite_eps():
    with pytest.raises(ValueError, match=r"'eps' parameter of none must be inf\. Got 1\.0"):
        mechanisms.NoPrivacy(eps=1.0)


@pytest.mark.parametrize("per_user", [False, True], ids=["fixed", "per_user"])
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_variance_params_and_privatize(name, model, per_user):
    if per_user and name == "none":
        return
    mech = make_per_user(name) if per_user else make(name)
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
    mech.callback()(d, g, params, as_state(s))
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
    # Privacy is kept however large a finite eps is (at 746 and up e^-eps underflowed and
    # q was 0: the bit was never flipped).
    for eps in (700.0, 746.0, 1e300):
        assert mechanisms.RandomizedResponse(eps=eps).params(models.Quantile())[0] > 0
        # The per-user callback's q for a user's eps, compiled as the kernel calls it.
        assert finite_flip_probability(eps) > 0


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


# ---------------------------------------------------------------------------------------
# Validation of the section-9 parameters (SPEC 9.1).


@pytest.mark.parametrize(
    ("delta", "exc", "shown"),
    [
        (0, ValueError, "Got 0."),
        (1.0, ValueError, "Got 1.0."),
        (1.5, ValueError, "Got 1.5."),
        (-1e-5, ValueError, "Got -1e-05."),
        (math.nan, ValueError, "Got nan."),
        ("1e-5", TypeError, "Got '1e-5'."),
        (None, TypeError, "Got None."),
    ],
)
def test_gaussian_delta_validation(delta, exc, shown):
    with pytest.raises(exc) as info:
        mechanisms.Gaussian(eps=0.5, delta=delta)
    msg = str(info.value)
    assert "'delta'" in msg and "of gaussian" in msg and "(0, 1)" in msg and shown in msg


@pytest.mark.parametrize("name", PER_USER)
@pytest.mark.parametrize(
    ("budget_range", "exc", "shown"),
    [
        ((0.0, 1.0), ValueError, "Got (0.0, 1.0)."),
        ([-1, 2], ValueError, "Got [-1, 2]."),
        ([2.0, 1.0], ValueError, "Got [2.0, 1.0]."),
        ([1.0, math.inf], ValueError, "Got [1.0, inf]."),
        ([math.nan, 1.0], ValueError, "Got [nan, 1.0]."),
        ([1.0], ValueError, "Got [1.0]."),
        ([1.0, 2.0, 3.0], ValueError, "Got [1.0, 2.0, 3.0]."),
        (1.0, TypeError, "Got 1.0."),
        ("1, 2", TypeError, "Got '1, 2'."),
        (["1", 2], TypeError, "Got ['1', 2]."),
        ([True, 2], TypeError, "Got [True, 2]."),
    ],
)
def test_budget_range_validation(name, budget_range, exc, shown):
    with pytest.raises(exc) as info:
        mechanisms.REGISTRY[name](budget_range=budget_range)
    msg = str(info.value)
    # Randomized response names its own floor for a low end below it, as a list.
    below = name == "randomized_response" and shown in ("Got (0.0, 1.0).", "Got [-1, 2].")
    shown = shown.replace("(0.0, 1.0)", "[0.0, 1.0]") if below else shown
    assert "'budget_range'" in msg and f"of {name}" in msg and shown in msg
    assert "[low, high]" in msg and ("1e-06 <= low <= high" if below else "0 < low <= high") in msg


@pytest.mark.parametrize("name", PER_USER)
def test_budget_range_replaces_the_budget(name):
    cls = mechanisms.REGISTRY[name]
    param = cls.budget_param
    with pytest.raises(ValueError) as info:
        cls(**{param: 1.0}, budget_range=[1.0, 2.0])
    msg = str(info.value)
    assert f"'{param}' parameter of {name}" in msg and "together with 'budget_range'" in msg
    assert f"{param} = 1.0" in msg and "budget_range = [1.0, 2.0]" in msg
    mech = cls(budget_range=[1, 2])  # ints accepted, normalized to a tuple of floats
    assert mech.budget_range == (1.0, 2.0) and getattr(mech, param) is None
    assert mech.is_private and mech == cls(budget_range=(1.0, 2.0))
    assert mech.key() == {
        "budget_range": (1.0, 2.0),
        **({"delta": 1e-5} if name == "gaussian" else {}),
    }
    # low = high is allowed: every user gets the same budget (drawn all the same).
    assert cls(budget_range=[1.5, 1.5]).mean_inverse_square_budget() == 1 / 1.5**2


def test_none_refuses_budget_range():
    with pytest.raises(ValueError, match=r"'budget_range' parameter of none must be left out"):
        mechanisms.NoPrivacy(budget_range=[1.0, 2.0])


def test_fixed_budget_keys_the_stream_as_before():
    # The data stream of an existing configuration is keyed by {'eps': eps} exactly as
    # before these mechanisms existed (per-user budgets add keys only when given).
    assert mechanisms.Laplace(eps=2.0).key() == {"eps": 2.0}
    assert mechanisms.RandomizedResponse().key() == {"eps": 1.0}
    assert mechanisms.NoPrivacy().key() == {"eps": math.inf}
    assert mechanisms.Gaussian(eps=0.5, delta=1e-3).key() == {"eps": 0.5, "delta": 1e-3}
    assert mechanisms.GaussianDP(mu=2.0).key() == {"mu": 2.0}


# ---------------------------------------------------------------------------------------
# Gaussian and GDP: calibration by Delta2 and the law of the noise.


def test_models_l2_sensitivities():
    # Delta2 per model (derived in the models; the corner enumeration is in test_models).
    assert MODELS[0].l2_sensitivity() == 1.0
    assert MODELS[1].l2_sensitivity() == pytest.approx(max(2.0, 1.6 * math.sqrt(3)))
    assert MODELS[2].l2_sensitivity() == pytest.approx(2 * math.sqrt(2))


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_gaussian_calibration(model):
    # SPEC 9.1: s = Delta2 sqrt(2 ln(1.25 / delta)) / eps; gdp: s = Delta2 / mu.
    delta2 = model.l2_sensitivity()
    mech = mechanisms.Gaussian(eps=0.5, delta=1e-3)
    s = delta2 * math.sqrt(2 * math.log(1.25e3)) / 0.5
    assert mech.sensitivity(model) == delta2
    assert mech.sd(model) == pytest.approx(s, rel=1e-15)
    assert mech.params(model)[0] == pytest.approx(s, rel=1e-15)
    np.testing.assert_allclose(mech.variance(model), s**2 * np.eye(model.dim), rtol=1e-14)
    gdp = mechanisms.GaussianDP(mu=2.0)
    assert gdp.sd(model) == delta2 / 2.0 and gdp.params(model)[0] == delta2 / 2.0
    np.testing.assert_allclose(gdp.variance(model), (delta2 / 2) ** 2 * np.eye(model.dim))


@pytest.mark.parametrize("name", ["gaussian", "gdp"])
@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_gaussian_noise_law(name, model):
    # N = 100,000 reports of a fixed g0: per coordinate the noise has mean 0 (4 sd:
    # 4 s / sqrt(N)), variance s^2 (4 se of the sample variance, se = s^2 sqrt(2 / N)
    # for a normal law), P(|noise| > 1.96 s) = 0.05 (4 binomial sd, checks the shape),
    # and distinct coordinates are uncorrelated (|r| <= 4 / sqrt(N)).
    mech = make(name, 0.8)
    s = mech.sd(model)
    n, d = 100_000, model.dim
    g0 = np.linspace(-0.5, 0.5, d)
    noise = privatize_many(mech, model, g0, n, seed=11) - g0
    assert np.all(np.abs(noise.mean(axis=0)) <= 4 * s / math.sqrt(n))
    assert np.all(np.abs(noise.var(axis=0, ddof=1) - s**2) <= 4 * s**2 * math.sqrt(2 / n))
    tail = np.mean(np.abs(noise) > 1.959964 * s, axis=0)
    assert np.all(np.abs(tail - 0.05) <= 4 * math.sqrt(0.05 * 0.95 / n))
    if d > 1:
        corr = np.corrcoef(noise.T)[np.triu_indices(d, 1)]
        assert np.all(np.abs(corr) <= 4 / math.sqrt(n))


@pytest.mark.parametrize(("eps", "expected"), [(1.0, 0.126937), (2.0, 0.020924), (3.0, 0.001537)])
def test_gdp_implies_eps_delta(eps, expected):
    # SPEC 9.1 (seed 004, Example 3): 1-GDP is (eps, delta(eps))-LDP with these values.
    assert gaussian_delta(eps, 1.0) == pytest.approx(expected, abs=5e-7)


def test_gaussian_exact_delta_and_theory_warning():
    # Inside (0, 1) no message; outside, the message states the exact delta of the noise
    # at eps (Balle & Wang 2018) and whether it is within the claimed delta.
    assert mechanisms.Gaussian(eps=0.99).outside_theory() == []
    assert mechanisms.Gaussian(budget_range=[0.2, 0.99]).outside_theory() == []
    assert mechanisms.Gaussian(eps=math.inf).outside_theory() == []
    [msg] = mechanisms.Gaussian(eps=2.0).outside_theory()
    assert (
        "eps = 2 is outside (0, 1)" in msg and "1.34e-07" in msg and "within delta = 1e-05" in msg
    )
    [msg] = mechanisms.Gaussian(eps=10.0).outside_theory()
    assert "2.27e-05" in msg and "NOT within delta = 1e-05" in msg
    [msg] = mechanisms.Gaussian(budget_range=[0.5, 12.0]).outside_theory()
    assert "budget_range = [0.5, 12]" in msg and "at eps = 12" in msg and "NOT within" in msg
    # The exact delta is that of noise sd Delta2 c / eps, i.e. mu = eps / c.
    mech = mechanisms.Gaussian(eps=0.5, delta=1e-3)
    c = math.sqrt(2 * math.log(1.25e3))
    assert mech.exact_delta(0.5) == gaussian_delta(0.5, 0.5 / c) < 1e-3
    for name in ("laplace", "randomized_response", "gdp", "none"):
        assert make(name, 5.0).outside_theory() == []


@pytest.mark.parametrize("name", ["gaussian", "gdp"])
def test_infinite_budget_adds_no_gaussian_noise(name):
    model = MODELS[2]
    mech = make(name, math.inf)
    g0 = np.array([0.3, -0.2])
    out = privatize_many(mech, model, g0, 100, seed=1)
    assert np.array_equal(out, np.broadcast_to(g0, out.shape))
    assert np.all(mech.variance(model) == 0)


def test_laplace_follows_the_seed_for_models_with_only_delta2():
    # A model that states only Delta2 gets Delta1 = sqrt(p) Delta2 (seed 004, Example 1):
    # Laplace scale b = sqrt(p) Delta2 / eps. The SPEC 3 models keep their own Delta1.
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class OnlyDelta2(models.QuantileRegression):
        def l1_sensitivity(self):
            return Model.l1_sensitivity(self)

    model = OnlyDelta2(tau=0.8, coef=[0.0, 0.0, 1.0, -1.0])
    delta2 = model.l2_sensitivity()
    assert model.l1_sensitivity() == pytest.approx(2 * delta2, rel=1e-15)  # sqrt(p) = 2
    assert mechanisms.Laplace(eps=0.5).scale(model) == pytest.approx(2 * delta2 / 0.5)
    assert models.QuantileRegression(tau=0.8).l1_sensitivity() == pytest.approx(6.4)


# ---------------------------------------------------------------------------------------
# Per-user budgets: the noise covariance averaged over the budget law.


def test_mean_inverse_square_budget_by_monte_carlo():
    # E[1 / b^2] for b ~ Uniform(low, high) is 1 / (low high). Plain Monte Carlo with
    # N = 1e6 draws; tolerance 4 sd / sqrt(N) of 1 / b^2.
    rng = np.random.default_rng(5)
    for low, high in [(1.0, 2.0), (0.5, 3.0), (0.1, 0.2)]:
        b = rng.uniform(low, high, 1_000_000)
        values = 1 / b**2
        tol = 4 * values.std() / math.sqrt(values.size)
        assert abs(values.mean() - 1 / (low * high)) <= tol
    # SPEC 9.1: Uniform(1, 2) gives E[mu^-2] = 1/2, the same noise as mu = sqrt(2).
    assert mechanisms.GaussianDP(budget_range=[1, 2]).mean_inverse_square_budget() == 0.5


def test_randomized_response_mean_variance_by_monte_carlo():
    # E[e^eps / (e^eps - 1)^2] for eps ~ Uniform(low, high) is
    # (1 / (e^low - 1) - 1 / (e^high - 1)) / (high - low); plain Monte Carlo, 4 sd.
    rng = np.random.default_rng(6)
    for low, high in [(1.0, 2.0), (0.5, 3.0), (0.2, 0.25)]:
        eps = rng.uniform(low, high, 1_000_000)
        values = np.exp(eps) / np.expm1(eps) ** 2
        tol = 4 * values.std() / math.sqrt(values.size)
        assert abs(values.mean() - mean_privacy_variance(low, high)) <= tol
    # Narrow ranges (the midpoint is used below 1e-6 relative width, where the closed
    # form cancels) agree with numerical quadrature to 1e-9; no overflow for large eps.
    assert mean_privacy_variance(1.0, 1.0) == pytest.approx(math.e / (math.e - 1) ** 2, rel=1e-14)

    def f(e):
        return math.exp(e) / math.expm1(e) ** 2

    for high in (1.0 + 1e-9, 1.0 + 1e-7, 1.0 + 2e-6, 1.0 + 1e-4, 1.01):
        exact, _ = integrate.quad(f, 1.0, high, epsabs=0, epsrel=1e-13)
        assert mean_privacy_variance(1.0, high) == pytest.approx(exact / (high - 1.0), rel=1e-9)
    assert mean_privacy_variance(700.0, 700.0) == pytest.approx(math.exp(-700.0), rel=1e-12, abs=0)
    assert mean_privacy_variance(800.0, 800.0) == 0.0  # e^-800 underflows, no nan


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("laplace", MODELS[2]),
        ("laplace", MODELS[1]),
        ("gaussian", MODELS[2]),
        ("gaussian", MODELS[1]),
        ("gdp", MODELS[2]),
        ("gdp", MODELS[0]),
        ("randomized_response", MODELS[0]),
    ],
    ids=lambda v: getattr(v, "name", v),
)
@pytest.mark.parametrize("budget_range", [(1.0, 2.0), (0.3, 1.5)])
def test_per_user_noise_covariance_by_monte_carlo(name, model, budget_range):
    # The whole compiled chain (budget draw, then noise) against the closed form the
    # oracle uses: N = 200,000 reports of a fixed g0. Per coordinate, the mean is g0
    # within 4 sd and the sample variance is variance(model)_jj within 4 se, with
    # se = sqrt((m4 - var^2) / N) from the sample fourth central moment (a scale
    # mixture has heavy tails, so the normal-theory se would be too small); distinct
    # coordinates are uncorrelated within 4 / sqrt(N).
    mech = make_per_user(name, budget_range)
    n, d = 200_000, model.dim
    if name == "randomized_response":
        g0 = np.array([1 - model.tau])
    else:
        g0 = np.linspace(-0.5, 0.5, d)
    noise = privatize_many(mech, model, g0, n, seed=7) - g0
    expected = np.diag(mech.variance(model))
    assert np.array_equal(mech.variance(model), np.diag(expected))
    var = noise.var(axis=0, ddof=1)
    m4 = np.mean((noise - noise.mean(axis=0)) ** 4, axis=0)
    assert np.all(np.abs(noise.mean(axis=0)) <= 4 * np.sqrt(expected / n))
    assert np.all(np.abs(var - expected) <= 4 * np.sqrt((m4 - var**2) / n)), (var, expected)
    if d > 1:
        corr = np.corrcoef(noise.T)[np.triu_indices(d, 1)]
        assert np.all(np.abs(corr) <= 4 / math.sqrt(n))
    # The per-user variance lies between those of the two ends of the range.
    ends = [np.diag(make(name, b).variance(model)) for b in budget_range]
    assert np.all(ends[1] <= expected) and np.all(expected <= ends[0])


def test_per_user_budget_is_drawn_from_the_stream():
    # The budget is low + (high - low) u with u the stream's next Generator.random(),
    # drawn before the user's noise: with Gaussian noise, report = g0 + (c / b) z with
    # z the next standard normal, all bit for bit as numpy draws them.
    model = MODELS[2]
    mech = make_per_user("gdp", (1.0, 3.0))
    out = privatize_many(mech, model, np.zeros(2), 50, seed=9)
    rng = np.random.Generator(np.random.PCG64(9))
    for row in out:
        budget = 1.0 + 2.0 * rng.random()
        sd = model.l2_sensitivity() / budget
        expected = [0.0 + sd * rng.standard_normal() for _ in range(2)]
        assert np.array_equal(row, expected)


# ---------------------------------------------------------------------------------------
# Budgets so small that a mechanism's constants overflow float64 (issue 31): refused, with
# the smallest budget that can run; huge budgets give finite constants.


def spec_of(name: str, **params) -> dict:
    """A replicate spec with mechanism ``name`` (randomized response on quantile, the others
    on quantile regression, d = 4)."""
    model = "quantile" if name == "randomized_response" else "quantile_regression"
    return {"model": model, "n": 1000, "mechanism": name, **params}


def assert_finite_constants(spec: dict) -> None:
    rs = normalize_spec(spec)
    assert np.all(np.isfinite(rs.mechanism.params(rs.model)))
    assert np.all(np.isfinite(rs.mechanism.variance(rs.model)))


#: (mechanism, budget): every noise-adding mechanism at budgets whose noise variance
#: overflows (randomized response has its own floor, tested below).
TINY_BUDGETS = [
    (name, budget)
    for name in PER_USER
    if name != "randomized_response"
    for budget in (1e-160, 1e-300, 5e-324)
]


@pytest.mark.parametrize(("name", "budget"), TINY_BUDGETS)
def test_a_budget_whose_constants_overflow_is_refused(name, budget):
    param = mechanisms.REGISTRY[name].budget_param
    spec = spec_of(name, **{param: budget})
    with pytest.raises(ValueError) as info:  # before: ZeroDivisionError, or accepted
        normalize_spec(spec)
    message = str(info.value)
    prefix = f"The '{param}' parameter of {name} must be a float in ["
    assert message.startswith(prefix), message
    assert f", inf] for model {spec['model']!r}: below that, " in message
    assert message.endswith(f"not a finite float64. Got {budget!r}.") or message.endswith(
        f"not finite float64 numbers. Got {budget!r}."
    )
    smallest = float(message[len(prefix) :].split(",")[0])
    assert budget < smallest < 1e-15
    assert_finite_constants({**spec, param: smallest})  # the bound shown is allowed


@pytest.mark.parametrize("budget", [9.99e-7, 1e-13, 1e-17, 1e-160, 5e-324])
def test_randomized_responses_eps_floor_bounds_the_bias_of_its_reports(budget):
    # The flip is drawn on the uniforms' grid: P(flip) = ceil(q 2^53) / 2^53 on the CPU
    # (u = k 2^-53 < q), ceil(q 2^52) / 2^52 on the GPU (units.randomized_response), not q.
    # The debiased report's mean then misses g by (q - P) / (1 - 2q) of hi - lo. Exact in
    # rational arithmetic: at the floor, eps = 1e-6, both are within the 4.5e-10 that the
    # refusal states; below it the bias grows as 1 / eps (0.44 at 1e-15: no signal left).
    def bias(eps):
        q = Fraction(mechanisms.RandomizedResponse(eps=eps).params(models.Quantile())[0])
        drawn = [Fraction(math.ceil(q * 2**b), 2**b) for b in (53, 52)]
        return max(abs(q - p) / (1 - 2 * q) for p in drawn)

    assert bias(SMALLEST_EPS) < 4.5e-10
    with pytest.raises(ValueError) as info:  # before: accepted down to 5.56e-17
        normalize_spec(spec_of("randomized_response", eps=budget))
    assert str(info.value) == (
        "The 'eps' parameter of randomized_response must be a float in [1e-06, inf]: below "
        "it the flip probability 1 / (1 + e^eps) is so close to 1/2 that drawing the flip "
        "on the uniforms' grid (2^-53) biases the debiased reports by more than 4.5e-10 of "
        f"hi - lo (from eps ~ 4.4e-16 down they ignore the data). Got {budget!r}."
    )
    with pytest.raises(ValueError, match=r"with 1e-06 <= low <= high: below it the flip"):
        normalize_spec(spec_of("randomized_response", budget_range=[budget, 1.0]))
    assert_finite_constants(spec_of("randomized_response", eps=SMALLEST_EPS))
    assert_finite_constants(spec_of("randomized_response", budget_range=[SMALLEST_EPS, 1.0]))


def test_randomized_responses_bias_below_the_floor_is_large():
    # Why the floor: from eps ~ 4.4e-16 down the CPU's P(flip) is exactly 1/2 (q within
    # half a grid step of it), and the reports carry no information about the bit.
    for eps in (1e-16, 2e-16):
        q = flip_probability(eps)
        assert Fraction(math.ceil(q * 2**53), 2**53) == Fraction(1, 2)


@pytest.mark.parametrize("name", [name for name in PER_USER if name != "randomized_response"])
@pytest.mark.parametrize("budget_range", [[1e-300, 1.0], [1e-20, 1e-20]])
def test_a_budget_range_whose_smallest_budget_overflows_is_refused(name, budget_range):
    spec = spec_of(name, budget_range=budget_range)
    if budget_range[0] == 1e-20:
        assert_finite_constants(spec)  # a noise scale of 4e20: finite
        return
    with pytest.raises(ValueError) as info:
        normalize_spec(spec)
    message = str(info.value)
    assert message.startswith(
        f"The 'budget_range' parameter of {name} must be a list [low, high] of two finite "
        "floats with "
    )
    assert "<= low <= high for model" in message and "smallest user budget" in message
    assert message.endswith(f"Got {budget_range!r}.")


@pytest.mark.parametrize("name", PER_USER)
@pytest.mark.parametrize("budget", [1e300, math.inf, [1.0, 1e300], [1e300, 1e300]], ids=str)
def test_huge_budgets_give_finite_constants(name, budget):
    # [1, 1e300] for randomized response raised OverflowError (e^1e300) in its variance.
    key = "budget_range" if isinstance(budget, list) else mechanisms.REGISTRY[name].budget_param
    if name != "gaussian" or budget == math.inf:
        assert_finite_constants(spec_of(name, **{key: budget}))
        return
    # No noise to speak of: the exact delta of the gaussian's noise is 1, not nan.
    with pytest.warns(OutsideTheoryWarning, match=r"the exact delta of its noise .* is 1 "):
        assert_finite_constants(spec_of(name, **{key: budget}))


def test_a_delta_whose_noise_factor_overflows_is_refused():
    with pytest.raises(ValueError) as info:  # before: accepted, with an infinite noise sd
        mechanisms.Gaussian(eps=0.5, delta=5e-324)
    assert str(info.value) == (
        "The 'delta' parameter of gaussian must be a float in [6.96e-309, 1): below that, the "
        "noise factor sqrt(2 ln(1.25 / delta)) is not a finite float64. Got 5e-324."
    )
    assert math.isfinite(mechanisms.Gaussian(eps=0.5, delta=6.96e-309).noise_factor())


def test_nprr_keep_probability_at_extreme_eps():
    assert nprr_keep_probability(1.0, 3) == math.expm1(1.0) / (math.e + 3)  # unchanged
    for eps in (699.0, 700.0, 1000.0, 1e300):  # e^eps overflowed from 710 on
        assert nprr_keep_probability(eps, 10**6) == 1.0
    with pytest.raises(ValueError) as info:
        nprr_keep_probability(5e-324, 10**6)
    message = str(info.value)
    assert message.startswith("The 'eps' parameter of nprr must be a float in [")
    assert message.endswith("1 / r) is not a finite float64. Got 5e-324.")


def test_a_mechanism_without_a_per_user_callback_refuses_budget_range():
    # A hunt (h21b): a plugin that leaves privatize_per_user out cannot draw per-user
    # budgets; budget_range is refused by name (not run as a fixed budget of None).
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class FixedOnly(Mechanism):
        name = "fixed_only"
        privatize = mechanisms.REGISTRY["laplace"].privatize
        eps: float | None = None

    assert FixedOnly().eps == 1.0
    with pytest.raises(ValueError, match="takes no 'budget_range'") as info:
        FixedOnly(budget_range=[1.0, 2.0])
    assert "'fixed_only'" in str(info.value) and "give 'eps' instead" in str(info.value)


def test_gaussian_theory_warning_starts_at_eps_one():
    # A hunt (h21b): SPEC 9.1, the classical calibration is proved for eps < 1 only, so
    # eps = 1 itself, and a budget range whose high end is 1, are outside the theory.
    [msg] = mechanisms.Gaussian(eps=1.0).outside_theory()
    assert "eps = 1 is outside (0, 1)" in msg
    [msg] = mechanisms.Gaussian(budget_range=[0.2, 1.0]).outside_theory()
    assert "budget_range = [0.2, 1]" in msg and "at eps = 1 " in msg


@pytest.mark.parametrize("name", [name for name in PER_USER if name != "randomized_response"])
def test_a_budget_range_entirely_below_the_overflow_names_the_smallest_low(name):
    # A hunt (h21b): with [low, high] both too small, the smallest allowed low is searched
    # above high too (the range then probed is [b, max(b, high)]), and the message
    # blames budget_range, not the model's sensitivity, which is finite at budget 1.
    budget_range = [1e-300, 1e-200]
    with pytest.raises(ValueError) as info:
        normalize_spec(spec_of(name, budget_range=budget_range))
    message = str(info.value)
    prefix = f"The 'budget_range' parameter of {name} must be a list [low, high] of two finite "
    assert message.startswith(prefix + "floats with "), message
    assert message.endswith(f"Got {budget_range!r}.")
    smallest = float(message[len(prefix) + len("floats with ") :].split(" ")[0])
    assert 1e-200 < smallest < 1e-15


@pytest.mark.parametrize("name", ["laplace", "gaussian", "gdp"])
def test_infinite_budget_draws_nothing_from_the_stream(name):
    # A hunt (h21b): an infinite budget adds no noise and draws none either, so the data
    # stream after the user is the one the non-private mechanism leaves (the state the
    # callback returns is the state it was given); a finite budget does draw.
    model = MODELS[2]
    for budget, draws in ((math.inf, False), (1.0, True)):
        mech = make(name, budget)
        start = state_of(np.random.Generator(np.random.PCG64(3)))
        g = np.array([0.3, -0.2])
        after = mech.callback()(2, g, mech.params(model), start)
        assert (after != start) == draws
        assert np.array_equal(g, [0.3, -0.2]) != draws
