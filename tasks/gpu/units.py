"""The GPU backend's models and mechanisms: their callbacks as CUDA device functions.

The GPU kernel (:mod:`ldpsim.tasks.gpu.kernel`) calls a model's gradient and a
mechanism's privatization as the CPU kernel does, with the same signatures
(``sample_gradient(d, theta, params, s, g) -> s``, ``privatize(d, g, params, s) -> s``)
and the same parameter vectors (``Model.params``, ``Mechanism.params``), but drawing
from the replicate's Philox stream (:mod:`ldpsim.tasks.streams.philox`) instead of PCG64. Each
function below is its CPU callback's arithmetic, line for line, with the draws
replaced, except where a cheaper draw has the same law (:func:`quantile_gradient`).

Only the units listed here run on the GPU: :func:`gpu_refusal` names the first part of
a spec that does not. A new model or mechanism gets its GPU callback here, next to the
others, and its name in :data:`GPU_MODELS` or :data:`GPU_MECHANISMS`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from ldpsim.tasks.streams import philox

_SQRT_HALF = math.sqrt(0.5)
#: How far the single-precision Phi of :func:`quantile_gradient` may lie from the
#: double's: 2^-16. libdevice's erfcf is within 4 ulp (CUDA Math API: 2^-21 for values
#: below 2, 2^-22 once halved), the input's rounding to single adds at most
#: 2^-24 phi(x) |x| < 2^-26: so the true gap is below 2^-21, a 32nd of the margin.
PHI_MARGIN = 2.0**-16
_TWO_52 = 2.0**52
_TWO_M52 = 2.0**-52


@cuda.jit(device=True)
def quantile_gradient(d, theta, params, s, g):
    """:class:`ldpsim.tasks.models.quantile.Quantile`: g = 1{X <= theta} - tau, X ~ N(loc, 1).

    Only the comparison's outcome enters the gradient, and 1{X <= theta} is Bernoulli
    with p = Phi(theta - loc): so it is drawn as 1{U < p} with one uniform U
    (:func:`ldpsim.tasks.streams.philox.random`), the same law, instead of a normal (a
    logarithm, a square root, a sine and a cosine). p = erfc((loc - theta) / sqrt 2) / 2
    is first evaluated in single precision, which is within :data:`PHI_MARGIN` of the
    double's; only a U closer than that to it (about 3 steps in 100,000) needs the
    double's erfc. Either way 1{U < p} is decided as the double's p decides it.
    """
    u, s = philox.random(s)
    x = (params[1] - theta[0]) * _SQRT_HALF
    rough = 0.5 * float(math.erfc(np.float32(x)))
    if u < rough - PHI_MARGIN:
        below = True
    elif u > rough + PHI_MARGIN:
        below = False
    else:
        below = u < 0.5 * math.erfc(x)
    g[0] = params[3] if below else params[2]
    return s


@cuda.jit(device=True)
def mean_gradient(d, theta, params, s, g):
    """:class:`ldpsim.tasks.models.mean.Mean`: g = theta - X, X_j ~ N(loc, 1) truncated."""
    for j in range(d):
        z, s = philox.standard_normal(s)
        x = params[0] + z
        while x < params[1] or x > params[2]:
            z, s = philox.standard_normal(s)
            x = params[0] + z
        g[j] = theta[j] - x
    return s


@cuda.jit(device=True)
def quantile_regression_gradient(d, theta, params, s, g):
    """:class:`ldpsim.tasks.models.quantile_regression.QuantileRegression`."""
    tau = params[0]
    resid = 0.0
    g[0] = 1.0
    for j in range(1, d):
        z, s = philox.standard_normal(s)
        while abs(z) > 1.0:
            z, s = philox.standard_normal(s)
        g[j] = z
    xi, s = philox.standard_normal(s)
    e = xi - params[1]
    for j in range(d):
        resid += g[j] * (params[2 + j] - theta[j])
    resid += e
    w = (1.0 if resid <= 0.0 else 0.0) - tau
    for j in range(d):
        g[j] *= w
    return s


@cuda.jit(device=True)
def randomized_response(d, g, params, s):
    """:class:`ldpsim.tasks.mechanisms.randomized_response.RandomizedResponse`.

    The uniforms are (2k + 1) 2^-53, k < 2^52, never 0: ``u < q`` would flip with
    probability q rounded to the nearest 2^-52, and never once q < 2^-53 (eps > 36.7: no
    privacy at all). ``u < ceil(q 2^52) 2^-52`` (exact: scaling by 2^52 and rounding up are)
    flips with probability ceil(q 2^52) / 2^52, q rounded up: never less private than
    eps claims, and ``u < q``'s draw but at one k in 2^52.
    """
    u, s = philox.random(s)
    scaled = params[0] * _TWO_52  # in [0, 2^51]: its integer part is exact
    steps = float(int(scaled))
    if steps < scaled:
        steps += 1.0
    flip = u < steps * _TWO_M52
    bit = g[0] > 0.5 * (params[1] + params[2])
    g[0] = params[5] if bit != flip else params[4]
    return s


@cuda.jit(device=True)
def laplace(d, g, params, s):
    """:class:`ldpsim.tasks.mechanisms.laplace.Laplace`: iid Laplace(0, params[0])."""
    scale = params[0]
    if scale > 0.0:
        for j in range(d):
            noise, s = philox.laplace(s, scale)
            g[j] += noise
    return s


@cuda.jit(device=True)
def gaussian(d, g, params, s):
    """:class:`ldpsim.tasks.mechanisms.gaussian.Gaussian` and ``GaussianDP``: iid N(0, sd^2)."""
    sd = params[0]
    if sd > 0.0:
        for j in range(d):
            z, s = philox.standard_normal(s)
            g[j] += sd * z
    return s


#: Model name -> its GPU gradient callback.
GPU_MODELS = {
    "quantile": quantile_gradient,
    "quantile_regression": quantile_regression_gradient,
    "mean": mean_gradient,
}
#: Mechanism name -> its GPU privatization callback (fixed budgets only).
GPU_MECHANISMS = {
    "randomized_response": randomized_response,
    "laplace": laplace,
    "gaussian": gaussian,
    "gdp": gaussian,
}


def gpu_refusal(model, mechanism, methods) -> str | None:
    """Why a grid point cannot run on the GPU backend, or None when it can.

    Parameters
    ----------
    model, mechanism : Model, Mechanism
        The grid point's units (built-in units only: a plugin of the same name is
        another unit).
    methods : mapping label -> IntervalMethod
        Its interval methods: those that replay the users (``own_estimate``) need the
        CPU's streams.
    """
    if GPU_MODELS.get(model.name) is None or not _builtin(model):
        return f"model {model.name} has no GPU kernel; run it with backend = cpu"
    if GPU_MECHANISMS.get(mechanism.name) is None or not _builtin(mechanism):
        return f"mechanism {mechanism.name} has no GPU kernel; run it with backend = cpu"
    if mechanism.budget_range is not None:
        return (
            f"mechanism {mechanism.name} with a budget_range (per-user budgets) has no GPU "
            "kernel; run it with backend = cpu"
        )
    for label, method in methods.items():
        if method.own_estimate:
            return (
                f"method {label} ({method.name}) replays the users from the CPU's streams "
                "and has no GPU form; run it with backend = cpu"
            )
    return None


def _builtin(unit: object) -> bool:
    return type(unit).__module__.startswith("ldpsim.tasks.")
