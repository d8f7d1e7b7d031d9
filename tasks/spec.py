"""Validation of one replicate's specification: a plain mapping -> ReplicateSpec."""

from __future__ import annotations

import dataclasses
import functools
import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ldpsim.tasks import plugins
from ldpsim.tasks.intervals.base import IntervalMethod
from ldpsim.tasks.intervals.batch_means import follow_bootstrap
from ldpsim.tasks.mechanisms.base import Mechanism
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.spec_keys import SPEC_KEYS, unit_param_names, unit_params
from ldpsim.tasks.users import Users
from ldpsim.tasks.validation import (
    check_choice,
    check_distinct,
    check_float,
    check_int,
    check_vector,
    did_you_mean,
    lookup,
)
from ldpsim.tasks.warnings import OutsideTheoryWarning

#: Where the replicates' chains run (``backend``): numba on CPU cores, or one CUDA thread
#: per replicate (:mod:`ldpsim.tasks.gpu.kernel`), with streams of its own.
BACKENDS = ("cpu", "gpu")
#: Defaults of the keys left out; ``theta0`` defaults to the model's
#: :meth:`~ldpsim.tasks.models.base.Model.default_theta0` (0 but for a scale).
DEFAULTS: dict[str, Any] = {
    "c": 1.0,
    "gamma": 0.51,
    "batch": 1,
    "level": 0.9,
    "seed": 0,
    "backend": "cpu",
    "methods": {"bb": {}, "bm": {}, "sn": {}, "oracle": {}},
}
#: Largest n accepted. Step counters are int64 (at most 9.2e18), and bm's batch boundaries
#: pass through float64, which rounds to 2^63 (an int64 overflow) just below that; 1e18
#: leaves a margin and is far beyond any run (1e18 steps at 6 ns each: 190 core-years).
MAX_N = 10**18
#: Paper's pairing of models and mechanisms, used when 'mechanism' is not given.
DEFAULT_MECHANISM = {"quantile": "randomized_response"}


def model_param_keys() -> set[str]:
    """Every parameter name of every registered model."""
    return set(_param_keys("model"))


#: kind -> (the registry it was computed from, its parameter names).
_PARAM_KEYS: dict[str, tuple[dict, frozenset[str]]] = {}


def _param_keys(kind: str) -> frozenset[str]:
    # The registry is one dict until the plugins are scanned again: computed once per dict.
    registry = plugins.registry(kind)
    known = _PARAM_KEYS.get(kind)
    if known is None or known[0] is not registry:
        keys = frozenset(p for cls in registry.values() for p in unit_param_names(cls))
        known = _PARAM_KEYS[kind] = (registry, keys)
    return known[1]


def find_unit(kind: str, name: object) -> type:
    """The model, mechanism or method class called ``name``, built-in or from a plugin.

    Raises
    ------
    TypeError, ValueError
        No such unit (the message lists the available ones), or a plugin of that name
        that is left out (the message says why).
    """
    usable = plugins.registry(kind)
    problem = None if isinstance(name, str) and name in usable else plugins.problem_of(kind, name)
    if problem is not None:
        raise ValueError(problem)
    return lookup(usable, name, kind)


def mechanism_param_keys() -> set[str]:
    """Every parameter name of every registered mechanism (eps, delta, mu, budget_range)."""
    return set(_param_keys("mechanism"))


def build_from_spec(cls: type, kind_keys: set[str], spec: Mapping[str, Any], what: str):
    """Construct the model or mechanism ``cls`` from its keys among a flat spec's.

    ``kind_keys`` are the parameters of every unit of that kind: one of another unit of
    the kind (e.g. ``delta`` with ``laplace``) is refused, naming ``cls``'s parameters.
    """
    own = unit_params(cls)
    for key in sorted(kind_keys & set(spec)):
        if key not in own:
            raise ValueError(
                f"The {key!r} parameter does not apply to {what} {cls.name!r}; its "
                f"parameters are: {', '.join(own)}."
            )
    return build_unit(cls, {key: spec[key] for key in own if key in spec}, what)


def build_unit(cls: type, params: Mapping[str, Any], what: str):
    """Construct ``cls(**params)`` after checking that every key is a parameter."""
    allowed = unit_params(cls)
    for key in params:
        if key not in allowed:
            listed = ", ".join(allowed) if allowed else "(none)"
            raise ValueError(
                f"Unknown parameter {key!r}{did_you_mean(key, allowed)} of {what} {cls.name!r}. "
                f"Its parameters are: {listed}."
            )
    return cls(**params)


def check_constraint(label: str, method: IntervalMethod, model: Model) -> None:
    """Refuse ``intersect_constraint`` unless it is a bool and the model states a radius."""
    value = method.intersect_constraint
    if not isinstance(value, bool):
        raise TypeError(
            f"The 'intersect_constraint' parameter of method {label!r} must be true or "
            f"false. Got {value!r}."
        )
    if value and model.constraint_radius() is None:
        raise ValueError(
            f"The 'intersect_constraint' parameter of method {label!r} needs a model that "
            f"states an l1 ball around theta* (a constraint_radius); model {model.name!r} "
            f"states none. Leave it out."
        )


@dataclass(frozen=True, kw_only=True)
class ReplicateSpec:
    """A validated, normalized replicate specification (see :func:`normalize_spec`)."""

    model: Model
    mechanism: Mechanism
    n: int
    c: float
    gamma: float
    theta0: tuple[float, ...]
    batch: int
    methods: dict[str, IntervalMethod]
    level: float
    seed: int
    checkpoints: tuple[int, ...] | None
    backend: str = "cpu"

    def path_key(self) -> dict[str, Any]:
        """The values that shape the SGD path; they key the data stream.

        The GPU backend's streams are keyed by the backend and its streams' version too;
        the CPU's key is the same as before the backend existed.
        """
        gpu = {}
        if self.backend == "gpu":
            from ldpsim.tasks.streams.philox import STREAMS_VERSION

            gpu = {"backend": "gpu", "streams": STREAMS_VERSION}
        return {
            "model": self.model.name,
            **dataclasses.asdict(self.model),
            "mechanism": self.mechanism.name,
            **self.mechanism.key(),
            "n": self.n,
            "c": self.c,
            "gamma": self.gamma,
            "theta0": list(self.theta0),
            "batch": self.batch,
            **gpu,
        }

    def users(self, start: tuple) -> Users:
        """The users of this replicate whose data stream was at ``start`` (a state of
        :func:`ldpsim.tasks.streams.rng.state_of`): what a competitor replays."""
        return Users(
            model=self.model,
            mechanism=self.mechanism,
            n=self.n,
            batch=self.batch,
            c=self.c,
            gamma=self.gamma,
            theta0=self.theta0,
            start=start,
        )

    def method_key(self, label: str) -> dict[str, Any]:
        """Key of one method's own stream: its label, kind and parameters."""
        method = self.methods[label]
        return {"label": label, "method": method.name, **method.key()}


def build_methods(raw_methods: Mapping[str, Any]) -> dict[str, IntervalMethod]:
    """The interval methods of a spec's ``methods`` mapping, validated (bm following bb).

    The methods are frozen and depend on nothing but this mapping, so the grid points of
    a sweep, which share it, share one build (cached by its JSON, labels in their order,
    and the method classes registered).
    """
    try:
        token = json.dumps(raw_methods)
    except (TypeError, ValueError):  # not JSON (e.g. a numpy value): built each time
        return _build_methods(raw_methods)
    registered = tuple(plugins.registry("method").items())
    return dict(_build_methods_of(token, registered))


@functools.lru_cache(maxsize=64)
def _build_methods_of(token: str, registered: tuple) -> dict[str, IntervalMethod]:
    return _build_methods(json.loads(token))


def _build_methods(raw_methods: Mapping[str, Any]) -> dict[str, IntervalMethod]:
    methods: dict[str, IntervalMethod] = {}
    for label, params in raw_methods.items():
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise TypeError(
                f"The parameters of method {label!r} must be a mapping. Got {params!r}."
            )
        params = dict(params)
        kind = params.pop("method", label)
        cls = find_unit("method", kind)
        methods[str(label)] = build_unit(cls, params, "method")
    return follow_bootstrap(methods)


def normalize_spec(spec: Mapping[str, Any]) -> ReplicateSpec:
    """Validate a replicate specification and return it normalized.

    Parameters
    ----------
    spec : mapping
        ``model`` (str, required) and its parameters as top-level keys (e.g. ``tau``);
        ``mechanism`` (str; default randomized_response for quantile, laplace
        otherwise) and its parameters as top-level keys: ``eps`` in (0, inf] (default 1,
        inf for 'none'), ``delta`` in (0, 1) (gaussian), ``mu`` in (0, inf] (gdp, default
        1) or ``budget_range`` [low, high] instead of eps or mu (per-user budgets),
        ``calibration`` 'sparse' or 'dense' (laplace and gaussian, for a model that
        declares a gradient sparsity; default 'sparse'); a budget (or a budget_range's
        low) so small that the mechanism's noise scale or variance is not a finite
        float64 for the model is refused, with the smallest one allowed
        (:meth:`~ldpsim.tasks.mechanisms.base.Mechanism.check_constants`);
        ``n`` int in [2, 1e18];
        ``c`` float > 0 (1); ``gamma`` in (0, 1] (0.51); ``theta0`` float or list of d
        floats (the model's ``default_theta0()``: 0 but for a scale); ``batch`` int
        >= 1 (1); ``methods`` mapping label -> parameters, with optional ``method``
        naming the kind (default: the label; a bm without
        ``n_batches`` or ``beta`` takes the beta of the bb methods, which must agree, see
        :func:`ldpsim.tasks.intervals.batch_means.follow_bootstrap`); ``level`` in
        (0, 1) (0.9); ``seed`` int >= 0 (0); ``checkpoints`` optional list of ints in
        [1, n], each listed once, at which every interval is also computed; ``backend``
        'cpu' (the default) or 'gpu' (the model, mechanism and methods must have a GPU
        form: :func:`ldpsim.tasks.gpu.units.gpu_refusal`).

    Raises
    ------
    TypeError, ValueError
        Naming the parameter, what is allowed and the value received.

    Warns
    -----
    OutsideTheoryWarning
        gamma outside (1/2, 1), a bootstrap beta <= gamma, or a gaussian eps >= 1.
    """
    if not isinstance(spec, Mapping):
        raise TypeError(f"A replicate spec must be a mapping. Got {type(spec).__name__}.")
    model_keys = _param_keys("model")
    mech_keys = _param_keys("mechanism")
    for key in spec:
        if key not in SPEC_KEYS and key not in model_keys and key not in mech_keys:
            names = [*SPEC_KEYS, *sorted(model_keys), *sorted(mech_keys)]
            raise ValueError(
                f"Unknown key {key!r}{did_you_mean(key, names)}. Allowed keys are: "
                f"{', '.join(names)}."
            )
    if "model" not in spec:
        names = ", ".join(repr(k) for k in plugins.registry("model"))
        raise ValueError(f"The 'model' key is required; one of {names}.")
    model_cls = find_unit("model", spec["model"])
    mech_name = spec.get("mechanism", DEFAULT_MECHANISM.get(model_cls.name, "laplace"))
    mech_cls = find_unit("mechanism", mech_name)
    model_params, mech_params = set(unit_params(model_cls)), set(unit_params(mech_cls))
    shared = [key for key in unit_params(mech_cls) if key in model_params]
    if shared:  # possible only between two plugins: the built-ins are checked at load
        raise ValueError(
            f"The model {model_cls.name!r} and the mechanism {mech_cls.name!r} both take "
            f"the parameter(s) {', '.join(map(repr, shared))}, so a spec cannot say which "
            "one a value is for; use them with other units, or rename the parameter in "
            "one of the two plugins."
        )
    # A key of the chosen mechanism is not the model's to refuse, nor one of the chosen
    # model the mechanism's, though another unit of the other kind takes a key of that
    # name (two plugins): a plugin model's 'rate' stays usable with laplace when some
    # installed plugin mechanism also has a 'rate'.
    model = build_from_spec(model_cls, model_keys - mech_params, spec, "model")
    mechanism = build_from_spec(mech_cls, mech_keys - model_params, spec, "mechanism")
    mechanism.check_model(model)
    if (
        "calibration" in unit_params(mech_cls)
        and mechanism.calibration is None
        and model.gradient_sparsity() is not None
    ):
        # Recorded, so that the default and an explicit "sparse" key the same stream.
        mechanism = dataclasses.replace(mechanism, calibration="sparse")
    try:
        # A budget whose noise scale or variance overflows float64 is refused first:
        # params itself may divide by zero there (randomized response's 1 - 2q).
        mechanism.check_constants(model)
        mechanism.params(model)  # its calibration needs the model's sensitivity
    except NotImplementedError as exc:
        raise ValueError(
            f"The mechanism {mechanism.name!r} cannot be calibrated for model {model.name!r}: "
            f"{exc}; choose another mechanism."
        ) from None
    for message in mechanism.outside_theory():
        warnings.warn(message, OutsideTheoryWarning, stacklevel=2)

    values = {**DEFAULTS, **spec}
    if "n" not in spec:
        raise ValueError("The 'n' key is required: an int in [2, 1e18].")
    n = check_int(values["n"], "n", low=2, high=MAX_N)
    c = check_float(values["c"], "c", low=0)
    gamma = check_float(values["gamma"], "gamma", low=0, high=1, high_open=False)
    if not 0.5 < gamma < 1.0:
        warnings.warn(
            f"gamma = {gamma} is outside (1/2, 1), where averaged SGD is asymptotically "
            "normal (Polyak & Juditsky 1992).",
            OutsideTheoryWarning,
            stacklevel=2,
        )
    if "theta0" in spec:
        theta0 = check_vector(spec["theta0"], "theta0", model.dim)
    else:
        theta0 = tuple(float(v) for v in model.default_theta0())
    batch = check_int(values["batch"], "batch", low=1, high=10**6)
    level = check_float(values["level"], "level", low=0, high=1)
    seed = check_int(values["seed"], "seed", low=0, high=2**63 - 1)
    backend = check_choice(values["backend"], "backend", BACKENDS)

    raw_methods = values["methods"]
    if not isinstance(raw_methods, Mapping) or not raw_methods:
        raise TypeError(
            f"The 'methods' parameter must be a non-empty mapping label -> parameters, "
            f"labels from {', '.join(plugins.registry('method'))}. Got {raw_methods!r}."
        )
    methods = build_methods(raw_methods)
    for label, method in methods.items():
        check_constraint(label, method, model)

    checkpoints = None
    if spec.get("checkpoints") is not None:
        raw = spec["checkpoints"]
        if not isinstance(raw, list | tuple) or not raw:
            raise TypeError(
                f"The 'checkpoints' parameter must be a non-empty list of ints in [1, {n}]. "
                f"Got {raw!r}."
            )
        points = [check_int(p, "checkpoints", low=1, high=n) for p in raw]
        check_distinct(raw, "The 'checkpoints' parameter")
        checkpoints = tuple(sorted(set(points) | {n}))

    for label, method in methods.items():
        method.check(n, gamma)
        method.check_setup(model, mechanism, n, batch)
        if method.own_estimate and checkpoints is not None:
            raise ValueError(
                f"The method {label!r} ({method.name}) computes its own estimate from the "
                "users and is taken at n only; it cannot be combined with 'checkpoints'. "
                "Run it in a sweep without checkpoints."
            )

    if backend == "gpu":
        from ldpsim.tasks.gpu.units import gpu_refusal

        refusal = gpu_refusal(model, mechanism, methods)
        if refusal is not None:
            raise ValueError(refusal)

    return ReplicateSpec(
        model=model,
        mechanism=mechanism,
        n=n,
        c=c,
        gamma=gamma,
        theta0=theta0,
        batch=batch,
        methods=methods,
        level=level,
        seed=seed,
        checkpoints=checkpoints,
        backend=backend,
    )
