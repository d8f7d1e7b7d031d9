"""Every coordinate of a new store explains itself (SPEC section 7), read with plain xarray."""

from __future__ import annotations

import xarray as xr

from ldpsim.pipeline.store.store import Store
from ldpsim.pipeline.sweep import load_sweep

TABLES = {
    "replicates": 2,
    "seed": 1,
    "spec": {"model": "quantile", "tau": 0.5, "n": 1000},
    "grid": {"level": [0.8, 0.95], "gamma": [0.51, 0.6], "c": [1.0, 2.0]},
    "methods": {"sn": {}, "oracle": {}},
}


def test_every_coordinate_of_a_new_store_has_a_long_name(tmp_path):
    # Before, only rep, coord, method, checkpoint, n, tau, eps, case, delta and mu had
    # one: a store with a level, gamma or c axis opened with xr.open_zarr showed those
    # coordinates bare.
    path = tmp_path / "axes.zarr"
    Store.open_or_create(path, load_sweep(TABLES, name="axes"))
    ds = xr.open_zarr(path)
    assert set(ds.coords) == {"level", "gamma", "c", "method", "rep", "coord"}
    for name, coord in ds.coords.items():
        assert coord.attrs.get("long_name"), name
    assert ds["level"].attrs["long_name"] == "nominal coverage 1 - alpha of the intervals"


def test_a_model_parameter_axis_is_named_by_its_spec_key(tmp_path):
    # A model's or mechanism's parameter has no long_name of its own: it gets one that
    # names its spec key.
    tables = {**TABLES, "grid": {"loc": [0.0, 1.0]}}
    path = tmp_path / "loc.zarr"
    Store.open_or_create(path, load_sweep(tables, name="loc"))
    ds = xr.open_zarr(path)
    assert ds["loc"].attrs["long_name"] == "spec value 'loc' (a grid axis)"
