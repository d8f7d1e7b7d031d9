"""Scaling benchmark: the `scale` sweep and a compute-bound probe on 1, 2, 4, ... workers.

Usage: ``python benchmarks/scaling.py [--json] [--quick] [--workers 1,2,4,8,16]
[--replicates R] [--worker-start forkserver|spawn]``, then
``python benchmarks/scaling.py --fit RECORDS.json [--json]`` on the records it printed.

For each worker count (default: the powers of 2 up to this machine's usable cores, and
the count itself), on a fresh local cluster of that many one-thread worker processes
(ldpsim's `local` cluster file):

- ``ready_s``: from the cluster's start until every worker is connected;
  ``first_task_s``: until every worker has run a first task that imports ldpsim's task
  modules (what a spawned worker imports before it can compute; a worker forked from
  ldpsim's forkserver has them: :mod:`ldpsim.pipeline.compute.worker_start`);
- the built-in ``scale`` sweep (quantile, n = 500 and 1,000, bb / bm / sn / oracle) with
  ``--replicates`` per grid point (default 50,000: 200,000 in all) into a new store, after
  each worker compiled the kernel: its wall time, the replicates' summed compute time (the
  store's ``seconds``), the speed-up over the first (smallest) worker count, and the
  driver's CPU seconds (the client, the scheduler and the nannies: one process), whose
  replicates per CPU-second are what one driver can take before it is the ceiling, and
  their split over its threads (main, distributed's event loop, zarr's writes; Linux),
  and the event loop's CPU per second while the cluster waits for work, before the run
  (the driver's cost by the second rather than by the replicate);
- a compute-bound probe, 64 replicates of n = 2e7 with the oracle only, one replicate a
  task: its wall time against its compute divided by the workers plus ``ready_s``;
- for the largest count only, the sweep again and then with twice the replicates, into
  new stores on the same warm cluster: the driver's CPU seconds the second takes more
  than the first, per replicate more (``driver_margin_replicates_per_cpu_s``). A whole
  run's figure counts
  the driver's fixed costs (its imports, the store's creation), which at 200,000
  replicates are most of its CPU; the margin is what a larger run adds.

Each worker count is measured in a process of its own, as ``ldpsim run`` starts one: the
forkserver's own start is in every count's ``ready_s``.

``--quick`` runs 1 worker and the usable cores, 500 replicates per grid point and a probe
of 8 replicates at n = 2e5: a check that the benchmark works, whose figures mean nothing.
This is issue 35's table: run it on the machine whose cluster you size.

``--fit`` fits the cost model of a run to those records (:func:`fit`) and projects a
sweep of 1e7 replicates at n = 1e3 and 1e6 onto 1, 10 and 100 nodes of 32 cores
(:func:`projections`): an efficiency curve fitted to measurements in place of linear
scaling.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
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
    "driver_main_cpu_s": "s, difference",
    "driver_loop_cpu_s": "s, difference",
    "driver_store_io_cpu_s": "s, difference",
    "driver_idle_loop_share": "ratio",
    "speedup": "ratio",
    "probe_replicates": "count",
    "probe_n": "count",
    "probe_wall_s": "s",
    "probe_compute_s": "s",
    "probe_over_bound": "ratio",
    # the largest count only: replicates per driver CPU-second at the margin (twice the
    # replicates against once); absent from the others' records
    "driver_margin_replicates_per_cpu_s": "1/s",
}
#: The fields of ``--fit``'s output and their units (benchmarks/README.md, its own table).
FIT_FIELDS = {
    "machine": "name",
    "worker_counts": "[count]",
    "core_s_per_replicate": "s",  # c1: a replicate's core time on one worker (n = 500, 1000)
    "contention_per_worker": "ratio",  # s: c(w) = c1 (1 + s (w - 1))
    "task_s_per_replicate": "s, difference",  # u (>= 0): its task beyond its own time
    "step_s": "s",  # an SGD step's core time on one worker (the probe)
    "driver_replicates_per_s": "1/s",  # D: what one driver takes (at the margin)
    "fixed_s": "s, difference",  # f (>= 0): a run's wall time beyond its computing
    # the worker count from which the driver is the ceiling; null: never
    "saturating_workers": "ratio",
    "predicted_wall_s": "[s]",  # the model's wall time for each measured count
    "measured_wall_s": "[s]",
    "projections": "[record]",
}
#: The sweep the fit projects: replicates, its n, the nodes and their cores.
PROJECTED_REPLICATES = 10_000_000
PROJECTED_N = (1_000, 1_000_000)
PROJECTED_NODES = (1, 10, 100)
CORES_PER_NODE = 32
#: The `scale` sweep's n (500 and 1,000, as many replicates each): its mean SGD steps.
SCALE_MEAN_N = 750
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


def thread_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of each thread of this process, by native id (Linux's
    /proc; in clock ticks, 10 ms on most systems)."""
    if not os.path.isdir("/proc/self/task"):  # not Linux: the parts stay 0
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def thread_group(name: str) -> str:
    """The driver's part a thread of that name belongs to: main, loop, store_io, other."""
    if name == "MainThread":
        return "main"
    if name == "IO loop":  # distributed's event loop: client, scheduler, nannies
        return "loop"
    if name == "zarr_io" or name.startswith(("asyncio_", "zarr_pool")):  # zarr's loop, pools
        return "store_io"
    return "other"


#: Seconds the idle cluster is watched for ``driver_idle_loop_share``.
IDLE_SECONDS = 2.0


def by_group(before: dict[int, float], after: dict[int, float]) -> dict[str, float]:
    """CPU seconds of this process's threads between two :func:`thread_cpu` readings, by
    :func:`thread_group`."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    parts = dict.fromkeys(("main", "loop", "store_io", "other"), 0.0)
    for tid, seconds in after.items():
        parts[thread_group(names.get(tid, ""))] += seconds - before.get(tid, 0.0)
    return parts


def idle_loop_share(seconds: float = IDLE_SECONDS) -> float:
    """CPU seconds per second of distributed's event loop while the cluster has nothing
    to do: what the driver pays by the second, whatever the replicates (heartbeats, the
    scheduler's and the nannies' periodic checks)."""
    before = thread_cpu()
    time.sleep(seconds)
    return by_group(before, thread_cpu())["loop"] / seconds


def timed_run(sweep: Any, store: Path, client: Any) -> tuple[float, float, int, dict[str, float]]:
    """(wall s, summed compute s, replicates, driver CPU s by part) of ``sweep`` into the
    new ``store``. The driver's CPU seconds are this process's, all its threads: the
    client's collect-and-write loop, and the local cluster's scheduler and nannies, which
    run in it too; ``total``, and the threads' by :func:`thread_group` (a thread that
    ended during the run, the collector's or the lock's heartbeat, is in ``total`` only)."""
    from ldpsim.pipeline.compute.runner import run_sweep
    from ldpsim.pipeline.store.reading import open_dataset

    before = thread_cpu()
    start, cpu = time.perf_counter(), time.process_time()
    report = run_sweep(sweep, store, client=client, log=lambda *a: None, progress="none")
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    parts = by_group(before, thread_cpu())
    if report.failed:
        raise RuntimeError(f"{report.failed} replicates failed in {store}")
    seconds = np.asarray(open_dataset(store)["seconds"].values, dtype=float)
    return (
        wall,
        float(np.nansum(seconds)),
        int(np.isfinite(seconds).sum()),
        {"total": cpu, **parts},
    )


def import_task_modules() -> None:
    """What a worker imports for its first task of a sweep."""
    import ldpsim.pipeline.compute.worker  # noqa: F401


def measure(
    workers: int,
    tmp: Path,
    sizes: dict[str, int],
    worker_start: str = "forkserver",
    margin: bool = False,
) -> dict[str, Any]:
    """One record: a fresh cluster of ``workers``, its start, the sweep, the probe; and
    with ``margin`` the sweep again with twice the replicates (the driver's margin)."""
    from distributed import Client

    from ldpsim.pipeline.compute.clusters import build_cluster, load_cluster_config
    from ldpsim.pipeline.compute.limits import usable_cores
    from ldpsim.pipeline.store.provenance import cpu_model
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
        idle = idle_loop_share()
        scale = load_sweep("scale", replicates=sizes["replicates"])
        wall, compute, done, parts = timed_run(scale, tmp / f"scale-{workers}.zarr", client)
        driver = parts["total"]
        probe_file = tmp / "probe.toml"
        probe_file.write_text(
            PROBE.format(replicates=sizes["probe_replicates"], n=sizes["probe_n"])
        )
        probe = load_sweep(str(probe_file))
        probe_wall, probe_compute, _, _ = timed_run(probe, tmp / f"probe-{workers}.zarr", client)
        more: dict[str, Any] = {}
        if margin:
            # The sweep again, then with twice the replicates: the first run paid the
            # process's first imports and first writes, which the difference must not hold.
            _, _, done_again, again = timed_run(scale, tmp / f"again-{workers}.zarr", client)
            double = load_sweep("scale", replicates=2 * sizes["replicates"])
            _, _, done_twice, twice = timed_run(double, tmp / f"twice-{workers}.zarr", client)
            extra = twice["total"] - again["total"]
            # At tiny sizes (--quick) the difference is noise, and may be <= 0.
            rate = (done_twice - done_again) / extra if extra > 0 else None
            more["driver_margin_replicates_per_cpu_s"] = rate and round(rate, 1)
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
        "driver_main_cpu_s": round(parts["main"], 3),
        "driver_loop_cpu_s": round(parts["loop"], 3),
        "driver_store_io_cpu_s": round(parts["store_io"], 3),
        "driver_idle_loop_share": round(idle, 4),
        "speedup": 1.0,
        "probe_replicates": sizes["probe_replicates"],
        "probe_n": sizes["probe_n"],
        "probe_wall_s": round(probe_wall, 3),
        "probe_compute_s": round(probe_compute, 3),
        "probe_over_bound": round(probe_wall / (probe_compute / workers + ready), 3),
        **more,
    }


def nonnegative_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line of ``y`` on ``x``, both >= 0: a
    negative one (noise) is set to 0 and the other refitted without it; one distinct
    ``x``: slope 0."""
    if len(set(x)) < 2:
        return 0.0, max(float(y.mean()), 0.0)
    slope, intercept = (float(v) for v in np.polyfit(x, y, 1))
    if slope < 0:
        return 0.0, max(float(y.mean()), 0.0)
    if intercept < 0:
        return max(float(x @ y / (x @ x)), 0.0), 0.0
    return slope, intercept


def fit(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The cost model of a run, fitted to the records of one machine (1, 2, 4, ... workers).

    A replicate of the `scale` sweep costs ``c(w) = c1 (1 + s (w - 1))`` core-seconds of
    its own (the store's ``seconds``) on ``w`` workers: least squares of the records'
    ``compute_s / replicates`` on ``w - 1``, where ``s`` is what each further worker
    adds through the memory and the caches the cores share. Beyond that, its task costs
    a worker ``u`` more (the task's loop, packing the results), and a run costs ``f``
    once (the store's creation, the closing): least squares of what each wall time
    leaves, ``wall - R c(w) / w = f + u R / w``, for ``R`` replicates. One driver takes
    at most ``D`` replicates a second: ``driver_margin_replicates_per_cpu_s`` (the
    client, the scheduler and the nannies share one interpreter; what twice the
    replicates cost it more, on the largest count), or where no record has it, the
    median of ``driver_replicates_per_cpu_s``, whose fixed CPU (the imports, the
    store's creation) makes ``D`` low: at 200,000 replicates a sixth of the margin's on
    the 2-core machine, and driver-bound projections that much too slow. A run then takes

        ``wall(w) = f + R max((c(w) + u) / w, 1 / D)``,

    and the driver is the ceiling from ``w* = D (c1 (1 - s) + u) / (1 - D c1 s)``
    workers on (None where ``D c1 s >= 1``: the workers' contention stops them first).
    ``step_s`` is the probe's core time per SGD step on one worker (the oracle only),
    which :func:`projections` adds for a larger n. ``s``, ``f`` and ``u`` are taken as
    at least 0, the other parameter of their line refitted without them.

    Parameters
    ----------
    records : list of dict
        ``scaling.py --json``'s output: one record per worker count, the same machine,
        none of whose runs was bound by the driver (``wall(w)`` would not be linear).

    Returns
    -------
    dict
        :data:`FIT_FIELDS`, ``projections`` included.
    """
    workers = np.array([r["workers"] for r in records], dtype=float)
    replicates = np.array([r["replicates"] for r in records], dtype=float)
    walls = np.array([r["wall_s"] for r in records])
    per_replicate = np.array([r["compute_s"] for r in records]) / replicates
    slope, c1 = nonnegative_line(workers - 1, per_replicate)
    contention = slope / c1
    own = c1 * (1 + contention * (workers - 1))
    share, fixed = nonnegative_line(replicates / workers, walls - replicates * own / workers)
    margins = [r.get("driver_margin_replicates_per_cpu_s") for r in records]
    margins = [m for m in margins if m]
    whole = [r["driver_replicates_per_cpu_s"] for r in records]
    driver = float(np.median(margins or whole))
    one = min(records, key=lambda r: r["workers"])
    if "probe_n" not in one:
        raise ValueError("records without probe_n (scaling.py before 2026-11-27): run it again")
    step = one["probe_compute_s"] / (one["probe_replicates"] * one["probe_n"])
    predicted = fixed + replicates * np.maximum((own + share) / workers, 1 / driver)
    limit = driver * c1 * contention
    # None (JSON null): the workers' contention stops them before the driver does.
    saturating = (
        float(driver * (c1 * (1 - contention) + share) / (1 - limit)) if limit < 1 else None
    )
    model = {
        "machine": one["machine"],
        "worker_counts": [int(w) for w in workers],
        "core_s_per_replicate": float(c1),
        "contention_per_worker": contention,
        "task_s_per_replicate": share,
        "step_s": float(step),
        "driver_replicates_per_s": driver,
        "fixed_s": fixed,
        "saturating_workers": saturating,
        "predicted_wall_s": [round(float(w), 3) for w in predicted],
        "measured_wall_s": [float(w) for w in walls],
    }
    model["projections"] = projections(model)
    return model


def projections(model: dict[str, Any]) -> list[dict[str, Any]]:
    """:data:`PROJECTED_REPLICATES` replicates at each n of :data:`PROJECTED_N` on each
    count of :data:`PROJECTED_NODES` nodes of :data:`CORES_PER_NODE` cores, one driver.

    A replicate at ``n`` costs ``(c1 + (n - 750) step) (1 + s (32 - 1)) + u`` core-seconds
    (a node's cores contend with each other, not with other nodes': an extrapolation
    beyond the largest count measured); the cluster computes ``32 N`` of them at once,
    the driver takes at most ``D`` a second, and ``f`` is paid once. The batch system's
    start of the nodes is not in it (minutes, the site's).
    """
    c1, contention = model["core_s_per_replicate"], model["contention_per_worker"]
    out = []
    for n in PROJECTED_N:
        own = (c1 + (n - SCALE_MEAN_N) * model["step_s"]) * (1 + contention * (CORES_PER_NODE - 1))
        cost = own + model["task_s_per_replicate"]
        for nodes in PROJECTED_NODES:
            cores = nodes * CORES_PER_NODE
            rate = min(cores / cost, model["driver_replicates_per_s"])
            out.append(
                {
                    "replicates": PROJECTED_REPLICATES,
                    "n": n,
                    "nodes": nodes,
                    "cores": cores,
                    "core_s_per_replicate": round(cost, 9),
                    "replicates_per_s": round(rate, 1),
                    "driver_bound": bool(rate < cores / cost),
                    "wall_s": round(model["fixed_s"] + PROJECTED_REPLICATES / rate, 1),
                    "linear_wall_s": round(PROJECTED_REPLICATES * cost / cores, 1),
                }
            )
    return out


def powers(value: int) -> str:
    """A power of 10 as 1e7."""
    return f"{value:.0e}".replace("e+0", "e").replace("e+", "e")


def fit_text(model: dict[str, Any]) -> str:
    """:func:`fit`'s model and projections as lines for a person."""
    lines = [
        f"{model['machine']}: workers {model['worker_counts']}",
        f"a replicate (n = 500, 1000): {model['core_s_per_replicate'] * 1e6:.1f} us of a core "
        f"on 1 worker, +{model['contention_per_worker'] * 100:.2f}% per further worker, "
        f"{model['task_s_per_replicate'] * 1e6:.1f} us more in its task",
        f"an SGD step: {model['step_s'] * 1e9:.2f} ns; one driver: "
        f"{model['driver_replicates_per_s']:,.0f} replicates/s, the ceiling "
        + (
            f"from {model['saturating_workers']:.1f} workers"
            if model["saturating_workers"] is not None
            else "never (the workers' contention stops them first)"
        )
        + f"; fixed cost {model['fixed_s']:.2f} s",
        "wall, measured / predicted: "
        + ", ".join(
            f"{w}: {m:.2f} / {p:.2f} s"
            for w, m, p in zip(
                model["worker_counts"],
                model["measured_wall_s"],
                model["predicted_wall_s"],
                strict=True,
            )
        ),
    ]
    for p in model["projections"]:
        bound = ", driver-bound" if p["driver_bound"] else ""
        lines.append(
            f"{powers(PROJECTED_REPLICATES)} replicates, n = {powers(p['n'])}, "
            f"{p['nodes']} x {CORES_PER_NODE} cores: "
            f"{p['wall_s']:,.1f} s{bound} (linear scaling: {p['linear_wall_s']:,.1f} s)"
        )
    return "\n".join(lines)


def measured_apart(workers: int, args: argparse.Namespace, margin: bool) -> dict[str, Any]:
    """The record of ``workers``, measured by this script in a process of its own."""
    command = [sys.executable, __file__, "--json", "--workers", str(workers)]
    command += ["--margin"] if margin else []
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="JSON records on stdout")
    parser.add_argument("--quick", action="store_true", help="tiny runs: a smoke test")
    parser.add_argument("--workers", help="comma-separated worker counts (default: 1, 2, 4, ...)")
    parser.add_argument("--replicates", type=int, help="replicates per grid point of scale")
    parser.add_argument(
        "--fit", metavar="RECORDS", help="fit the cost model to a --json run's records"
    )
    parser.add_argument(
        "--worker-start",
        choices=("forkserver", "spawn"),
        default="forkserver",
        help="how the local workers start (the local cluster's worker_start option)",
    )
    parser.add_argument(
        "--margin",
        action="store_true",
        help="also the sweep with twice the replicates, for the driver's margin (without "
        "--workers: on the largest count; with it: on each count listed)",
    )
    args = parser.parse_args(argv)
    if args.fit:
        model = fit(json.loads(Path(args.fit).read_text()))
        if args.json:
            json.dump(model, sys.stdout, indent=1)
            print()
        else:
            print(fit_text(model))
        return 0
    from ldpsim.pipeline.compute.limits import usable_cores

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
        # Without --workers, the largest count; with it, where --margin asks (each count
        # measured apart gets --workers and the parent's choice).
        margin = args.margin if args.workers else workers == max(counts)
        if len(counts) == 1:
            with tempfile.TemporaryDirectory(prefix="ldpsim-scaling-") as name:
                record = measure(workers, Path(name), sizes, args.worker_start, margin)
        else:  # each count in a new process, as a run starts its cluster
            record = measured_apart(workers, args, margin)
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
