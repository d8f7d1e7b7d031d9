"""What the robust regressions of SPEC 9 share: covariates, weights, clipping, quadrature."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Literal

import numpy as np
from numba import njit

from ldpsim.tasks.lazy_import import lazy_module
from ldpsim.tasks.streams.rng import standard_normal
from ldpsim.tasks.validation import check_choice, check_float, check_int

integrate = lazy_module("scipy.integrate")
optimize = lazy_module("scipy.optimize")
special = lazy_module("scipy.special")
stats = lazy_module("scipy.stats")

#: Covariate weights: Mallows' w(x) = min(1, 2 / ||x||^2), or none (w = 1).
Weights = Literal["mallows", "none"]
WEIGHTS = ("mallows", "none")
#: Largest number of covariates d (the parameter has d + 1 or d + 2 coordinates).
MAX_COVARIATES = 62
#: Half-width of the range of a standard normal variable that the quadrature covers:
#: the mass beyond it, 2e-45, is far below its 1e-10 tolerance.
NORMAL_RANGE = 14.0
#: Gauss-Legendre nodes per panel, and panels between kinks, of the inner rule.
INNER_NODES = 24
INNER_PANELS = 6
#: Relative tolerance of the outer adaptive rule (scipy's quad_vec).
OUTER_RTOL = 1e-11


@njit(inline="always")  # not cached: numba would miss changes in tasks.rng
def draw_covariates(p, s, x):
    """x = (1, z), z ~ N(0, I) into ``x[0:p]``; returns (||x||^2, s)."""
    x[0] = 1.0
    sq = 1.0
    for j in range(1, p):
        z, s = standard_normal(s)
        x[j] = z
        sq += z * z
    return sq, s


@njit(inline="always")
def mallows_weight(sq):
    """Mallows' weight min(1, 2 / ||x||^2) of a covariate vector with ||x||^2 = ``sq``."""
    return 1.0 if sq <= 2.0 else 2.0 / sq


@njit(inline="always")
def clip_gradient(p, g, clip):
    """g <- g min(1, C / ||g||_2) in place for C = ``clip`` > 0 (Abadi et al. 2016)."""
    sq = 0.0
    for j in range(p):
        sq += g[j] * g[j]
    norm = math.sqrt(sq)
    if norm > clip:
        factor = clip / norm
        for j in range(p):
            g[j] *= factor


def check_regression_params(
    owner: str, d: object, weights: object, clip: object
) -> tuple[int, str, float | None]:
    """Validate ``d``, ``weights`` and ``clip`` of a section-9 regression; normalized.

    ``clip`` acts on the unweighted gradient (SPEC 9.5), so it needs weights = "none",
    and weights = "none" needs it: the unweighted gradient has no finite sensitivity.
    """
    d = check_int(d, "d", owner=owner, low=1, high=MAX_COVARIATES)
    weights = check_choice(weights, "weights", WEIGHTS, owner=owner)
    if clip is not None:
        clip = check_float(clip, "clip", owner=owner, low=0)
        if weights != "none":
            raise ValueError(
                f"The 'clip' parameter of {owner} clips the unweighted gradient: give "
                f"weights = 'none' with it. Got weights = {weights!r} and clip = {clip!r}."
            )
    elif weights == "none":
        raise ValueError(
            f"The 'clip' parameter of {owner} must be a float in (0, inf) when weights = "
            f"'none' (the unweighted gradient is unbounded: no noise scale makes it private). "
            f"Got None."
        )
    return d, weights, clip


def covariate_matrix(d: int, m0: float, m1: float, m2: float, mq: float) -> np.ndarray:
    """E[k x x'] for x = (1, z) from the scalars of :func:`expect` along a direction.

    With z = v e + z_perp, e = 1_d / sqrt(d), v = e'z ~ N(0, 1) and q = ||z_perp||^2:
    m0 = E k, m1 = E[k v], m2 = E[k v^2], mq = E[k q] / (d - 1) (0 for d = 1), so
    E[k x x'] = [[m0, m1 e'], [m1 e, m2 e e' + mq (I - e e')]].
    """
    e = np.full(d, 1.0 / math.sqrt(d))
    out = np.empty((d + 1, d + 1))
    out[0, 0] = m0
    out[0, 1:] = out[1:, 0] = m1 * e
    out[1:, 1:] = m2 * np.outer(e, e) + mq * (np.eye(d) - np.outer(e, e))
    return (out + out.T) / 2


def expect(
    integrand: Callable[[float, np.ndarray], np.ndarray],
    k: int,
    inner_kinks: Callable[[float], list[float]] | None = None,
    outer_points: list[float] | None = None,
    outer_sd: float = 1.0,
) -> np.ndarray:
    """E f(xi, rho) for independent xi ~ N(0, outer_sd^2) and rho ~ chi_k, by quadrature.

    Parameters
    ----------
    integrand : callable
        ``f(xi, rho)`` for a float ``xi`` and an array ``rho``: an array of shape
        (m, len(rho)), piecewise smooth in rho between the points of ``inner_kinks(xi)``.
    k : int
        Degrees of freedom of rho, >= 0 (0: rho = 0, a one-dimensional integral).
    inner_kinks : callable, optional
        ``xi -> list of rho^2`` where ``f`` or a derivative jumps (values outside
        (0, inf) are ignored). Also used to place the outer breakpoints: where one of
        them crosses 0, the inner integral's derivative jumps.
    outer_points : list of float, optional
        Further values of xi where ``f`` jumps.

    Returns
    -------
    ndarray, shape (m,)

    Notes
    -----
    The inner integral is a composite Gauss-Legendre rule on [0, sqrt(k) + 14] split at
    the kinks (exact on each smooth piece to about 1e-14); the outer one is scipy's
    adaptive ``quad_vec`` on [-14 sd, 14 sd] with the kinks as breakpoints, to a relative
    tolerance of 1e-11. Integrating against rho ~ chi_k, not q = rho^2 ~ chi2_k, keeps
    the density smooth at 0 for every k.
    """
    lo_nodes, lo_weights = np.polynomial.legendre.leggauss(INNER_NODES)
    rho_max = math.sqrt(k) + NORMAL_RANGE
    log_norm = (1.0 - k / 2.0) * math.log(2.0) - special.gammaln(k / 2.0) if k else 0.0

    def inner(xi: float) -> np.ndarray:
        if k == 0:
            return integrand(xi, np.zeros(1))[:, 0] * stats.norm.pdf(xi, scale=outer_sd)
        cuts = sorted(
            {0.0, rho_max}
            | {
                math.sqrt(q)
                for q in (inner_kinks(xi) if inner_kinks else [])
                if 0 < q < rho_max**2
            }
        )
        total = 0.0
        for a, b in itertools.pairwise(cuts):
            edges = np.linspace(a, b, INNER_PANELS + 1)
            half = (edges[1:] - edges[:-1])[:, None] / 2
            rho = ((edges[1:] + edges[:-1])[:, None] / 2 + half * lo_nodes).ravel()
            wts = (half * lo_weights).ravel()
            density = np.exp(log_norm + (k - 1) * np.log(rho) - rho * rho / 2)
            total = total + integrand(xi, rho) @ (wts * density)
        return total * stats.norm.pdf(xi, scale=outer_sd)

    limit = NORMAL_RANGE * outer_sd
    points = [p for p in (outer_points or []) if -limit < p < limit]
    if inner_kinks is not None:
        grid = np.linspace(-limit, limit, 4001)
        for index in range(len(inner_kinks(0.0))):

            def crossing(xi: float, index: int = index) -> float:
                return inner_kinks(xi)[index]

            values = np.array([crossing(xi) for xi in grid])
            for j in np.flatnonzero(np.sign(values[:-1]) * np.sign(values[1:]) < 0):
                points.append(optimize.brentq(crossing, grid[j], grid[j + 1], xtol=1e-14))
    value, _ = integrate.quad_vec(
        inner, -limit, limit, epsabs=0.0, epsrel=OUTER_RTOL, points=sorted(points) or None
    )
    return np.asarray(value)
