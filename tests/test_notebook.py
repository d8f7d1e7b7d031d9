"""examples/demo.ipynb runs on a real kernel and a real LocalCluster, every cell without error."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the test extra installs nbformat")
nbclient = pytest.importorskip("nbclient", reason="the test extra installs nbclient")

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "demo.ipynb"


def outputs(cell) -> list[dict]:
    return list(cell.get("outputs", []))


def report_of(cell) -> dict:
    """The run report a cell shows as its value (the dict's repr)."""
    (result,) = [o for o in outputs(cell) if o["output_type"] == "execute_result"]
    return ast.literal_eval(result["data"]["text/plain"])


def test_notebook_is_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
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
