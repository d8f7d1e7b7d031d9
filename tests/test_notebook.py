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


def test_demo_notebook_runs(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError naming the cell at any error
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    runs = [cell for cell in code if "run(" in cell.source and "run_report" in cell.source]
    first, again, extension = (report_of(cell) for cell in runs)
    assert (first["computed"], first["total"], first["status"]) == (120, 120, "complete")
    assert (again["computed"], again["already_done"]) == (0, 120)  # the second call: a no-op
    assert (extension["computed"], extension["already_done"], extension["total"]) == (60, 120, 180)
    images = [o for cell in code for o in outputs(cell) if "image/png" in o.get("data", {})]
    assert len(images) == 1  # the figure, shown inline once
    assert (tmp_path / "demo-notebook.zarr" / "zarr.json").is_file()  # in the notebook's folder


def test_researcher_loop_notebook_runs(tmp_path):
    nb = nbformat.read(LOOP, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
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
