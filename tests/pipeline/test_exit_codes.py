"""One exit-code policy for `run`, `status` and `errors` (cli.outcome), method failures shown."""

from __future__ import annotations

import pytest
from conftest import DEMO_ARGS, scheduler

from ldpsim.pipeline.cli import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    main,
    outcome,
)
from ldpsim.pipeline.store import Store
from ldpsim.pipeline.sweep import load_sweep

METHODS = ("bb", "bm", "sn", "oracle")


def test_policy():
    assert (EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INCOMPLETE, EXIT_INTERRUPTED) == (
        0,
        1,
        2,
        3,
        130,
    )
    assert outcome(replicates_failed=0, methods_failed=0, missing=0) == EXIT_OK
    assert outcome(replicates_failed=1, methods_failed=0, missing=0) == EXIT_FAILED
    assert outcome(replicates_failed=0, methods_failed=1, missing=0) == EXIT_FAILED
    assert outcome(replicates_failed=0, methods_failed=0, missing=5) == EXIT_INCOMPLETE
    # A failure outranks missing replicates: something needs looking at.
    assert outcome(replicates_failed=0, methods_failed=2, missing=5) == EXIT_FAILED


def test_help_documents_the_policy(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "exit codes (the same policy for run, status and errors)" in out
    for code in ("0 ", "1 ", "2 ", "3 ", "130"):
        assert f"\n  {code}" in out, code


def test_all_nan_intervals_are_failures_for_every_verb(tmp_path, local_cluster, capsys):
    # c = 1e308: the first SGD step overflows, so every interval is NaN (issue 10 saw
    # "0 failed" and exit 0). No replicate raises; every method fails in all 4.
    store = tmp_path / "nan.zarr"
    argv = ["run", *DEMO_ARGS, "--set", "c=1e308", "--store", str(store)]
    argv += scheduler(local_cluster)
    assert main(argv) == EXIT_FAILED
    out = capsys.readouterr().out
    assert "Computed 4 replicates, 0 failed" in out
    assert "Interval methods failed: " + ", ".join(f"{m} in 4 replicates" for m in METHODS) in out
    assert f"ldpsim errors {store}" in out
    assert main(["status", str(store)]) == EXIT_FAILED
    status = capsys.readouterr().out
    assert "4/4 replicates done, 0 failed" in status
    for method in METHODS:
        assert f"interval method {method} failed in 4 replicate(s)" in status
    assert main(["errors", str(store)]) == EXIT_FAILED
    assert "non-finite" in capsys.readouterr().out
    # Nothing left to compute: the run still reports the failures, with the same code.
    assert main(argv) == EXIT_FAILED
    out = capsys.readouterr().out
    assert "Nothing to do" in out and "bb in 4 replicates" in out


def test_clean_store_is_ok_for_every_verb(demo_store, local_cluster, capsys):
    run = ["run", *DEMO_ARGS, "--store", str(demo_store), *scheduler(local_cluster)]
    for argv in (run, ["status", str(demo_store)], ["errors", str(demo_store)]):
        assert main(argv) == EXIT_OK, argv
    assert "failed in" not in capsys.readouterr().out


def test_store_with_nothing_computed_is_incomplete(tmp_path, capsys):
    store = tmp_path / "empty.zarr"
    Store.open_or_create(store, load_sweep("demo", ["grid.n=[1000]"], 2))
    assert main(["status", str(store)]) == EXIT_INCOMPLETE
    assert "0/4 replicates done, 0 failed" in capsys.readouterr().out
    assert main(["errors", str(store)]) == EXIT_INCOMPLETE
