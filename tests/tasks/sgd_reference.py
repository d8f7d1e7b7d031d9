"""Plain-Python LDP-SGD, the naive reference the compiled kernel is tested against.

Every model's sampler and every mechanism is rewritten here as a Python function of
Python floats, drawing from a ``numpy.random.Generator`` in the order the SPEC
describes (data first, then the privacy noise, coordinate by coordinate). The
constants (tau, Phi^-1(tau), the RR flip probability and debiasing scale, the Laplace
scale) are taken from the units' ``params`` vectors, which the model and mechanism
tests check against the SPEC's closed forms.
"""

from __future__ import annotations

import math

import numpy as np
from ldpsim.tasks.sgd import eta_schedule
from ldpsim.tasks.spec import ReplicateSpec
from numba.np.random._constants import fe_double, ke_double, we_double, ziggurat_exp_r

KE = [int(v) for v in ke_double]
WE = [float(v) for v in we_double]
FE = [float(v) for v in fe_double]
ZIGGURAT_EXP_R = float(ziggurat_exp_r)


def quantile_gradient(theta, params, rng, g):
    # SPEC 3.1: X ~ N(loc, 1), g = 1{X <= theta} - tau.
    tau, loc = params[0], params[1]
    x = loc + rng.standard_normal()
    g[0] = (1.0 if x <= theta[0] else 0.0) - tau


def quantile_regression_gradient(theta, params, rng, g):
    # SPEC 3.2: x = (1, Z_1..Z_{d-1}), Z_j ~ N(0,1) truncated to [-1, 1] (rejection),
    # y = x'coef + xi - Phi^-1(tau); g = (1{y - x'theta <= 0} - tau) x.
    tau, ppf_tau, coef = params[0], params[1], params[2:]
    d = len(theta)
    x = [1.0]
    for _ in range(1, d):
        z = rng.standard_normal()
        while abs(z) > 1.0:
            z = rng.standard_normal()
        x.append(z)
    e = rng.standard_normal() - ppf_tau
    resid = 0.0  # y - x'theta = x'(coef - theta) + e
    for j in range(d):
        resid += x[j] * (coef[j] - theta[j])
    resid += e
    w = (1.0 if resid <= 0.0 else 0.0) - tau
    for j in range(d):
        g[j] = x[j] * w


def mean_gradient(theta, params, rng, g):
    # SPEC 3.3: X_j ~ N(loc, 1) truncated to [low, high] (rejection), g = theta - X.
    loc, low, high = params[0], params[1], params[2]
    for j in range(len(theta)):
        x = loc + rng.standard_normal()
        while x < low or x > high:
            x = loc + rng.standard_normal()
        g[j] = theta[j] - x


def randomized_response(g, params, rng):
    # Keep the bit with probability p = 1 - q, report lo + (hi - lo)(btilde - q)/(2p - 1).
    q, lo, hi, scale = params[:4]
    bit = 1.0 if g[0] == hi else 0.0
    if rng.random() < q:
        bit = 1.0 - bit
    g[0] = lo + scale * (bit - q)


def standard_exponential(rng, word):
    # numpy's exponential ziggurat (random_standard_exponential), whose first 64-bit word
    # ``word`` has been drawn already; tables from numba's copy of numpy's.
    while True:
        r = word >> 3
        idx = r & 0xFF
        r >>= 8
        x = r * WE[idx]
        if r < KE[idx]:
            return x
        u = (int(rng.bit_generator.random_raw()) >> 11) * 2.0**-53
        if idx == 0:
            return ZIGGURAT_EXP_R - math.log1p(-u)
        if (FE[idx - 1] - FE[idx]) * u + FE[idx] < math.exp(-x):
            return x
        word = int(rng.bit_generator.random_raw())


def laplace(g, params, rng):
    # Laplace(0, scale) as a random sign (bit 0 of the word) times numpy's exponential.
    scale = params[0]
    if scale > 0.0:
        for j in range(len(g)):
            word = int(rng.bit_generator.random_raw())
            e = standard_exponential(rng, word)
            g[j] += 0.0 + (-scale if word & 1 else scale) * e


def numpy_laplace(g, params, rng):
    # numpy's own inverse-CDF sampler: other numbers than the kernel's, but the fastest
    # plain-Python form of the mechanism (the benchmark's Python baseline uses it).
    scale = params[0]
    if scale > 0.0:
        for j in range(len(g)):
            g[j] += rng.laplace(0.0, scale)


def no_privacy(g, params, rng):
    pass


GRADIENTS = {
    "quantile": quantile_gradient,
    "quantile_regression": quantile_regression_gradient,
    "mean": mean_gradient,
}
PRIVATIZERS = {"randomized_response": randomized_response, "laplace": laplace, "none": no_privacy}
#: The fastest plain-Python privatizers (numpy's Laplace sampler), for timings only.
FASTEST_PRIVATIZERS = {**PRIVATIZERS, "laplace": numpy_laplace}


def reference_path(
    rs: ReplicateSpec, rng: np.random.Generator, privatizers=PRIVATIZERS
) -> np.ndarray:
    """All iterates theta_1..theta_n of LDP-SGD (SPEC 2) as an (n, d) array.

    theta_i = theta_{i-1} - eta_i ghat_i with eta_i from :func:`ldpsim.tasks.sgd.eta_schedule`
    and ghat_i the mean of ``rs.batch`` privatized gradients at theta_{i-1}.
    """
    model, mechanism = rs.model, rs.mechanism
    sample = GRADIENTS[model.name]
    privatize = privatizers[mechanism.name]
    model_params = [float(v) for v in model.params()]
    mech_params = [float(v) for v in mechanism.params(model)]
    d = model.dim
    eta = eta_schedule(rs.n, rs.c, rs.gamma).tolist()
    theta = [float(v) for v in rs.theta0]
    path = np.empty((rs.n, d))
    g = [0.0] * d
    for i in range(rs.n):
        if rs.batch == 1:
            sample(theta, model_params, rng, g)
            privatize(g, mech_params, rng)
        else:
            gsum = [0.0] * d
            for _ in range(rs.batch):
                sample(theta, model_params, rng, g)
                privatize(g, mech_params, rng)
                for j in range(d):
                    gsum[j] += g[j]
            g = [gsum[j] / rs.batch for j in range(d)]
        for j in range(d):
            theta[j] -= eta[i] * g[j]
        path[i] = theta
    return path
