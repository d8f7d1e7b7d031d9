"""Each option of the command line and keyword of the API reaches the code it names.

A hunt (2026-12-02, mutants of cli.py, api.py and accessor.py): with any of these
options or keywords dropped on its way (``--compare`` printing text whatever
``--format``, ``--task-timeout`` parsed and never passed, ``report --target-se`` or
``--zip-coord`` ignored, ``run(accept_code_change=True)`` run as False, a refusal
removed), every test still passed. These check the hand-over itself, fast: the
function called is replaced by one that records what it was given, or a small
hand-made store is read.
"""

from __future__ import annotations

import pytest
import synthetic as syn
from conftest import one_error_line

import ldpsim.pipeline.cli as cli
import ldpsim.pipeline.compute.runner as runner
import ldpsim.pipeline.report.report as report
import ldpsim.pipeline.report.zip_plot as zip_plot
from ldpsim.pipeline import api
from ldpsim.pipeline.cli import EXIT_INTERRUPTED, main
from ldpsim.pipeline.errors import InputError, InputTypeError
from ldpsim.pipeline.summary.compare import compare_methods, format_comparison


class Handed(Exception):
    """Raised by a stand-in with the keywords it was called with."""

    def __init__(self, kwargs):
        super().__init__("handed over")
        self.kwargs = kwargs


def recorder(*args, **kwargs):
    raise Handed(kwargs)


@pytest.fixture
def store(tmp_path):
    """synthetic.grid_store written as a store: 2 x 2 grid points, bb and oracle, d = 2."""
    return syn.save_store(syn.grid_store(), tmp_path / "s.zarr")


def test_run_passes_every_option_on(monkeypatch):
    monkeypatch.setattr(api, "run_report", recorder)
    argv = ["run", "demo", "--replicates", "3", "--set", "eps=2", "--task-timeout", "30"]
    argv += ["--start-timeout", "40", "--max-failures", "2", "--yes", "--accept-code-change"]
    argv += ["--backend", "cpu", "--workers", "1"]
    with pytest.raises(Handed) as handed:
        main(argv)
    given = handed.value.kwargs
    assert (given["task_timeout"], given["start_timeout"]) == (30.0, 40.0)
    assert (given["max_failures"], given["workers"], given["backend"]) == (2, 1, "cpu")
    assert given["allow_long"] is True and given["accept_code_change"] is True
    # The defaults: none of them set.
    with pytest.raises(Handed) as handed:
        main(["run", "demo"])
    given = handed.value.kwargs
    assert given["allow_long"] is False and given["accept_code_change"] is False
    assert given["task_timeout"] is given["max_failures"] is given["backend"] is None


def test_run_passes_its_keywords_to_run_report(monkeypatch):
    monkeypatch.setattr(api, "run_report", recorder)
    sweep = api.load_sweep("demo", replicates=2)
    keywords = {
        "max_failures": 2,
        "task_timeout": 30.0,
        "start_timeout": 40.0,
        "allow_long": True,
        "accept_code_change": True,
        "progress": False,
    }
    with pytest.raises(Handed) as handed:
        api.run(sweep, "s.zarr", **keywords)
    assert {key: handed.value.kwargs[key] for key in keywords} == keywords


def test_run_passes_progress_on_and_logs_only_with_it(monkeypatch, tmp_path):
    monkeypatch.setattr(runner, "run_sweep", recorder)
    sweep = api.load_sweep("demo", replicates=2)
    for progress, shown in ((False, "none"), (True, "bar"), ("auto", "auto")):
        with pytest.raises(Handed) as handed:
            api.run_report(sweep, tmp_path / "s.zarr", scheduler="tcp://x:1", progress=progress)
        given = handed.value.kwargs
        assert given["progress"] == shown
        assert (given["log"] is print) == bool(progress), progress


def test_load_sweep_takes_one_set_string_as_a_list_of_one():
    sweep = api.load_sweep("demo", set="eps=2")
    assert {point.spec["eps"] for point in sweep.points()} == {2}


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], ["--workers applies"]),
        (["--cluster-option", "walltime=01:00:00"], ["--cluster-option needs --cluster"]),
    ],
)
def test_run_options_that_would_do_nothing_are_refused(options, words, tmp_path, capfd):
    store = tmp_path / "s.zarr"
    code = main(["run", "demo", "--replicates", "1", "--store", str(store), *options])
    one_error_line(capfd.readouterr(), code, words)
    assert not store.exists()


@pytest.mark.parametrize(
    ("fmt", "coords"), [("csv", "auto"), ("json", "auto"), ("text", "mean"), ("markdown", "all")]
)
def test_summarize_compare_takes_format_and_coords(fmt, coords, store, capsys):
    argv = ["summarize", str(store), "--compare", "bb,oracle", "--format", fmt]
    assert main([*argv, "--coords", coords]) == 0
    comparison = compare_methods(api.open_store(store, load=True), "bb", "oracle")
    expected = format_comparison(comparison, fmt, coords=coords)
    assert capsys.readouterr().out == expected + "\n"
    assert expected != format_comparison(comparison, "text", coords="auto")


def test_report_passes_its_options_on(monkeypatch, store, tmp_path):
    monkeypatch.setattr(report, "write_report", recorder)
    page = tmp_path / "page.html"
    argv = ["report", str(store), "--out", str(page), "--target-se", "0.01"]
    with pytest.raises(Handed) as handed:
        main([*argv, "--zip", "--zip-coord", "1"])
    given = handed.value.kwargs
    assert (given["target_se"], given["zip_plots"], given["zip_coord"]) == (0.01, True, 1)
    with pytest.raises(Handed) as handed:
        main(["report", str(store)])
    given = handed.value.kwargs
    assert (given["target_se"], given["zip_plots"], given["zip_coord"]) == (0.005, False, 0)


def test_plot_draws_the_zip_coordinate_asked_for(monkeypatch, store, tmp_path, capsys):
    figures = api.plot(store, "all", zip_plots=True, zip_coord=1)
    zips = [figure for name, figure in figures.items() if name.startswith("zip")]
    assert zips and {ax.get_xlabel() for fig in zips for ax in fig.axes} == {"theta, coord 1"}

    drawn = []
    original = zip_plot.store_zip_plots

    def spy(ds, *, coord=0, **kwargs):
        drawn.append(coord)
        return original(ds, coord=coord, **kwargs)

    monkeypatch.setattr(zip_plot, "store_zip_plots", spy)
    monkeypatch.setattr("ldpsim.pipeline.report.plots.store_figures", lambda *a, **k: {})
    assert (
        main(["plot", str(store), "--out", str(tmp_path / "f"), "--zip", "--zip-coord", "1"]) == 0
    )
    assert drawn == [1]
    # A coordinate the store lacks: refused before any file is written.
    capsys.readouterr()
    out = tmp_path / "none"
    assert main(["plot", str(store), "--out", str(out), "--zip", "--zip-coord", "2"]) == 2
    assert "--zip-coord" in capsys.readouterr().err
    assert not out.exists()


def test_summarize_plans_for_the_target_se_given(store):
    default = api.summarize(store)["replicates_needed"].to_numpy()
    wider = api.summarize(store, target_se=0.01)["replicates_needed"].to_numpy()
    shown = default > 100  # 4 times fewer for twice the standard error, up to rounding
    assert shown.any() and (abs(wider[shown] * 4 / default[shown] - 1) < 0.01).all()


def test_ctrl_c_in_any_verb_is_exit_130_and_one_line(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, "list", interrupted)
    assert main(["list"]) == EXIT_INTERRUPTED == 130
    assert capsys.readouterr().err == (
        "ldpsim: interrupted (SIGINT); run the same command again to resume.\n"
    )


def test_accessor_refuses_a_dimension_in_both_the_mapping_and_a_keyword(store):
    ds = api.open_store(store)
    with pytest.raises(
        InputError, match=r"Cannot select on 'method' \(ds\.ldpsim\.sel\): given both"
    ):
        ds.ldpsim.sel({"method": "bb"}, method="oracle")
    with pytest.raises(InputError, match=r"given both in the mapping and as a keyword"):
        ds.ldpsim.isel({"rep": 0}, rep=1)
    # A ValueError, as xarray's for both forms at once, not a TypeError (as the
    # docstrings said).
    with pytest.raises(InputError) as raised:
        ds.ldpsim.sel({"tau": 0.5}, tau=0.9)
    assert not isinstance(raised.value, InputTypeError)
