"""Every bad parameter is refused with a message naming it, what is allowed and the value;
configurations outside the theory warn."""

import math
import warnings

import numpy as np
import pytest

from ldpsim.tasks import normalize_spec, run_replicate
from ldpsim.tasks.validation import (
    check_choice,
    check_distinct,
    check_finite_constants,
    check_float,
    check_int,
    check_vector,
    did_you_mean,
    reading_recorded,
    recorded_specs,
)
from ldpsim.tasks.warnings import LDPSimWarning, OutsideTheoryWarning

BASE = {"model": "quantile", "n": 1000}
QR = {"model": "quantile_regression", "n": 1000}

# (id, spec, exception, substrings the message must contain)
BAD_SPECS = [
    # eps: (0, inf]; randomized response (BASE) names its own floor for 0 and below
    ("eps-zero", {**BASE, "eps": 0}, ValueError, ["'eps'", "[1e-06, inf]", "Got 0."]),
    ("eps-negative", {**BASE, "eps": -1.0}, ValueError, ["'eps'", "[1e-06, inf]", "Got -1.0."]),
    ("eps-nan", {**BASE, "eps": math.nan}, ValueError, ["'eps'", "(0, inf]", "Got nan."]),
    ("eps-string", {**BASE, "eps": "1"}, TypeError, ["'eps'", "(0, inf]", "Got '1'."]),
    ("eps-bool", {**BASE, "eps": True}, TypeError, ["'eps'", "(0, inf]", "Got True."]),
    ("eps-laplace", {**QR, "eps": -2}, ValueError, ["'eps'", "laplace", "(0, inf]", "Got -2."]),
    ("eps-none", {**BASE, "mechanism": "none", "eps": 1.0}, ValueError, ["'eps'", "inf", "1.0"]),
    # section-9 mechanisms: delta in (0, 1), mu in (0, inf], budget_range [low, high]
    (
        "delta-zero",
        {**QR, "mechanism": "gaussian", "eps": 0.5, "delta": 0},
        ValueError,
        ["The 'delta' parameter of gaussian must be a float in (0, 1). Got 0."],
    ),
    (
        "delta-one",
        {**QR, "mechanism": "gaussian", "eps": 0.5, "delta": 1},
        ValueError,
        ["'delta'", "(0, 1)", "Got 1."],
    ),
    (
        "mu-zero",
        {**QR, "mechanism": "gdp", "mu": 0.0},
        ValueError,
        ["The 'mu' parameter of gdp must be a float in (0, inf]. Got 0.0."],
    ),
    ("mu-negative", {**QR, "mechanism": "gdp", "mu": -1}, ValueError, ["'mu'", "Got -1."]),
    (
        "delta-laplace",
        {**QR, "delta": 1e-5},
        ValueError,
        ["The 'delta' parameter does not apply to mechanism 'laplace'", "budget_range, eps"],
    ),
    (
        "eps-gdp",
        {**QR, "mechanism": "gdp", "eps": 1.0},
        ValueError,
        ["'eps' parameter does not apply to mechanism 'gdp'", "budget_range, mu"],
    ),
    (
        "mu-gaussian",
        {**QR, "mechanism": "gaussian", "mu": 1.0},
        ValueError,
        ["'mu'", "mechanism 'gaussian'", "budget_range, eps, delta"],
    ),
    (
        "budget-range-with-eps",
        {**BASE, "eps": 1.0, "budget_range": [1, 2]},
        ValueError,
        ["'eps' parameter of randomized_response cannot be given together with 'budget_range'"],
    ),
    (
        "budget-range-with-mu",
        {**QR, "mechanism": "gdp", "mu": 1.0, "budget_range": [1, 2]},
        ValueError,
        ["'mu' parameter of gdp cannot be given together with 'budget_range'"],
    ),
    (
        "budget-range-low-zero",
        {**QR, "budget_range": [0, 2]},
        ValueError,
        [
            "The 'budget_range' parameter of laplace must be a list [low, high] of two "
            "finite floats with 0 < low <= high. Got [0, 2]."
        ],
    ),
    (
        "budget-range-reversed",
        {**QR, "mechanism": "gdp", "budget_range": [2, 1]},
        ValueError,
        ["'budget_range' parameter of gdp", "0 < low <= high", "Got [2, 1]."],
    ),
    (
        "budget-range-scalar",
        {**BASE, "budget_range": 1.5},
        TypeError,
        ["'budget_range' parameter of randomized_response", "Got 1.5."],
    ),
    (
        "budget-range-none",
        {**BASE, "mechanism": "none", "budget_range": [1, 2]},
        ValueError,
        ["'budget_range' parameter of none must be left out", "Got [1, 2]."],
    ),
    # tau: (0, 1)
    ("tau-zero", {**BASE, "tau": 0.0}, ValueError, ["'tau'", "(0, 1)", "Got 0.0."]),
    ("tau-one", {**BASE, "tau": 1}, ValueError, ["'tau'", "(0, 1)", "Got 1."]),
    ("tau-big", {**QR, "tau": 1.5}, ValueError, ["'tau'", "quantile_regression", "Got 1.5."]),
    ("tau-nan", {**BASE, "tau": math.nan}, ValueError, ["'tau'", "(0, 1)", "Got nan."]),
    ("tau-string", {**BASE, "tau": "0.5"}, TypeError, ["'tau'", "(0, 1)", "Got '0.5'."]),
    # gamma: (0, 1]
    ("gamma-zero", {**BASE, "gamma": 0}, ValueError, ["'gamma'", "(0, 1]", "Got 0."]),
    ("gamma-big", {**BASE, "gamma": 1.5}, ValueError, ["'gamma'", "(0, 1]", "Got 1.5."]),
    ("gamma-inf", {**BASE, "gamma": math.inf}, ValueError, ["'gamma'", "(0, 1]", "Got inf."]),
    # c: (0, inf)
    ("c-zero", {**BASE, "c": 0.0}, ValueError, ["'c'", "(0, inf)", "Got 0.0."]),
    ("c-inf", {**BASE, "c": math.inf}, ValueError, ["'c'", "(0, inf)", "Got inf."]),
    ("c-list", {**BASE, "c": [1.0]}, TypeError, ["'c'", "(0, inf)", "Got [1.0]."]),
    # n: int >= 2
    ("n-zero", {**BASE, "n": 0}, ValueError, ["'n'", "[2, 1e18]", "Got 0."]),
    ("n-one", {**BASE, "n": 1}, ValueError, ["'n'", "[2, 1e18]", "Got 1."]),
    ("n-fraction", {**BASE, "n": 1e3 + 0.5}, ValueError, ["'n'", "[2, 1e18]", "Got 1000.5."]),
    ("n-inf", {**BASE, "n": math.inf}, ValueError, ["'n'", "[2, 1e18]", "Got inf."]),
    ("n-nan", {**BASE, "n": math.nan}, ValueError, ["'n'", "[2, 1e18]", "Got nan."]),
    ("n-string", {**BASE, "n": "1000"}, TypeError, ["'n'", "[2, 1e18]", "Got '1000'."]),
    ("n-missing", {"model": "quantile"}, ValueError, ["'n'", "required", "[2, 1e18]"]),
    # Beyond int64 (and the float64 rounding of bm's boundaries near it): refused, not
    # an OverflowError at validation or at run time.
    ("n-beyond-int64", {**BASE, "n": 2**63}, ValueError, ["'n'", "[2, 1e18]", "Got 9223"]),
    ("n-1e20", {**BASE, "n": 1e20}, ValueError, ["'n'", "[2, 1e18]", "Got 1e+20."]),
    # level: (0, 1)
    ("level-zero", {**BASE, "level": 0}, ValueError, ["'level'", "(0, 1)", "Got 0."]),
    ("level-one", {**BASE, "level": 1.0}, ValueError, ["'level'", "(0, 1)", "Got 1.0."]),
    ("level-percent", {**BASE, "level": 90}, ValueError, ["'level'", "(0, 1)", "Got 90."]),
    # other SGD parameters
    ("batch-zero", {**BASE, "batch": 0}, ValueError, ["'batch'", "[1, 1000000]", "Got 0."]),
    ("seed-negative", {**BASE, "seed": -1}, ValueError, ["'seed'", "[0, ", "Got -1."]),
    ("theta0-nan", {**BASE, "theta0": math.nan}, ValueError, ["'theta0'", "finite", "Got nan."]),
    (
        "theta0-len",
        {**QR, "theta0": [0.0, 1.0]},
        ValueError,
        ["'theta0'", "4 finite", "[0.0, 1.0]"],
    ),
    ("theta0-str", {**BASE, "theta0": "0"}, TypeError, ["'theta0'", "finite float", "Got '0'."]),
    # model parameters
    ("loc-inf", {**BASE, "loc": math.inf}, ValueError, ["'loc'", "quantile", "Got inf."]),
    # loc in [-1e6, 1e6], closed: the first float beyond either end is refused
    (
        "loc-below",
        {**BASE, "loc": math.nextafter(-1e6, -math.inf)},
        ValueError,
        [
            "The 'loc' parameter of quantile must be a float in [-1e+06, 1e+06]. "
            "Got -1000000.0000000001."
        ],
    ),
    ("n-inf", {**BASE, "n": math.inf}, ValueError, ["'n'", "[2, 1e18]", "Got inf."]),
    ("n-bool", {**BASE, "n": True}, TypeError, ["'n'", "[2, 1e18]", "Got True."]),
    ("backend-int", {**BASE, "backend": 1}, TypeError, ["'backend'", "one of", "Got 1."]),
    ("model-list", {"model": ["quantile"], "n": 100}, TypeError, ["Unknown model ['quantile']"]),
    # theta0 of quantile_regression: exactly d = 4 finite reals, no bool
    ("theta0-long", {**QR, "theta0": [0.0] * 5}, ValueError, ["'theta0'", "4 finite", "Got [0.0"]),
    ("theta0-inf", {**QR, "theta0": [0, 0, 0, math.inf]}, ValueError, ["'theta0'", "inf]."]),
    ("theta0-bool", {**QR, "theta0": [0, 0, 0, True]}, TypeError, ["'theta0'", "True]."]),
    ("d-zero", {"model": "mean", "n": 100, "d": 0}, ValueError, ["'d'", "[1, 64]", "Got 0."]),
    ("d-float", {"model": "mean", "n": 100, "d": 2.5}, ValueError, ["'d'", "[1, 64]", "Got 2.5."]),
    ("coef-nan", {**QR, "coef": [0, math.nan]}, ValueError, ["'coef'", "finite", "nan"]),
    ("coef-empty", {**QR, "coef": []}, ValueError, ["coef", "[1, 64]", "Got 0."]),
    ("coef-str", {**QR, "coef": "0 1"}, TypeError, ["'coef'", "finite floats", "Got '0 1'."]),
    # names: model, mechanism, method, multiplier, form
    ("model-unknown", {"model": "median", "n": 10}, ValueError, ["model 'median'", "'quantile'"]),
    ("model-type", {"model": 3, "n": 10}, TypeError, ["model 3", "'quantile'"]),
    ("model-missing", {"n": 10}, ValueError, ["'model'", "required", "'quantile'"]),
    (
        "mechanism-unknown",
        {**BASE, "mechanism": "gauss"},
        ValueError,
        ["mechanism 'gauss'", "'laplace'", "'randomized_response'"],
    ),
    (
        "method-unknown",
        {**BASE, "methods": {"boot": {}}},
        ValueError,
        ["method 'boot'", "'bb'", "'bm'", "'oracle'", "'sn'"],
    ),
    (
        "method-kind-unknown",
        {**BASE, "methods": {"x": {"method": "jackknife"}}},
        ValueError,
        ["method 'jackknife'", "'bb'"],
    ),
    (
        "multiplier-unknown",
        {**BASE, "methods": {"bb": {"multiplier": "poisson"}}},
        ValueError,
        ["'multiplier'", "bb", "'uniform'", "'rademacher'", "'mammen'", "Got 'poisson'."],
    ),
    (
        "form-unknown",
        {**BASE, "methods": {"bb": {"form": "studentized"}}},
        ValueError,
        ["'form'", "'basic'", "'percentile'", "Got 'studentized'."],
    ),
    # method parameters
    (
        "B-zero",
        {**BASE, "methods": {"bb": {"B": 0}}},
        ValueError,
        ["'B'", "bb", "[2, 1000000]", "Got 0."],
    ),
    (
        "B-string",
        {**BASE, "methods": {"bb": {"B": "500"}}},
        TypeError,
        ["'B'", "[2, 1000000]", "Got '500'."],
    ),
    (
        "beta-one",
        {**BASE, "methods": {"bb": {"beta": 1.0}}},
        ValueError,
        ["'beta'", "(0, 1)", "Got 1.0."],
    ),
    (
        "too-few-blocks",
        {**BASE, "methods": {"bb": {"beta": 0.99}}},
        ValueError,
        ["'beta'", "n = 1000", "n_blocks = 1", "n_blocks >= 2", "beta = 0.99"],
    ),
    (
        "n_batches-one",
        {**BASE, "methods": {"bm": {"n_batches": 1}}},
        ValueError,
        ["'n_batches'", "[2, 1000000]", "Got 1."],
    ),
    (
        "n_batches-too-many",
        {**BASE, "methods": {"bm": {"n_batches": 500}}},
        ValueError,
        ["'n_batches'", "increasing batch boundaries", "n = 1000", "M = 500"],
    ),
    (
        "method-param-unknown",
        {**BASE, "methods": {"bm": {"B": 10}}},
        ValueError,
        ["parameter 'B'", "method 'bm'", "n_batches, beta"],
    ),
    (
        "oracle-param",
        {**BASE, "methods": {"oracle": {"level": 0.9}}},
        ValueError,
        ["parameter 'level'", "'oracle'", "parameters are: intersect_constraint."],
    ),
    (
        "methods-empty",
        {**BASE, "methods": {}},
        TypeError,
        ["'methods'", "non-empty mapping", "{}"],
    ),
    ("methods-list", {**BASE, "methods": ["bb"]}, TypeError, ["'methods'", "['bb']"]),
    (
        "method-params-type",
        {**BASE, "methods": {"bb": 500}},
        TypeError,
        ["method 'bb'", "mapping", "Got 500."],
    ),
    # keys
    (
        "key-unknown",
        {**BASE, "alpha": 0.1},
        ValueError,
        ["key 'alpha'", "Allowed keys", "level", "tau"],
    ),
    (
        "key-other-model",
        {**BASE, "coef": [0.0, 1.0]},
        ValueError,
        ["'coef'", "model 'quantile'", "tau, loc"],
    ),
    (
        "key-other-model-2",
        {"model": "mean", "n": 10, "tau": 0.5},
        ValueError,
        ["'tau'", "'mean'", "d, loc"],
    ),
    (
        "rr-with-regression",
        {**QR, "mechanism": "randomized_response"},
        ValueError,
        ["randomized_response", "two-valued", "'quantile_regression'"],
    ),
    (
        "checkpoints-zero",
        {**BASE, "checkpoints": [0, 500]},
        ValueError,
        ["'checkpoints'", "[1, 1000]", "Got 0."],
    ),
    (
        "checkpoints-beyond-n",
        {**BASE, "checkpoints": [2000]},
        ValueError,
        ["'checkpoints'", "[1, 1000]", "Got 2000."],
    ),
    ("checkpoints-int", {**BASE, "checkpoints": 500}, TypeError, ["'checkpoints'", "Got 500."]),
    # A checkpoint listed twice is refused, as a grid value listed twice is (issue 31).
    (
        "checkpoints-twice",
        {**BASE, "checkpoints": [100, 100]},
        ValueError,
        [
            "The 'checkpoints' parameter lists the same value twice: 100 and 100 (numbers are "
            "compared by value). Each value may appear once."
        ],
    ),
    (
        "checkpoints-twice-by-value",
        {**BASE, "checkpoints": [1e2, 500, 100]},
        ValueError,
        ["'checkpoints' parameter lists the same value twice: 100.0 and 100 "],
    ),
    # A model whose sensitivity overflows the noise at a budget of 1 too: the model is named,
    # not the budget (before: "The 'mu' parameter of gdp gives constants that cannot be
    # computed", "The 'eps' parameter of laplace ...").
    (
        "huber-c-overflows",
        {"model": "huber_regression", "d": 5, "huber_c": 1e100, "mechanism": "gdp", "n": 1000},
        ValueError,
        [
            "The sensitivity of model 'huber_regression' (beyond float64) is too large for "
            "gdp: the noise sd Delta2 / mu and the noise variance (Delta2 / mu)^2 are not "
            "finite float64 numbers at mu = 1.0. Make the model parameter that scales "
        ],
    ),
    (
        "sparse-magnitude-overflows",
        {"model": "sparse_mean", "d": 10, "sparsity": 2, "magnitude": 1e200, "eps": 1e-3},
        ValueError,
        [
            "The sensitivity of model 'sparse_mean' (4e+200) is too large for laplace: ",
            "at eps = 0.001, and at eps = 1 too.",
        ],
    ),
    (
        "huber-c-overflows-budget-range",
        {"model": "huber_regression", "d": 5, "huber_c": 1e100, "mechanism": "gdp"}
        | {"budget_range": [1, 2]},
        ValueError,
        ["The sensitivity of model 'huber_regression' (beyond float64) is too large for gdp"],
    ),
]


@pytest.mark.parametrize(
    ("spec", "exc", "parts"), [pytest.param(*case[1:], id=case[0]) for case in BAD_SPECS]
)
def test_bad_spec_is_refused(spec, exc, parts):
    with pytest.raises(exc) as info:
        normalize_spec(spec)
    assert type(info.value) is exc
    msg = str(info.value)
    for part in parts:
        assert part in msg, f"{part!r} not in {msg!r}"


def test_largest_n_is_accepted_with_its_bm_boundaries():
    # 1e18 is the documented limit: validation (bm's boundaries included) passes there.
    spec = normalize_spec({**BASE, "n": 1e18})
    assert spec.n == 10**18
    assert spec.methods["bm"].bounds(spec.n, spec.gamma)[-1] == 10**18


def test_spec_must_be_a_mapping():
    with pytest.raises(TypeError, match=r"must be a mapping\. Got list"):
        normalize_spec([("model", "quantile")])


@pytest.mark.parametrize(
    ("rep", "exc", "shown"),
    [(-1, ValueError, "Got -1."), (1.5, ValueError, "Got 1.5."), ("0", TypeError, "Got '0'.")],
)
def test_bad_rep_is_refused(rep, exc, shown):
    with pytest.raises(exc) as info:
        run_replicate(BASE, rep)
    msg = str(info.value)
    assert "'rep'" in msg and "[0, inf]" in msg and shown in msg


def test_valid_spec_is_normalized():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rs = normalize_spec({"model": "quantile", "n": 1e6, "tau": 0.9, "theta0": 1})
    assert rs.n == 10**6 and isinstance(rs.n, int)
    assert rs.theta0 == (1.0,)
    assert rs.mechanism.name == "randomized_response" and rs.mechanism.eps == 1.0
    assert (rs.c, rs.gamma, rs.level, rs.batch, rs.seed) == (1.0, 0.51, 0.9, 1, 0)
    assert sorted(rs.methods) == ["bb", "bm", "oracle", "sn"]
    rs = normalize_spec({**QR, "methods": {"bb_r": {"method": "bb", "multiplier": "rademacher"}}})
    assert rs.mechanism.name == "laplace"
    assert rs.methods["bb_r"].name == "bb" and rs.methods["bb_r"].multiplier == "rademacher"
    assert normalize_spec({**BASE, "mechanism": "none"}).mechanism.eps == math.inf


@pytest.mark.parametrize(
    ("spec", "shown"),
    [
        ({**BASE, "gamma": 0.5}, "gamma = 0.5"),
        ({**BASE, "gamma": 0.3}, "gamma = 0.3"),
        ({**BASE, "gamma": 1.0, "methods": {"sn": {}}}, "gamma = 1.0"),
        ({**BASE, "methods": {"bb": {"beta": 0.5}}}, "beta = 0.5"),
        ({**BASE, "gamma": 0.6, "methods": {"bb": {"beta": 0.6}}}, "beta = 0.6"),
        ({**QR, "mechanism": "gaussian"}, "gaussian: eps = 1 is outside (0, 1)"),
        (
            {**QR, "mechanism": "gaussian", "budget_range": [0.5, 1.5]},
            "budget_range = [0.5, 1.5] reaches eps_i outside (0, 1)",
        ),
    ],
)
def test_outside_the_theory_warns(spec, shown):
    with pytest.warns(OutsideTheoryWarning) as record:
        normalize_spec(spec)
    assert any(shown in str(w.message) for w in record)
    assert issubclass(OutsideTheoryWarning, LDPSimWarning)
    assert issubclass(LDPSimWarning, RuntimeWarning)


def test_paper_configuration_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        normalize_spec({**BASE, "gamma": 0.51, "methods": {"bb": {"beta": 0.75}, "bm": {}}})
        normalize_spec({**QR, "gamma": 0.7, "methods": {"bb": {"beta": 0.8}}, "n": 10**6})


def test_mechanism_parameters_are_normalized_and_key_the_stream():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gauss = normalize_spec({**QR, "mechanism": "gaussian", "eps": 0.5, "delta": 1e-3})
        gdp = normalize_spec({**QR, "mechanism": "gdp"})
        per_user = normalize_spec({**QR, "mechanism": "gdp", "budget_range": [1, 2]})
    assert (gauss.mechanism.eps, gauss.mechanism.delta) == (0.5, 1e-3)
    assert gdp.mechanism.mu == 1.0  # the default
    assert per_user.mechanism.budget_range == (1.0, 2.0) and per_user.mechanism.mu is None
    assert {"eps": 0.5, "delta": 1e-3}.items() <= gauss.path_key().items()
    assert gdp.path_key()["mu"] == 1.0 and "eps" not in gdp.path_key()
    assert per_user.path_key()["budget_range"] == (1.0, 2.0) and "mu" not in per_user.path_key()
    # Existing configurations: the key holds eps (as before) and nothing new.
    key = normalize_spec(QR).path_key()
    assert key["eps"] == 1.0 and not {"delta", "mu", "budget_range"} & set(key)


def test_bm_needs_gamma_below_one():
    with pytest.warns(OutsideTheoryWarning), pytest.raises(ValueError, match=r"'gamma'.*< 1"):
        normalize_spec({**BASE, "gamma": 1.0, "methods": {"bm": {}}})


def test_check_helpers_message_template():
    # One template: "The 'eps' parameter of laplace must be a float in (0, inf]. Got -1.0."
    with pytest.raises(ValueError) as info:
        check_float(-1.0, "eps", owner="laplace", low=0, allow_inf=True)
    assert (
        str(info.value) == "The 'eps' parameter of laplace must be a float in (0, inf]. Got -1.0."
    )
    with pytest.raises(ValueError) as info:
        check_int(7, "B", owner="bb", low=10, high=20)
    assert str(info.value) == "The 'B' parameter of bb must be an int in [10, 20]. Got 7."
    with pytest.raises(ValueError) as info:
        check_choice("x", "form", ("a", "b"))
    assert str(info.value) == "The 'form' parameter must be one of 'a', 'b'. Got 'x'."
    # A typo of an allowed name is named after the value; nothing close, no hint.
    with pytest.raises(ValueError) as info:
        check_choice("gausian", "multiplier", ("uniform", "gaussian"), owner="bb")
    assert str(info.value) == (
        "The 'multiplier' parameter of bb must be one of 'uniform', 'gaussian'. "
        "Got 'gausian' (did you mean 'gaussian'?)."
    )
    assert did_you_mean("tua", ["n", "tau", "eps"]) == " (did you mean 'tau'?)"
    assert did_you_mean("zzz", ["n", "tau", "eps"]) == did_you_mean(3, ["3"]) == ""
    assert check_vector(2, "theta0", 3) == (2.0, 2.0, 2.0)
    # A long value is cut in the message, with its length (d = 1000 coefficients).
    with pytest.raises(ValueError) as info:
        check_vector([0.5] * 999, "coef", 1000, owner="sparse_mean")
    message = str(info.value)
    assert message.endswith(
        "Got [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5,... (length 999)."
    )
    assert "list of 1000 finite floats" in message and len(message) < 200
    assert check_int(1e6, "n", low=2) == 10**6
    assert check_float(math.inf, "eps", low=0, allow_inf=True) == math.inf


def test_check_distinct_compares_numbers_by_value():
    check_distinct([1, 2, "a", "b"], "The grid axis 'x'")
    with pytest.raises(ValueError) as info:
        check_distinct([0.5, 1, 1.0], "The grid axis 'eps'")
    assert str(info.value) == (
        "The grid axis 'eps' lists the same value twice: 1 and 1.0 (numbers are compared by "
        "value). Each value may appear once."
    )


def _inverse_square(value: float) -> dict:
    """A toy unit's constant 1 / v^2: finite from v = sqrt(1 / DBL_MAX) = 7.46e-155 on."""
    return {"the toy constant 1 / v^2": lambda: 1.0 / (value * value)}


def test_check_finite_constants_gives_the_smallest_allowed_value():
    assert check_finite_constants(_inverse_square, 1e-150, "eps", owner="toy") == 1e-150
    with pytest.raises(ValueError) as info:
        check_finite_constants(_inverse_square, 1e-200, "eps", owner="toy", context=" here")
    assert str(info.value) == (
        "The 'eps' parameter of toy must be a float in [7.46e-155, inf] here: below that, "
        "the toy constant 1 / v^2 is not a finite float64. Got 1e-200."
    )
    # The bound shown is allowed (rounded up, not to the nearest), and the true boundary is
    # within its rounding: 1 / v^2 overflows just below sqrt(1 / DBL_MAX).
    boundary = 1.0 / math.sqrt(np.finfo(np.float64).max)
    assert check_finite_constants(_inverse_square, 7.46e-155, "eps") == 7.46e-155
    assert boundary <= 7.46e-155 < boundary * 1.001
    # A constant that raises (1.0 / 0.0: ZeroDivisionError) counts as not finite; 1 / v
    # overflows to inf below v = 1 / DBL_MAX = 5.56e-309.
    with pytest.raises(ValueError, match=r"\[5\.57e-309, inf\]: .*the ratio 1 / v .*Got 0\.0\."):
        check_finite_constants(lambda v: {"the ratio 1 / v": lambda: 1.0 / v}, 0.0, "v")


def test_the_closed_ends_of_loc_are_allowed_and_recorded_specs_widen_them():
    # [-1e6, 1e6] is closed: both ends run; beyond them only a store's recorded sweep reads.
    assert normalize_spec({**BASE, "loc": -1e6}).model.loc == -1e6
    assert normalize_spec({**BASE, "loc": 1e6}).model.loc == 1e6
    assert check_float(-1.0, "x", low=-1.0, low_open=False) == -1.0
    with pytest.raises(ValueError, match=r"'loc'.*\[-1e\+06, 1e\+06\]\. Got 10000000\.0\."):
        normalize_spec({**BASE, "loc": 1e7})
    assert not reading_recorded()
    with recorded_specs():
        assert reading_recorded()
        assert normalize_spec({**BASE, "loc": 1e7}).model.loc == 1e7
    assert not reading_recorded()


def test_check_int_bounds_and_values_as_the_message_shows_them():
    assert check_int(10, "B", low=10, high=20) == 10
    assert check_int(20, "B", low=10, high=20) == 20
    # A power of ten from 1e9 on is written 1ek, 1e9 included.
    with pytest.raises(ValueError) as info:
        check_int(2 * 10**9, "n", low=2, high=10**9)
    assert str(info.value) == "The 'n' parameter must be an int in [2, 1e9]. Got 2000000000."
    # A value whose repr is 80 characters is shown whole (cut only beyond 80).
    value = [0.25] * 13
    assert len(repr(value)) <= 80
    with pytest.raises(ValueError) as info:
        check_vector(value, "coef", 12)
    assert str(info.value).endswith(f"Got {value!r}.")


def test_check_finite_constants_checks_every_entry_and_blames_the_parameter():
    # One infinite entry of an array makes the constant not finite.
    def vector(v: float) -> dict:
        return {"the vector": lambda: np.array([1.0, np.inf if v < 0.5 else 1.0])}

    with pytest.raises(ValueError) as info:
        check_finite_constants(vector, 0.2, "eps", owner="toy")
    # The boundary 0.5 is itself a 3-digit number: it is shown as is, not rounded up.
    assert str(info.value) == (
        "The 'eps' parameter of toy must be a float in [0.5, inf]: below that, the vector is "
        "not a finite float64. Got 0.2."
    )
    # Not finite above ``good`` (exp overflows) while finite at ``good``: the parameter is
    # to blame, not what ``instead`` names.
    with pytest.raises(ValueError) as info:
        check_finite_constants(
            lambda v: {"e^v": lambda: math.exp(v)},
            1000.0,
            "eps",
            owner="toy",
            instead="the model's sensitivity",
        )
    assert str(info.value) == (
        "The 'eps' parameter of toy gives constants that cannot be computed: e^v is not a "
        "finite float64. Got 1000.0."
    )
