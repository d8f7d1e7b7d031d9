"""The Jacobian G of a model's mean gradient by simulation, for the model tests."""

import math

import numpy as np


def jacobian_by_simulation(model, theta, n, seed, h=0.02):
    """Central differences of the mean gradient on common random numbers, and their se."""
    p = model.dim
    jac, se = np.empty((p, p)), np.empty((p, p))
    for j in range(p):
        step = np.zeros(p)
        step[j] = h
        quotient = (
            model.sample_gradients(theta + step, n, seed)
            - model.sample_gradients(theta - step, n, seed)
        ) / (2 * h)
        jac[:, j] = quotient.mean(axis=0)
        se[:, j] = quotient.std(axis=0, ddof=1) / math.sqrt(n)
    return jac, se
