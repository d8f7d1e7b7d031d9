"""The GPU backend end to end, its kernel in numba's CUDA simulator (tests/conftest.py).

A `local-gpu` cluster (one worker holding the resource GPU, one CPU worker), real Zarr
stores: a GPU sweep is bit-identical on a rerun, after a kill and resume, and after an
extension; it is refused in one line on a cluster without a GPU, in a store of the
other backend, and for a model that has no GPU kernel.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import done_count, kill_when, one_error_line, tree_hash

from ldpsim.pipeline import api
from ldpsim.pipeline.cli import main
from ldpsim.pipeline.compute.clusters import build_cluster, load_cluster_config
from ldpsim.pipeline.errors import InputError, InputTypeError
from ldpsim.pipeline.store.reading import open_dataset, read_attrs
from ldpsim.pipeline.sweep import load_sweep
from ldpsim.tasks import run_replicate
from ldpsim.tasks.streams.philox import STREAMS_VERSION

FIELDS = ("estimate", "last", "lower", "upper", "method_estimate", "done", "failed")

#: n = 200: the simulator runs each thread's chain as Python, and a launch of a chunk (3
#: replicates) took 0.37 s of CPU at n = 400, 0.24 s at n = 200 (measured 2026-11-30).
#: bb still has 3 blocks and bm 4 batches.
SWEEP = """
description = "GPU backend test"
replicates = {replicates}
seed = 5
rep_chunk = 3
backend = "gpu"
[spec]
model = "quantile"
n = 200
[grid]
tau = [0.5, 0.8]
[methods.bb]
B = 40
form = "t"
[methods.bm]
[methods.sn]
[methods.oracle]
"""


@pytest.fixture(scope="module")
def gpu_cluster():
    """The shipped local-gpu cluster with one CPU worker (the simulator counts 1 GPU)."""
    cluster = build_cluster(load_cluster_config("local-gpu"), {"cpu_workers": 1})
    with cluster:
        yield cluster


def sweep_file(tmp_path: Path, replicates: int) -> Path:
    path = tmp_path / f"gpu{replicates}.toml"
    path.write_text(SWEEP.format(replicates=replicates))
    return path


def run(args: list[str]) -> int:
    return main(["run", *args])


def test_a_gpu_sweep_is_bit_identical_on_rerun_kill_resume_and_extension(tmp_path, gpu_cluster):
    address = ["--scheduler", gpu_cluster.scheduler_address]
    baseline = tmp_path / "baseline.zarr"
    assert run([str(sweep_file(tmp_path, 12)), "--store", str(baseline), *address]) == 0
    attrs = read_attrs(baseline)
    assert attrs["gpu_streams"] == STREAMS_VERSION
    base = open_dataset(baseline).load()
    assert bool(base["done"].all())
    # One replicate alone (ldpsim replay's path): the values the launches stored.
    point = load_sweep(sweep_file(tmp_path, 12)).points()[1]
    alone = run_replicate(point.spec, 7)
    index = dict(zip(base["estimate"].dims, (1, 7, 0), strict=False))
    assert alone.estimate[0] == base["estimate"].isel(tau=1, rep=7, coord=0).item(), index
    bb = list(base["method"].values).index("bb")
    assert alone.upper["bb"][0] == base["upper"].isel(tau=1, rep=7, coord=0, method=bb).item()
    # Extension: 6 replicates into a new store (a rerun of the first six: the same
    # numbers), then 12.
    grown = tmp_path / "grown.zarr"
    assert run([str(sweep_file(tmp_path, 6)), "--store", str(grown), *address]) == 0
    assert run([str(sweep_file(tmp_path, 12)), "--store", str(grown), *address]) == 0
    for name in FIELDS:
        np.testing.assert_array_equal(open_dataset(grown)[name].values, base[name].values, name)
    # Kill the run (SIGKILL to its process group) once some replicates are written;
    # resume in this process, as the other runs here (no second interpreter to start).
    killed = tmp_path / "killed.zarr"
    args = [str(sweep_file(tmp_path, 12)), "--store", str(killed), *address]
    command = [sys.executable, "-m", "ldpsim.pipeline", "run", *args]
    env = {**os.environ, "LDPSIM_WRITE_EVERY": "0"}
    kill_when(command, lambda: done_count(killed) >= 3, env)
    assert done_count(killed) < 24
    assert run(args) == 0
    for name in FIELDS:
        np.testing.assert_array_equal(open_dataset(killed)[name].values, base[name].values, name)


def test_a_gpu_sweep_is_refused_where_it_cannot_run(tmp_path, local_cluster, capfd):
    sweep = sweep_file(tmp_path, 4)
    store = tmp_path / "refused.zarr"
    # A cluster whose workers hold no GPU: refused before the store exists.
    code = run([str(sweep), "--store", str(store), "--scheduler", local_cluster.scheduler_address])
    one_error_line(capfd.readouterr(), code, ["no worker of this cluster holds a GPU"])
    assert not store.exists()
    # A model or mechanism without a GPU kernel: refused before anything starts.
    huber = tmp_path / "huber.toml"
    huber.write_text('replicates = 2\n[spec]\nmodel = "huber_regression"\nn = 1000\n')
    code = run([str(huber), "--store", str(store), "--backend", "gpu"])
    one_error_line(capfd.readouterr(), code, ["model huber_regression has no GPU kernel"])
    budgets = tmp_path / "budgets.toml"
    budgets.write_text(sweep.read_text().replace("n = 200\n", "n = 200\nbudget_range = [1, 2]\n"))
    code = run([str(budgets), "--store", str(store)])
    one_error_line(capfd.readouterr(), code, ["no GPU kernel", "backend = cpu", "tau = 0.5"])
    assert not store.exists()


def test_one_store_never_mixes_backends(tmp_path, local_cluster, gpu_cluster, capfd):
    cpu_store = tmp_path / "cpu.zarr"
    cpu_sweep = tmp_path / "cpu.toml"
    cpu_sweep.write_text(SWEEP.format(replicates=3).replace('backend = "gpu"\n', ""))
    cpu = ["--scheduler", local_cluster.scheduler_address]
    gpu = ["--scheduler", gpu_cluster.scheduler_address]
    assert run([str(cpu_sweep), "--store", str(cpu_store), *cpu]) == 0
    capfd.readouterr()
    before = tree_hash(cpu_store)
    code = run([str(cpu_sweep), "--store", str(cpu_store), "--backend", "gpu", *gpu])
    one_error_line(capfd.readouterr(), code, ["cpu backend", "gpu backend", "never mixes"])
    assert tree_hash(cpu_store) == before
    gpu_store = tmp_path / "gpu.zarr"
    assert run([str(cpu_sweep), "--store", str(gpu_store), "--backend", "gpu", *gpu]) == 0
    capfd.readouterr()
    before = tree_hash(gpu_store)
    code = run([str(cpu_sweep), "--store", str(gpu_store), "--replicates", "5", *cpu])
    one_error_line(capfd.readouterr(), code, ["gpu backend", "cpu backend"])
    assert tree_hash(gpu_store) == before


def test_a_method_added_to_a_finished_gpu_store_equals_a_fresh_gpu_sweep(tmp_path, gpu_cluster):
    """Issue 34 item 6 on the GPU backend: the chains of the stored replicates run again in
    one launch per chunk, and the added methods' values are a fresh sweep's (few
    replicates: the simulator is slow; two chunks a grid point, so that a launch's row
    of a replicate is not its number)."""
    address = ["--scheduler", gpu_cluster.scheduler_address]
    text = SWEEP.format(replicates=6).replace("[methods.bm]\n[methods.sn]\n", "")
    stored, every = tmp_path / "stored.toml", tmp_path / "every.toml"
    stored.write_text(text)
    every.write_text(text + "[methods.bm]\n[methods.sn]\n")
    store, fresh = tmp_path / "S.zarr", tmp_path / "fresh.zarr"
    assert run([str(stored), "--store", str(store), *address]) == 0
    before = tree_hash(store)
    assert run([str(every), "--store", str(store), *address]) == 0
    assert run([str(every), "--store", str(fresh), *address]) == 0
    got, want = open_dataset(store).load(), open_dataset(fresh).load()
    assert list(got["method"].values) == ["bb", "oracle", "bm", "sn"]
    for name in FIELDS:
        np.testing.assert_array_equal(got[name].values, want[name].values, name)
    # The stored methods' files were never rewritten.
    kept = {k: v for k, v in before.items() if k.startswith(("lower/c/", "upper/c/"))}
    assert kept and all(tree_hash(store)[k] == v for k, v in kept.items())


def test_a_store_of_the_first_gpu_streams_is_refused_in_one_line(
    tmp_path, gpu_cluster, capfd, monkeypatch
):
    """Version 2 of the GPU streams (one key per grid point, the replicate in the counter,
    other conversions and sines) draws other numbers: a store that recorded version 1
    is not extended with them, and nothing in it changes."""
    from ldpsim.tasks.streams import philox

    address = ["--scheduler", gpu_cluster.scheduler_address]
    store = tmp_path / "first.zarr"
    sweep = tmp_path / "first.toml"
    sweep.write_text(SWEEP.format(replicates=2).replace("tau = [0.5, 0.8]", "tau = [0.5]"))
    assert STREAMS_VERSION == "philox4x32-10/rep-counter/2"
    with monkeypatch.context() as patch:  # the store as version 1 wrote it
        patch.setattr(philox, "STREAMS_VERSION", "philox4x32-10/pairs/1")
        assert run([str(sweep), "--store", str(store), *address]) == 0
    assert read_attrs(store)["gpu_streams"] == "philox4x32-10/pairs/1"
    capfd.readouterr()
    before = tree_hash(store)
    code = run([str(sweep), "--store", str(store), "--replicates", "3", *address])
    line = one_error_line(capfd.readouterr(), code)
    assert "'philox4x32-10/pairs/1'" in line and f"'{STREAMS_VERSION}'" in line
    assert tree_hash(store) == before


def test_the_python_api_takes_the_backend_as_the_cli_does(tmp_path, gpu_cluster):
    # A hunt (2026-12-01): run(..., backend=...) raised NameError for every value.
    path = tmp_path / "cpu.toml"
    path.write_text(SWEEP.format(replicates=3).replace('backend = "gpu"\n', ""))
    sweep = load_sweep(path)
    refused = tmp_path / "refused.zarr"
    with pytest.raises(InputError, match="'backend' parameter of run must be 'cpu', 'gpu'"):
        api.run(sweep, refused, backend="tpu")
    with pytest.raises(InputTypeError, match="'backend' parameter of run must be 'cpu'"):
        api.run(sweep, refused, backend=["gpu"])
    assert not refused.exists()
    store = tmp_path / "gpu.zarr"
    address = gpu_cluster.scheduler_address
    ds = api.run(sweep, store, scheduler=address, backend="gpu", progress=False)
    assert bool(ds["done"].all()) and read_attrs(store)["gpu_streams"] == STREAMS_VERSION
    cli = tmp_path / "cli.zarr"
    assert run([str(path), "--store", str(cli), "--backend", "gpu", "--scheduler", address]) == 0
    for name in FIELDS:
        np.testing.assert_array_equal(ds[name].values, open_dataset(cli)[name].values, name)


@pytest.mark.skipif(Path("/dev/nvidiactl").exists(), reason="a real CUDA driver is here")
def test_gpu_workers_without_a_cuda_device_are_refused_before_the_store(tmp_path):
    # A hunt (2026-12-01): CUDA_VISIBLE_DEVICES set on a machine without a driver gave a
    # store of failed replicates (CudaSupportError in each), exit 1. Outside the
    # simulator, in a process of its own: numba's CUDA target as a user's run sees it.
    store = tmp_path / "none.zarr"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    command = [sys.executable, "-m", "ldpsim.pipeline", "run", str(sweep_file(tmp_path, 2))]
    command += ["--store", str(store), "--cluster", "local-gpu"]
    out = subprocess.run(
        command, env={**env, "CUDA_VISIBLE_DEVICES": "0"}, capture_output=True, text=True
    )
    words = ["1 of the 1 GPU workers cannot use CUDA", "CudaSupportError", "--backend cpu"]
    one_error_line(SimpleNamespace(err=out.stderr), out.returncode, words)
    assert not store.exists()
