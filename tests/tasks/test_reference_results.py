"""Today's task path gives the numbers of the code before grid-point set-up was shared.

tests/reference/*.npz hold every replicate of reduced built-in sweeps (and the example
plugin's), computed one replicate at a time by the code of commit f101eff
(tests/reference/make_reference.py). A task now sets up its grid point once and runs
its replicates through :func:`ldpsim.pipeline.compute.worker.run_chunk`; every value must be
the same, bit for bit (NaN where NaN), but the interval bounds, which pass through a BLAS
product and agree to a few ulps on a machine whose OpenBLAS kernel differs from the one
that wrote the reference (conftest.BLAS_FIELDS).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_same_values, pip_install

from ldpsim.pipeline.compute.worker import run_chunk

REFERENCE = Path(__file__).resolve().parents[1] / "reference"
sys.path.insert(0, str(REFERENCE))
from make_reference import FIELDS, REDUCED, reduced_sweep  # noqa: E402

#: run_chunk's arrays with the replicate first (the others have the method first).
REPLICATE_FIRST = ("estimate", "last", "projected")


def check_sweep(name: str) -> int:
    """Compare every replicate of ``name``'s reduced sweep; the number of values compared."""
    with np.load(REFERENCE / f"{name}.npz") as stored:
        reference = dict(stored)
    sweep = reduced_sweep(name)
    methods = list(sweep.methods)
    compared = 0
    for point in sweep.points():
        label = "-".join(map(str, point.index)) or "0"
        reps = list(range(sweep.replicates))
        d = point.normalized.model.dim
        out = run_chunk(point.spec, reps, methods, d, f"reference-{label}")
        assert not out["failed"].any(), out["errors"]
        for field in FIELDS:
            for i, rep in enumerate(reps):
                key = f"{field}/{label}/{rep}"
                if key not in reference:
                    assert field == "projected" and np.isnan(out[field][i]).all()
                    continue
                got = out[field][i] if field in REPLICATE_FIRST else out[field][:, i]
                want = reference[key]
                assert got.shape == want.shape, (key, got.shape, want.shape)
                assert_same_values(got, want, field, err_msg=key)
                compared += want.size
    assert compared > 0
    return compared


@pytest.mark.parametrize("name", [n for n in REDUCED if n != "plugin"])
def test_builtin_sweeps_are_bit_identical_to_the_reference(name):
    check_sweep(name)


def test_the_example_plugin_sweep_is_bit_identical_to_the_reference(tmp_path):
    site = tmp_path / "site"
    source = tmp_path / "plugin-source"
    shutil.copytree(REFERENCE.parents[1] / "examples" / "plugin", source)
    pip_install(source, site)
    # In a process of its own, with the plugin installed for real on its path.
    code = (
        f"import sys; sys.path[:0] = [{str(Path(__file__).parent)!r}, "
        f"{str(Path(__file__).parents[1])!r}]; "
        "from test_reference_results import check_sweep; print(check_sweep('plugin'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) > 0
