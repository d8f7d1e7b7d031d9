"""The notebooks of examples/ run on a real kernel and a real LocalCluster, every cell without
error: demo.ipynb, and researcher-loop.ipynb (issue 34: a sweep in Python, a mechanism
registered inline, methods added to the finished store, a failure replayed)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from ldpsim.pipeline.store.reading import read_attrs

nbformat = pytest.importorskip("nbformat", reason="the test extra installs nbformat")
nbclient = pytest.importorskip("nbclient", reason="the test extra installs nbclient")

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "demo.ipynb"
LOOP = NOTEBOOK.with_name("researcher-loop.ipynb")
#: nbclient's limit for one cell, in seconds. A cell that runs a sweep waits for the
#: workers to compile the kernels: 25 s with empty caches on an idle machine, minutes on
#: a loaded one. The last cell closes the cluster: 2 s on an idle machine, 4-6 s with
#: the notebook's processes held to a tenth of a core, or three notebooks sharing 0.6 of
#: one (measured). distributed's ``cluster.close()`` has no limit of its own: it waits
#: for each worker to stop, and first for a worker that its nanny is restarting to
#: finish starting. ldpsim's watchdog restarts a worker whose task runs past its timeout
#: (at least 120 s), as a first task compiling the kernels on a loaded machine does, and
#: a restarted worker that never starts makes the close wait forever: past this limit
#: the close hangs, and the test says so.
CELL_TIMEOUT = 300
#: The test's own limit (pytest-timeout, seconds), well above a notebook's time on a
#: loaded machine (45 s idle, 220 s for each of three notebooks sharing 0.6 of a core),
#: so that a notebook that is slow fails, if at all, by the limit of one cell, which
#: names the cell, and not by the default 600 s, which names none.
TEST_TIMEOUT = 1200


def outputs(cell) -> list[dict]:
    return list(cell.get("outputs", []))


def report_of(cell) -> dict:
    """The run report a cell shows as its value (the dict's repr)."""
    (result,) = [o for o in outputs(cell) if o["output_type"] == "execute_result"]
    return ast.literal_eval(result["data"]["text/plain"])


@pytest.mark.parametrize("path", [NOTEBOOK, LOOP], ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)


def execute(path: Path, folder: Path):
    """The notebook at ``path``, run in ``folder`` on a real kernel, with its outputs.

    Raises CellExecutionError naming the cell at any error; fails the test, saying so,
    when closing the cluster hangs.
    """
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(folder)}},
    )
    try:
        client.execute()
    except nbclient.exceptions.CellTimeoutError as exc:
        if "cluster.close()" not in str(exc):
            raise
        pytest.fail(
            f"{path.name}: cluster.close() did not return in {CELL_TIMEOUT} s (it takes "
            "seconds, also on a loaded machine): it hangs, e.g. on a worker that its "
            f"nanny restarted and that never started.\n{exc}"
        )
    return nb


@pytest.mark.timeout(TEST_TIMEOUT)
def test_demo_notebook_runs(tmp_path):
    nb = execute(NOTEBOOK, tmp_path)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    runs = [cell for cell in code if "run(" in cell.source and "run_report" in cell.source]
    first, again, extension = (report_of(cell) for cell in runs)
    assert (first["computed"], first["total"], first["status"]) == (120, 120, "complete")
    assert (again["computed"], again["already_done"]) == (0, 120)  # the second call: a no-op
    assert (extension["computed"], extension["already_done"], extension["total"]) == (60, 120, 180)
    images = [o for cell in code for o in outputs(cell) if "image/png" in o.get("data", {})]
    assert len(images) == 1  # the figure, shown inline once
    assert (tmp_path / "demo-notebook.zarr" / "zarr.json").is_file()  # in the notebook's folder


@pytest.mark.timeout(TEST_TIMEOUT)
def test_researcher_loop_notebook_runs(tmp_path):
    # What an earlier run of the notebook left in its folder: it starts from an empty
    # store (its store holds the methods that its later cells add, which a run of the
    # first sweep would refuse; a folder that is no store is refused the same way).
    (tmp_path / "loop.zarr").mkdir()
    (tmp_path / "loop.zarr" / "left-by-an-earlier-run").touch()
    nb = execute(LOOP, tmp_path)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    runs = [cell for cell in code if "run(" in cell.source and "run_report" in cell.source]
    first, added = (report_of(cell) for cell in runs)
    assert (first["computed"], first["total"], first["status"]) == (20, 20, "complete")
    # The methods added to the finished store: no replicate computed anew, and the
    # planted bug of 'halves' recorded as that method's failures.
    assert (added["computed"], added["already_done"], added["missing"]) == (0, 20, 0)
    assert added["methods_computed"] == 20  # the added methods, on every stored replicate
    assert set(added["method_failures"]) == {"halves"} and added["status"] == "failed"
    text = "".join(o.get("text", "") for cell in code for o in outputs(cell))
    assert "replayed: a planted bug: a positive estimate" in text
    # The mechanism written in a cell (no file: inspect reads its functions only) is
    # known by a hash of its source, which a later run compares.
    units = json.loads(read_attrs(tmp_path / "loop.zarr")["units"])
    assert [len(g["mechanism:inline_laplace"]["source_sha256"] or "") for g in units] == [64]
    # progress=False: the run's own lines (what it computes, what it computed) stay out.
    lines = text.splitlines()
    assert not [line for line in lines if line.startswith(("Added method", "Computed ", "0 of "))]
