"""Critical values of the interval methods, computed once per process and level."""

from __future__ import annotations

import functools


@functools.cache
def normal_quantile(prob: float) -> float:
    """The standard normal quantile z_prob, for prob in (0, 1) (scipy's ``norm.ppf``).

    Cached: a grid point's replicates share one level, so scipy is asked once per
    process and value, not once per replicate and method.
    """
    from scipy import special  # lighter than scipy.stats, for a command that reads only

    return float(special.ndtri(prob))


@functools.cache
def student_t_quantile(prob: float, df: int) -> float:
    """The quantile t_df(prob) of Student's t with ``df`` >= 1 degrees of freedom, for
    prob in (0, 1) (scipy's ``t.ppf``); cached like :func:`normal_quantile`."""
    # scipy.stats.t.ppf evaluates special.stdtrit: the same bits, without importing
    # scipy.stats (most of a second in every worker).
    from scipy import special

    return float(special.stdtrit(df, prob))
