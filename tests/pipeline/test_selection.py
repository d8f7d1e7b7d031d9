"""Selecting methods and grid values: the ``ds.ldpsim`` accessor, ``open_store``'s
selection, and :func:`ldpsim.pipeline.api.run` returning the sweep's part of its store."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr
from conftest import write_sweep

from ldpsim.pipeline import api
from ldpsim.pipeline.errors import InputError, StoreDamage
from ldpsim.pipeline.summary.tables import replicates_per_cell

#: The demo store's (conftest's `demo_store`) method labels, in store order.
DEMO_METHODS = ["bb", "bm", "sn", "oracle"]


@pytest.fixture(scope="module")
def demo(demo_store) -> xr.Dataset:
    return api.open_store(demo_store, load=True)


def test_the_accessor_is_there_once_ldpsim_opens_a_store_and_the_api_stays_light(demo_store):
    # Importing the API does not import xarray (half a second for every command); the
    # first store ldpsim opens registers ds.ldpsim, on that Dataset and every other.
    code = (
        "import sys, ldpsim.pipeline.api as api; light = 'xarray' not in sys.modules; "
        f"ds = api.open_store({str(demo_store)!r}); import xarray as xr; "
        "other = xr.Dataset({'x': ('method', [1, 2])}, coords={'method': ['a', 'b']}); "
        "print(light, list(ds.ldpsim.sel(method='bb')['method'].values.shape), "
        "int(other.ldpsim.sel(method='b')['x']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "[]", "2"], out


def test_accessor_selects_a_method_and_a_grid_value_as_the_dict_form_does(demo):
    assert demo["method"].values.tolist() == DEMO_METHODS
    got = demo.ldpsim.sel(method="bm", tau=0.9)
    xr.testing.assert_identical(got, demo.sel({"method": "bm", "tau": 0.9}))
    assert "method" not in got.dims and got["method"].item() == "bm"
    want = demo["lower"].values[1, :, 1]  # dims (tau, n, method, rep, coord)
    np.testing.assert_array_equal(got["lower"].values, want)
    # The trap the accessor avoids: xarray reads method= as its fill method.
    assert demo.sel(method="bm").sizes["method"] == len(DEMO_METHODS)
    # A list keeps the dimension, in the order given; a DataArray has the accessor too.
    kept = demo.ldpsim.sel({"method": ["oracle", "bb"]}, tau=[0.5])
    assert kept["method"].values.tolist() == ["oracle", "bb"] and kept.sizes["tau"] == 1
    xr.testing.assert_identical(
        demo["upper"].ldpsim.sel(method="sn"), demo["upper"].sel({"method": "sn"})
    )
    xr.testing.assert_identical(demo.ldpsim.isel(method=-1), demo.sel({"method": "oracle"}))


@pytest.mark.parametrize(
    ("selection", "words"),
    [
        ({"method": "bx"}, ["method = 'bx'", "labels of method are: bb, bm, sn, oracle."]),
        ({"method": ["bb", "nope"]}, ["method = 'nope'", "bb, bm, sn, oracle"]),
        ({"tau": 0.7, "method": "bb"}, ["tau = 0.7", "labels of tau are: 0.5, 0.9."]),
        ({"n": 10_000}, ["n = 10000", "labels of n are: 1000."]),
        ({"eps": 1.0}, ["on 'eps'", "the dimensions are: ", "method", "tau", "rep", "coord"]),
    ],
)
def test_unknown_label_or_dimension_is_refused_with_what_is_allowed(demo, selection, words):
    with pytest.raises(InputError) as refused:
        demo.ldpsim.sel(**selection)
    message = str(refused.value)
    assert "\n" not in message and "(ds.ldpsim.sel)" in message
    for word in words:
        assert word in message, (word, message)


def test_isel_refuses_a_position_past_the_end_and_a_non_integer(demo):
    with pytest.raises(InputError, match=r"method has 4 positions, 0 to 3"):
        demo.ldpsim.isel(method=4)
    with pytest.raises(api.InputTypeError, match=r"must be an int"):
        demo.ldpsim.isel(method="bb")


def test_open_store_subsets_by_method_and_grid_value(demo_store, demo):
    lazy = api.open_store(demo_store, method="bb")
    assert lazy["lower"].chunks is not None  # still lazy
    assert dict(lazy.sizes) == {**demo.sizes, "method": 1}  # every dimension kept
    xr.testing.assert_identical(lazy.compute(), demo.sel({"method": ["bb"]}))
    loaded = api.open_store(demo_store, load=True, method=["sn", "bb"], tau=0.9)
    assert loaded["method"].values.tolist() == ["sn", "bb"] and loaded.sizes["tau"] == 1
    xr.testing.assert_identical(loaded, demo.sel({"method": ["sn", "bb"], "tau": [0.9]}))
    assert len(api.summarize(loaded)) == 2  # a store's Dataset still: one row per method
    with pytest.raises(InputError, match=r"'rep' \(open_store\).*grid axes only: method, tau, n"):
        api.open_store(demo_store, rep=0)
    with pytest.raises(InputError, match=r"method = 'BB' \(open_store\)"):
        api.open_store(demo_store, method="BB")


def test_run_returns_the_sweep_asked_for_and_says_what_else_the_store_holds(
    tmp_path, local_cluster, capsys
):
    store = tmp_path / "S.zarr"
    grid = {"tau": [0.5], "n": [2000, 5000]}
    big = write_sweep(tmp_path / "big.toml", replicates=4, grid=grid)
    first = api.run(big, store, scheduler=local_cluster.scheduler_address, progress=False)
    assert first.attrs[api.REPORT_ATTR]["store_holds"] is None
    assert (first.sizes["rep"], first.sizes["n"]) == (4, 2)

    small = write_sweep(tmp_path / "small.toml", replicates=2, grid={"tau": [0.5], "n": [2000]})
    capsys.readouterr()
    ds = api.run(small, store, scheduler=local_cluster.scheduler_address, progress=True)
    report = ds.attrs[api.REPORT_ATTR]
    assert (report["computed"], report["done"], report["total"]) == (0, 2, 2)
    assert ds["rep"].values.tolist() == [0, 1] and ds["n"].values.tolist() == [2000]
    assert ds["method"].values.tolist() == ["bb", "bm", "oracle"]
    whole = api.open_store(store)  # open_store still gives everything
    assert (whole.sizes["rep"], whole["n"].values.tolist()) == (4, [2000, 5000])
    xr.testing.assert_identical(
        ds.drop_attrs().compute(),
        whole.isel(rep=slice(0, 2)).sel(n=[2000]).drop_attrs().compute(),
    )
    assert report["store_holds"] == {
        "replicates": 4,
        "methods": ["bb", "bm", "oracle"],
        "grid": {"tau": [0.5], "n": [2000, 5000]},
    }
    lines = [line for line in capsys.readouterr().out.splitlines() if "holds more" in line]
    assert len(lines) == 1, lines
    assert "4 replicates per grid point (returned: the first 2); n = 5000" in lines[0]
    assert f"open_store({str(store)!r})" in lines[0]
    # Its tables describe the part: 2 of 2 replicates in every cell, none marked partial.
    assert json.loads(ds.attrs["sweep"])["replicates"] == 2
    summary = api.summarize(ds, as_dataset=True)
    assert replicates_per_cell(summary, "replicates_done") == "replicates per cell: 2 of 2"


def test_compare_is_the_python_side_of_summarize_compare(demo_store, capsys):
    table = api.compare(demo_store, "bb", "sn")
    dataset = api.compare(demo_store, "bb", "sn", as_dataset=True)
    assert len(table) == dataset.sizes["tau"] * dataset.sizes["n"] * dataset.sizes["coord"]
    assert table["coverage_diff"].tolist() == dataset["coverage_diff"].values.ravel().tolist()
    for a, b, words in (("bb", "bb", "two different"), ("bb", "nope", "'nope' is not")):
        with pytest.raises(InputError, match=words):
            api.compare(demo_store, a, b)


def test_a_label_twice_is_refused_and_a_tuple_is_a_list_of_labels(demo_store, demo):
    # A label selected twice would count its replicates twice in a summary.
    for select in (
        lambda: demo.ldpsim.sel(method=["bb", "bb"]),
        lambda: api.open_store(demo_store, n=[1000, 1000.0]),
        lambda: demo.ldpsim.isel(rep=[0, -2]),  # two replicates: -2 is 0
    ):
        with pytest.raises(InputError, match=r"twice \((ds\.ldpsim\.i?sel|open_store)\)"):
            select()
    with pytest.raises(InputError, match=r"position -2 \(= 0\) of rep twice"):
        demo.ldpsim.isel(rep=[0, -2])
    # xarray reads a tuple as one label; open_store and the accessor as its labels.
    for ds in (
        api.open_store(demo_store, method=("bb", "sn")),
        demo.ldpsim.sel(method=("bb", "sn")),
    ):
        assert ds["method"].values.tolist() == ["bb", "sn"]


def test_nested_labels_and_an_empty_selection_are_refused_in_one_line(demo_store, demo):
    # Before: pandas' "unhashable type: 'list'", numpy's "setting an array element with a
    # sequence" and xarray's "Unlabeled multi-dimensional array" (no ldpsim message).
    for select, words in (
        (lambda: demo.ldpsim.sel(method=[["bb"], ["oracle"]]), "labels of 'method'"),
        (lambda: demo.ldpsim.sel(tau=[[0.5]]), "labels of 'tau'"),
        (lambda: demo.ldpsim.sel(method=np.array([["bb"]])), "labels of 'method'"),
        (lambda: demo.ldpsim.isel(method=[[0], [1]]), "positions of 'method'"),
        (lambda: api.open_store(demo_store, method=[["bb"]]), "labels of 'method'"),
    ):
        with pytest.raises(api.InputTypeError) as refused:
            select()
        message = str(refused.value)
        assert words in message and ("flat list" in message or "list of ints" in message)
        assert "\n" not in message, message
    # Before: a Dataset with no method (or tau), refused only by the summary after it.
    for selection, dim in (({"method": []}, "method"), ({"tau": []}, "tau")):
        with pytest.raises(InputError, match=rf"Cannot select no {dim} \(open_store\)"):
            api.open_store(demo_store, **selection)
    # A flat list, an Index and a one-dimensional array still select.
    assert demo.ldpsim.sel(method=np.array(["sn", "bb"]))["method"].values.tolist() == [
        "sn",
        "bb",
    ]


@pytest.mark.parametrize(
    ("select", "words"),
    [
        (
            lambda ds: ds.ldpsim.sel(method="bb"),
            "'lower' has no dimension 'method'. A selection of a single label drops its "
            "dimension: select a list, ds.ldpsim.sel(method=[...]) or open_store(path, ",
        ),
        (lambda ds: ds.isel(coord=0), "no dimension 'coord'. A selection of a single label"),
        # Before: accepted, and tau = 0.9 was named nowhere (caption, records, figures).
        (
            lambda ds: ds.ldpsim.sel(tau=0.9),
            "it has no dimension 'tau', a grid axis of its sweep. A selection of a single "
            "label drops its dimension: select a list, ds.ldpsim.sel(tau=[...]) or ",
        ),
        (lambda ds: ds.isel(coord=0), "select a list, ds.ldpsim.isel(coord=[...])."),
        (lambda ds: ds.isel(rep=[1, 1]), "holds rep = 1 twice"),
        (lambda ds: ds.sel({"method": []}), "has no method: the selection kept none"),
        (lambda ds: ds.drop_vars("truth"), "has no variable 'truth'"),
        (lambda ds: api.summarize(ds, as_dataset=True), "has no variable 'truth'"),
    ],
)
def test_a_dataset_that_is_not_a_stores_is_refused_in_one_line(demo, select, words):
    bad = select(demo)
    for call in (api.summarize, lambda ds: api.compare(ds, "bb", "sn"), api.plot):
        with pytest.raises(InputError) as refused:
            call(bad)
        message = str(refused.value)
        assert words in message and "\n" not in message, message


def test_a_selection_of_replicates_is_marked_partial_and_any_order_of_dimensions_counts(demo):
    # Replicate 1 of the store's 2: every cell says so, as a partial cell.
    summary = api.summarize(demo.isel(rep=[1]), as_dataset=True)
    assert replicates_per_cell(summary, "n_done") == "replicates per cell: 1 of 2"
    assert set(api.summarize(demo.isel(rep=[1]))["n_replicates"]) == {2}
    assert api.compare(demo.isel(rep=[1]), "bb", "sn", as_dataset=True).attrs["replicates"] == 2
    # Dimensions in another order: the same numbers.
    xr.testing.assert_identical(
        api.summarize(demo.transpose("rep", ...), as_dataset=True),
        api.summarize(demo, as_dataset=True),
    )


def test_a_lazy_dataset_of_a_damaged_store_is_refused_as_its_path_is(demo_store, tmp_path):
    copy = tmp_path / "damaged.zarr"
    shutil.copytree(demo_store, copy)
    lazy = api.open_store(copy)  # opened before the damage, as a notebook holds it
    next(
        path
        for path in sorted((copy / "upper").rglob("*"))
        if path.is_file() and path.name != "zarr.json"
    ).unlink()
    for call in (api.summarize, lambda ds: api.compare(ds, "bb", "sn"), api.plot):
        with pytest.raises(StoreDamage, match=r"is damaged: 1 data file\(s\) missing \(upper/c/"):
            call(lazy)


def test_compare_has_rows_only_for_the_coordinates_a_grid_point_has():
    # Before: a grid point of smaller d (truth NaN beyond its d, as a case of d = 1 beside
    # one of d = 3) got NaN rows for the coordinates it has not, where api.summarize and
    # `ldpsim summarize --compare --format csv` leave them out.
    import synthetic as syn

    ds = syn.grid_store()
    ds["truth"] = ds["truth"].copy(deep=True)
    ds["truth"].loc[{"tau": 0.5, "coord": 1}] = np.nan
    table = api.compare(ds, "bb", "oracle")
    summary = api.summarize(ds)
    assert len(table) == 3 * ds.sizes["n"] == len(summary[summary["method"] == "bb"])
    assert not ((table["tau"] == 0.5) & (table["coord"] == 1)).any()
    assert table["coord_exists"].all()


# A hunt (2026-12-02, mutants of accessor.py): these held with a bound of isel off by
# one, bools taken as positions, a long axis's labels or the line saying what else a
# store holds miscounted, and still every test passed. On synthetic.grid_store: fast.


@pytest.fixture(scope="module")
def grid() -> xr.Dataset:
    import synthetic as syn

    return syn.grid_store()


def test_isel_takes_every_position_from_either_end_and_a_slice_and_refuses_the_rest(grid):
    # rep has 40 positions: 0 to 39, or -40 to -1 from the end.
    xr.testing.assert_identical(grid.ldpsim.isel(rep=-40), grid.isel(rep=0))
    xr.testing.assert_identical(grid.ldpsim.isel(rep=[39, -39]), grid.isel(rep=[39, 1]))
    assert grid.ldpsim.isel(rep=slice(2, 5))["rep"].values.tolist() == [2, 3, 4]
    assert grid.ldpsim.isel(rep=np.int64(3))["rep"].item() == 3
    with pytest.raises(InputError) as refused:
        grid.ldpsim.isel(rep=-41)
    assert str(refused.value) == (
        "Cannot select position -41 of rep (ds.ldpsim.isel): rep has 40 positions, 0 to 39 "
        "(or -40 to -1 from the end)."
    )
    # True is not position 1.
    with pytest.raises(api.InputTypeError, match=r"positions of 'method' .* Got True\."):
        grid.ldpsim.isel(method=True)
    with pytest.raises(InputError) as refused:
        grid["lower"].ldpsim.isel(eps=0)
    assert str(refused.value) == (
        "Cannot select on 'eps' (da.ldpsim.isel): no such dimension; the dimensions are: "
        "tau, n, method, rep, coord."
    )


def test_a_refused_label_names_a_short_axis_whole_and_a_long_one_by_its_ends(grid):
    for reps, labels in (
        (12, "0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11."),
        (13, "0, 1, 2, 3, 4, ..., 11, 12 (13 labels)."),
        (40, "0, 1, 2, 3, 4, ..., 38, 39 (40 labels)."),
    ):
        with pytest.raises(InputError) as refused:
            grid.isel(rep=slice(0, reps)).ldpsim.sel(rep=99)
        assert str(refused.value) == (
            f"Cannot select rep = 99 (ds.ldpsim.sel): no such label; the labels of rep are: "
            f"{labels}"
        )


def test_the_accessor_selects_what_it_does_not_refuse_as_xarray_does(grid):
    # A label in a 0-d array is that label; an empty list an empty dimension (which
    # summarize refuses); a DataArray of two dimensions is xarray's vectorized indexing.
    label = np.array("oracle")
    xr.testing.assert_identical(grid.ldpsim.sel(method=label), grid.sel({"method": label}))
    assert grid.ldpsim.sel(method=[]).sizes["method"] == 0
    pick = xr.DataArray([[0], [1]], dims=("x", "y"))
    xr.testing.assert_identical(grid.ldpsim.sel(coord=pick), grid.sel(coord=pick))
    # A label a Dataset holds twice (not a store's) selects both, as xarray's sel.
    twice = xr.Dataset({"x": ("method", [1, 2, 3])}, coords={"method": ["bb", "sn", "bb"]})
    assert twice.ldpsim.sel(method="bb")["x"].values.tolist() == [1, 3]
    # A label pandas cannot look up (a set: unhashable) is refused as any other.
    with pytest.raises(InputError, match=r"Cannot select method = \{'oracle'\} \(ds"):
        grid.ldpsim.sel(method={"oracle"})
    with pytest.raises(
        api.InputTypeError,
        match=r"'indexers' parameter of ds\.ldpsim\.sel must be a mapping .* Got \['method'\]\.",
    ):
        grid.ldpsim.sel(["method"])


def test_open_store_takes_a_slice_of_labels(tmp_path):
    import synthetic as syn

    store = syn.save_store(syn.grid_store(), tmp_path / "s.zarr")
    ds = api.open_store(store, tau=slice(0.6, 1.0), n=[10_000], method="oracle")
    assert ds["tau"].values.tolist() == [0.9] and ds["method"].values.tolist() == ["oracle"]
    assert dict(ds.sizes) == {"tau": 1, "n": 1, "method": 1, "rep": 40, "coord": 2}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda ds: ds.isel(rep=0), "'done' has no dimension 'rep'"),
        (
            lambda ds: ds.assign(truth=ds["truth"].isel(coord=0)),
            "'truth' has no dimension 'coord'",
        ),
    ],
)
def test_a_dropped_replicate_or_coordinate_is_refused_saying_how_to_keep_it(grid, change, words):
    dim = words.split("'")[-2]
    with pytest.raises(InputError) as refused:
        api.summarize(change(grid))
    assert str(refused.value).endswith(
        f"{words}. A selection of a single label drops its dimension: select a list, "
        f"ds.ldpsim.isel({dim}=[...])."
    )


def test_a_sweep_record_that_cannot_be_read_names_no_grid_axis(grid):
    from ldpsim.pipeline.accessor import check_store_dataset

    for record in ("not json", "[1, 2]", '{"grid": ["tau"]}'):
        check_store_dataset(grid.assign_attrs(sweep=record).isel(tau=0), "summarize")


def test_registering_the_accessor_again_warns_nothing():
    import warnings

    from ldpsim.pipeline.accessor import register

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        register()


def _sweep(grid: dict, methods: list[str], replicates: int):
    tables = {"replicates": replicates, "seed": 0, "spec": {"model": "quantile", "eps": 1.0}}
    tables |= {"grid": grid, "methods": {m: {} for m in methods}}
    return api.load_sweep(tables, name="part")


def test_the_part_of_a_store_a_sweep_asks_for_and_the_line_naming_the_rest(grid):
    from ldpsim.pipeline.accessor import store_holds_text, sweep_part

    everything = _sweep({"tau": [0.5, 0.9], "n": [100, 10_000]}, ["bb", "oracle"], 40)
    whole, holds = sweep_part(grid, everything)
    assert holds is None
    xr.testing.assert_identical(whole, grid)
    sweep = _sweep({"tau": [0.9], "n": [10_000, 100]}, ["oracle"], 2)
    part, holds = sweep_part(grid, sweep)
    # The sweep's grid values and methods, in its order, and its first replicates.
    xr.testing.assert_identical(
        part.drop_attrs(), grid.isel(tau=[1], n=[1, 0], method=[1], rep=[0, 1]).drop_attrs()
    )
    assert json.loads(part.attrs["sweep"])["replicates"] == 2
    assert json.loads(grid.attrs["sweep"])["replicates"] == 40  # the store's as it was
    assert holds == {
        "replicates": 40,
        "methods": ["bb", "oracle"],
        "grid": {"tau": [0.5, 0.9], "n": [100, 10_000]},
    }
    assert store_holds_text(holds, sweep, "S.zarr") == (
        "The store holds more than this sweep: 40 replicates per grid point (returned: the "
        "first 2); tau = 0.5; method bb. The Dataset returned holds the sweep's part; "
        "open_store('S.zarr') gives all of it."
    )
    # As many replicates as the sweep's, its grid, two methods more.
    holds = {**holds, "replicates": 2, "methods": ["bb", "bm", "oracle"]}
    holds["grid"] = {"tau": [0.9], "n": [100, 10_000]}
    assert store_holds_text(holds, sweep, "S.zarr").startswith(
        "The store holds more than this sweep: methods bb, bm. The Dataset"
    )
