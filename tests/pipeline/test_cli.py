"""The `ldpsim` CLI in-process: list, status, errors, exit codes."""

from __future__ import annotations

import pytest

from ldpsim.pipeline.cli import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, FORMATS, main
from ldpsim.pipeline.tables import TABLE_FORMATS


def test_summarize_offers_every_table_format():
    assert FORMATS == TABLE_FORMATS


def test_exit_codes():
    assert (EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT) == (0, 1, 2)


def test_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "Built-in sweeps:" in out and "demo" in out and "paper-table1" in out
    assert "Clusters (--cluster NAME):" in out and "local" in out


def test_help_exits_zero(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    assert "run" in capsys.readouterr().out


def test_no_verb_is_bad_input(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("ldpsim: error:")
