"""ldpsim.pipeline.api: a run on the caller's own client, resume, extension, the CLI's errors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from conftest import DEMO_ARGS, one_error_line, tree_hash

from ldpsim.pipeline import api
from ldpsim.pipeline.cli import main
from ldpsim.pipeline.errors import InputError, StoreDamage
from ldpsim.pipeline.report.plots import FIGURE_KINDS
from ldpsim.pipeline.store.layout import META_GROUP
from ldpsim.pipeline.store.lock import RunLock

#: Data variables holding wall times: the only ones two runs of a sweep may differ in.
TIMINGS = {"seconds", "method_seconds"}


def demo_sweep(replicates: int = 2):
    """The sweep of conftest's DEMO_ARGS (`demo --replicates 2 --set grid.n=[1000]`)."""
    return api.load_sweep("demo", replicates=replicates, grid__n=[1000])


@pytest.fixture(scope="module")
def client(local_cluster):
    """The caller's own client of the session cluster, as a notebook would hold it."""
    from distributed import Client

    with Client(local_cluster, set_as_default=False) as own:
        yield own


@pytest.fixture(scope="module")
def api_store(tmp_path_factory, client):
    """The demo store of conftest's `demo_store`, written through the API."""
    store = tmp_path_factory.mktemp("api") / "A.zarr"
    ds = api.run(demo_sweep(), store, client=client, progress=False)
    return store, ds


def test_load_sweep_overrides_are_the_cli_overrides():
    by_keyword = api.load_sweep("demo", replicates=3, eps=2.0, grid__n=[1000, 2000])
    by_dotted_key = api.load_sweep("demo", replicates=3, eps=2.0, **{"grid.n": [1000, 2000]})
    by_set = api.load_sweep("demo", set=["eps=2.0", "grid.n=[1000, 2000]", "replicates=3"])
    assert by_keyword == by_dotted_key == by_set
    assert by_keyword.replicates == 3 and by_keyword.base["eps"] == 2.0
    assert by_keyword.grid["n"] == [1000, 2000]
    assert by_keyword != api.load_sweep("demo", replicates=3)
    # spec.KEY is the bare KEY: it drops the grid axis of that name (a hunt, 2026-12-01:
    # it was refused as "both in [spec] and in [grid]").
    by_spec = api.load_sweep("demo", set=["spec.n=500"])
    assert by_spec == api.load_sweep("demo", n=500) == api.load_sweep("demo", spec__n=500)
    assert "n" not in by_spec.grid and by_spec.base["n"] == 500


def test_run_on_own_client_returns_lazy_dataset_and_report(api_store, client, local_cluster):
    _, ds = api_store
    assert isinstance(ds, xr.Dataset)
    assert ds["estimate"].chunks is not None  # lazy: dask-backed
    report = ds.attrs[api.REPORT_ATTR]
    assert report["total"] == report["done"] == report["computed"] == 2 * 1 * 2  # tau x n x rep
    assert (report["failed"], report["missing"], report["already_done"]) == (0, 0, 0)
    assert (report["exit_code"], report["status"]) == (api.EXIT_OK, "complete")
    assert report["seconds"] > 0
    assert bool(ds["done"].all())
    # The caller's client is left open on the caller's cluster: no cluster was started.
    assert client.status == "running"
    assert client.scheduler.address == local_cluster.scheduler_address


def test_second_run_is_a_no_op(api_store, client, tmp_path):
    store, _ = api_store
    copy = tmp_path / "copy.zarr"
    shutil.copytree(store, copy)
    before = tree_hash(copy)
    ds = api.run(demo_sweep(), copy, client=client, progress=False)
    report = ds.attrs[api.REPORT_ATTR]
    assert (report["computed"], report["already_done"], report["done"]) == (0, 4, 4)
    assert report["status"] == "complete"
    assert tree_hash(copy) == before  # not a byte written, not even the lock


def test_api_and_cli_stores_are_bit_identical(api_store, demo_store):
    _, ds = api_store
    cli_ds = api.open_store(demo_store, load=True)
    assert set(ds.data_vars) == set(cli_ds.data_vars)
    assert json.loads(ds.attrs["sweep"]) == json.loads(cli_ds.attrs["sweep"])
    compared = sorted(set(ds.data_vars) - TIMINGS)
    assert {"estimate", "lower", "upper", "done"} <= set(compared)
    for name in compared:
        a, b = ds[name].values, cli_ds[name].values
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name


def test_extension_computes_only_the_new_replicates(api_store, client, tmp_path, capsys):
    store, base = api_store
    copy = tmp_path / "extend.zarr"
    shutil.copytree(store, copy)
    ds = api.run(demo_sweep(replicates=3), copy, client=client, progress=True)
    report = ds.attrs[api.REPORT_ATTR]
    assert (report["computed"], report["already_done"], report["total"]) == (2, 4, 6)
    assert ds.sizes["rep"] >= 3 and bool(ds["done"].isel(rep=slice(0, 3)).all())
    old = ds["estimate"].isel(rep=slice(0, 2)).values
    assert old.tobytes() == base["estimate"].isel(rep=slice(0, 2)).values.tobytes()
    err = capsys.readouterr().err
    assert "2/2 rep" in err  # the tqdm bar (tqdm.auto is tqdm's text bar outside Jupyter)


def test_summarize_is_a_tidy_frame_of_the_cli_records(api_store):
    from ldpsim.pipeline.summary.summary import summarize
    from ldpsim.pipeline.summary.tables import records

    store, ds = api_store
    frame = api.summarize(ds)
    assert isinstance(frame, pd.DataFrame)
    expected = records(summarize(api.open_store(store, load=True)))
    assert len(frame) == len(expected) == 2 * 4 * 1  # tau x method x coord
    assert list(frame.columns) == list(expected[0])
    assert list(frame["method"]) == [r["method"] for r in expected]
    assert frame["coverage"].dtype == np.float64 and (frame["n_done"] == 2).all()
    assert frame["coverage"].between(0, 1).all()
    means = api.summarize(store, coords="mean")  # a path works too
    assert len(means) == 2 * 4 and "joint_coverage" in means.columns
    summary = api.summarize(ds, as_dataset=True)
    assert isinstance(summary, xr.Dataset) and "coverage_se" in summary
    assert ds["estimate"].chunks is not None  # the caller's Dataset stays lazy


def test_plot_returns_figures_that_show_inline(api_store):
    from matplotlib.figure import Figure

    _, ds = api_store
    fig = api.plot(ds, "coverage")
    assert isinstance(fig, Figure)
    assert fig._repr_png_().startswith(b"\x89PNG")  # what IPython displays
    figures = api.plot(ds, "all")
    assert list(figures)[:2] == ["coverage", "length"]
    assert set(figures) <= set(FIGURE_KINDS)
    with pytest.raises(InputError, match="Unknown figure kind 'bogus'"):
        api.plot(ds, "bogus")
    with pytest.raises(InputError, match="no data for the 'running' figure; its figures are: "):
        api.plot(ds, "running")  # the demo has no checkpoints


def test_bad_input_raises_the_cli_message(tmp_path, capsys):
    code = main(["run", *DEMO_ARGS, "--set", "bogus=1", "--store", str(tmp_path / "x.zarr")])
    line = one_error_line(capsys.readouterr(), code, ["bogus"])
    with pytest.raises(InputError) as raised:
        api.load_sweep("demo", set=["bogus=1"])
    assert line == f"ldpsim: error: {raised.value}"
    with pytest.raises(InputError, match="Unknown key 'bogus' in \\[spec\\]"):
        api.load_sweep("demo", bogus=1)


def test_a_store_in_use_is_refused(api_store, client, tmp_path, capsys):
    store, _ = api_store
    copy = tmp_path / "held.zarr"
    shutil.copytree(store, copy)
    lock = RunLock(copy / META_GROUP)
    lock.acquire(log=lambda message: None)
    try:
        before = tree_hash(copy)
        with pytest.raises(InputError, match="being written by another ldpsim run") as raised:
            # More replicates, so that the run needs the store (a finished one does not).
            api.run(demo_sweep(replicates=3), copy, client=client, progress=False)
        code = main(["run", *DEMO_ARGS, "--replicates", "3", "--store", str(copy)])
        line = one_error_line(capsys.readouterr(), code)
        assert line.split(" (")[0] == f"ldpsim: error: {raised.value}".split(" (")[0]
        assert tree_hash(copy) == before
    finally:
        lock.release()


def test_a_damaged_store_is_refused_with_the_cli_message(api_store, tmp_path, capsys):
    store, _ = api_store
    copy = tmp_path / "damaged.zarr"
    shutil.copytree(store, copy)
    (copy / "estimate" / "zarr.json").write_text("{not json")
    with pytest.raises(StoreDamage, match=r"is damaged: estimate/zarr\.json") as raised:
        api.open_store(copy)
    code = main(["summarize", str(copy)])
    line = one_error_line(capsys.readouterr(), code, exit_code=api.EXIT_DAMAGED)
    assert line == f"ldpsim: error: {raised.value}"


def test_client_excludes_the_cluster_arguments(client, tmp_path):
    with pytest.raises(InputError, match="leave out workers, scheduler"):
        api.run(demo_sweep(), tmp_path / "x.zarr", client=client, workers=2, scheduler="x")
    assert not (tmp_path / "x.zarr").exists()


def test_a_client_without_workers_is_refused_not_replaced(tmp_path):
    # Were a cluster started in its place, the run would succeed.
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as empty,
        Client(empty, set_as_default=False) as own,
    ):
        with pytest.raises(InputError, match="No Dask worker of the scheduler"):
            api.run(demo_sweep(), tmp_path / "x.zarr", client=own, start_timeout=0.5)
        assert own.status == "running"
    assert not (tmp_path / "x.zarr").exists()


@pytest.mark.parametrize(
    ("arguments", "error", "words"),
    [
        ({"workers": 0}, InputError, "'workers' parameter of run must be an int >= 1"),
        ({"workers": "2"}, TypeError, "'workers' parameter of run must be an int >= 1"),
        ({"progress": "yes"}, TypeError, "'progress' parameter of run must be a bool"),
        ({"jobs": 2}, InputError, "--jobs and --adapt scale the jobs of a batch cluster"),
        ({"store": ""}, InputError, "store path is an empty string"),
        # Issue 31: each of these was a raw TypeError or AttributeError, or accepted.
        ({"store": 42}, TypeError, r"'store' parameter of run must be a path \(str or os"),
        ({"cluster_options": [1]}, TypeError, "'cluster_options' parameter of run must be a map"),
        ({"cluster_options": {1: 2}}, TypeError, "'cluster_options' parameter of run"),
        ({"start_timeout": 0}, InputError, r"'start_timeout' parameter of run must be a number "),
        ({"start_timeout": "9"}, InputError, r"of seconds in \(0, inf\]\. Got '9'\."),
        ({"task_timeout": -1.0}, InputError, r"'task_timeout' parameter of run must be a number"),
        ({"scheduler": 8786}, TypeError, "'scheduler' parameter of run must be a Dask schedul"),
        ({"cluster": 5}, TypeError, "'cluster' parameter of run must be a path"),
        ({"adapt": "2:10"}, TypeError, r"'adapt' parameter of run must be a pair \(minimum, max"),
        ({"adapt": (10, 2)}, InputError, r"0 <= minimum <= maximum and maximum >= 1, or None"),
        ({"client": "tcp://x:1"}, TypeError, "'client' parameter of run must be a distributed.C"),
        ({"allow_long": "no"}, TypeError, "'allow_long' parameter of run must be True or False"),
        ({"max_failures": 1.5}, TypeError, "'max_failures' parameter of run must be an int >= 1"),
    ],
)
def test_bad_run_arguments_are_refused_before_anything_starts(
    tmp_path, monkeypatch, arguments, error, words
):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=words) as raised:
        api.run(demo_sweep(), **{"store": "s.zarr", **arguments})
    # InputError (the CLI's one line) whatever the error; a wrong type is a TypeError too.
    assert isinstance(raised.value, InputError)
    assert isinstance(raised.value, TypeError) == (error is TypeError)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        # Before: AttributeError ('int' object has no attribute 'compute').
        (lambda: api.summarize(42), TypeError, "'ds' parameter of summarize must be a store's"),
        (lambda: api.plot(None), TypeError, "'ds' parameter of plot must be a store's xarray"),
        # Before: ValueError, not InputError, and only once the store was read.
        (
            lambda: api.summarize("absent.zarr", target_se=-1),
            InputError,
            r"'target_se' parameter of summarize must be a float in \(0, 1\)\. Got -1\.",
        ),
        (lambda: api.summarize("absent.zarr", target_se="0.01"), TypeError, "'target_se'"),
        (lambda: api.summarize("absent.zarr", as_dataset="no"), TypeError, "'as_dataset'"),
        (lambda: api.summarize("absent.zarr", coords="none"), InputError, "'coords'"),
        # Wrong types are TypeErrors too (a hunt, 2026-12-01: these were InputError only).
        (lambda: api.summarize("absent.zarr", coords=["all"]), TypeError, "'coords'"),
        (lambda: api.plot("absent.zarr", kind="nope"), InputError, "Unknown figure kind"),
        (lambda: api.plot("absent.zarr", kind=["coverage"]), TypeError, "'kind' parameter of"),
        (lambda: api.plot("absent.zarr", zip_coord="0"), TypeError, "'zip_coord' parameter"),
        (lambda: api.open_store(42), TypeError, "'path' parameter of open_store must be a st"),
        (lambda: api.open_store("absent.zarr", load="x"), TypeError, "'load' parameter of ope"),
        # Before: TypeError from os.fspath, from unpacking 42, from indexing 1.
        (lambda: api.load_sweep(42), TypeError, "'name_or_path' parameter of load_sweep must"),
        (lambda: api.load_sweep("demo", set=42), TypeError, "'set' parameter of load_sweep"),
        (lambda: api.load_sweep("demo", set=[1]), TypeError, r"list of 'KEY=VALUE' strings"),
    ],
)
def test_bad_arguments_of_the_other_functions_are_input_errors(
    tmp_path, monkeypatch, call, error, words
):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=words) as raised:
        call()
    assert isinstance(raised.value, InputError)
    assert isinstance(raised.value, TypeError) == (error is TypeError)
    assert list(tmp_path.iterdir()) == []
