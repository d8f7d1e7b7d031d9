"""Coverage, length and accuracy summaries of a sweep's store (tables: ``tables.py``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeAlias

import numpy as np
import xarray as xr
from scipy.special import ndtri  # the normal quantile, without importing scipy.stats

from ldpsim.pipeline.store.code_identity import code_versions
from ldpsim.pipeline.store.pending import pending_cells
from ldpsim.pipeline.summary import cell_statistics
from ldpsim.pipeline.summary.case_parameters import case_coords
from ldpsim.pipeline.summary.cell_statistics import Statistic, check_statistics
from ldpsim.pipeline.summary.diagnostics import interval_diagnostics
from ldpsim.pipeline.summary.partial_cells import replicates_attrs
from ldpsim.pipeline.summary.variables import (
    SUMMARY_ATTRS,
    grid_axes,
    reserved_names,
    with_coords,
)

#: Label of the oracle interval method (exact asymptotic covariance, SPEC section 5.4).
ORACLE = "oracle"
#: What the summary's arithmetic takes and gives: an array with named dimensions, a
#: DataArray or a Variable (no coordinates: :func:`summarize` computes on these).
Dimensioned: TypeAlias = xr.DataArray | xr.Variable
#: Default target Monte-Carlo standard error of a coverage, for ``replicates_needed``.
TARGET_SE = 0.005


def sweep_info(ds: xr.Dataset) -> dict[str, Any]:
    """The sweep specification stored in the ``sweep`` attribute ({} when absent)."""
    raw = ds.attrs.get("sweep")
    return json.loads(raw) if raw else {}


def oracle_label(ds: xr.Dataset) -> str | None:
    """The method label of the oracle interval, or None when the sweep has none.

    The label ``'oracle'`` counts; so does any label whose ``method`` kind is ``'oracle'``
    in the sweep specification.
    """
    labels = [str(m) for m in ds["method"].values]
    if ORACLE in labels:
        return ORACLE
    methods = sweep_info(ds).get("methods", {})
    for label in labels:
        if (methods.get(label) or {}).get("method") == ORACLE:
            return label
    return None


def band_labels(ds: xr.Dataset) -> list[str]:
    """The method labels of simultaneous bands (``simultaneous = true`` in the sweep
    specification, e.g. ``band_sidak``), in the store's order; their target is the joint
    coverage, not the coverage of each coordinate."""
    methods = sweep_info(ds).get("methods", {})
    labels = [str(m) for m in ds["method"].values]
    return [label for label in labels if (methods.get(label) or {}).get("simultaneous") is True]


def sample_size(ds: xr.Dataset) -> xr.DataArray | None:
    """n of every cell: the checkpoint, else the ``n`` axis, else the spec's ``n``."""
    if "checkpoint" in ds.dims:
        return ds["checkpoint"].astype(np.float64)
    if "n" in ds.dims:
        return ds["n"].astype(np.float64)
    n = sweep_info(ds).get("spec", {}).get("n")
    return None if n is None else xr.DataArray(float(n))


def nominal_level(ds: xr.Dataset) -> xr.DataArray:
    """The confidence level 1 - alpha (per grid point when ``level`` is a grid axis)."""
    if "level" in ds.dims:
        return ds["level"].astype(np.float64)
    return xr.DataArray(float(ds.attrs.get("level", np.nan)))


def shared_level(ds: xr.Dataset) -> float | None:
    """The one confidence level of every cell of ``ds`` (a store's Dataset or a summary):
    its ``level`` coordinate's value where that holds a single value, the stored level
    where there is none, and None where ``level`` is a grid axis with several values (a
    caption or a figure's reference line then cannot name one level)."""
    if "level" in ds.coords:
        values = np.unique(np.asarray(ds["level"].values, dtype=np.float64))
        return float(values[0]) if values.size == 1 else None
    level = ds.attrs.get("level")
    return None if level is None else float(level)


def _ratio(num: Dimensioned, count: Dimensioned) -> Dimensioned:
    # NaN (not a warning or inf) where no replicate counts.
    return (num / count.where(count > 0)).astype(np.float64)


def _binomial_se(p: Dimensioned, count: Dimensioned) -> Dimensioned:
    return np.sqrt(p * (1.0 - p) / count.where(count > 0))


def _mean_sd_count(
    x: Dimensioned, use: Dimensioned, dim: str
) -> tuple[Dimensioned, Dimensioned, Dimensioned]:
    """Mean, sample sd (ddof 1) and count of ``x`` over ``dim`` where ``use`` holds.

    ``x`` must be finite wherever ``use`` holds, as every caller's ``use`` makes sure
    (a replicate or method with a non-finite estimate or bound fails): the values left
    out are zeroed, and the sums skip no NaN (xarray's NaN-skipping sum costs two more
    passes over the replicates).

    Finite values beyond about 1e154 (an interval of a nearly diverged run) overflow the
    squares, and values near the largest float (1e308) the sums: where the mean or the
    sd comes out infinite, they are computed again from the values divided by a power of
    two near the largest of them (an exact rescaling), as
    :func:`ldpsim.pipeline.summary.cell_statistics.mean_and_sd` does, so that they are
    finite unless they exceed the float range themselves. Other cells keep numpy's
    values, bit for bit.
    """
    count = use.sum(dim)
    with np.errstate(over="ignore", invalid="ignore"):
        mean, sd = _moments(x, use, dim, count)
        overflowed = np.isinf(mean) | np.isinf(sd)
        # Every caller passes loaded (numpy) values; lazy ones would always take the
        # second pass, and their warnings come when computed, outside this errstate.
        if isinstance(overflowed.data, np.ndarray) and not overflowed.data.any():
            return mean, sd, count  # the usual case: no second pass
        # In units of 2^exponent > every |value| of the cell (as mean_and_sd); 2^1 where
        # nothing overflowed (those cells keep their values below), or where an inf is
        # among the values (its cell stays as it was).
        peak = abs(x).where(use, 0.0).max(dim)
        _, exponent = np.frexp(peak.where(overflowed & np.isfinite(peak), 1.0))
        small_mean, small_sd = _moments(np.ldexp(x, -exponent), use, dim, count)
        mean = xr.where(overflowed, np.ldexp(small_mean, exponent), mean)
        sd = xr.where(overflowed, np.ldexp(small_sd, exponent), sd)
    return mean, sd, count


def _moments(
    x: Dimensioned, use: Dimensioned, dim: str, count: Dimensioned
) -> tuple[Dimensioned, Dimensioned]:
    """Mean and sample sd (ddof 1) of ``x`` over ``dim`` where ``use`` holds (``count``
    values), in one plain pass each (:func:`_mean_sd_count`)."""
    mean = _ratio(x.where(use, 0.0).sum(dim, skipna=False), count)
    sq = ((x - mean) ** 2).where(use, 0.0).sum(dim, skipna=False)
    sd = np.sqrt(sq / (count - 1).where(count > 1))
    return mean, sd


def squared_error(
    estimate: Dimensioned, truth: Dimensioned, done: Dimensioned
) -> tuple[Dimensioned, ...]:
    """Mean over replicates of ||estimate - theta*||^2, its standard error and count.

    The norm runs over the coordinates where theta* is known (a grid point of smaller d
    is NaN-padded); a replicate counts when it is done and its estimate is finite on all
    of them. The standard error is the sample sd (ddof 1) of the squared errors over
    sqrt(R); NaN for R < 2, and everything NaN for R = 0.
    """
    valid = truth.notnull()
    finite = (estimate.notnull() | ~valid).all("coord")
    use = done & valid.any("coord") & finite
    squared = ((estimate - truth) ** 2).where(valid, 0.0).sum("coord")
    mean, sd, count = _mean_sd_count(squared, use, "rep")
    return mean, sd / np.sqrt(count.where(count > 0)), count.astype(np.int64)


def coordinate_means(covered: Dimensioned, length: Dimensioned, ok: Dimensioned) -> xr.Dataset:
    """Coverage and length averaged over the coordinates, with replicate-level errors.

    The coordinates of one replicate share its data, so their coverage indicators are
    not independent and a binomial standard error over all (replicate, coordinate)
    pairs would be too small. Each replicate is reduced first, to its fraction of
    covered coordinates and its mean length over the coordinates where it has bounds
    (``ok``); the statistics are the mean of these per-replicate values over the
    replicates with bounds at one coordinate at least, and the standard errors their
    sample sd (ddof 1) / sqrt(R). When a method fails for all coordinates of a
    replicate or for none, the means equal the means over coordinates of ``coverage``
    and ``length``.

    Parameters
    ----------
    covered : xarray.DataArray or xarray.Variable
        Whether the interval covers theta*_j (dims ``rep`` and ``coord``, among others).
    length : xarray.DataArray or xarray.Variable
        upper - lower, with the dims of ``covered``.
    ok : xarray.DataArray or xarray.Variable
        Where a replicate counts for a method at a coordinate: done, a real coordinate,
        finite bounds.

    Returns
    -------
    xarray.Dataset
        ``coord_mean_coverage``, ``coord_mean_coverage_se``, ``coord_mean_length``,
        ``coord_mean_length_se`` and ``coord_mean_n_done`` (R), without the ``rep`` and
        ``coord`` dims; NaN where R = 0, NaN standard errors where R < 2.
    """
    coords_with_bounds = ok.sum("coord")
    replicate_counts = coords_with_bounds > 0
    covered_fraction = _ratio((covered & ok).sum("coord"), coords_with_bounds)
    mean_length = _ratio(length.where(ok, 0.0).sum("coord"), coords_with_bounds)
    coverage, coverage_sd, count = _mean_sd_count(covered_fraction, replicate_counts, "rep")
    length_mean, length_sd, _ = _mean_sd_count(mean_length, replicate_counts, "rep")
    root_count = np.sqrt(count.where(count > 0))
    return xr.Dataset(
        {
            "coord_mean_coverage": coverage,
            "coord_mean_coverage_se": coverage_sd / root_count,
            "coord_mean_length": length_mean,
            "coord_mean_length_se": length_sd / root_count,
            "coord_mean_n_done": count.astype(np.int64),
        }
    )


def replicates_needed(
    se: Dimensioned, count: Dimensioned, target_se: float, level: Dimensioned
) -> Dimensioned:
    """Replicates that give a coverage standard error of ``target_se``.

    A standard error falls as 1 / sqrt(R), so R replicates with standard error ``se``
    need R (se / target_se)^2, rounded up. Where ``se`` is 0 (an observed coverage of 0
    or 1 has no binomial spread) the nominal ``level`` plans instead: level (1 - level) /
    target_se^2. NaN where no replicate counts or R = 1 with an unknown se.

    Parameters
    ----------
    se : xarray.DataArray or xarray.Variable
        The Monte-Carlo standard error of a coverage from ``count`` replicates.
    count : xarray.DataArray or xarray.Variable
        The replicates R it comes from.
    target_se : float
        The standard error wanted, in (0, 1).
    level : xarray.DataArray or xarray.Variable
        The nominal level, the planning value where ``se`` is 0.

    Returns
    -------
    xarray.DataArray or xarray.Variable (as the inputs)
        float64 (NaN where unknown); whole numbers elsewhere.
    """
    # Rounded to 6 decimals first, so that 900.0000000001 (floating noise) needs 900.
    from_se = np.ceil(np.round(count * (se / target_se) ** 2, 6))
    from_level = np.ceil(np.round(level * (1.0 - level) / target_se**2, 6))
    out = xr.where(se > 0, from_se, from_level)
    return out.where(se.notnull() & (count > 0)).astype(np.float64)


def check_target_se(target_se: float) -> float:
    """The ``target_se`` parameter, checked: a float in (0, 1).

    Raises
    ------
    TypeError
        Not a real number.
    ValueError
        Not in (0, 1).
    """
    if isinstance(target_se, bool) or not isinstance(target_se, int | float | np.floating):
        raise TypeError(
            f"The 'target_se' parameter of summarize must be a float in (0, 1). Got {target_se!r}."
        )
    if not 0 < float(target_se) < 1:
        raise ValueError(
            f"The 'target_se' parameter of summarize must be a float in (0, 1). Got {target_se!r}."
        )
    return float(target_se)


def summarize(
    ds: xr.Dataset,
    target_se: float = TARGET_SE,
    *,
    diagnostics: bool = True,
    statistics: Mapping[str, Statistic] | None = None,
) -> xr.Dataset:
    """Summarize the replicates of a store (SPEC section 7).

    Only replicates with ``done`` set count; for a method, a replicate also needs
    bounds at that cell (a method that failed leaves NaN bounds there, e.g. at one
    checkpoint only, and sets ``method_failed``, which is not read here). A cell
    with no usable replicate gets NaN statistics and ``n_done`` 0, so a partly filled
    store can be summarized at any time.

    Parameters
    ----------
    ds : xarray.Dataset
        A store opened with :func:`ldpsim.pipeline.store.reading.open_dataset` (or a Dataset
        of the same layout): ``estimate``, ``lower``, ``upper``, ``truth`` and ``done``; attributes
        ``level`` and ``sweep``. ``last`` (the last iterate) is optional: without it
        (a store of an older ldpsim) ``mse_last`` and ``rmse_last`` are NaN.
    target_se : float
        The Monte-Carlo standard error of a coverage that ``replicates_needed`` plans
        for, in (0, 1); default :data:`TARGET_SE` (0.005).
    diagnostics : bool
        Compute the interval diagnostics (``bias_over_sd``, ``variance_ratio``,
        ``predicted_coverage``, ``coverage_gap`` and their standard errors; default
        True). False leaves them out: a table that does not show them is made in a
        quarter less time.
    statistics : mapping of str to callable, optional
        Your own statistics, name -> function of a
        :class:`~ldpsim.pipeline.summary.cell_statistics.Cell`: the replicates that one cell
        counts (those of its ``coverage``, ``n_done``) as numpy arrays ``lower``,
        ``upper``, ``estimate`` (the method's own) and ``truth``, with ``level`` and
        ``labels``. A function returns one value per replicate (shape (R,)), whose mean
        is the statistic and whose standard error is coverage's rule, sd / sqrt(R) with
        the sd of ddof 0 (the coverage indicators give exactly ``coverage_se``), or one
        number (shape () or (1,)), whose standard error is the sd over
        :data:`~ldpsim.pipeline.summary.cell_statistics.BOOTSTRAP_RESAMPLES` (1000) bootstrap
        resamples of the cell's replicates (a generator per cell, seeded from the cell's
        labels, so the same store gives the same numbers). A bootstrap costs 1000 calls
        per cell: give statistics only where they are shown, per coordinate
        (:func:`ldpsim.pipeline.summary.tables.check_statistics_shown`). See
        :func:`ldpsim.pipeline.summary.cell_statistics.compute`. A name must be an identifier
        the summary does not use.

    Returns
    -------
    xarray.Dataset
        Per grid point, method, [checkpoint,] coord: ``coverage``, ``coverage_se``
        (sqrt(cov (1 - cov) / R)), ``length`` (mean), ``length_se`` (sd / sqrt(R)) and
        ``n_done`` (R) and ``n_failed`` (replicates lost to a failure of the replicate
        or of this method there; a cell whose R is below the grid point's replicates is
        *partial*, see :mod:`ldpsim.pipeline.summary.partial_cells`). Per grid point, method,
        [checkpoint]: ``coord_mean_n_failed`` (the same for the coordinate means and joint
        coverage); per grid point: ``replicates_done`` and ``replicates_failed``; the
        attribute ``replicates``, the replicates per grid point.
        Per grid point, method, [checkpoint]: ``joint_coverage`` (all
        coordinates covered at once), ``joint_coverage_se``, ``joint_n_done`` and
        ``joint_coverage_z``, its distance to the nominal level in binomial standard
        errors at that level (the check of a simultaneous band); and the means over
        the coordinates ``coord_mean_coverage`` and ``coord_mean_length``, with
        standard errors from the per-replicate means (``*_se``) and their count
        ``coord_mean_n_done`` (see :func:`coordinate_means`). Per grid
        point, [checkpoint,] coord: ``bias`` and ``rmse`` of theta_bar_n, ``rmse_last`` of
        the last iterate theta_n, ``sd`` (sample
        sd of sqrt(n) (theta_bar_n - theta*)), ``oracle_sd`` (oracle half-length /
        z_{1 - alpha/2} * sqrt(n)) and ``sd_ratio`` = sd / oracle_sd (NaN without an
        oracle method). Per grid point, method, [checkpoint,] coord: ``method_bias`` and
        ``method_rmse`` of the method's own estimate (theta_bar_n for bb, bm, sn and the
        oracle; a competitor's own, SPEC 10; theta_bar_n for every method of a store
        older than ``method_estimate``); and over the replicates that count for the
        method: ``bias_over_sd``, ``variance_ratio`` and ``predicted_coverage`` of the
        method's estimate, with their standard errors (``*_se``), see
        :mod:`ldpsim.pipeline.summary.diagnostics` (left out with ``diagnostics=False``). Per grid
        point, method, [checkpoint]:
        ``method_seconds``, the mean compute time of the method (NaN in older stores).
        Statistics use the sample sd (ddof 1); R < 2 gives NaN sds. Per grid point,
        [checkpoint]: ``mse`` = mean of ||theta_bar_n - theta*||^2 over the replicates,
        ``mse_last`` the same of the last iterate theta_n and ``mse_projected`` of the
        estimate's projection onto the model's l1 ball (SPEC 11; NaN for other models
        and for stores older than it), each with its standard error (``*_se``,
        sd / sqrt(R)) and count R (``*_n_done``; see :func:`squared_error`).
        ``replicates_needed`` (per grid point, method, [checkpoint,] coord) and
        ``coord_mean_replicates_needed`` and ``joint_replicates_needed`` (per grid
        point, method, [checkpoint]): the replicates that would give the coverage (its
        coordinate mean, the joint coverage) a standard error of ``target_se``
        (:func:`replicates_needed`); a simultaneous band (:func:`band_labels`) plans
        with the joint one.
        Per grid point and coord: ``coord_exists``, false for the coordinates beyond a
        grid point's d (tables and figures leave them out). With ``statistics``, per
        grid point, method, [checkpoint,] coord: ``NAME`` and ``NAME_se`` for each (the
        ``se_method`` attribute of ``NAME_se`` says ``mean`` or ``bootstrap``).
        With a ``case`` axis, the spec parameters that vary across its cases as
        coordinates along ``case``, ``case_NAME`` (``case_d``, ``case_mechanism``; see
        :func:`ldpsim.pipeline.summary.case_parameters.case_coords`).
        Attributes ``level`` and ``sweep`` are kept, and ``target_se`` added (and
        ``statistics``, a JSON list of the names, with ``statistics``).

    Raises
    ------
    TypeError
        ``statistics`` is not a mapping of str to callables, or ``target_se`` not a real.
    ValueError
        ``target_se`` outside (0, 1).
    ldpsim.pipeline.errors.InputError
        A statistic's name is not an identifier or is taken; a statistic raised or
        returned something else than a number or R numbers (one line naming it and the
        cell).

    Examples
    --------
    One-sided coverage (the upper bound above theta*) and the median length:

    >>> import numpy as np
    >>> summary = summarize(  # doctest: +SKIP
    ...     ds,
    ...     statistics={
    ...         "upper_cover": lambda c: c.upper >= c.truth,
    ...         "median_length": lambda c: np.median(c.upper - c.lower),
    ...     },
    ... )
    >>> summary["upper_cover_se"].attrs["se_method"]  # doctest: +SKIP
    'mean'
    """
    target_se = check_target_se(target_se)
    reserved = reserved_names() | {str(d) for d in ds.dims} | {str(c) for c in ds.coords}
    reserved |= set(case_coords(ds))
    statistics = check_statistics(statistics, reserved)
    # The arithmetic runs on the variables alone (xarray.Variable: named dimensions,
    # no coordinates): every operation of two DataArrays aligns them first, which was
    # more than half of a small store's summary, and these share one layout. The
    # coordinates are put back at the end.
    data = {name: ds.variables[name] for name in ds.data_vars}
    truth = data["truth"]
    valid = truth.notnull()  # coordinates beyond a grid point's d are NaN-padded
    done = data["done"].astype(bool)
    lower, upper = data["lower"], data["upper"]

    # A failed method leaves NaN bounds exactly where it failed, so the bounds alone
    # decide. ``method_failed`` is not used: stores written before it had a checkpoint
    # axis flag a replicate at every checkpoint when the method failed at one of them,
    # which would drop that replicate from the later checkpoints too.
    bounds_ok = lower.notnull() & upper.notnull()
    ok = done & valid & bounds_ok
    covered = (lower <= truth) & (truth <= upper)
    width = upper - lower  # each interval's length, computed once for all statistics

    n_done = ok.sum("rep")
    coverage = _ratio((covered & ok).sum("rep"), n_done)
    length, length_sd, _ = _mean_sd_count(width, ok, "rep")

    # A replicate counts for joint coverage when every real coordinate has bounds.
    has_coord = valid.any("coord")
    joint_ok = done & has_coord & (ok | ~valid).all("coord")
    joint_covered = (covered | ~valid).all("coord")
    joint_n_done = joint_ok.sum("rep")
    joint_coverage = _ratio((joint_covered & joint_ok).sum("rep"), joint_n_done)
    level = nominal_level(ds).variable
    joint_coverage_z = (joint_coverage - level) / _binomial_se(level, joint_n_done)

    coord_means = coordinate_means(covered, width, ok)
    failed = data["failed"].astype(bool) if "failed" in data else xr.zeros_like(done)
    # The bounds that a method failed to give: flagged ``method_failed`` (a store older
    # than the flag: every missing bound of a done replicate). Not flagged are the cells a
    # method does not compute by design (a competitor at checkpoints).
    flagged = data["method_failed"].astype(bool) if "method_failed" in data else ~bounds_ok
    method_lost = done & valid & ~bounds_ok & flagged
    replicates_failed = failed.sum("rep")
    n_failed = (failed & valid).sum("rep") + method_lost.sum("rep")
    coord_mean_n_failed = replicates_failed + method_lost.any("coord").sum("rep")

    estimate = data["estimate"]
    est_ok = done & valid & estimate.notnull()
    error = estimate - truth
    bias, _, n_est = _mean_sd_count(error, est_ok, "rep")
    rmse = np.sqrt(_ratio((error.where(est_ok) ** 2).sum("rep"), n_est))
    _, est_sd, _ = _mean_sd_count(estimate, est_ok, "rep")
    mse, mse_se, mse_n_done = squared_error(estimate, truth, done)
    # A store of an older ldpsim has no last iterates: NaN statistics, count 0.
    last = data["last"] if "last" in data else xr.full_like(estimate, np.nan)
    mse_last, mse_last_se, mse_last_n_done = squared_error(last, truth, done)
    # NaN for a model without an l1 ball, and in a store older than the variable.
    projected = data["projected"] if "projected" in data else xr.full_like(estimate, np.nan)
    mse_projected, mse_projected_se, mse_projected_n_done = squared_error(projected, truth, done)
    last_ok = done & valid & last.notnull()
    rmse_last = np.sqrt(
        _ratio((((last - truth) ** 2).where(last_ok)).sum("rep"), last_ok.sum("rep"))
    )

    # Each method's own estimate. Replicates written by an older ldpsim have none (NaN,
    # or no variable at all); there every method was centred at theta_bar_n (the
    # competitors did not exist), wherever it gave an interval.
    theta_bar = estimate.where(lower.notnull())
    method_estimate = (
        data["method_estimate"].fillna(theta_bar) if "method_estimate" in data else theta_bar
    )
    method_ok = done & valid & method_estimate.notnull()
    method_error = method_estimate - truth
    method_bias, _, method_n = _mean_sd_count(method_error, method_ok, "rep")
    method_rmse = np.sqrt(_ratio((method_error.where(method_ok) ** 2).sum("rep"), method_n))
    if "method_seconds" in data:
        method_seconds = data["method_seconds"].where(done).mean("rep")
    else:
        method_seconds = xr.full_like(done.isel(rep=0), np.nan, dtype=float)

    n = sample_size(ds)
    n = None if n is None else n.variable
    z = xr.apply_ufunc(ndtri, 0.5 + level / 2.0)
    label = oracle_label(ds)
    if n is None:
        sd = xr.full_like(est_sd, np.nan)
    else:
        sd = est_sd * np.sqrt(n)
    if label is None or n is None:
        oracle_sd = xr.full_like(est_sd, np.nan)
    else:
        # By position: the variables have no coordinates.
        methods = [str(m) for m in ds["method"].values]
        oracle_len = length.isel(method=methods.index(label))
        oracle_sd = oracle_len / 2.0 / z * np.sqrt(n)

    # Over the replicates that count for each method, so that predicted and observed
    # coverage describe the same replicates.
    diagnostic_vars = (
        interval_diagnostics(method_error, width, covered, ok & method_ok, z).data_vars
        if diagnostics
        else {}
    )

    out = xr.Dataset(
        {
            "coverage": coverage,
            "coverage_se": _binomial_se(coverage, n_done),
            "length": length,
            "length_se": length_sd / np.sqrt(n_done.where(n_done > 0)),
            "n_done": n_done.astype(np.int64),
            "n_failed": n_failed.astype(np.int64),
            "coord_mean_n_failed": coord_mean_n_failed.astype(np.int64),
            "replicates_done": done.sum("rep").astype(np.int64),
            "replicates_failed": replicates_failed.astype(np.int64),
            "methods_pending": pending_cells(ds).variable.sum("rep").astype(np.int64),
            "joint_coverage": joint_coverage,
            "joint_coverage_se": _binomial_se(joint_coverage, joint_n_done),
            "joint_n_done": joint_n_done.astype(np.int64),
            "joint_coverage_z": joint_coverage_z,
            **coord_means.data_vars,
            "bias": bias,
            "rmse": rmse,
            "rmse_last": rmse_last,
            "method_bias": method_bias,
            "method_rmse": method_rmse,
            "method_seconds": method_seconds,
            "mse": mse,
            "mse_se": mse_se,
            "mse_n_done": mse_n_done,
            "mse_last": mse_last,
            "mse_last_se": mse_last_se,
            "mse_last_n_done": mse_last_n_done,
            "mse_projected": mse_projected,
            "mse_projected_se": mse_projected_se,
            "mse_projected_n_done": mse_projected_n_done,
            "sd": sd,
            "oracle_sd": oracle_sd,
            "sd_ratio": sd / oracle_sd,
            **diagnostic_vars,
        }
    )
    out["coord_exists"] = valid
    versions = code_versions(ds)
    if versions is not None:  # a store of an older ldpsim opened without a run lacks it
        out["code_versions"] = versions.variable
    if statistics:
        own = cell_statistics.compute(
            statistics,
            *(with_coords(x, ds) for x in (lower, upper, method_estimate)),
            ds["truth"],
            with_coords(ok, ds),
            nominal_level(ds),
        )
        out = out.assign(own.data_vars)
    out["replicates_needed"] = replicates_needed(out["coverage_se"], n_done, target_se, level)
    out["coord_mean_replicates_needed"] = replicates_needed(
        out["coord_mean_coverage_se"], out["coord_mean_n_done"], target_se, level
    )
    out["joint_replicates_needed"] = replicates_needed(
        out["joint_coverage_se"], out["joint_n_done"], target_se, level
    )
    out = with_coords(out, ds)
    order = [*grid_axes(ds), "method", "checkpoint", "coord"]
    out = out.transpose(*[d for d in order if d in out.dims])
    for name, attrs in SUMMARY_ATTRS.items():
        if name in out:  # the diagnostics may be left out
            out[name].attrs = dict(attrs)
    for name in out.coords:
        if name in ds.coords:
            out[name].attrs = dict(ds[name].attrs)
    out.attrs = {k: ds.attrs[k] for k in ("title", "level", "sweep") if k in ds.attrs}
    out.attrs["target_se"] = target_se
    out.attrs.update(replicates_attrs(ds))
    out = out.assign_coords(case_coords(out))
    if statistics:
        out.attrs[cell_statistics.STATISTICS_ATTR] = json.dumps(list(statistics))
    return out.compute()


# -- records ------------------------------------------------------------------------------
