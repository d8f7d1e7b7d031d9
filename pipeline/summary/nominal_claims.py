"""Each method's nominal claim, and the test that flags a coverage departing from it.

An interval method claims that each coordinate's interval covers theta*_j with the
nominal probability 1 - alpha; a simultaneous band (``simultaneous = true`` in the sweep,
:func:`~ldpsim.pipeline.summary.summary.band_labels`) claims that all coordinates are covered at
once with that probability. A method is judged against its own claim only: the per
coordinate coverage (and its mean over the coordinates) of an interval method, the joint
coverage of a band. The other coverage is information: a band over-covers each
coordinate by design, and intervals cover all d coordinates at once far less often
(about 0.9^d for independent coordinates).

The test of H0: coverage = q (the nominal level) from R replicates is two-sided at
:data:`FLAG_SIZE` (5%) with the standard error under H0, ``sqrt(q (1 - q) / R)``: a cell
departs when ``|coverage - q| > FLAG_Z sqrt(q (1 - q) / R)``. The observed coverage's
own standard error ``sqrt(p (1 - p) / R)`` would test another hypothesis: it shrinks as
p nears 1, so that over-coverage is flagged far more often than the 5% a test promises
(8.6% of cells at exactly nominal coverage for R = 40, 6.6% for R = 200). With the null's
standard error the exact rate at exactly nominal coverage (:func:`false_flag_rate`) is
5.7%, 4.4% and 4.4% at R = 40, 200 and 500 (q = 0.9); it is not exactly 5% because the
coverage is a count.

The coordinate mean of the coverage is tested the same way with its replicates R: the
fraction of covered coordinates of a replicate lies in [0, 1] with mean q under H0, so
its variance is at most q (1 - q); the test is conservative where the coordinates are not
perfectly correlated.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import xarray as xr

# scipy.special, not scipy.stats: the tables import this module, and scipy.stats takes a
# second to import.
from scipy.special import gammaln, ndtri, xlog1py, xlogy

from ldpsim.pipeline.summary.summary import band_labels

#: What a method claims: ``coordinate`` (each coordinate's interval covers with the nominal
#: probability) or ``joint`` (all coordinates are covered at once with it).
Claim = Literal["coordinate", "joint"]
#: The size of the two-sided test that flags a coverage: the share of cells flagged by
#: chance alone where every method has exactly its nominal coverage (about).
FLAG_SIZE = 0.05
#: The normal quantile of the test: |coverage - q| beyond this many standard errors under
#: H0 (1.96) is flagged.
FLAG_Z = float(ndtri(1.0 - FLAG_SIZE / 2.0))
#: Coverage statistics of a summary -> the claim they test.
CLAIM_OF: dict[str, Claim] = {
    "coverage": "coordinate",
    "coord_mean_coverage": "coordinate",
    "joint_coverage": "joint",
}


def method_claims(ds: xr.Dataset) -> dict[str, Claim]:
    """Each method's nominal claim: ``joint`` for a simultaneous band, else ``coordinate``.

    Parameters
    ----------
    ds : xarray.Dataset
        A store or its summary, with the ``sweep`` attribute (a method the sweep does not
        mark ``simultaneous = true`` claims per coordinate).

    Returns
    -------
    dict of str to str
        Method label -> ``coordinate`` or ``joint``, in the store's order.
    """
    bands = set(band_labels(ds))
    return {str(m): "joint" if str(m) in bands else "coordinate" for m in ds["method"].values}


def null_se(level: float | np.ndarray, count: float | np.ndarray) -> np.ndarray:
    """The standard error of a coverage from ``count`` replicates when the true coverage
    is ``level``: sqrt(level (1 - level) / count); NaN where count <= 0."""
    count = np.asarray(count, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(count > 0, np.sqrt(level * (1.0 - level) / count), np.nan)


def departs(
    coverage: float | np.ndarray, count: float | np.ndarray, level: float | np.ndarray
) -> np.ndarray:
    """Whether coverages depart from the nominal ``level``: the two-sided test at
    :data:`FLAG_SIZE` of H0: coverage = level, with the standard error under H0.

    Parameters
    ----------
    coverage : float or array
        Observed coverages (fractions of ``count`` replicates), NaN where none counts.
    count : float or array
        The replicates R each coverage is a fraction of (broadcast).
    level : float or array
        The nominal level q, in (0, 1).

    Returns
    -------
    numpy.ndarray of bool
        ``|coverage - q| > FLAG_Z sqrt(q (1 - q) / R)``; False for a NaN coverage or R = 0.
    """
    coverage = np.asarray(coverage, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = np.abs(coverage - level) > FLAG_Z * null_se(level, count)
    return np.asarray(out & np.isfinite(coverage), dtype=bool)


def false_flag_rate(replicates: int, level: float) -> float:
    """The exact probability that :func:`departs` flags a coverage whose true value is
    exactly ``level``: the binomial sum over the counts of covering replicates it flags.

    Parameters
    ----------
    replicates : int
        R, >= 1.
    level : float
        The nominal (and true) coverage q, in (0, 1).

    Returns
    -------
    float
        sum over k = 0..R with departs(k / R) of C(R, k) q^k (1 - q)^(R - k).

    Examples
    --------
    >>> round(false_flag_rate(200, 0.9), 4)
    0.0439
    """
    covered = np.arange(replicates + 1)
    flagged = covered[departs(covered / replicates, replicates, level)]
    log_pmf = (
        gammaln(replicates + 1)
        - gammaln(flagged + 1)
        - gammaln(replicates - flagged + 1)
        + xlogy(flagged, level)
        + xlog1py(replicates - flagged, -level)
    )
    return float(np.exp(log_pmf).sum())
