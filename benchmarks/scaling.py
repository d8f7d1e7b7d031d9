"""Scaling benchmark: the `scale` sweep and a compute-bound probe on 1, 2, 4, ... workers.

Usage: ``python benchmarks/scaling.py [--json] [--quick] [--workers 1,2,4,8,16]
[--replicates R] [--worker-start forkserver|spawn]``.

For each worker count (default: the powers of 2 up to this machine's usable cores, and
the count itself), on a fresh local cluster of that many one-thread worker processes
(ldpsim's `local` cluster file):

- ``ready_s``: from the cluster's start until every worker is connected;
  ``first_task_s``: until every worker has run a first task that imports ldpsim's task
  modules (what a spawned worker imports before it can compute; a worker forked from
  ldpsim's forkserver has them: :mod:`ldpsim.pipeline.worker_start`);
- the built-in ``scale`` sweep (quantile, n = 500 and 1,000, bb / bm / sn / oracle) with
  ``--replicates`` per grid point (default 50,000: 200,000 in all) into a new store, after
  each worker compiled the kernel: its wall time, the replicates' summed compute time (the
  store's ``seconds``), the speed-up over the first (smallest) worker count, and the
  driver's CPU seconds (the client, the scheduler and the nannies: one process), whose
  replicates per CPU-second are what one driver can take before it is the ceiling;
- a compute-bound probe, 64 replicates of n = 2e7 with the oracle only, one replicate a
  task: its wall time against its compute divided by the workers plus ``ready_s``.

Each worker count is measured in a process of its own, as ``ldpsim run`` starts one: the
forkserver's own start is in every count's ``ready_s``.

``--quick`` runs 1 worker and the usable cores, 500 replicates per grid point and a probe
of 8 replicates at n = 2e5: a check that the benchmark works, whose figures mean nothing.
This is issue 35's table: run it on the machine whose cluster you size.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

# Run as a script, this file's folder comes first on sys.path; nothing here shadows a
# package, but the other benchmarks' rule is kept (``pipeline.py`` would shadow ldpsim's).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

#: The fields of each record (one per worker count) and their units.
JSON_FIELDS = {
    "workers": "count",
    "cores": "count",
    "machine": "name",  # the CPU's model name
    "replicates": "count",
    "ready_s": "s",
    "first_task_s": "s",
    "wall_s": "s",
    "compute_s": "s",
    "replicates_per_s": "1/s",
    "driver_cpu_s": "s",
    "driver_replicates_per_cpu_s": "1/s",
    "speedup": "ratio",
    "probe_replicates": "count",
    "probe_wall_s": "s",
    "probe_compute_s": "s",
    "probe_over_bound": "ratio",
}
FULL = {"replicates": 50_000, "probe_replicates": 64, "probe_n": 20_000_000}
QUICK = {"replicates": 500, "probe_replicates": 8, "probe_n": 200_000}

PROBE = """\
description = "compute-bound probe"
replicates = {replicates}
seed = 3
rep_chunk = 1
[spec]
model = "quantile"
eps = 1.0
n = {n}
[methods.oracle]
"""


def worker_counts(cores: int, quick: bool) -> list[int]:
    """1, 2, 4, ... up to ``cores``, and ``cores`` itself (quick: 1 and ``cores``)."""
    if quick:
        return sorted({1, cores})
    counts, w = [], 1
    while w < cores:
        counts.append(w)
        w *= 2
    return [*counts, cores]


def timed_run(sweep: Any, store: Path, client: Any) -> tuple[float, float, int, float]:
    """(wall s, summed compute s, replicates, driver CPU s) of ``sweep`` into the new
    ``store``. The driver's CPU seconds are this process's, all its threads: the client's
    collect-and-write loop, and the local cluster's scheduler and nannies, which run in
    it too."""
    from ldpsim.pipeline.reading import open_dataset
    from ldpsim.pipeline.runner import run_sweep

    start, cpu = time.perf_counter(), time.process_time()
    report = run_sweep(sweep, store, client=client, log=lambda *a: None, progress="none")
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    if report.failed:
        raise RuntimeError(f"{report.failed} replicates failed in {store}")
    seconds = np.asarray(open_dataset(store)["seconds"].values, dtype=float)
    return wall, float(np.nansum(seconds)), int(np.isfinite(seconds).sum()), cpu


def import_task_modules() -> None:
    """What a worker imports for its first task of a sweep."""
    import ldpsim.pipeline.worker  # noqa: F401


def measure(
    workers: int, tmp: Path, sizes: dict[str, int], worker_start: str = "forkserver"
) -> dict[str, Any]:
    """One record: a fresh cluster of ``workers``, its start, the sweep, the probe."""
    from distributed import Client

    from ldpsim.pipeline.clusters import build_cluster, load_cluster_config, usable_cores
    from ldpsim.pipeline.provenance import cpu_model
    from ldpsim.pipeline.sweep import load_sweep
    from ldpsim.tasks import run_replicate

    start = time.perf_counter()
    options = {"n_workers": workers, "worker_start": worker_start}
    cluster = build_cluster(load_cluster_config("local"), options)
    with cluster, Client(cluster, set_as_default=False) as client:
        client.wait_for_workers(workers)
        ready = time.perf_counter() - start
        client.run(import_task_modules)
        first_task = time.perf_counter() - start
        spec = {"model": "quantile", "n": 1000, "methods": {"bb": {}, "bm": {}, "sn": {}}}
        client.run(run_replicate, spec, 0)  # every worker compiles (or loads) its kernel
        scale = load_sweep("scale", replicates=sizes["replicates"])
        wall, compute, done, driver = timed_run(scale, tmp / f"scale-{workers}.zarr", client)
        probe_file = tmp / "probe.toml"
        probe_file.write_text(
            PROBE.format(replicates=sizes["probe_replicates"], n=sizes["probe_n"])
        )
        probe = load_sweep(str(probe_file))
        probe_wall, probe_compute, _, _ = timed_run(probe, tmp / f"probe-{workers}.zarr", client)
    return {
        "workers": workers,
        "cores": usable_cores(),
        "machine": cpu_model(),
        "replicates": done,
        "ready_s": round(ready, 3),
        "first_task_s": round(first_task, 3),
        "wall_s": round(wall, 3),
        "compute_s": round(compute, 3),
        "replicates_per_s": round(done / wall, 1),
        "driver_cpu_s": round(driver, 3),
        "driver_replicates_per_cpu_s": round(done / driver, 1),
        "speedup": 1.0,
        "probe_replicates": sizes["probe_replicates"],
        "probe_wall_s": round(probe_wall, 3),
        "probe_compute_s": round(probe_compute, 3),
        "probe_over_bound": round(probe_wall / (probe_compute / workers + ready), 3),
    }


def measured_apart(workers: int, args: argparse.Namespace) -> dict[str, Any]:
    """The record of ``workers``, measured by this script in a process of its own."""
    command = [sys.executable, __file__, "--json", "--workers", str(workers)]
    command += ["--quick"] if args.quick else []
    command += ["--replicates", str(args.replicates)] if args.replicates else []
    command += ["--worker-start", args.worker_start]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        sys.stderr.write(done.stderr)
        raise RuntimeError(f"scaling.py --workers {workers} failed (exit {done.returncode})")
    (record,) = json.loads(done.stdout)
    return record


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark with the command-line arguments ``argv``; the exit status."""
    from ldpsim.pipeline.clusters import usable_cores

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="JSON records on stdout")
    parser.add_argument("--quick", action="store_true", help="tiny runs: a smoke test")
    parser.add_argument("--workers", help="comma-separated worker counts (default: 1, 2, 4, ...)")
    parser.add_argument("--replicates", type=int, help="replicates per grid point of scale")
    parser.add_argument(
        "--worker-start",
        choices=("forkserver", "spawn"),
        default="forkserver",
        help="how the local workers start (the local cluster's worker_start option)",
    )
    args = parser.parse_args(argv)
    sizes = dict(QUICK if args.quick else FULL)
    if args.replicates:
        sizes["replicates"] = args.replicates
    counts = (
        [int(w) for w in args.workers.split(",")]
        if args.workers
        else worker_counts(usable_cores(), args.quick)
    )
    records = []
    for workers in counts:
        if len(counts) == 1:
            with tempfile.TemporaryDirectory(prefix="ldpsim-scaling-") as name:
                record = measure(workers, Path(name), sizes, args.worker_start)
        else:  # each count in a new process, as a run starts its cluster
            record = measured_apart(workers, args)
        records.append(record)
        records[-1]["speedup"] = round(records[0]["wall_s"] / records[-1]["wall_s"], 3)
        if not args.json:
            print(json.dumps(records[-1]), flush=True)
    if args.json:
        json.dump(records, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
