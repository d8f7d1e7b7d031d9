"""Euclidean projection onto an l1 ball (seed 003's projection step, SPEC 11)."""

from __future__ import annotations

import numpy as np


def project_l1_ball(v: np.ndarray, radius: float) -> np.ndarray:
    """The point of {x : ||x||_1 <= radius} closest to ``v`` in l2.

    Parameters
    ----------
    v : ndarray, shape (..., d)
        Points to project, finite; each row (last axis) separately.
    radius : float
        r > 0.

    Returns
    -------
    ndarray, the shape of ``v``
        ``v`` itself where ||v||_1 <= r; else sign(v) max(|v| - lambda, 0) with the
        threshold lambda > 0 that makes the l1 norm r (soft thresholding). O(d log d)
        per row (a sort); all rows in whole-array operations.

    References
    ----------
    Duchi, J., Shalev-Shwartz, S., Singer, Y. & Chandra, T. (2008). Efficient
    projections onto the l1-ball for learning in high dimensions. ICML, Figure 1.
    """
    v = np.asarray(v, dtype=np.float64)
    if not radius > 0:
        raise ValueError(f"The l1 ball's radius must be > 0. Got {radius!r}.")
    flat = v.reshape(-1, v.shape[-1])
    out = flat.copy()
    size = np.abs(flat)
    outside = np.flatnonzero(size.sum(axis=1) > radius)  # the others stay as they are
    if not len(outside):
        return out.reshape(v.shape)
    size = size[outside]
    ordered = np.sort(size, axis=1)[:, ::-1]
    cumulative = np.cumsum(ordered, axis=1) - radius
    ranks = np.arange(1, size.shape[1] + 1)
    # rho: the largest k with ordered[k-1] > (cumsum_k - r) / k; lambda from it.
    holds = ordered > cumulative / ranks
    rho = size.shape[1] - 1 - np.argmax(holds[:, ::-1], axis=1)
    rows = np.arange(len(outside))
    threshold = cumulative[rows, rho] / (rho + 1)
    projected = np.sign(flat[outside]) * np.maximum(size - threshold[:, None], 0.0)
    # k = 1 always holds (r > 0), but not in floating point where x_max - r rounds to
    # x_max (|v| beyond 2**53 r): lambda is then x_max - r, and the ball's point puts r
    # on the largest coordinates, shared where they tie.
    rounded = ~holds.any(axis=1)
    if rounded.any():
        largest = size[rounded] == ordered[rounded, :1]
        share = radius / largest.sum(axis=1, keepdims=True)
        projected[rounded] = np.sign(flat[outside[rounded]]) * np.where(largest, share, 0.0)
    out[outside] = projected
    return out.reshape(v.shape)


def intersect_with_ball(
    lower: np.ndarray, upper: np.ndarray, radius: float
) -> tuple[np.ndarray, np.ndarray]:
    """Each interval [lower_j, upper_j] cut to [-r, r], where ||theta*||_1 <= r puts theta*_j.

    Parameters
    ----------
    lower, upper : ndarray, shape (d,)
        Interval bounds, lower <= upper.
    radius : float
        r > 0, the radius of the l1 ball around 0 that holds theta*.

    Returns
    -------
    (lower, upper), each of shape (d,)
        Both bounds clipped to [-r, r]. An interval wholly outside [-r, r] (its
        intersection is empty) becomes the point -r or r nearest to it, a zero-length
        interval, so that lengths are never negative. It covers theta*_j only if
        theta*_j is that very point, where the empty set would cover nothing.
    """
    return np.clip(lower, -radius, radius), np.clip(upper, -radius, radius)
