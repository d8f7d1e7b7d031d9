"""The summary's variables and dimensions: :mod:`ldpsim.pipeline.summary.variables`."""

from __future__ import annotations

import numpy as np
import synthetic as syn
import xarray as xr

from ldpsim.pipeline.summary.partial_cells import partial
from ldpsim.pipeline.summary.summary import summarize
from ldpsim.pipeline.summary.variables import grid_axes, with_coords


def test_with_coords_puts_back_the_coordinates_along_the_dimensions_it_has():
    # A Variable along x gets x's index and the scalar label, not y's index nor the
    # coordinate along (x, y). A mutation assigning every coordinate that shares a
    # dimension with x (set(dims) & dims) dropped the scalar ones and passed every test
    # (a mutation hunt, h19b).
    ds = xr.Dataset(
        coords={
            "x": [1, 2],
            "y": [10, 20, 30],
            "label": "a",
            "xy": (("x", "y"), np.zeros((2, 3))),
        }
    )
    out = with_coords(xr.Variable("x", [0.5, 1.5]), ds)
    assert isinstance(out, xr.DataArray)
    assert set(out.coords) == {"x", "label"}
    assert out["x"].values.tolist() == [1, 2] and out["label"].item() == "a"
    both = with_coords(xr.Variable(("y", "x"), np.ones((3, 2))), ds)
    assert set(both.coords) == {"x", "y", "label", "xy"}


def test_a_summary_of_one_selected_grid_point_keeps_its_scalar_coordinates():
    # A store selected at one tau (a scalar coordinate, no tau axis): its summary and
    # the masks of its partial cells still say which tau they are of.
    ds = syn.grid_store().sel(tau=0.5)
    summary = summarize(ds)
    assert float(summary["tau"]) == 0.5
    assert grid_axes(summary) == ["n"] == grid_axes(ds)
    mask = partial(summary, "coverage")
    assert float(mask["tau"]) == 0.5 and mask["n"].values.tolist() == syn.NS
