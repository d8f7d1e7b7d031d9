"""A new store's files written with zarr alone equal xarray's ``to_zarr``, byte for byte.

Until 2026-12 ldpsim created its stores with xarray (``Dataset.to_zarr(compute=False,
zarr_format=3)`` of a Dataset of lazy dask arrays); :func:`xarray_template` here is that
writer, on the same description of the arrays, so a store created today is the same
files as one created then (and as one ``xr.open_zarr`` reads the same way).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from ldpsim.pipeline.api import load_sweep
from ldpsim.pipeline.store.code_identity import UNITS_ATTR, sweep_units
from ldpsim.pipeline.store.layout import (
    VARIABLE_ATTRS,
    ZSTD_LEVEL,
    coord_attrs,
    layout_for,
    library_versions,
    truth_array,
)
from ldpsim.pipeline.store.template import TemplateArray, template, write_template
from ldpsim.pipeline.sweep import builtin_sweeps
from ldpsim.tasks.streams.seeding import STREAMS_VERSION


def xarray_template(root: Path, arrays: dict[str, TemplateArray], attrs: dict) -> None:
    """The store's arrays as ldpsim wrote them with xarray: lazy dask arrays for the
    replicates' arrays, the values for the others, the same encoding."""
    import dask.array as da
    import xarray as xr
    from zarr.codecs import Crc32cCodec, ZstdCodec

    data, coords, encoding = {}, {}, {}
    for name, array in arrays.items():
        if array.data is None:
            values = da.zeros(array.shape, dtype=array.dtype, chunks=array.shards)
        else:
            values = array.data
        variable = xr.Variable(array.dims, values, attrs=dict(array.attrs))
        (coords if array.dims == (name,) else data)[name] = variable
        encoding[name] = {"compressors": (ZstdCodec(level=array.zstd_level), Crc32cCodec())}
        if array.chunks is not None:
            encoding[name]["chunks"] = array.chunks
        if array.shards is not None:
            encoding[name]["shards"] = array.shards
    ds = xr.Dataset(data, coords=coords, attrs=attrs)
    ds.to_zarr(
        str(root),
        compute=False,
        mode="w-",
        consolidated=False,
        zarr_format=3,
        encoding=encoding,
        write_empty_chunks=True,
    )


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


SWEEPS = sorted(builtin_sweeps())


@pytest.mark.parametrize("name", SWEEPS)
def test_zarr_writes_what_xarray_wrote(tmp_path, name):
    # At most 3,000 replicates: the rep coordinate and the shards as a sweep of that
    # size has them (scale's 1e6 replicates would only take longer).
    sweep = load_sweep(name, replicates=min(3000, load_sweep(name).replicates))
    arrays, attrs = template(sweep, layout_for(sweep))
    write_template(tmp_path / "zarr", arrays, attrs)
    xarray_template(tmp_path / "xarray", arrays, attrs)
    ours, theirs = files(tmp_path / "zarr"), files(tmp_path / "xarray")
    assert list(ours) == list(theirs)
    for path, content in theirs.items():
        assert ours[path] == content, path


def test_a_large_coordinate_and_a_gpu_sweep(tmp_path):
    # The rep coordinate of 1e6 replicates is chunked by zarr's own rule; a GPU sweep
    # carries its streams' version.
    gpu = load_sweep(
        {
            "replicates": 20,
            "spec": {"model": "quantile", "n": 1000},
            "backend": "gpu",
            "methods": {"bb": {"form": "t"}},
        },
        name="gpu",
    )
    for label, sweep in {"large": load_sweep("scale"), "gpu": gpu}.items():
        arrays, attrs = template(sweep, layout_for(sweep))
        write_template(tmp_path / label / "zarr", arrays, attrs)
        xarray_template(tmp_path / label / "xarray", arrays, attrs)
        assert files(tmp_path / label / "zarr") == files(tmp_path / label / "xarray"), label
    assert "gpu_streams" in attrs and arrays["lower"].data is None


def test_a_new_store_imports_neither_xarray_nor_dask_array(tmp_path):
    code = (
        "import sys\n"
        "from ldpsim.pipeline.store.store import Store\n"
        "from ldpsim.pipeline.sweep import load_sweep\n"
        f"Store.open_or_create({str(tmp_path / 'new.zarr')!r}, load_sweep('demo', replicates=10),"
        " before_write=lambda path: None)\n"
        "print(sorted(m for m in ('xarray', 'dask.array', 'pandas') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert (tmp_path / "new.zarr" / "zarr.json").exists()


def test_a_new_store_s_arrays_are_sharded_as_its_layout_says(tmp_path):
    """Each replicates' array of a new store has shards of ``shard_grid`` x
    ``shard_reps`` and chunks of ``shard_grid`` x ``chunk_reps`` along its grid and 'rep'
    axes (after 'method' where it has one), whole along the others; its data type is the
    one SPEC section 7 names. Both writers of test_zarr_writes_what_xarray_wrote take the
    same description, so a shard or chunk put on the wrong axis, or the two extents
    swapped, passed them (a mutation hunt, h16k)."""
    sweep = load_sweep(
        {
            "replicates": 20_000,
            "rep_chunk": 16,
            "spec": {"model": "quantile"},
            "grid": {"tau": [0.5, 0.7, 0.9], "n": [200]},
            "methods": {"bb": {}, "sn": {}, "oracle": {}},
        },
        name="three",
    )
    layout = layout_for(sweep)
    # The premise: chunks and shards apart, a shard of 3 x 1 grid points.
    assert (layout.chunk_reps, layout.shard_reps, layout.shard_grid) == (10_912, 21_824, (3, 1))
    arrays, attrs = template(sweep, layout)
    write_template(tmp_path / "s.zarr", arrays, attrs)
    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="r")
    g = layout.shard_grid
    for name, before, after in (
        ("estimate", (), (1,)),
        ("lower", (3,), (1,)),
        ("method_seconds", (3,), ()),
        ("done", (), ()),
        ("code_version", (), ()),
    ):
        array = group[name]
        assert array.shards == (*g, *before, layout.shard_reps, *after), name
        assert array.chunks == (*g, *before, layout.chunk_reps, *after), name
    assert group["code_version"].dtype == np.int16 and group["job_id"].dtype == np.int64
    assert (attrs["rep_chunk"], attrs["chunk_reps"], attrs["shard_reps"]) == (16, 10_912, 21_824)
    assert attrs["shard_grid"] == [3, 1]


def test_a_template_is_not_written_over_an_existing_store(tmp_path):
    # The group is created with mode "w-": written over a store ("w"), its arrays would
    # be replaced by empty ones, every replicate lost (a mutation hunt, h16k).
    sweep = load_sweep("demo", replicates=10)
    arrays, attrs = template(sweep, layout_for(sweep))
    write_template(tmp_path / "s.zarr", arrays, attrs)
    before = files(tmp_path / "s.zarr")
    with pytest.raises(FileExistsError):
        write_template(tmp_path / "s.zarr", arrays, {**attrs, "title": "another"})
    assert files(tmp_path / "s.zarr") == before


def test_a_template_describes_each_array_as_the_spec_says(tmp_path):
    # A hunt (h21c): the writers compared above take the same description, so a wrong
    # dimension, type, chunk, level, attribute or coordinate in it passed them; here
    # the description of an unsharded store with checkpoints, and its root attributes.
    sweep = load_sweep(
        {
            "replicates": 5,
            "rep_chunk": 2,
            "description": "two taus",
            "spec": {"model": "quantile", "n": 100, "checkpoints": [50, 100]},
            "grid": {"tau": [0.5, 0.9]},
            "methods": {"bb": {}, "oracle": {}},
        },
        name="small",
    )
    layout = layout_for(sweep, shards=None)
    d = layout.d
    arrays, attrs = template(sweep, layout)
    expected = {  # dims, dtype and chunks (one grid point, 2 replicates)
        "estimate": (("tau", "rep", "checkpoint", "coord"), np.float64, (1, 2, 2, d)),
        "projected": (("tau", "rep", "checkpoint", "coord"), np.float64, (1, 2, 2, d)),
        "lower": (("tau", "method", "rep", "checkpoint", "coord"), np.float64, (1, 2, 2, 2, d)),
        "method_seconds": (("tau", "method", "rep", "checkpoint"), np.float64, (1, 2, 2, 2)),
        "method_failed": (("tau", "method", "rep", "checkpoint"), np.bool_, (1, 2, 2, 2)),
        "done": (("tau", "rep"), np.bool_, (1, 2)),
        "failed": (("tau", "rep"), np.bool_, (1, 2)),
        "seconds": (("tau", "rep"), np.float64, (1, 2)),
        "job_id": (("tau", "rep"), np.int64, (1, 2)),
        "code_version": (("tau", "rep"), np.int16, (1, 2)),
    }
    sizes = {"tau": 2, "method": 2, "rep": 5, "checkpoint": 2, "coord": d}
    for name, (dims, dtype, chunks) in expected.items():
        array = arrays[name]
        assert (array.dims, array.dtype, array.chunks) == (dims, dtype, chunks), name
        assert array.shape == tuple(sizes[a] for a in dims), name
        assert array.shards is None and array.data is None, name
        assert (array.zstd_level, array.attrs) == (ZSTD_LEVEL, VARIABLE_ATTRS[name]), name
    values = {
        "tau": [0.5, 0.9],
        "method": ["bb", "oracle"],
        "rep": [0, 1, 2, 3, 4],
        "coord": list(range(d)),
        "checkpoint": [50, 100],
    }
    for name, listed in values.items():
        array = arrays[name]
        assert array.dims == (name,) and array.data.tolist() == listed, name
        assert (array.chunks, array.shards, array.zstd_level) == (None, None, 0), name
        assert array.attrs == coord_attrs(name), name
    assert arrays["rep"].dtype == np.int64 and arrays["method"].dtype == object
    for name, pseudo in (("truth", False), ("pseudo_truth", True)):
        assert arrays[name].dims == ("tau", "coord") and arrays[name].attrs == VARIABLE_ATTRS[name]
        np.testing.assert_array_equal(arrays[name].data, truth_array(sweep, layout, pseudo=pseudo))
    assert sorted(arrays) == sorted(
        [*expected, *values, "last", "upper", "method_estimate", "truth", "pseudo_truth"]
    )
    # The root attributes; an unsharded store has none of the shards'.
    assert attrs["title"] == "ldpsim sweep 'small'" and attrs["description"] == "two taus"
    assert attrs["sweep"] == sweep.to_json() and attrs["rep_chunk"] == 2
    assert attrs["level"] == sweep.points()[0].normalized.level
    assert not {"shard_reps", "shard_grid", "chunk_reps", "gpu_streams"} & set(attrs)
    assert json.loads(attrs["versions"]) == library_versions()
    assert attrs["streams_version"] == STREAMS_VERSION
    assert json.loads(attrs[UNITS_ATTR]) == [sweep_units(sweep)]
    created = time.mktime(time.strptime(attrs["created"], "%Y-%m-%dT%H:%M:%S%z"))
    assert abs(created - time.time()) < 600
    assert attrs["conventions"].startswith("done(grid, rep) is true only after")
    # Written: floats read NaN where no run wrote, with xarray's _FillValue attribute;
    # the flags False, the ids 0; the coordinates and truths hold their values.
    write_template(tmp_path / "s.zarr", arrays, attrs)
    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="r")
    nan_bytes = base64.standard_b64decode(group["estimate"].attrs["_FillValue"])
    assert np.isnan(np.frombuffer(nan_bytes, dtype=np.float64)).all() and len(nan_bytes) == 8
    assert np.isnan(group["lower"][...]).all() and np.isnan(group["seconds"][...]).all()
    assert not group["done"][...].any() and (group["job_id"][...] == 0).all()
    assert "_FillValue" not in group["done"].attrs and "_FillValue" not in group["rep"].attrs
    assert group["method"][...].tolist() == ["bb", "oracle"]
    assert group["checkpoint"][...].tolist() == [50, 100]
    np.testing.assert_array_equal(group["truth"][...], arrays["truth"].data)
    assert dict(group.attrs) == attrs
