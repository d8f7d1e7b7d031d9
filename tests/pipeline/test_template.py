"""A new store's files written with zarr alone equal xarray's ``to_zarr``, byte for byte.

Until 2026-12 ldpsim created its stores with xarray (``Dataset.to_zarr(compute=False,
zarr_format=3)`` of a Dataset of lazy dask arrays); :func:`xarray_template` here is that
writer, on the same description of the arrays, so a store created today is the same
files as one created then (and as one ``xr.open_zarr`` reads the same way).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ldpsim.pipeline.api import load_sweep
from ldpsim.pipeline.store.layout import layout_for
from ldpsim.pipeline.store.template import TemplateArray, template, write_template
from ldpsim.pipeline.sweep import builtin_sweeps


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
    import zarr

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
