"""Plain-Python LDP-SGD, the naive reference the compiled kernel is tested against.

Every model's sampler and every mechanism is rewritten here as a Python function of
Python floats, drawing from a ``numpy.random.Generator`` in the order the SPEC
describes (data first, then the privacy noise, coordinate by coordinate). The
constants (tau, Phi^-1(tau), the RR flip probability and debiasing scale, the Laplace
scale, the Gaussian sd) are taken from the units' ``params`` vectors, which the model and mechanism
tests check against the SPEC's closed forms.
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from ldpsim.tasks.kernel.step_sizes import eta_schedule
from ldpsim.tasks.spec import ReplicateSpec
from ldpsim.tasks.streams import ziggurat

# The shipped tables as Python ints and floats.
KI = [int(v) for v in ziggurat.ki_double]
WI = [float(v) for v in ziggurat.wi_double]
FI = [float(v) for v in ziggurat.fi_double]
KE = [int(v) for v in ziggurat.ke_double]
WE = [float(v) for v in ziggurat.we_double]
FE = [float(v) for v in ziggurat.fe_double]
ZIGGURAT_NOR_R = ziggurat.ziggurat_nor_r
ZIGGURAT_NOR_INV_R = ziggurat.ziggurat_nor_inv_r
ZIGGURAT_EXP_R = ziggurat.ziggurat_exp_r


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


def covariates(p, rng):
    # SPEC 9.2: x = (1, z), z ~ N(0, I); returns x and ||x||^2 accumulated in order.
    x = [1.0]
    sq = 1.0
    for _ in range(1, p):
        z = rng.standard_normal()
        x.append(z)
        sq += z * z
    return x, sq


def mallows(sq):
    return 1.0 if sq <= 2.0 else 2.0 / sq


def clip(g, c):
    # SPEC 9.5: g <- g min(1, C / ||g||_2).
    norm = math.sqrt(sum(v * v for v in g))
    if norm > c:
        factor = c / norm
        for j in range(len(g)):
            g[j] *= factor


def huber_gradient(theta, params, rng, g):
    # SPEC 9.3: y = x'1 + sigma* xi; u = (y - x'beta) / sigma, psi = clip(u, -c, c);
    # g_beta = -w psi x, g_sigma = w (kappa - psi^2) / 2; then clipped if C > 0.
    c, kappa, sigma_true, use_mallows, c_clip = params[:5]
    p = len(theta)
    x, sq = covariates(p - 1, rng)
    e = sigma_true * rng.standard_normal()
    resid = 0.0
    for j in range(p - 1):
        resid += x[j] * (1.0 - theta[j])
    resid += e
    scale = theta[p - 1] if theta[p - 1] >= 1e-3 else 1e-3
    u = resid / scale
    psi = c if u > c else (-c if u < -c else u)
    w = mallows(sq) if use_mallows > 0.0 else 1.0
    a = w * psi
    for j in range(p - 1):
        g[j] = -a * x[j]
    g[p - 1] = 0.5 * w * (kappa - psi * psi)
    if c_clip > 0.0:
        clip(g, c_clip)


def huber_project(j, value, p):
    # sigma (the last coordinate) is floored at 1e-3 after every step.
    return 1e-3 if j == p - 1 and value < 1e-3 else value


def logistic_gradient(theta, params, rng, g):
    # SPEC 9.4: y ~ Bernoulli(s(x'1)) by a uniform draw; g = w (s(x'theta) - y) x.
    use_mallows, c_clip = params[:2]
    p = len(theta)
    x, sq = covariates(p, rng)
    t = 0.0
    t_true = 0.0
    for j in range(p):
        t += x[j] * theta[j]
        t_true += x[j]
    y = 1.0 if rng.random() < 1.0 / (1.0 + math.exp(-t_true)) else 0.0
    r = 1.0 / (1.0 + math.exp(-t)) - y
    if use_mallows > 0.0:
        r = r * mallows(sq)
    for j in range(p):
        g[j] = x[j] * r
    if c_clip > 0.0:
        clip(g, c_clip)


def sparse_mean_gradient(theta, params, rng, g):
    # SPEC 11: the support by Floyd's algorithm (an index uniform on 0..top from one
    # uniform, one already chosen replaced by top), each chosen X_j = +-M with
    # P(+M) = params[2 + j]; g = theta - X.
    d, m, size = len(theta), params[0], int(params[1])
    x = [0.0] * d
    for top in range(d - size, d):
        j = int(rng.random() * (top + 1))
        if x[j] != 0.0:
            j = top
        x[j] = m if rng.random() < params[2 + j] else -m
    for j in range(d):
        g[j] = theta[j] - x[j]


def one_hot_quantile_regression_gradient(theta, params, rng, g):
    # SPEC 11: C = the first j with u < F_j (F cumulative probabilities), then
    # y = coef_C + xi - Phi^-1(tau); g = (1{y <= theta_C} - tau) e_C.
    d, tau = len(theta), params[0]
    c = bisect.bisect_right(params[2 : 2 + d], rng.random())
    y = params[2 + d + c] + rng.standard_normal() - params[1]
    for j in range(d):
        g[j] = 0.0
    g[c] = (1.0 if y <= theta[c] else 0.0) - tau


def randomized_response(g, params, rng):
    # Keep the bit with probability p = 1 - q, report lo + (hi - lo)(btilde - q)/(2p - 1).
    q, lo, hi, scale = params[:4]
    bit = 1.0 if g[0] == hi else 0.0
    if not isinstance(rng, np.random.Generator):  # the GPU's: q rounded up to 2^-52
        q_drawn = math.ceil(q * 2.0**52) * 2.0**-52
    else:
        q_drawn = q
    if rng.random() < q_drawn:
        bit = 1.0 - bit
    g[0] = lo + scale * (bit - q)


def next_double(rng):
    # numpy's next_double: the top 53 bits of one 64-bit word, scaled to [0, 1).
    return (int(rng.bit_generator.random_raw()) >> 11) * 2.0**-53


def standard_normal(rng, paths=None):
    # numpy's normal ziggurat (random_standard_normal) on the shipped tables. ``paths``,
    # a Counter if given, counts the draws by the way they ended: "fast" (inside a
    # rectangle), "wedge" (accepted in a layer's wedge) or "tail" (beyond r).
    while True:
        r = int(rng.bit_generator.random_raw())
        idx = r & 0xFF
        r >>= 8
        rabs = (r >> 1) & 0x000FFFFFFFFFFFFF
        x = rabs * WI[idx]
        if r & 1:
            x = -x
        if rabs < KI[idx]:
            way = "fast"
            break
        if idx == 0:
            while True:
                xx = -ZIGGURAT_NOR_INV_R * math.log1p(-next_double(rng))
                yy = -math.log1p(-next_double(rng))
                if yy + yy > xx * xx:
                    x = -(ZIGGURAT_NOR_R + xx) if (rabs >> 8) & 1 else ZIGGURAT_NOR_R + xx
                    break
            way = "tail"
            break
        if (FI[idx - 1] - FI[idx]) * next_double(rng) + FI[idx] < math.exp(-0.5 * x * x):
            way = "wedge"
            break
    if paths is not None:
        paths[way] += 1
    return x


def standard_exponential(rng, word, paths=None):
    # numpy's exponential ziggurat (random_standard_exponential) on the shipped tables,
    # whose first 64-bit word ``word`` has been drawn already; ``paths`` as for
    # standard_normal.
    while True:
        r = word >> 3
        idx = r & 0xFF
        r >>= 8
        x = r * WE[idx]
        if r < KE[idx]:
            way = "fast"
            break
        u = next_double(rng)
        if idx == 0:
            x = ZIGGURAT_EXP_R - math.log1p(-u)
            way = "tail"
            break
        if (FE[idx - 1] - FE[idx]) * u + FE[idx] < math.exp(-x):
            way = "wedge"
            break
        word = int(rng.bit_generator.random_raw())
    if paths is not None:
        paths[way] += 1
    return x


def laplace(g, params, rng):
    # Laplace(0, scale) as a random sign (bit 0 of the word) times numpy's exponential.
    scale = params[0]
    if scale > 0.0:
        for j in range(len(g)):
            word = int(rng.bit_generator.random_raw())
            e = standard_exponential(rng, word)
            g[j] += 0.0 + (-scale if word & 1 else scale) * e


def budget(low, width, rng):
    # A user's budget Uniform(low, low + width), drawn before that user's noise.
    return low + width * rng.random()


def laplace_per_user(g, params, rng):
    eps = budget(params[1], params[2], rng)
    laplace(g, [params[0] / eps], rng)


def randomized_response_per_user(g, params, rng):
    # The user's eps first, then the flip with q = e^-eps / (1 + e^-eps), debiased with q.
    lo, hi = params[0], params[1]
    eps = budget(params[2], params[3], rng)
    e = math.exp(-eps)
    q = e / (1.0 + e)
    flip = rng.random() < q
    bit = g[0] > 0.5 * (lo + hi)
    reported = 1.0 if bit != flip else 0.0
    g[0] = lo + (hi - lo) * (reported - q) / (1.0 - 2.0 * q)


def gaussian(g, params, rng):
    # iid N(0, sd^2) on every coordinate (gaussian and gdp differ only in the sd).
    sd = params[0]
    if sd > 0.0:
        for j in range(len(g)):
            g[j] += sd * rng.standard_normal()


def gaussian_per_user(g, params, rng):
    b = budget(params[1], params[2], rng)
    gaussian(g, [params[0] / b], rng)


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
    "huber_regression": huber_gradient,
    "logistic_regression": logistic_gradient,
    "sparse_mean": sparse_mean_gradient,
    "one_hot_quantile_regression": one_hot_quantile_regression_gradient,
}
#: Projections of the iterate after each step, for the models that have one.
PROJECTIONS = {"huber_regression": huber_project}
#: Keyed by mechanism name, and "name:per_user" for per-user budgets (budget_range).
PRIVATIZERS = {
    "randomized_response": randomized_response,
    "laplace": laplace,
    "gaussian": gaussian,
    "gdp": gaussian,
    "none": no_privacy,
    "randomized_response:per_user": randomized_response_per_user,
    "laplace:per_user": laplace_per_user,
    "gaussian:per_user": gaussian_per_user,
    "gdp:per_user": gaussian_per_user,
}
#: The fastest plain-Python privatizers (numpy's Laplace sampler), for timings only.
FASTEST_PRIVATIZERS = {**PRIVATIZERS, "laplace": numpy_laplace}


def reference_path(
    rs: ReplicateSpec,
    rng: np.random.Generator,
    privatizers=PRIVATIZERS,
    gradients=GRADIENTS,
    eta: list[float] | None = None,
) -> np.ndarray:
    """All iterates theta_1..theta_n of LDP-SGD (SPEC 2) as an (n, d) array.

    theta_i = P(theta_{i-1} - eta_i ghat_i) with eta_i from
    :func:`ldpsim.tasks.kernel.step_sizes.eta_schedule` (or ``eta``, the list eta_1..eta_n),
    ghat_i the mean of ``rs.batch`` privatized gradients at theta_{i-1} and P the
    model's projection (if any).
    """
    model, mechanism = rs.model, rs.mechanism
    sample = gradients[model.name]
    project = PROJECTIONS.get(model.name)
    per_user = ":per_user" if mechanism.budget_range is not None else ""
    privatize = privatizers[mechanism.name + per_user]
    model_params = [float(v) for v in model.params()]
    mech_params = [float(v) for v in mechanism.params(model)]
    d = model.dim
    eta = eta_schedule(rs.n, rs.c, rs.gamma).tolist() if eta is None else eta
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
            if project is not None:
                theta[j] = project(j, theta[j], d)
        path[i] = theta
    return path
