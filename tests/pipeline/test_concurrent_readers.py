"""Readers of a store that a run is writing meanwhile (h13c's hunt).

Before: a run that computed again a replicate that had failed (its worker killed the
first time) removed its error record while ``status``, ``summarize``, ``errors`` or
``report`` read the records, and the reader called the store damaged (exit 4, "error
record ... cannot be read ([Errno 2] No such file or directory ...)").
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ldpsim.pipeline.cli import EXIT_DAMAGED, main
from ldpsim.pipeline.store.reading import iter_errors


def _errors_cleared_after_listing(monkeypatch, folder: Path) -> list[Path]:
    """Make the listing of ``folder`` behave as if a run removed its first record right
    after a reader listed it (the run's ``Store.clear_error``); returns the removed."""
    real_glob = Path.glob
    removed: list[Path] = []

    def glob(self, pattern, *args, **kwargs):
        listed = list(real_glob(self, pattern, *args, **kwargs))
        if self == folder and listed and not removed:
            first = sorted(listed)[0]
            first.unlink()
            removed.append(first)
        return iter(listed)

    monkeypatch.setattr(Path, "glob", glob)
    return removed


def _write_records(folder: Path, reps: range) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for rep in reps:
        record = {"key": "tau = 0.5", "rep": rep, "error": "RuntimeError: x"}
        (folder / f"0_0__{rep}.json").write_text(json.dumps(record))


def test_a_record_removed_after_the_listing_is_left_out(tmp_path, monkeypatch):
    folder = tmp_path / "S.zarr" / "ldpsim" / "errors"
    _write_records(folder, range(3))
    removed = _errors_cleared_after_listing(monkeypatch, folder)
    records = list(iter_errors(tmp_path / "S.zarr"))
    assert [r["rep"] for r in records] == [1, 2] and removed


@pytest.mark.parametrize("verb", ["status", "summarize"])
def test_a_reader_does_not_call_a_store_damaged_when_a_run_clears_a_record(
    demo_store, tmp_path, monkeypatch, capsys, verb
):
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    folder = store / "ldpsim" / "errors"
    _write_records(folder, range(2))
    removed = _errors_cleared_after_listing(monkeypatch, folder)
    code = main([verb, str(store)])
    captured = capsys.readouterr()
    assert removed
    assert code != EXIT_DAMAGED and "damaged" not in captured.err, captured.err
