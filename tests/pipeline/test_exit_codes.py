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
from ldpsim.pipeline.store.store import Store
from ldpsim.pipeline.sweep import load_sweep


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


def test_a_diverging_run_fails_its_replicates_for_every_verb(tmp_path, local_cluster, capsys):
    # c = 1e308: the first SGD step overflows (issue 10 saw "0 failed" and exit 0; then
    # every method failed with a FloatingPointError). The run failed, so each replicate
    # fails, with the step size to lower.
    store = tmp_path / "nan.zarr"
    argv = ["run", *DEMO_ARGS, "--set", "c=1e308", "--store", str(store)]
    argv += scheduler(local_cluster)
    assert main(argv) == EXIT_FAILED
    out = capsys.readouterr().out
    assert "Computed 0 replicates, 4 failed" in out
    assert f"ldpsim errors {store}" in out
    assert main(["status", str(store)]) == EXIT_FAILED
    assert "0/4 replicates done, 4 failed" in capsys.readouterr().out
    assert main(["errors", str(store)]) == EXIT_FAILED
    errors = capsys.readouterr().out
    # One block: the same failure (its message differs by the step where it overflowed).
    assert errors.count("--- ") == 1 and "--- 4 replicate failures" in errors
    assert "NonFiniteRun: non-finite theta_bar" in errors
    assert "overflowed" in errors and "lower c (1e+308)" in errors
    # A failed replicate is computed again by the next run, and fails again.
    assert main(argv) == EXIT_FAILED
    assert "Computed 0 replicates, 4 failed" in capsys.readouterr().out


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
