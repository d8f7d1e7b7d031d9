"""The `ldpsim` CLI in-process: list, status, errors, exit codes."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import synthetic as syn
import xarray as xr

from ldpsim.pipeline.cli import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, FORMATS, main
from ldpsim.pipeline.summary.tables import TABLE_FORMATS
from ldpsim.pipeline.summary.timings import median_per_point, timing_line, timing_summary


def test_summarize_offers_every_table_format():
    assert FORMATS == TABLE_FORMATS


def test_exit_codes():
    assert (EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT) == (0, 1, 2)


def test_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "Built-in sweeps:" in out and "demo" in out and "paper-table1" in out
    assert "Clusters (--cluster NAME):" in out and "local" in out
    # Every sweep's description starts in one column, past the longest name (before: a
    # fixed 14 characters, so that names such as shi-fig4-mechanisms ran into theirs).
    sweeps = out.split("Built-in sweeps:\n")[1].split("Clusters")[0].splitlines()
    starts = {len(line) - len(line[2:].split(" ", 1)[1].lstrip()) for line in sweeps}
    assert len(starts) == 1 and len(sweeps) > 10, sweeps
    # A unit's summary wrapped over two docstring lines is shown whole (before: nprr's
    # ended "... nonparametric randomized response at the").
    nprr = next(line for line in out.splitlines() if line.split()[:1] == ["nprr"])
    assert nprr.rstrip().endswith("a finite-sample interval for the mean from the reports."), nprr


def test_help_exits_zero(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    assert "run" in capsys.readouterr().out


def test_no_verb_is_bad_input(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("ldpsim: error:")


def test_list_names_every_model_mechanism_and_method(capsys):
    from ldpsim.tasks import intervals, mechanisms, models

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    for heading, registry in (
        ("Models:", models.REGISTRY),
        ("Mechanisms:", mechanisms.REGISTRY),
        ("Interval methods:", intervals.REGISTRY),
    ):
        start = lines.index(heading)
        listed = {line.split()[0] for line in lines[start + 1 : start + 1 + len(registry)]}
        assert listed == set(registry), heading
    # One line each, with a description (the class docstring's first line).
    (bb,) = [line for line in lines if line.split()[:1] == ["bb"]]
    assert "block bootstrap" in bb


def test_status_shows_median_seconds(tmp_path, capsys):
    store = tmp_path / "s.zarr"
    ds = syn.grid_store()
    ds["method_seconds"] = (("tau", "n", "method", "rep"), np.full((2, 2, 2, syn.REPS), 0.25))
    ds["method_seconds"][..., 0, :] = 0.125
    ds.to_zarr(store, zarr_format=3, consolidated=False)
    main(["status", str(store)])
    out = capsys.readouterr().out
    assert "median seconds per replicate: 0.5 (108 replicates, 54 s in all)" in out
    assert "per method: bb 0.125, oracle 0.25" in out
    assert "tau = 0.9, n = 1e4: 0/40 done, 0 failed, median n/a s per replicate" in out


def test_timings_count_the_done_replicates_only():
    # Replicate 3 is not done (its seconds are left out); replicate 2 is done without bb's
    # seconds at either checkpoint (left out of bb's median, not a 0); the checkpoints'
    # seconds of a replicate are summed; the median is a median (a mean would be 3).
    nan = np.nan
    bb = [[0.5, 1.0, nan, 50.0], [0.25, 1.0, nan, 50.0]]  # checkpoint x rep
    ds = xr.Dataset(
        {
            "done": (("point", "rep"), [[True, True, True, False]]),
            "seconds": (("point", "rep"), [[1.0, 2.0, 6.0, 100.0]]),
            "method_seconds": (
                ("point", "method", "checkpoint", "rep"),
                [[bb, [[nan] * 4] * 2]],
            ),
        },
        coords={"method": ["bb", "oracle"]},
    )
    timing = timing_summary(ds)
    assert (timing["replicates"], timing["median"], timing["total"]) == (3, 2.0, 9.0)
    assert timing["per_method"]["bb"] == 1.375 and timing["per_method_total"]["bb"] == 2.75
    assert np.isnan(timing["per_method"]["oracle"])
    assert median_per_point(ds).tolist() == [2.0]
    assert timing_line(ds) == (
        "median seconds per replicate: 2 (3 replicates, 9 s in all); per method: "
        "bb 1.38, oracle n/a"
    )
    # A store of before method_seconds, and one of before seconds.
    assert timing_line(ds.drop_vars("method_seconds")).endswith(
        "; per method: not recorded in this store"
    )
    assert timing_line(ds.drop_vars("seconds")) == (
        "median seconds per replicate: no replicate done"
    )
    one = ds.copy(deep=True)
    one["done"][:] = [[True, False, False, False]]
    assert timing_line(one.drop_vars("method_seconds")).startswith(
        "median seconds per replicate: 1 (1 replicate, 1 s in all)"
    )


@pytest.mark.parametrize(
    "variables",
    [{"PYTHONIOENCODING": "ascii"}, {"PYTHONUTF8": "0"}],  # strict, and surrogateescape
)
def test_output_an_encoding_cannot_hold_is_escaped(tmp_path, capsys, variables):
    # Before: a UnicodeEncodeError traceback, exit 1, on an ASCII stdout (LC_ALL=C with
    # PYTHONUTF8=0, PYTHONIOENCODING=ascii) or a Windows code page, for a store path or
    # label with a character the encoding lacks (here Greek omicron and epsilon).
    store = tmp_path / "st\u03bfre-\xe9.zarr"
    ds = syn.grid_store()
    ds["method_seconds"] = (("tau", "n", "method", "rep"), np.full((2, 2, 2, syn.REPS), 0.25))
    ds.assign_coords(method=np.array(["bb-\u03b5", "oracle"], dtype=object)).to_zarr(
        store, zarr_format=3, consolidated=False
    )
    expected = main(["status", str(store)])  # this store's code (it has failures)
    assert "per method: bb-\u03b5 0.25" in capsys.readouterr().out
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONIO"))}
    env |= {"LC_ALL": "C", **variables}  # PYTHONUTF8=0: ASCII, surrogateescape
    encoding = variables.get("PYTHONIOENCODING", "ascii")
    proc = subprocess.run(
        [sys.executable, "-m", "ldpsim.pipeline", "status", store.name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == expected, proc.stderr.decode(encoding, errors="replace")
    assert b"Traceback" not in proc.stderr
    lines = proc.stdout.splitlines()
    if "PYTHONUTF8" in variables:  # argv's bytes (surrogateescape) are written back as given
        assert lines[0].startswith(os.fsencode(store.name))
    else:
        assert lines[0].decode(encoding).startswith("st\\u03bfre-"), lines[0]
    assert b"per method: bb-\\u03b5 0.25" in proc.stdout


def test_a_path_given_after_an_equals_sign_expands_the_home_folder(tmp_path, capsys, monkeypatch):
    # The shell does not expand ~ after '=': `--store=~/s.zarr` made a folder named '~'
    # in the current one (a hunt, 2026-12-01); ldpsim expands it as the shell would.
    from ldpsim.pipeline.cli import build_parser

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "home").mkdir()
    args = build_parser().parse_args(["run", "demo", "--store=~/s.zarr"])
    assert args.store == str(tmp_path / "home" / "s.zarr")
    syn.grid_store().to_zarr(tmp_path / "home" / "s.zarr", zarr_format=3, consolidated=False)
    assert main(["summarize", "~/s.zarr", "--format", "csv"]) == EXIT_OK
    assert "tau" in capsys.readouterr().out
    assert not (tmp_path / "~").exists()
    # A name the shell leaves as it is (no such user) stays as written.
    unknown = "~no-such-user-of-ldpsim/s.zarr"
    assert build_parser().parse_args(["status", unknown]).store == unknown


def test_a_units_description_attribute_is_its_line_in_list():
    # A unit may describe itself with a `description` string, as xarray's backends do;
    # a blank one leaves the docstring's summary (a hunt, 2026-12-02: no test set one).
    from ldpsim.pipeline.units import one_line

    class Described:
        """The docstring's summary."""

        description = "The unit's own description,\nwrapped over two lines."

    assert one_line(Described) == "The unit's own description, wrapped over two lines."
    Described.description = "  "
    assert one_line(Described) == "The docstring's summary."


# -- option values refused by the parser (a mutation hunt, h19d: none of these messages,
# nor the bounds they hold, was pinned by a test) ------------------------------------------
@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["run", "demo", "--workers", "0"], ["--workers", "expected a positive integer, got '0'"]),
        (["run", "demo", "--jobs", "two"], ["--jobs", "expected a positive integer, got 'two'"]),
        (["run", "demo", "--start-timeout", "soon"], ["expected seconds in (0, inf], got 'soon'"]),
        (["run", "demo", "--task-timeout", "0"], ["expected seconds in (0, inf], got '0'"]),
        (["run", "demo", "--task-timeout", "nan"], ["expected seconds in (0, inf], got 'nan'"]),
        (["run", "demo", "--adapt", "2"], ["--adapt", "expected MIN:MAX jobs, got '2'"]),
        (["run", "demo", "--adapt", "3:2"], ["expected 0 <= MIN <= MAX, MAX >= 1; got '3:2'"]),
        (["run", "demo", "--adapt", "0:0"], ["expected 0 <= MIN <= MAX, MAX >= 1; got '0:0'"]),
        (["run", "demo", "--adapt=-1:2"], ["expected 0 <= MIN <= MAX, MAX >= 1; got '-1:2'"]),
        (["run", "demo", "--jobs", "2", "--adapt", "1:2"], ["--adapt", "not allowed with"]),
        (["run", "demo", "--scheduler", "tcp://x:1", "--cluster", "local"], ["not allowed"]),
        (["summarize", "s.zarr", "--target-se", "1"], ["expected a standard error in (0, 1)"]),
        (["report", "s.zarr", "--target-se", "x"], ["expected a standard error in (0, 1)"]),
        (["plot", "s.zarr", "--zip-coord", "-1"], ["expected a coordinate >= 0, got '-1'"]),
        (["summarize", "s.zarr", "--format", "html"], ["--format", "invalid choice: 'html'"]),
        (["replay", "s.zarr"], ["the following arguments are required: --rep"]),
    ],
)
def test_bad_option_values_are_one_line_naming_the_verb(argv, words, capsys):
    assert main(argv) == EXIT_BAD_INPUT
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"ldpsim: error: {argv[0]}: "), lines[0]
    assert lines[0].endswith(" (see --help)") and lines[0].count("ldpsim") == 1, lines[0]
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_option_values_at_their_bounds_are_taken():
    from ldpsim.pipeline.cli import build_parser

    parse = build_parser().parse_args
    args = parse(["run", "demo", "--workers", "1", "--adapt", "0:1", "--start-timeout", "inf"])
    assert (args.workers, args.adapt, args.start_timeout) == (1, (0, 1), float("inf"))
    args = parse(["run", "demo", "--adapt", "2:2", "--task-timeout", "0.5", "--max-failures", "1"])
    assert (args.adapt, args.task_timeout, args.max_failures) == ((2, 2), 0.5, 1)
    assert parse(["plot", "s.zarr", "--zip", "--zip-coord", "0"]).zip_coord == 0
    assert parse(["summarize", "s.zarr", "--target-se", "0.01"]).target_se == 0.01
    # The defaults a user sees: the text table, coords auto, no target (the summary's 0.005).
    args = parse(["summarize", "s.zarr"])
    assert (args.format, args.coords, args.target_se, args.strict) == ("text", "auto", None, False)


# -- what status, errors, list and an interrupted verb print (a mutation hunt, h19d) --------
def test_status_names_each_failed_method_and_its_replicates(tmp_path, capsys):
    # bb failed in replicate 3 of the three cells with replicates done; the oracle never.
    store = syn.save_store(syn.grid_store(), tmp_path / "s.zarr")
    assert main(["status", str(store)]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert f"{store}: 108/160 replicates done, 0 failed\n" in out
    assert "  interval method bb failed in 3 replicate(s)\n" in out
    assert "oracle failed" not in out


def test_errors_says_when_failed_replicates_have_no_records(tmp_path, capsys):
    ds = syn.grid_store()
    failed = ds["failed"].values.copy()
    failed[0, 0, [syn.DONE, syn.DONE + 1]] = True  # two replicates not done: failed
    ds["failed"] = (ds["failed"].dims, failed)
    store = syn.save_store(ds, tmp_path / "s.zarr")
    assert main(["errors", str(store)]) == EXIT_FAILED
    assert capsys.readouterr().out == (
        f"No failure records in {store}, but 2 replicate(s) are marked failed (deleted, or "
        "the run stopped before writing it): `ldpsim status` counts them, `ldpsim run` "
        "computes them again.\n"
    )
    # With no replicate failed: said so, and the exit code is still the store's (bb's
    # failures, which errors lists only from their records).
    clean = syn.save_store(syn.grid_store(), tmp_path / "clean.zarr")
    assert main(["errors", str(clean)]) == EXIT_FAILED
    assert capsys.readouterr().out == f"No failures recorded in {clean}.\n"


def test_list_says_when_no_plugin_is_installed(capsys, monkeypatch):
    import ldpsim.pipeline.summary.cell_statistics as cell_statistics
    import ldpsim.tasks.plugins as plugins

    monkeypatch.setattr(plugins, "plugins", lambda: [])
    monkeypatch.setattr(cell_statistics, "statistic_plugins", lambda: [])
    assert main(["list"]) == EXIT_OK
    assert "Plugins: none installed (see docs/extending.md)\n" in capsys.readouterr().out


def test_sigterm_in_any_verb_is_exit_143_and_named(monkeypatch, capsys):
    # The code a signal handler gives its KeyboardInterrupt is the exit code (a batch
    # job's time limit reads 143, not Ctrl-C's 130).
    from ldpsim.pipeline.cli import COMMANDS, EXIT_TERMINATED

    def terminated(args):
        stop = KeyboardInterrupt()
        stop.exit_code, stop.signal_name = EXIT_TERMINATED, "SIGTERM"
        raise stop

    monkeypatch.setitem(COMMANDS, "list", terminated)
    assert main(["list"]) == EXIT_TERMINATED == 143
    assert capsys.readouterr().err == (
        "ldpsim: interrupted (SIGTERM); run the same command again to resume.\n"
    )


def test_run_hands_the_sweep_store_and_cluster_to_run_report(monkeypatch):
    # The sweep (with --set and --replicates applied) and the store are positional; the
    # option tests of test_options_passed_on.py read only the keywords.
    from ldpsim.pipeline import api

    handed = {}

    def recorder(sweep, store, **kwargs):
        handed.update(sweep=sweep, store=store, **kwargs)
        return {"exit_code": 3}

    monkeypatch.setattr(api, "run_report", recorder)
    argv = ["run", "demo", "--replicates", "3", "--set", "eps=3", "--store", "x.zarr"]
    argv += ["--scheduler", "tcp://h:1", "--adapt", "1:4"]
    assert main(argv) == 3  # run_report's exit code is the command's
    assert (handed["sweep"].replicates, handed["sweep"].base["eps"]) == (3, 3)
    assert (handed["store"], handed["scheduler"], handed["adapt"]) == (
        "x.zarr",
        "tcp://h:1",
        (1, 4),
    )
    assert (handed["cluster"], handed["jobs"], handed["progress"]) == (None, None, "auto")
    handed.clear()
    assert main(["run", "demo", "--cluster", "local", "--jobs", "2"]) == 3
    assert (handed["store"], handed["cluster"], handed["jobs"]) == (None, "local", 2)
    assert handed["sweep"].replicates == api.load_sweep("demo").replicates


def test_an_empty_path_is_refused_and_a_users_home_is_expanded(capsys):
    import pwd

    from ldpsim.pipeline.cli import build_parser

    assert main(["status", ""]) == EXIT_BAD_INPUT
    assert (
        "status: argument store: expected a path, got an empty string" in capsys.readouterr().err
    )
    # ~user as the shell expands it (not only ~/).
    user = pwd.getpwuid(os.getuid())
    args = build_parser().parse_args(["plot", f"~{user.pw_name}/s.zarr"])
    assert args.store == os.path.join(user.pw_dir, "s.zarr")


def _failed_store(tmp_path, reps, records):
    """grid_store with ``reps`` of its first grid point failed and ``records`` written."""
    import json

    ds = syn.grid_store()
    failed = ds["failed"].values.copy()
    failed[0, 0, reps] = True
    ds["failed"] = (ds["failed"].dims, failed)
    store = syn.save_store(ds, tmp_path / f"s{len(reps)}.zarr")
    errors = store / "ldpsim" / "errors"
    errors.mkdir()
    for i, (kind, rep) in enumerate(records):
        record = {"key": "tau=0.5,n=100", "rep": rep, "seed": 7, "kind": kind, "error": "E"}
        (errors / f"0_0__{i}.json").write_text(json.dumps(record))
    return store


def test_errors_counts_task_records_and_says_which_failures_have_none(tmp_path, capsys):
    # Three failed replicates, a replicate's record and a task's: one has no record.
    store = _failed_store(tmp_path, [36, 37, 38], [("replicate", 36), ("task", 37)])
    assert main(["errors", str(store)]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert "1 of the 3 failed replicates has no failure record (deleted, or" in out
    assert main(["status", str(store)]) == EXIT_FAILED
    assert f"{store}: 108/160 replicates done, 3 failed\n" in capsys.readouterr().out
    # More records than failed replicates (a replicate recorded twice): nothing said.
    store = _failed_store(tmp_path, [36], [("replicate", 36), ("replicate", 36)])
    assert main(["errors", str(store)]) == EXIT_FAILED
    assert "no failure record" not in capsys.readouterr().out


def test_summarize_compare_names_every_table_option_given(tmp_path, capsys):
    # Refused before the store is read (it does not exist here).
    argv = ["summarize", str(tmp_path / "none.zarr"), "--compare", "bb,oracle"]
    assert main([*argv, "--errors", "--target-se", "0.01"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "--errors is an option of the summary table, which --compare replaces" in err
    assert "leave out --errors --target-se or --compare" in err


def test_summarize_strict_exits_1_with_one_line(tmp_path, capsys):
    store = syn.save_store(syn.grid_store(), tmp_path / "s.zarr")  # bb failed in rep 3
    assert main(["summarize", str(store), "--strict", "--format", "csv"]) == EXIT_FAILED
    assert capsys.readouterr().err == (
        "--strict: some cells are computed on fewer than all the replicates of their grid "
        f"point (marked; see `ldpsim status {store}`)\n"
    )


def test_list_says_nothing_of_plugins_when_one_is_installed(capsys, monkeypatch):
    from types import SimpleNamespace

    import ldpsim.pipeline.summary.cell_statistics as cell_statistics
    import ldpsim.tasks.plugins as plugins

    # A statistic plugin installed but not loaded (it is warned of): a plugin all the same.
    broken = SimpleNamespace(
        function=None, problem="no module", left_out=lambda: "broken: left out"
    )
    monkeypatch.setattr(plugins, "plugins", lambda: [])
    monkeypatch.setattr(cell_statistics, "statistic_plugins", lambda: [broken])
    assert main(["list"]) == EXIT_OK
    out, err = capsys.readouterr()
    assert "Plugins:" not in out and "Statistics (summarize" not in out
    assert err == "warning: broken: left out\n"


def test_damaged_metadata_is_exit_4_and_a_stopped_run_its_own_code(tmp_path, monkeypatch, capsys):
    from ldpsim.pipeline.cli import COMMANDS, EXIT_DAMAGED
    from ldpsim.pipeline.errors import RunStopped

    store = syn.save_store(syn.grid_store(), tmp_path / "s.zarr")
    (store / "zarr.json").write_text('{"attributes": {')
    assert main(["summarize", str(store)]) == EXIT_DAMAGED == 4
    err = capsys.readouterr().err
    assert err.startswith("ldpsim: error: ") and len(err.splitlines()) == 1, err

    def stopped(args):
        raise RunStopped("the disk is full", exit_code=EXIT_FAILED)

    monkeypatch.setitem(COMMANDS, "list", stopped)
    assert main(["list"]) == EXIT_FAILED
    assert capsys.readouterr().err == "ldpsim: error: the disk is full\n"


@pytest.mark.parametrize(
    ("kept", "report", "line"),
    [
        ({"kept": 12}, None, "interrupted (SIGINT): 12 replicates kept in s.zarr; run the"),
        (
            {"kept": 5, "methods_kept": 4},
            None,
            "interrupted (SIGINT): the added methods of 4 finished replicates written to "
            "s.zarr, whose replicates are kept as they were;",
        ),
        (
            {"kept": 5, "methods_kept": 4},
            {"computed": 2, "failed": 1},
            "interrupted (SIGINT): 3 replicates computed and the added methods of 4 finished "
            "replicates written to s.zarr; run the",
        ),
        (
            {"kept": 5, "methods_kept": 4},
            {"computed": 0, "failed": 1},
            "interrupted (SIGINT): 1 replicates computed and the added methods",
        ),
    ],
)
def test_an_interrupted_run_says_what_it_kept(kept, report, line, monkeypatch, capsys):
    from types import SimpleNamespace

    from ldpsim.pipeline.cli import COMMANDS, EXIT_INTERRUPTED

    def interrupted(args):
        stop = KeyboardInterrupt()
        stop.store = "s.zarr"
        for name, value in kept.items():
            setattr(stop, name, value)
        if report is not None:
            stop.report = SimpleNamespace(**report)
        raise stop

    monkeypatch.setitem(COMMANDS, "list", interrupted)
    assert main(["list"]) == EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert err.startswith(f"ldpsim: {line}") and err.endswith("again to resume.\n"), err


def test_methods_pending_make_a_store_incomplete():
    from ldpsim.pipeline.cli import EXIT_INCOMPLETE, store_outcome

    ds = syn.grid_store()
    done = ds["done"].values
    ds["done"] = (ds["done"].dims, np.ones_like(done))
    ds["method_failed"] = (ds["method_failed"].dims, np.zeros_like(ds["method_failed"].values))
    assert store_outcome(ds) == store_outcome(ds, {}) == EXIT_OK
    assert store_outcome(ds, {"bb": 0}) == EXIT_OK
    assert store_outcome(ds, {"bb": 2}) == EXIT_INCOMPLETE


@pytest.mark.parametrize(("stale", "shown"), [(6, 6), (7, 6)])
def test_plot_names_at_most_six_stale_figures(stale, shown, tmp_path, capsys, monkeypatch):
    # No figure drawn here (plot's figures are test_plots.py's): every zip-*.png is stale.
    monkeypatch.setattr("ldpsim.pipeline.report.plots.store_figures", lambda *a, **k: {})
    store = syn.save_store(syn.grid_store(), tmp_path / "s.zarr")
    out = tmp_path / "figures"
    out.mkdir()
    names = [f"zip-{i}.png" for i in range(stale)]
    for name in names:
        (out / name).write_bytes(b"")
    assert main(["plot", str(store), "--out", str(out)]) == EXIT_OK
    err = capsys.readouterr().err
    listed = ", ".join(names[:shown]) + (", ..." if stale > shown else "")
    assert f"also holds {stale} figure file(s) this plot did not draw ({listed}), from" in err


def test_summarize_shows_the_timings_and_replicates_needed_only_where_asked(tmp_path, capsys):
    store = str(syn.save_store(syn.grid_store(), tmp_path / "s.zarr"))
    assert main(["summarize", store]) == EXIT_OK
    text = capsys.readouterr().out
    assert "median seconds per replicate" in text  # the text table's last line
    assert main(["summarize", store, "--target-se", "0.005"]) == EXIT_OK
    planned = capsys.readouterr().out
    assert planned != text and len(planned.splitlines()) > len(text.splitlines())
    assert main(["summarize", store, "--format", "markdown"]) == EXIT_OK
    assert "median seconds" not in capsys.readouterr().out  # to be pasted as it is
    # --statistic is a table option too: refused with --compare, before any reading.
    argv = ["summarize", str(tmp_path / "none.zarr"), "--compare", "bb,oracle"]
    assert main([*argv, "--statistic", "x"]) == EXIT_BAD_INPUT
    assert "--statistic is an option of the summary table" in capsys.readouterr().err


def test_replay_of_a_path_that_is_no_store_is_bad_input(tmp_path, capsys):
    assert main(["replay", str(tmp_path / "none.zarr"), "--rep", "0"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("ldpsim: error: ") and "Traceback" not in err, err


def test_list_names_the_package_of_a_plugin_unit(capsys, monkeypatch):
    import ldpsim.pipeline.units as units

    lines = [
        units.UnitLine("method", "mine", "My interval.", "ldpsim-mine 1.0"),
        units.UnitLine("method", "bb", "Block bootstrap.", None),
    ]
    monkeypatch.setattr(units, "unit_lines", lambda: lines)
    assert main(["list"]) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    start = out.index("Interval methods:")
    assert out[start + 1 : start + 3] == [
        "  mine  My interval. [plugin: ldpsim-mine 1.0]",
        "  bb    Block bootstrap.",
    ]
