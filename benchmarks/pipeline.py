"""Pipeline benchmark: per-replicate overhead, 2-worker speed-up, peak memory.

Usage: ``python benchmarks/pipeline.py [--json] [--quick] [--skip PART] [--speedup-n N]``;
``python benchmarks/pipeline.py --scaling [...]`` is ``benchmarks/scaling.py [...]``.

``--quick`` runs every part through the same code with the sizes of :data:`QUICK`
(tens to hundreds of replicates, one 1-worker cluster shared by the parts that are not
about 2 workers, one run per median, the compile part's replicate with the oracle only,
no n = 1e9) in under a minute: a check that the benchmark still works, whose figures
mean nothing. Without it the sizes are :data:`FULL`, those below.

- ``overhead_ms_per_replicate``: a sweep of many tiny replicates (quantile, n = 1000)
  through :func:`ldpsim.pipeline.compute.runner.run_sweep` on a warmed local cluster (as
  ``ldpsim run`` starts one: cluster/local.yaml) to a temporary
  store; (wall time x workers - summed compute time) / replicates, the compute time
  being the store's ``seconds`` variable. Covers scheduling, (de)serialisation, the
  Python side of a replicate (spec normalisation, cuts, intervals are inside
  ``seconds``; only what is outside counts) and the Zarr writes.
- ``speedup_2_over_1``: wall time of a CPU-bound sweep (16 replicates at n = 1e8, one
  replicate per task) on 1 warmed worker over that on 2 warmed workers: the median of
  3 ratios, the two clusters timed in turn.
- ``hardware_pair_speedup``: the ceiling of that speed-up on this machine, without Dask:
  2 x (time of one replicate at that n alone) / (time of each of two copies run at
  once in separate processes); the median of 3.
- ``rss_mb_n1e6`` / ``rss_mb_n1e9``: peak resident memory (ru_maxrss) of a fresh
  process running one quantile replicate (methods bb, bm, sn, oracle) at n = 1e6 / 1e9.
- ``compile_s_cold`` / ``compile_s_warm``: how long a fresh process takes to start
  computing: the time of its first replicate of :data:`REPLICATE` at n = 1000 minus
  the time of a second replicate in the same process (the replicate's own time), with
  an empty kernel cache (cold: ``LDPSIM_CACHE_DIR`` and ``NUMBA_CACHE_DIR`` new empty
  folders, so that nothing compiled before is found) and with the cache an earlier
  process filled (warm). ``compile_s_in_memory``: the same with ldpsim's cache folder
  unwritable, so that the kernel and (since 2026-12-01, ``tasks/compiled.py``) the
  package's compiled functions compile in memory: what every process pays without a
  cache folder (earlier figures had the package's functions warm in numba's own cache,
  and are not comparable). Medians over runs; the raw times are reported too
  (``first_replicate_s_*``, ``second_replicate_s``, and ``import_s``, the time to
  import ``ldpsim.tasks``, which none of the others includes).
- A replicate of :data:`REPLICATE` at n = 1000 and at n = 10,000, split, in one worker
  process (medians of 5 runs of 2,000 replicates): ``replicate_us_*`` the time per
  replicate of ``run_chunk`` (a task's chunk: set-up shared, four interval methods, the
  arrays the store takes); ``kernel_us_*`` the chains alone, as the chunk runs them
  (``GridPointSetup.run_chains``: every replicate's stream seeded and its chain run in
  one compiled call); ``bb_us_*``, ``bm_us_*``, ``sn_us_*``, ``oracle_us_*`` each method's
  ``method_seconds`` as ``run_chunk`` records them, per replicate (whatever the chunk
  does: per replicate, or a batched call's time divided among its replicates);
  ``bookkeeping_us_*`` what is left: the replicate minus the chains and the methods
  (the statistics' stacking, failure checks, the chunk's result arrays); and
  ``replicate_overhead_us_n1e3`` the replicate minus the kernel.
- ``replicates_per_s_per_core_n1e3`` / ``_n1e4``: a sweep of 20,000 (n = 1e3) or 4,000
  (n = 1e4) replicates through :func:`ldpsim.pipeline.compute.runner.run_sweep` on a warmed
  2-worker local cluster (the same) into a new store: replicates / (wall seconds x workers).
  ``driver_cpu_us_n1e3`` / ``_n1e4``: this process's CPU time during that sweep (the
  driver: the client's collect-and-write loop, the scheduler and the nannies of the
  local cluster, the store's creation) per replicate, after a small sweep that took the
  one-off imports of a store's creation.
- ``store_files_1e5``, ``status_s_1e5``, ``summarize_s_1e5``, ``noop_run_s_1e5``: a
  finished store of 100,000 replicates (4 grid points, n = 1000; ``store_replicates``):
  its files, and the wall time of ``ldpsim status``, ``ldpsim summarize`` and a second
  ``ldpsim run`` with nothing to do, each a fresh process (imports included); medians of 3.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: The replicate that the memory and hardware measurements run, and that the workers
#: compile before timed sweeps (the same spec as the benchmark sweeps' grid points,
#: :data:`SWEEP`): bb in its basic form, whose B = 500 multipliers are drawn (a sweep's
#: bb without a form is the t form, which draws none).
REPLICATE = {
    "model": "quantile",
    "mechanism": "randomized_response",
    "eps": 1.0,
    "methods": {"bb": {"B": 500, "form": "basic"}, "bm": {}, "sn": {}, "oracle": {}},
}


@dataclass(frozen=True, kw_only=True)
class Sizes:
    """How much each part of the benchmark runs: :data:`FULL` or :data:`QUICK`."""

    #: Runs per median of the overhead, speed-up, hardware-pair, compile and store parts.
    repeats: int
    #: Workers of the overhead, throughput and store clusters (the speed-up uses 1 and 2).
    workers: int
    #: Whether the parts share one cluster per worker count (:class:`Clusters`), the
    #: store's ``ldpsim run`` included (``--scheduler``), instead of each part starting
    #: its own. Measured 2026-11-30 on 2 busy cores: a 1-worker cluster's start, warm-up
    #: and close took 2.2 CPU-seconds, the quick store's ``ldpsim run`` 6.0 to 6.7 with
    #: a cluster of its own and 2.8 to 3.4 on a running one, a quick sweep 0.4.
    shared_clusters: bool
    #: Runs per median of the per-replicate split (``replicate_us_*`` and the fields beside
    #: it) and replicates per run, at each n.
    replicate_overhead_repeats: int
    replicate_overhead_replicates: int
    #: (n, replicates) of each throughput sweep.
    throughput_sweeps: tuple[tuple[int, int], ...]
    #: Replicates of the store that ``ldpsim status``, ``summarize`` and ``run`` read.
    store_replicates: int
    #: Replicates of the overhead sweep (and a sweep 4 times smaller).
    overhead_replicates: int
    #: Replicates and n of the CPU-bound sweep (``--speedup-n`` replaces ``speedup_n``).
    speedup_replicates: int
    speedup_n: int
    #: Seconds from their start to the joint start of the hardware pair's processes.
    pair_start_delay_s: float
    #: n of the replicates whose peak memory is measured.
    rss_n: tuple[float, ...]
    #: The interval methods (of :data:`REPLICATE`'s) of the replicate whose first run
    #: the compile part times. A method's compiled functions are compiled too in the
    #: cold runs (numba's empty cache): with the oracle only, a cold run took 6.8 to 7.9
    #: CPU-seconds against 13 to 17 with all four (2026-11-30, 2 busy cores).
    compile_methods: tuple[str, ...]


FULL = Sizes(
    repeats=3,
    workers=2,
    shared_clusters=False,
    replicate_overhead_repeats=5,
    replicate_overhead_replicates=2000,
    throughput_sweeps=((1000, 20_000), (10_000, 4_000)),
    store_replicates=100_000,
    overhead_replicates=400,
    speedup_replicates=16,
    speedup_n=int(1e8),
    pair_start_delay_s=15.0,
    rss_n=(1e6, 1e9),
    compile_methods=tuple(REPLICATE["methods"]),
)
QUICK = Sizes(
    repeats=1,
    workers=1,
    shared_clusters=True,
    replicate_overhead_repeats=1,
    replicate_overhead_replicates=50,
    throughput_sweeps=((1000, 200), (10_000, 40)),
    store_replicates=200,
    overhead_replicates=40,
    speedup_replicates=4,
    speedup_n=int(2e5),
    pair_start_delay_s=2.0,
    rss_n=(1e6,),
    compile_methods=("oracle",),
)

#: The fields of the JSON record and their units: "count" a positive integer; "s", "ms",
#: "us" a time; "MB" memory; "1/s" replicates per second per core; "ratio" a ratio of
#: times; ", difference": a difference of two measurements, which noise can make
#: negative; "[...]": a list, one per run. benchmarks/README.md lists the same fields,
#: and tests/test_benchmarks.py checks both against the output.
JSON_FIELDS = {
    "replicate_us_n1e3": "us",
    "kernel_us_n1e3": "us",
    "bb_us_n1e3": "us",
    "bm_us_n1e3": "us",
    "sn_us_n1e3": "us",
    "oracle_us_n1e3": "us",
    "bookkeeping_us_n1e3": "us, difference",
    "replicate_overhead_us_n1e3": "us, difference",
    "replicate_us_n1e4": "us",
    "kernel_us_n1e4": "us",
    "bb_us_n1e4": "us",
    "bm_us_n1e4": "us",
    "sn_us_n1e4": "us",
    "oracle_us_n1e4": "us",
    "bookkeeping_us_n1e4": "us, difference",
    "replicates_per_s_per_core_n1e3": "1/s",
    "replicates_per_s_per_core_n1e4": "1/s",
    "driver_cpu_us_n1e3": "us",
    "driver_cpu_us_n1e4": "us",
    "store_replicates": "count",
    "store_files_1e5": "count",
    "status_s_1e5": "s",
    "summarize_s_1e5": "s",
    "noop_run_s_1e5": "s",
    "overhead_ms_per_replicate": "ms, difference",
    "marginal_overhead_ms_per_replicate": "ms, difference",
    "overhead_ms_runs": "[ms, difference]",
    "overhead_replicates": "count",
    "overhead_n": "count",
    "overhead_workers": "count",
    "overhead_wall_s": "s",
    "speedup_replicates": "count",
    "speedup_n": "count",
    "wall_s_1_worker": "s",
    "wall_s_2_workers": "s",
    "speedup_2_over_1": "ratio",
    "speedup_runs": "[ratio]",
    "hardware_pair_speedup": "ratio",
    "hardware_pair_runs": "[ratio]",
    "compile_s_cold": "s, difference",
    "compile_s_warm": "s, difference",
    "compile_s_in_memory": "s, difference",
    "first_replicate_s_cold": "[s]",
    "first_replicate_s_warm": "[s]",
    "first_replicate_s_in_memory": "[s]",
    "second_replicate_s": "s",
    "import_s": "s",
    "compile_runs": "count",
    "rss_mb_n1e6": "MB",
    "replicate_s_n1e6": "s",
    "rss_mb_n1e9": "MB",
    "replicate_s_n1e9": "s",
    "rss_growth_mb": "MB, difference",
}
#: The fields that only the full run reports (``--quick`` runs no replicate at n = 1e9).
FULL_ONLY_FIELDS = ("rss_mb_n1e9", "replicate_s_n1e9", "rss_growth_mb")

# Run as a script, this file's folder comes first on sys.path and its name would shadow
# the ``pipeline`` package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

SWEEP = """\
description = "benchmark"
replicates = {replicates}
seed = 7
{rep_chunk}
[spec]
model = "quantile"
mechanism = "randomized_response"
eps = 1.0

[grid]
tau = {taus}
n = [{n}]

[methods.bb]
B = 500
form = "basic"

[methods.bm]

[methods.sn]

[methods.oracle]
"""

# A fresh process: compile on a tiny replicate, wait until the start time (two copies
# start together), run one replicate at n; print peak RSS (MB) and its seconds.
CHILD = """
import json, resource, sys, time
from ldpsim.tasks import run_replicate
spec, n, start = json.loads(sys.argv[1]), int(float(sys.argv[2])), float(sys.argv[3])
run_replicate({**spec, "n": 1000}, 0)
time.sleep(max(0.0, start - time.time()))
t = time.perf_counter()
run_replicate({**spec, "n": n}, 0)
seconds = time.perf_counter() - t
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, seconds)
"""


def make_sweep(tmp: Path, name: str, *, replicates, n, taus=(0.5,), rep_chunk=None):
    from ldpsim.pipeline.sweep import load_sweep

    path = tmp / f"{name}.toml"
    chunk = "" if rep_chunk is None else f"rep_chunk = {rep_chunk}\n"
    path.write_text(SWEEP.format(replicates=replicates, n=n, taus=list(taus), rep_chunk=chunk))
    return load_sweep(str(path))


def run_timed(sweep, store, address) -> tuple[float, float, int, float]:
    """(wall seconds, summed compute seconds, replicates, this process's CPU seconds) of
    one sweep into a new store."""
    from ldpsim.pipeline.compute.runner import run_sweep
    from ldpsim.pipeline.store.reading import open_dataset

    start, cpu = time.perf_counter(), time.process_time()
    report = run_sweep(sweep, store, scheduler=address, log=lambda *a: None)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert report.failed == 0, report
    seconds = np.asarray(open_dataset(store)["seconds"].values, dtype=float)
    return wall, float(np.nansum(seconds)), int(np.isfinite(seconds).sum()), cpu


def cluster(workers: int):
    """A local cluster of ``workers`` as ``ldpsim run`` starts one for a short run
    (cluster/local.yaml: its housekeeping intervals, worker start and preload; no
    dashboard, as ``dashboard_address: auto`` gives a run estimated under 30 s)."""
    from ldpsim.pipeline.compute.clusters import build_cluster, load_cluster_config

    return build_cluster(
        load_cluster_config("local"), {"n_workers": workers, "dashboard_address": None}
    )


class Clusters:
    """The local clusters (:func:`cluster`) of the parts of one run, as a context.

    Parameters
    ----------
    shared : bool
        False: each part starts a cluster of its own and closes it when it ends, and the
        store's ``ldpsim run`` starts one too (``--workers``). True: the parts share one
        cluster per worker count, started by the first part that asks for it and closed
        when this context ends, and ``ldpsim run`` computes on it (``--scheduler``).
    """

    def __init__(self, shared: bool) -> None:
        self.shared = shared
        self._stack = contextlib.ExitStack()
        self._kept: dict[int, Any] = {}

    def __enter__(self) -> Clusters:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()

    def _kept_cluster(self, workers: int) -> Any:
        if workers not in self._kept:
            self._kept[workers] = self._stack.enter_context(cluster(workers))
        return self._kept[workers]

    @contextlib.contextmanager
    def of(self, workers: int) -> Iterator[Any]:
        """A cluster of ``workers`` one-thread worker processes for one part.

        Parameters
        ----------
        workers : int
            Its worker processes, >= 1.

        Yields
        ------
        distributed.LocalCluster
            A new cluster, closed when the part's block ends; or the shared one, which
            stays open.
        """
        if self.shared:
            yield self._kept_cluster(workers)
        else:
            with cluster(workers) as lc:
                yield lc

    def shared_address(self, workers: int) -> str | None:
        """The scheduler address of the shared cluster of ``workers`` (started if need
        be), for a process that computes on it; None where the clusters are not shared."""
        return self._kept_cluster(workers).scheduler_address if self.shared else None


# A fresh process: import, then two replicates of the spec argv[1], timed apart.
FIRST_REPLICATE = """
import json, sys, time
start = time.perf_counter()
from ldpsim.tasks import run_replicate
spec = json.loads(sys.argv[1])
imported = time.perf_counter()
run_replicate(spec, 0)
first = time.perf_counter()
run_replicate(spec, 1)
second = time.perf_counter()
print(json.dumps({"import_s": imported - start, "first_s": first - imported,
                  "second_s": second - first}))
"""


def first_replicate(spec: dict, caches: dict[str, Path]) -> dict[str, float]:
    """Times of a fresh process's import and first two replicates of ``spec``, with
    ``caches``."""
    env = {**os.environ, **{name: str(path) for name, path in caches.items()}}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FIRST_REPLICATE), json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the replicate failed (exit {proc.returncode}): {proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compile_times(tmp: Path, runs: int, methods: tuple[str, ...] = FULL.compile_methods) -> dict:
    """compile_s_cold, compile_s_warm and compile_s_in_memory (module docstring), of
    :data:`REPLICATE` at n = 1000 with its interval ``methods``."""
    spec = {
        **REPLICATE,
        "methods": {name: REPLICATE["methods"][name] for name in methods},
        "n": 1000,
    }
    (tmp / "not-a-folder").write_text("")
    times: dict[str, list[dict[str, float]]] = {"cold": [], "warm": [], "in_memory": []}
    for r in range(runs):
        caches = {"LDPSIM_CACHE_DIR": tmp / f"kernels-{r}", "NUMBA_CACHE_DIR": tmp / f"numba-{r}"}
        times["cold"].append(first_replicate(spec, caches))
        times["warm"].append(first_replicate(spec, caches))
        unwritable = {**caches, "LDPSIM_CACHE_DIR": tmp / "not-a-folder" / "kernels"}
        times["in_memory"].append(first_replicate(spec, unwritable))
    record: dict = {}
    for kind, runs_of_kind in times.items():
        record[f"compile_s_{kind}"] = round(
            float(np.median([t["first_s"] - t["second_s"] for t in runs_of_kind])), 3
        )
    for kind, runs_of_kind in times.items():
        record[f"first_replicate_s_{kind}"] = [round(t["first_s"], 3) for t in runs_of_kind]
    every = [t for runs_of_kind in times.values() for t in runs_of_kind]
    record["second_replicate_s"] = round(float(np.median([t["second_s"] for t in every])), 4)
    record["import_s"] = round(float(np.median([t["import_s"] for t in every])), 3)
    record["compile_runs"] = runs
    return record


def _compile_here() -> None:
    # One tiny replicate of the benchmark's spec: compiles the kernel in this process.
    from ldpsim.tasks import run_replicate

    run_replicate({**REPLICATE, "n": 1000}, 0)


def warm_every_worker(lc) -> None:
    """Compile the kernel on every worker: a warm-up sweep may leave one worker idle."""
    from distributed import Client

    with Client(lc) as client:
        client.run(_compile_here)


def overhead(tmp: Path, clusters: Clusters, workers: int, replicates: int, repeats: int) -> dict:
    taus = (0.3, 0.5)
    per_tau = replicates // len(taus)
    warm = make_sweep(tmp, "warm-o", replicates=20, n=1000, taus=taus)
    sweep = make_sweep(tmp, "overhead", replicates=per_tau, n=1000, taus=taus)
    small = make_sweep(tmp, "overhead-small", replicates=per_tau // 4, n=1000, taus=taus)
    values, walls, marginal = [], [], []
    with clusters.of(workers) as lc:
        warm_every_worker(lc)
        run_timed(warm, tmp / "warm-o.zarr", lc.scheduler_address)
        for r in range(repeats):
            wall, compute, reps, _ = run_timed(
                sweep, tmp / f"overhead-{r}.zarr", lc.scheduler_address
            )
            values.append((wall * workers - compute) / reps * 1e3)
            walls.append(wall)
            # The same for a sweep 4 x smaller: the difference removes the fixed per-sweep
            # cost (store creation, connecting), leaving the cost per added replicate.
            wall_s, compute_s, reps_s, _ = run_timed(
                small, tmp / f"overhead-small-{r}.zarr", lc.scheduler_address
            )
            marginal.append(
                ((wall - wall_s) * workers - (compute - compute_s)) / (reps - reps_s) * 1e3
            )
    return {
        "overhead_ms_per_replicate": round(float(np.median(values)), 3),
        "marginal_overhead_ms_per_replicate": round(float(np.median(marginal)), 3),
        "overhead_ms_runs": [round(v, 3) for v in values],
        "overhead_replicates": reps,
        "overhead_n": 1000,
        "overhead_workers": workers,
        "overhead_wall_s": round(float(np.median(walls)), 3),
    }


def speedup(tmp: Path, clusters: Clusters, replicates: int, n: int, repeats: int) -> dict:
    # Both clusters live side by side (idle workers cost nothing) and the timed sweeps
    # alternate between them, so that a change of load on the host hits both alike.
    sweep = make_sweep(tmp, "cpu", replicates=replicates, n=n, rep_chunk=1)
    walls: dict[int, list[float]] = {1: [], 2: []}
    with clusters.of(1) as one, clusters.of(2) as two:
        by_workers = {1: one, 2: two}
        for lc in by_workers.values():
            warm_every_worker(lc)
        for r in range(repeats):
            for workers, lc in by_workers.items():
                wall, _, _, _ = run_timed(
                    sweep, tmp / f"cpu-{workers}-{r}.zarr", lc.scheduler_address
                )
                walls[workers].append(wall)
    ratios = [w1 / w2 for w1, w2 in zip(walls[1], walls[2], strict=True)]
    return {
        "speedup_replicates": replicates,
        "speedup_n": n,
        "wall_s_1_worker": round(float(np.median(walls[1])), 3),
        "wall_s_2_workers": round(float(np.median(walls[2])), 3),
        "speedup_2_over_1": round(float(np.median(ratios)), 3),
        "speedup_runs": [round(v, 3) for v in ratios],
    }


def hardware_pair_speedup(n: int, repeats: int, start_delay_s: float = 15.0) -> dict:
    """2 T1 / T2: one replicate alone (T1) against two copies at once (T2 each), without
    Dask. The ceiling of ``speedup_2_over_1`` on this machine: below 2 when the two
    cores share execution units or memory bandwidth. The copies start ``start_delay_s``
    after their processes, which must have compiled by then."""

    def run(copies: int) -> float:
        start = time.time() + start_delay_s  # after both have compiled
        procs = [child(n, start) for _ in range(copies)]
        return max(float(p.communicate()[0].split()[-1]) for p in procs)

    ratios = [2.0 * run(1) / run(2) for _ in range(repeats)]
    return {
        "hardware_pair_speedup": round(float(np.median(ratios)), 3),
        "hardware_pair_runs": [round(v, 3) for v in ratios],
    }


def child(n: float, start: float = 0.0) -> subprocess.Popen:
    """A fresh process running :data:`CHILD` at ``n``, from the wall-clock ``start`` on."""
    args = [sys.executable, "-c", textwrap.dedent(CHILD), json.dumps(REPLICATE), str(n)]
    return subprocess.Popen([*args, str(start)], stdout=subprocess.PIPE, text=True)


def rss(n: float) -> tuple[float, float]:
    proc = child(n)
    out = proc.communicate()[0].split()
    if proc.returncode != 0:
        raise RuntimeError(f"the replicate at n = {n:g} failed (exit {proc.returncode})")
    return float(out[-2]), float(out[-1])


#: The n of the per-replicate split (:func:`replicate_split`), as they appear in field names.
SPLIT_N = {1000: "n1e3", 10_000: "n1e4"}


def replicate_split(repeats: int = 5, replicates: int = 2000) -> dict:
    """Microseconds per replicate of a chunk, its kernel, each method and the rest, at
    each n of :data:`SPLIT_N` (module docstring)."""
    from ldpsim.pipeline.compute.worker import run_chunk
    from ldpsim.tasks.grid_point import setup_of

    methods = list(REPLICATE["methods"])
    record: dict = {}
    for n, suffix in SPLIT_N.items():
        spec = {**REPLICATE, "n": n, "tau": 0.5, "seed": 7}
        setup = setup_of(spec)
        run_chunk(spec, list(range(50)), methods, 1, "warm")
        chunk, kernel, method = [], [], []
        for r in range(repeats):
            reps = list(range(r * replicates, (r + 1) * replicates))
            start = time.perf_counter()
            result = run_chunk(spec, reps, methods, 1, "bench")
            chunk.append((time.perf_counter() - start) / replicates)
            # Each method's seconds per replicate as the chunk recorded them.
            seconds = np.asarray(result["method_seconds"], dtype=float)
            method.append(np.nansum(seconds.reshape(len(methods), -1), axis=1) / replicates)
            # The chains as the chunk runs them: seeded and run in one compiled call.
            start = time.perf_counter()
            setup.run_chains(reps)
            kernel.append((time.perf_counter() - start) / replicates)
        per_method = np.median(method, axis=0)
        record[f"replicate_us_{suffix}"] = round(float(np.median(chunk)) * 1e6, 1)
        record[f"kernel_us_{suffix}"] = round(float(np.median(kernel)) * 1e6, 1)
        for label, seconds in zip(methods, per_method, strict=True):
            record[f"{label}_us_{suffix}"] = round(float(seconds) * 1e6, 2)
        rest = np.subtract(chunk, kernel) - np.sum(method, axis=1)
        record[f"bookkeeping_us_{suffix}"] = round(float(np.median(rest)) * 1e6, 1)
        if suffix == "n1e3":
            overhead = np.subtract(chunk, kernel)
            record["replicate_overhead_us_n1e3"] = round(float(np.median(overhead)) * 1e6, 1)
    return record


def throughput(
    tmp: Path,
    clusters: Clusters,
    workers: int = 2,
    sweeps: tuple[tuple[int, int], ...] = FULL.throughput_sweeps,
) -> dict:
    """Replicates per second per core at n = 1e3 and 1e4 (module docstring); ``sweeps``
    holds the (n, replicates) of each."""
    record = {}
    with clusters.of(workers) as lc:
        warm_every_worker(lc)
        # A small sweep first: the driver's one-off imports and compilations of a store's
        # creation (xarray, the streams' fingerprint) are in no timed sweep's CPU.
        warm = make_sweep(tmp, "rate-warm", replicates=10, n=1000)
        run_timed(warm, tmp / "rate-warm.zarr", lc.scheduler_address)
        for n, replicates in sweeps:
            sweep = make_sweep(tmp, f"rate-{n}", replicates=replicates // 2, n=n, taus=(0.3, 0.5))
            # cpu: the driver's, this process's (its local cluster's scheduler and nannies).
            wall, _, reps, cpu = run_timed(sweep, tmp / f"rate-{n}.zarr", lc.scheduler_address)
            suffix = f"n{n:.0e}".replace("+0", "")
            record[f"replicates_per_s_per_core_{suffix}"] = round(reps / (wall * workers), 1)
            record[f"driver_cpu_us_{suffix}"] = round(cpu / reps * 1e6, 2)
    return record


def store_reads(
    tmp: Path,
    clusters: Clusters,
    repeats: int = 3,
    workers: int = 2,
    replicates: int = FULL.store_replicates,
) -> dict:
    """Files of a store of ``replicates`` (1e5) replicates, 4 grid points, computed on
    ``workers`` by ``ldpsim run`` (on a cluster of its own, or on the shared one of
    ``clusters``), and the time of status, summarize, a no-op run."""
    taus = [0.2, 0.4, 0.6, 0.8]
    sweep_file = tmp / "reads.toml"
    sweep_file.write_text(
        SWEEP.format(replicates=replicates // len(taus), n=1000, taus=taus, rep_chunk="")
    )
    store = tmp / "reads.zarr"
    ldpsim = [sys.executable, "-m", "ldpsim.pipeline"]
    scheduler = clusters.shared_address(workers)
    where = ["--workers", str(workers)] if scheduler is None else ["--scheduler", scheduler]
    subprocess.run(
        [*ldpsim, "run", str(sweep_file), "--store", str(store), *where],
        check=True,
        capture_output=True,
    )
    record: dict = {
        "store_replicates": replicates // len(taus) * len(taus),
        "store_files_1e5": sum(1 for f in store.rglob("*") if f.is_file()),
    }
    commands = {
        "status_s_1e5": ["status", str(store)],
        "summarize_s_1e5": ["summarize", str(store)],
        "noop_run_s_1e5": ["run", str(sweep_file), "--store", str(store)],
    }
    for name, args in commands.items():
        walls = []
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run([*ldpsim, *args], check=True, capture_output=True)
            walls.append(time.perf_counter() - start)
        record[name] = round(float(np.median(walls)), 2)
    return record


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark with the command-line arguments ``argv``; the exit status.

    ``--scaling [ARGS]`` runs ``benchmarks/scaling.py ARGS`` instead (issue 35's table:
    the workers' scaling, see its docstring).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--scaling" in argv:
        argv.remove("--scaling")
        path = Path(__file__).resolve().with_name("scaling.py")
        spec = importlib.util.spec_from_file_location("ldpsim_scaling_benchmark", path)
        scaling = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(scaling)
        return scaling.main(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="one JSON record on stdout")
    parser.add_argument(
        "--quick", action="store_true", help="small runs, no n = 1e9: a smoke test"
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=["overhead", "speedup", "rss", "compile", "scale"],
        help="leave a part out",
    )
    parser.add_argument(
        "--speedup-n", type=float, help="n of the CPU-bound sweep (1e8; --quick: 2e5)"
    )
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    speedup_n = sizes.speedup_n if args.speedup_n is None else int(args.speedup_n)
    record: dict = {}
    with tempfile.TemporaryDirectory(prefix="ldpsim-bench-") as name:
        tmp = Path(name)
        # Shared clusters are closed before the parts without Dask: idle, a 1-worker and a
        # 2-worker cluster cost 0.2 CPU-seconds a second (2026-11-30).
        with Clusters(sizes.shared_clusters) as clusters:
            if "scale" not in args.skip:
                record.update(
                    replicate_split(
                        sizes.replicate_overhead_repeats, sizes.replicate_overhead_replicates
                    )
                )
                record.update(throughput(tmp, clusters, sizes.workers, sizes.throughput_sweeps))
                record.update(
                    store_reads(
                        tmp, clusters, sizes.repeats, sizes.workers, sizes.store_replicates
                    )
                )
            if "overhead" not in args.skip:
                record.update(
                    overhead(
                        tmp, clusters, sizes.workers, sizes.overhead_replicates, sizes.repeats
                    )
                )
            if "speedup" not in args.skip:
                record.update(
                    speedup(tmp, clusters, sizes.speedup_replicates, speedup_n, sizes.repeats)
                )
        if "speedup" not in args.skip:
            record.update(
                hardware_pair_speedup(speedup_n, sizes.repeats, sizes.pair_start_delay_s)
            )
        if "compile" not in args.skip:
            record.update(compile_times(tmp, sizes.repeats, sizes.compile_methods))
    if "rss" not in args.skip:
        for n in sizes.rss_n:
            mb, seconds = rss(n)
            record[f"rss_mb_n{n:.0e}".replace("+0", "").replace("+", "")] = round(mb, 1)
            record[f"replicate_s_n{n:.0e}".replace("+0", "").replace("+", "")] = round(seconds, 3)
        if "rss_mb_n1e9" in record:
            record["rss_growth_mb"] = round(record["rss_mb_n1e9"] - record["rss_mb_n1e6"], 1)
    if args.json:
        print(json.dumps(record, indent=1))
    else:
        for key, value in record.items():
            print(f"{key:<28} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
