"""The gradients at the corners of each built-in model's data range, for the
sensitivity tests and the privacy audits."""

import itertools

import numpy as np

from ldpsim.tasks import models


def corner_gradients(model):
    """Every gradient at the corners of the data's range (theta = 0 for the mean).

    The gradient set is, for each value of the model's residual sign, a box (a linear
    image of the covariates' box), so both norms of g - g' are largest at corners.
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
