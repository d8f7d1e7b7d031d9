"""The gradients at the corners of each built-in model's data range, for the
sensitivity tests and the privacy audits."""

import itertools
import math

import numpy as np
from scipy import optimize

from ldpsim.tasks import models


def corner_gradients(model):
    """Every gradient at the corners of the data's range (theta = 0 for the means).

    The gradient set is, for each value of the model's residual sign, a box (a linear
    image of the covariates' box), so both norms of g - g' are largest at corners. For
    the regressions with Gaussian covariates (logistic, Huber; d = 1 only) the "corners"
    are the points of the closure of the gradient set (over all data and theta) that are
    farthest apart in l1 and in l2, which need not be the same pair
    (:func:`logistic_corners`, :func:`huber_corners`).
    """
    if isinstance(model, models.Quantile):
        return np.array([[-model.tau], [1 - model.tau]])
    if isinstance(model, models.QuantileRegression):
        signs = itertools.product((-1.0, 1.0), repeat=model.dim - 1)
        corners = [np.array([1.0, *s]) for s in signs]
        return np.array([w * x for w in (1 - model.tau, -model.tau) for x in corners])
    if isinstance(model, models.Mean):
        box = (model.loc - 1.0, model.loc + 1.0)
        return -np.array(list(itertools.product(box, repeat=model.dim)))
    if isinstance(model, models.BoundedMean):
        # g = theta - x with x in [0, 1]: at theta = 0 the ends x = 0 and x = 1.
        return -np.array([[0.0], [1.0]])
    if isinstance(model, models.LogisticRegression):
        return logistic_corners(model)
    if isinstance(model, models.HuberRegression):
        return huber_corners(model)
    if isinstance(model, models.SparseMean):
        return -sparse_vectors(model.dim, model.sparsity, model.magnitude)
    if isinstance(model, models.OneHotQuantileRegression):
        unit = np.eye(model.dim)
        return np.array(
            [w * unit[c] for w in (1 - model.tau, -model.tau) for c in range(model.dim)]
        )
    raise AssertionError(f"no corners for {model.name}")


def sparse_vectors(d, sparsity, magnitude):
    """Every vector with ``sparsity`` coordinates +-magnitude and zeros elsewhere."""
    out = []
    for support in itertools.combinations(range(d), sparsity):
        for signs in itertools.product((-1.0, 1.0), repeat=sparsity):
            x = np.zeros(d)
            x[list(support)] = magnitude * np.array(signs)
            out.append(x)
    return np.array(out)


def logistic_corners(model):
    """Sup points of logistic regression's gradient set at d = 1: x = (1, z), theta = (a, b).

    Mallows: g = w r x with w = min(1, 2 / ||x||^2) and residual r = s(x'theta) - y in
    (-1, 1). ||w x||_2 = sqrt(1 + z^2) <= sqrt 2 for |z| <= 1 and 2 / sqrt(1 + z^2) <
    sqrt 2 beyond; ||w x||_1 = 1 + |z| <= 2, and 2 (1 + |z|) / (1 + z^2) < 2 for |z| > 1.
    Both are largest at z = +-1, so the sup points are r (1, +-1) with r -> +-1: l2
    diameter 2 sqrt 2 = Delta2 and l1 diameter 4 = Delta1 = sqrt(2) Delta2, both tight.
    They are limits, not gradients: at one theta the residuals of the same x differ by
    exactly 1, and r -> 1 at x = (1, 1) with r' -> -1 at x' = (1, 1 - t) needs b -> inf
    (a = -b (1 - t / 2)) with t -> 0: the sup over theta, which Delta must cover.

    Clip C: the clipped gradient of |r| ||x|| > C is C sign(r) x / ||x||, on the sphere
    of radius C, whose l1 norm C (1 + |z|) / sqrt(1 + z^2) is largest (C sqrt 2) at
    z = +-1. At theta = 0 (r = +-1/2) and x = (1, +-1) this is attained for C < sqrt(2) / 2
    (the audited C = 0.5): l2 diameter 2C = Delta2, l1 diameter 2 sqrt(2) C = Delta1.
    """
    assert model.d == 1, "corners derived for d = 1 only"
    corners = [np.array([1.0, z]) for z in (1.0, -1.0)]
    if model.clip is None:
        return np.array([r * x for r in (1.0, -1.0) for x in corners])
    assert model.clip < math.sqrt(2.0) / 2, "attained at theta = 0 for C < sqrt(2) / 2"
    return np.array([r * model.clip * x / math.sqrt(2.0) for r in (1.0, -1.0) for x in corners])


def huber_raw_gradient(model, psi, z):
    """Huber's unweighted, unclipped gradient (-psi x, (kappa - psi^2) / 2), x = (1, z)."""
    return np.array([-psi, -psi * z, 0.5 * (model.kappa() - psi * psi)])


def huber_corners(model):
    """Sup points of Huber regression's gradient set at d = 1: x = (1, z), psi in [-c, c].

    Every psi in [-c, c] is reached at every theta (the errors are normal), so the set
    does not depend on theta and these points are gradients (no limits needed).

    Mallows: g = w (-psi x, (kappa - psi^2) / 2). The sup points are psi = +-c at
    x = (1, +-1) (w = 1), where ||w psi x|| = c sqrt 2 is largest and the scale parts
    agree: l2 diameter 2 sqrt(2) c (3.804 at c = 1.345), below Delta2 = sqrt(8 c^2 +
    c^4 / 4) = 3.910, the bound that adds the scale part's range c^2 / 2 as if it were
    reached at the same pair (it is not: at psi, psi' = +-c it is 0, and e.g. at x = x' =
    (1, 1) with psi = c, psi' = -t, t in [0, c], the squared distance 2 (c + t)^2 +
    (c^2 - t^2)^2 / 4 grows with t for c < 4); l1 diameter 4 c (5.38) < Delta1 =
    sqrt(3) Delta2 (6.773). Both conservative. Found by a multi-start optimization over
    (psi, z, psi', z') when derived; test_regression_corners_are_the_sup_points checks
    them on a grid.

    Clip C (weights none), for the audited C = 1 < c: the raw gradient at psi = +-sqrt(kappa)
    has scale part 0 and, at x = (1, 1), norm sqrt(2 kappa) = 1.19 > C, so it is clipped
    to +-C (1, 1, 0) / sqrt 2: l2 diameter 2C = Delta2, attained. Its l1 distance
    2 sqrt(2) C is not the l1 diameter, which is 3.2085 (< Delta1 = 2 sqrt(3) C = 3.464):
    in the direction s = (1, 1, 1), min s'g is at psi = c, z = m^2 / (k c) on the sphere
    (k = c + a, m^2 = c^2 + a^2, a = (c^2 - kappa) / 2: value -C sqrt(k^2 + m^2) / m) and
    max s'g at psi < 0 on the curve where the raw norm is C (found by a 1-D search).
    Both pairs are returned. The l1 pair agrees with a multi-start optimization over
    (psi, z, psi', z') to 1e-15; test_regression_corners_are_the_sup_points checks both
    on a grid.
    """
    assert model.d == 1, "corners derived for d = 1 only"
    c, kappa = model.huber_c, model.kappa()
    if model.clip is None:
        return np.array([huber_raw_gradient(model, p, z) for p in (c, -c) for z in (1.0, -1.0)])
    clip = model.clip
    # The derivation below assumes C < c, sqrt(2 kappa) > C (the l2 pair is clipped) and
    # kappa + kappa^2 / 4 <= C^2 (for psi^2 <= kappa the raw norm at z = 0 is <= C).
    assert clip < c and 2.0 * kappa > clip**2 and kappa + kappa**2 / 4 <= clip**2
    l2_pair = [r * clip * np.array([1.0, 1.0, 0.0]) / math.sqrt(2.0) for r in (1.0, -1.0)]
    a = 0.5 * (c * c - kappa)
    low = huber_raw_gradient(model, c, (c * c + a * a) / ((c + a) * c))
    low *= clip / np.linalg.norm(low)

    def on_boundary(psi):  # the z >= 0 at which the raw norm at (psi, z) is C
        return math.sqrt((clip**2 - 0.25 * (kappa - psi * psi) ** 2) / (psi * psi) - 1.0)

    def minus_value(psi):
        return -float(np.sum(huber_raw_gradient(model, psi, on_boundary(psi))))

    found = optimize.minimize_scalar(
        minus_value, bounds=(-math.sqrt(kappa), -1e-3), method="bounded", options={"xatol": 1e-12}
    )
    high = huber_raw_gradient(model, found.x, on_boundary(found.x))
    return np.array([*l2_pair, low, high])
