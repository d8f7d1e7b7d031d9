"""The spec parameters that tell a sweep's cases apart, as columns and coordinates."""

from __future__ import annotations

import json
import math
import numbers
from typing import Any

import numpy as np
import xarray as xr

from ldpsim.pipeline.formatting import MISSING_TEXT
from ldpsim.pipeline.sweep import CASE_AXIS

#: The summary's coordinates along ``case`` are named this prefix and the parameter:
#: ``case_d``, ``case_mechanism``. A bare ``d`` could clash with a grid axis, a summary
#: variable or a statistic given to ``summarize``; the CSV and JSON records use the same
#: names, so a record joins back to the Dataset.
COORD_PREFIX = f"{CASE_AXIS}_"


def case_parameters(ds: xr.Dataset) -> dict[str, list[Any]]:
    """The spec parameters that vary across the cases of a store or summary.

    A sweep's ``[cases.LABEL]`` tables set spec values per case; the ``case`` axis lists
    the labels (:attr:`ldpsim.pipeline.sweep.Sweep.cases`, kept in the store's ``sweep``
    attribute). A parameter varies when two cases on the axis give it different values;
    one set by some cases and not by others varies too. Where a case does not set it,
    its value is the sweep's ``[spec]`` value (what that case ran with), or None when
    ``[spec]`` does not set it either (the parameter does not apply to that case, or
    takes its unit's default); tables show None as ``-``. Parameters every case gives
    the same value are left out: they hold for the whole sweep.

    Parameters
    ----------
    ds : xarray.Dataset
        A store (:func:`ldpsim.pipeline.store.reading.open_dataset`), a summary
        (:func:`ldpsim.pipeline.summary.summary.summarize`) or a part of one, with the ``sweep``
        attribute.

    Returns
    -------
    dict of str to list
        Parameter name (the spec key: ``d``, ``sparsity``, ``mechanism``) -> one value
        per case, in the order of the ``case`` coordinate; the parameters in the order
        the cases first set them. Values are as the sweep file gives them (int, float,
        str, bool, list). Empty without a ``case`` dimension, without a ``sweep``
        attribute that defines every case on the axis, or when nothing varies.

    Examples
    --------
    >>> case_parameters(summary)  # doctest: +SKIP
    {'d': [10, 10, 1000], 'mechanism': ['laplace', 'gaussian', 'laplace'],
     'delta': [None, 1e-06, None]}
    """
    if CASE_AXIS not in ds.dims:
        return {}
    raw = ds.attrs.get("sweep")
    sweep = json.loads(raw) if raw else {}
    defined = sweep.get("cases") or {}
    labels = [str(label) for label in ds[CASE_AXIS].values]
    if not all(label in defined for label in labels):
        return {}
    spec = sweep.get("spec") or {}
    names = list(dict.fromkeys(key for label in labels for key in defined[label]))
    out = {}
    for name in names:
        values = [defined[label].get(name, spec.get(name)) for label in labels]
        if any(not _same(value, values[0]) for value in values[1:]):
            out[name] = values
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal values of one parameter: None only equals None; 1 equals 1.0."""
    if a is None or b is None:
        return a is b
    return bool(a == b)


def case_coords(ds: xr.Dataset) -> dict[str, xr.DataArray]:
    """:func:`case_parameters` as coordinates along ``case``, named ``case_NAME``.

    A parameter of numbers (not bools) is numeric: int64, or float64 with NaN where a
    case leaves it unset; a parameter of bools all set is bool; any other is text
    (object dtype, like ``case``): strings as they are, other values in JSON, and
    :data:`MISSING_TEXT` where unset.

    Parameters
    ----------
    ds : xarray.Dataset
        As for :func:`case_parameters`.

    Returns
    -------
    dict of str to xarray.DataArray
        ``case_NAME`` -> the values along ``case`` (empty when nothing varies), for
        :meth:`xarray.Dataset.assign_coords`.
    """
    return {
        f"{COORD_PREFIX}{name}": xr.DataArray(
            _array(values),
            dims=CASE_AXIS,
            attrs={"long_name": f"{name} of each case (a spec value the cases vary)"},
        )
        for name, values in case_parameters(ds).items()
    }


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _array(values: list[Any]) -> np.ndarray:
    """One parameter's values as a numpy array (see :func:`case_coords`)."""
    present = [v for v in values if v is not None]
    if all(_is_number(v) for v in present):
        if len(present) == len(values) and all(isinstance(v, numbers.Integral) for v in values):
            return np.array(values, dtype=np.int64)
        return np.array([math.nan if v is None else float(v) for v in values])
    if len(present) == len(values) and all(isinstance(v, bool) for v in values):
        return np.array(values, dtype=bool)
    texts = [
        MISSING_TEXT if v is None else v if isinstance(v, str) else json.dumps(v) for v in values
    ]
    return np.array(texts, dtype=object)
