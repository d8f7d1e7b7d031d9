"""The variables of a summary (names, long names, units) and the dimensions of a store
that are not grid axes: what :func:`ldpsim.pipeline.summary.summary.summarize` writes and
what a statistic of your own may not be called."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ldpsim.pipeline.summary.diagnostics import DIAGNOSTIC_ATTRS

if TYPE_CHECKING:
    import xarray as xr

#: Store dimensions that are not grid axes.
NON_GRID_DIMS = ("checkpoint", "method", "rep", "coord")
SUMMARY_ATTRS: dict[str, dict[str, str]] = {
    "coverage": {
        "long_name": "empirical coverage of theta*_j by the interval",
        "units": "1",
    },
    "coverage_se": {
        "long_name": "Monte-Carlo standard error of coverage, sqrt(cov (1 - cov) / R)",
        "units": "1",
    },
    "length": {"long_name": "mean interval length", "units": "parameter units"},
    "length_se": {
        "long_name": "Monte-Carlo standard error of the mean length, sd / sqrt(R)",
        "units": "parameter units",
    },
    "n_done": {
        "long_name": "replicates R used: done, with finite bounds for this method",
        "units": "1",
    },
    "n_failed": {
        "long_name": (
            "replicates of the grid point that failed, or in which this method failed "
            "at this cell; they are not in n_done"
        ),
        "units": "1",
    },
    "coord_mean_n_failed": {
        "long_name": (
            "replicates of the grid point that failed, or in which this method failed "
            "at one coordinate at least; they are not in joint_n_done"
        ),
        "units": "1",
    },
    "replicates_done": {"long_name": "replicates of the grid point done", "units": "1"},
    "code_versions": {
        "long_name": "versions of the cell's own units (model, mechanism, method) that "
        "computed its grid point's done replicates (more than 1: the cell is marked)",
        "units": "1",
    },
    "replicates_failed": {"long_name": "replicates of the grid point failed", "units": "1"},
    "methods_pending": {
        "long_name": (
            "replicates of the grid point done but for this method, which was added to the "
            "store and is not computed for them yet (`ldpsim run` computes it)"
        ),
        "units": "1",
    },
    "joint_coverage": {
        "long_name": "empirical coverage of all coordinates of theta* simultaneously",
        "units": "1",
    },
    "joint_coverage_se": {
        "long_name": "Monte-Carlo standard error of joint coverage",
        "units": "1",
    },
    "joint_n_done": {
        "long_name": "replicates used for joint coverage: done, all bounds finite",
        "units": "1",
    },
    "joint_coverage_z": {
        "long_name": (
            "(joint coverage - nominal level) / sqrt(level (1 - level) / joint_n_done): "
            "0 is the target of a simultaneous band (bb with simultaneous = true)"
        ),
        "units": "1",
    },
    "coord_mean_coverage": {
        "long_name": "coverage averaged over the coordinates of the grid point",
        "description": (
            "mean over replicates of each replicate's fraction of covered coordinates "
            "(among those with bounds): the mean of coverage over coordinates when a "
            "method fails for all coordinates of a replicate or for none"
        ),
        "units": "1",
    },
    "coord_mean_coverage_se": {
        "long_name": (
            "Monte-Carlo standard error of coord_mean_coverage: sample sd of the "
            "per-replicate fractions of covered coordinates / sqrt(R)"
        ),
        "description": (
            "the coordinates of one replicate are not independent, so the replicate, "
            "not the (replicate, coordinate) pair, is the unit of the standard error"
        ),
        "units": "1",
    },
    "coord_mean_length": {
        "long_name": "mean interval length averaged over the coordinates of the grid point",
        "description": (
            "mean over replicates of each replicate's mean length over the coordinates with bounds"
        ),
        "units": "parameter units",
    },
    "coord_mean_length_se": {
        "long_name": (
            "Monte-Carlo standard error of coord_mean_length: sample sd of the "
            "per-replicate mean lengths / sqrt(R)"
        ),
        "units": "parameter units",
    },
    "coord_mean_n_done": {
        "long_name": (
            "replicates R used for the coordinate means: done, with finite bounds for "
            "this method at one coordinate at least"
        ),
        "units": "1",
    },
    "bias": {"long_name": "mean of theta_bar_n - theta*", "units": "parameter units"},
    "rmse": {
        "long_name": "root mean squared error of theta_bar_n",
        "units": "parameter units",
    },
    "method_bias": {
        "long_name": "mean of the method's estimate - theta* (theta_bar_n but for competitors)",
        "units": "parameter units",
    },
    "method_rmse": {
        "long_name": "root mean squared error of the method's estimate",
        "units": "parameter units",
    },
    "method_seconds": {
        "long_name": "mean compute time of the method per replicate (NaN: not recorded)",
        "units": "s",
    },
    "rmse_last": {
        "long_name": "root mean squared error of the last iterate theta_n",
        "units": "parameter units",
    },
    "mse": {
        "long_name": "mean squared error of theta_bar_n: mean of ||theta_bar_n - theta*||^2",
        "units": "squared parameter units",
    },
    "mse_se": {
        "long_name": "Monte-Carlo standard error of mse, sd / sqrt(R)",
        "units": "squared parameter units",
    },
    "mse_n_done": {
        "long_name": "replicates R used for mse: done, every coordinate finite",
        "units": "1",
    },
    "mse_last": {
        "long_name": "mean squared error of the last iterate: mean of ||theta_n - theta*||^2",
        "units": "squared parameter units",
    },
    "mse_last_se": {
        "long_name": "Monte-Carlo standard error of mse_last, sd / sqrt(R)",
        "units": "squared parameter units",
    },
    "mse_last_n_done": {
        "long_name": "replicates R used for mse_last: done, last iterate stored and finite",
        "units": "1",
    },
    "mse_projected": {
        "long_name": (
            "mean squared l2 error of the projection of theta_bar_n onto the l1 ball "
            "(SPEC 11): mean of ||theta_tilde_n - theta*||^2"
        ),
        "units": "squared parameter units",
    },
    "mse_projected_se": {
        "long_name": "Monte-Carlo standard error of mse_projected, sd / sqrt(R)",
        "units": "squared parameter units",
    },
    "mse_projected_n_done": {
        "long_name": "replicates R used for mse_projected: done, projection stored and finite",
        "units": "1",
    },
    "sd": {
        "long_name": "empirical sd of sqrt(n) (theta_bar_n - theta*) over replicates",
        "units": "parameter units",
    },
    "oracle_sd": {
        "long_name": "asymptotic sd sqrt(Sigma_jj), from the oracle interval",
        "units": "parameter units",
    },
    "sd_ratio": {
        "long_name": "empirical sd of sqrt(n) (theta_bar_n - theta*) / oracle sd",
        "units": "1",
    },
    "coord_exists": {
        "long_name": "whether the grid point has this coordinate (theta*_j known)",
        "description": "false beyond the d of a grid point of smaller d (NaN-padded)",
        "units": "1",
    },
    "replicates_needed": {
        "long_name": "replicates that would give a coverage standard error of target_se",
        "description": (
            "R (coverage_se / target_se)^2, rounded up (a standard error falls as "
            "1 / sqrt(R)); where the observed coverage is 0 or 1 (no spread) from the "
            "nominal level, level (1 - level) / target_se^2"
        ),
        "units": "1",
    },
    "coord_mean_replicates_needed": {
        "long_name": (
            "replicates that would give coord_mean_coverage a standard error of target_se"
        ),
        "description": "R (coord_mean_coverage_se / target_se)^2, rounded up",
        "units": "1",
    },
    "joint_replicates_needed": {
        "long_name": "replicates that would give joint_coverage a standard error of target_se",
        "description": (
            "joint_n_done (joint_coverage_se / target_se)^2, rounded up; what a "
            "simultaneous band (bb with simultaneous = true) plans for, since its joint "
            "coverage is what it is for"
        ),
        "units": "1",
    },
    **DIAGNOSTIC_ATTRS,
}


def reserved_names() -> set[str]:
    """Names a statistic given to :func:`summarize` may not take: the summary's own
    variables, its dimensions and the fields its records add (grid axes are added per
    store)."""
    return {*SUMMARY_ATTRS, *NON_GRID_DIMS, "n_replicates", "coverage_diff"}


def grid_axes(ds: xr.Dataset) -> list[str]:
    """The grid axes of a store or summary, in sweep order (possibly none)."""
    # A store has theta*, a summary coverage, a comparison (compare.py) its difference.
    name = next(v for v in ("truth", "coverage", "coverage_diff") if v in ds)
    dims = ds[name].dims
    return [str(d) for d in dims if d not in NON_GRID_DIMS]


def with_coords(
    x: xr.Variable | xr.DataArray | xr.Dataset, ds: xr.Dataset
) -> xr.DataArray | xr.Dataset:
    """``x`` with the coordinates of ``ds`` that lie along its dimensions.

    The summary computes on variables without coordinates (``xarray.Variable``: an
    operation of two DataArrays first aligns their indexes, which was most of a small
    store's summary); this puts the coordinates back. A Variable becomes a DataArray.
    """
    import xarray as xr

    if isinstance(x, xr.Variable):
        x = xr.DataArray(x)
    dims = set(x.dims)
    return x.assign_coords(
        {name: coord for name, coord in ds.coords.items() if set(coord.dims) <= dims}
    )
