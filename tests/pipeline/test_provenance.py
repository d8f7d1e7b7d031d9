"""The run records of :mod:`ldpsim.pipeline.store.provenance` where a store cannot take one."""

from __future__ import annotations

from ldpsim.pipeline.store.provenance import read_runs, record_run


def test_a_store_that_cannot_be_written_gets_no_record_and_no_error(tmp_path):
    # A hunt (h20c): on a store the run cannot write (a read-only mount, or a path that
    # runs through a file) the temporary record's clean-up raised the same OSError
    # again, so a finished `ldpsim run` ended in a traceback. The results are kept; the
    # record, which only describes them, is skipped.
    through_a_file = tmp_path / "file"
    through_a_file.write_text("not a store")
    assert (
        record_run(through_a_file, wall_seconds=1.0, computed=1, failed=0, cluster="local") is None
    )
    assert through_a_file.read_text() == "not a store"
    # A store that can be written gets its record, read back as written.
    store = tmp_path / "store.zarr"
    written = record_run(store, wall_seconds=2.0, computed=3, failed=1, cluster="local")
    assert written is not None and written.parent.parent.parent == store
    (run,) = read_runs(store)
    assert (run["computed"], run["failed"], run["cluster"]) == (3, 1, "local")
