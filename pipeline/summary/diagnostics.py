"""Why an interval misses: its bias and width against the spread of the estimate.

For each grid point, method and coordinate, over the replicates where the method gave an
interval, with e_r = theta_bar_n - theta* of replicate r, ebar and s their mean and sample
sd (ddof 1), L_r the interval length, Lbar its mean and z = z_{1 - alpha/2}:

- ``bias_over_sd`` b = ebar / s,
- ``variance_ratio`` r = (Lbar / (2 z s))^2, the variance the mean width implies against
  the variance of the estimate,
- ``predicted_coverage`` P = Phi(z sqrt(r) - b) - Phi(-z sqrt(r) - b), the coverage of
  an interval of fixed width Lbar centred at a normal estimate of bias b s and sd s.

An interval of fixed width (the oracle) around a normal estimate covers with probability
exactly P; for a data-driven interval the gap between the observed coverage and P is what
the variability of its width and a non-normal pivot cost. ``coverage_gap`` = observed
coverage - P has its own standard error, from the same replicates: whether the gap is
more than Monte-Carlo noise is judged against it, not against the binomial standard
error of the coverage alone (P is estimated too, from the same replicates).

Standard errors come from the nonparametric delta method: each statistic is a smooth
function of the replicate means of (e_r, (e_r - ebar)^2, L_r), so its empirical influence
values IF_r are the gradient times the centred replicate values, and its standard error
is sd(IF) / sqrt(R). No normality is assumed; for normal errors and a fixed width the
formulas reduce to se(b) = sqrt((1 + b^2 / 2) / R) and se(r) = r sqrt(2 / R).
"""

from __future__ import annotations

import math
from typing import TypeAlias

import numpy as np
import xarray as xr
from scipy.special import ndtr

#: What :func:`normal_coverage` takes and returns: a scalar, an array, a DataArray or a
#: Variable (:func:`interval_diagnostics` takes the last two).
Values: TypeAlias = float | np.ndarray | xr.DataArray | xr.Variable

#: Summary variables added by :func:`interval_diagnostics`, in table order.
DIAGNOSTIC_FIELDS = (
    "predicted_coverage",
    "predicted_coverage_se",
    "coverage_gap",
    "coverage_gap_se",
    "bias_over_sd",
    "bias_over_sd_se",
    "variance_ratio",
    "variance_ratio_se",
)

DIAGNOSTIC_ATTRS: dict[str, dict[str, str]] = {
    "bias_over_sd": {
        "long_name": "mean(theta_bar_n - theta*) / sd(theta_bar_n) over the method's replicates",
        "units": "1",
    },
    "bias_over_sd_se": {
        "long_name": "standard error of bias_over_sd (nonparametric delta method)",
        "units": "1",
    },
    "variance_ratio": {
        "long_name": "(mean length / (2 z_{1-alpha/2} sd(theta_bar_n)))^2: implied over "
        "needed variance",
        "units": "1",
    },
    "variance_ratio_se": {
        "long_name": "standard error of variance_ratio (nonparametric delta method)",
        "units": "1",
    },
    "predicted_coverage": {
        "long_name": "coverage of a normal interval with this bias_over_sd and "
        "variance_ratio: Phi(z sqrt(r) - b) - Phi(-z sqrt(r) - b)",
        "units": "1",
    },
    "predicted_coverage_se": {
        "long_name": "standard error of predicted_coverage (nonparametric delta method)",
        "units": "1",
    },
    "coverage_gap": {
        "long_name": "observed coverage - predicted_coverage (width variability, non-normality)",
        "units": "1",
    },
    "coverage_gap_se": {
        "long_name": "standard error of coverage_gap (nonparametric delta method)",
        "units": "1",
    },
}


def _normal_pdf(x: Values) -> Values:
    return np.exp(-0.5 * x**2) / math.sqrt(2.0 * math.pi)


def normal_coverage(bias_over_sd: Values, variance_ratio: Values, z: Values) -> Values:
    """Coverage of a fixed-width interval centred at a normal estimate.

    Parameters
    ----------
    bias_over_sd : float, ndarray or xarray.DataArray
        b = bias / sd of the estimate, any real value.
    variance_ratio : float, ndarray or xarray.DataArray
        r = (half-length / (z sd))^2, in [0, inf).
    z : float, ndarray or xarray.DataArray
        The critical value z_{1 - alpha/2} > 0 the half-length is measured in.

    Returns
    -------
    float, ndarray or xarray.DataArray
        Phi(z sqrt(r) - b) - Phi(-z sqrt(r) - b), in [0, 1); 1 - alpha at b = 0, r = 1.
    """
    half = z * np.sqrt(variance_ratio)
    return ndtr(half - bias_over_sd) - ndtr(-half - bias_over_sd)


def _mean(x: Values, count: Values) -> Values:
    return x.sum("rep") / count.where(count > 0)


def interval_diagnostics(
    error: Values, length: Values, covered: Values, use: Values, z: Values
) -> xr.Dataset:
    """Bias over sd, variance ratio and predicted coverage, with standard errors.

    Parameters
    ----------
    error : xarray.DataArray or xarray.Variable
        theta_bar_n - theta* per replicate; has a ``rep`` dimension.
    length : xarray.DataArray or xarray.Variable
        Interval length upper - lower per replicate (broadcasts against ``error``, e.g.
        with an extra ``method`` dimension).
    covered : xarray.DataArray or xarray.Variable of bool
        Whether the interval covered theta* per replicate (broadcasts likewise).
    use : xarray.DataArray or xarray.Variable of bool
        Which replicates count (done, with finite bounds); broadcasts likewise.
    z : float, xarray.DataArray or xarray.Variable
        z_{1 - alpha/2} > 0 (per grid point when the level is a grid axis).

    Returns
    -------
    xarray.Dataset
        The variables of :data:`DIAGNOSTIC_FIELDS` over the dimensions of the inputs
        but ``rep``. NaN where fewer than 2 replicates count or the estimate does not
        vary (sd 0); standard errors need 3 replicates.
    """
    # Lengths near the largest float (a nearly diverged run) overflow the variance ratio
    # and its influence values: inf and NaN there ("n/a"), without numpy's warnings.
    with np.errstate(over="ignore", invalid="ignore"):
        count = use.sum("rep")
        e = error.where(use)
        centred = e - _mean(e, count)
        square = centred**2
        var = square.sum("rep") / (count - 1).where(count > 1)
        var = var.where(var > 0)
        sd = np.sqrt(var)
        lengths = length.where(use)
        mean_length = _mean(lengths, count)

        bias_over_sd = _mean(e, count) / sd
        variance_ratio = (mean_length / (2.0 * z * sd)) ** 2
        half = z * np.sqrt(variance_ratio)
        predicted = normal_coverage(bias_over_sd, variance_ratio, z)

        # Influence values of the replicate means; var's own is (e - ebar)^2 - var (its
        # dependence on ebar has zero derivative at the mean).
        var_influence = square - var
        b_influence = centred / sd - bias_over_sd * var_influence / (2.0 * var)
        r_influence = variance_ratio * (
            2.0 * (lengths - mean_length) / mean_length.where(mean_length > 0)
            - var_influence / var
        )
        upper_density = _normal_pdf(half - bias_over_sd)
        lower_density = _normal_pdf(-half - bias_over_sd)
        dp_db = lower_density - upper_density
        # dP/dr = z / (2 sqrt r) (phi(upper) + phi(lower)) = z^2 / (2 half) (...); r = 0 has none.
        dp_dr = z**2 / (2.0 * half.where(half > 0)) * (upper_density + lower_density)
        p_influence = dp_db * b_influence + dp_dr * r_influence
        hits = covered.where(use).astype(np.float64)
        coverage = _mean(hits, count)
        gap_influence = (hits - coverage) - p_influence

        def standard_error(influence: Values, statistic: Values) -> Values:
            # sd(IF) / sqrt(R), sd with ddof 1 (the influence values have mean 0); NaN
            # where the statistic is (sd 0: its influence values are all NaN, which the
            # sum would skip, giving 0).
            spread = (influence**2).sum("rep") / (count - 1).where(count > 2)
            return np.sqrt(spread / count).where(statistic.notnull())

        gap = coverage - predicted
        return xr.Dataset(
            {
                "predicted_coverage": predicted,
                "predicted_coverage_se": standard_error(p_influence, predicted),
                "coverage_gap": gap,
                "coverage_gap_se": standard_error(gap_influence, gap),
                "bias_over_sd": bias_over_sd,
                "bias_over_sd_se": standard_error(b_influence, bias_over_sd),
                "variance_ratio": variance_ratio,
                "variance_ratio_se": standard_error(r_influence, variance_ratio),
            }
        )
