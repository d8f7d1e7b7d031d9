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
