"""GPU benchmark: the GPU backend's kernel against one CPU core, and whole GPU sweeps.

Usage: ``python benchmarks/gpu.py [--json] [--quick] [--repeats R] [--case I] [--sweep NAME ...]``.

For each case of :data:`CASES` (a model, a mechanism, n and a number of replicates R,
or a number of whole waves of the GPU), one launch of R replicates
(:meth:`ldpsim.tasks.grid_point.GridPointSetup.run_gpu`) is timed ``--repeats`` times
after a first launch that compiles; the record holds the medians, of the launch end to
end and of its stages apart (:class:`ldpsim.tasks.gpu.kernel.LaunchTimes`): the inputs
(the replicates' keys are made on the device), the buffers, the kernel alone (between
two CUDA events) and the one copy back into pinned memory. Beside it, on the same
machine, one CPU core runs the CPU kernel (:func:`ldpsim.tasks.replicate.run_stats`)
for one replicate of the same spec, and the estimates of the launch give sd x sqrt(n)
against the oracle's sqrt(Sigma_11).

A case of ``waves`` launches that many times the replicates resident at once on the
GPU (its multiprocessors times the blocks of the kernel's registers that fit on one:
:func:`ldpsim.tasks.gpu.kernel.replicates_per_wave`), so that no wave runs part-empty.

Then one more record, ``side_by_side``: :data:`SIDE_BY_SIDE_LAUNCHES` launches of
:data:`SIDE_BY_SIDE_CASE`, first one after the other in one thread, then at once, one a
thread, as a GPU worker's threads run them (each thread's own default stream:
:func:`ldpsim.tasks.gpu.kernel.run_gpu_replicates`). Their ratio is near 1 where the
device runs them one after the other, near 1 / launches where it runs them side by side.

``--sweep NAME`` (repeatable) runs that built-in sweep end to end on the GPU backend
(``ldpsim run NAME --backend gpu --cluster local-gpu``) into a temporary store and says
where its time went: the wall time, the GPU launches' seconds (summed over launches)
and the interval methods' core-seconds, read back from the store.

``--quick`` runs each case with n = 50 and 2 replicates (the fewest with a spread), one
timed launch (in numba's CUDA simulator where there is no GPU: NUMBA_ENABLE_CUDASIM=1,
whose Python threads make every launch cost seconds), and the cases that then coincide
(the quantile's four) once: a check that the benchmark works, whose figures mean
nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ldpsim.tasks.grid_point import GridPointSetup, needs_full_matrix
from ldpsim.tasks.replicate import run_stats
from ldpsim.tasks.spec import normalize_spec

#: The cases: the issue's targets (quantile with randomized response at n = 1e5 and one
#: whole wave, 135,168 replicates on an H100 or H200: steps per second; n = 1e6 and
#: 1,000 replicates: ns per step per thread), the quantile's spread at n = 1e4 and the
#: other models and mechanisms.
CASES = [
    {"model": "quantile", "eps": 1.0, "n": 100_000, "waves": 1},
    {"model": "quantile", "eps": 1.0, "n": 1_000_000, "replicates": 1_000},
    {"model": "quantile", "eps": 1.0, "n": 1_000_000, "replicates": 16_896},
    # The spread at n = 1e4 against the CPU's (docs/studies/gpu.md: one length there).
    {"model": "quantile", "eps": 1.0, "n": 10_000, "replicates": 100_000},
    {
        "model": "quantile_regression",
        "mechanism": "gaussian",
        "eps": 0.9,
        "coef": [0.0, 0.0, 1.0, -1.0],
        "n": 100_000,
        "replicates": 10_000,
    },
    {"model": "mean", "mechanism": "laplace", "eps": 1.0, "n": 100_000, "replicates": 10_000},
    {"model": "mean", "mechanism": "gdp", "mu": 1.0, "d": 4, "n": 100_000, "replicates": 10_000},
]
#: The interval methods of the specs (their cuts are the kernel's segment ends).
METHODS = {"bb": {"B": 200}, "bm": {}, "sn": {}, "oracle": {}}
#: JSON fields per record kind and their units (benchmarks/README.md lists the same).
JSON_FIELDS = {
    "kind": "name",
    "case": "name",
    "device": "name",
    "d": "count",
    "n": "count",
    "replicates": "count",
    "repeats": "count",
    "compile_s": "s",
    "launch_s": "s",
    "steps_per_s": "1/s",
    "ns_per_step_thread": "ns",
    "kernel_s": "s",
    "kernel_steps_per_s": "1/s",
    "kernel_ns_per_step_thread": "ns",
    "seeding_s": "s",
    "allocation_s": "s",
    "copies_s": "s",
    "unpacking_s": "s",
    "cpu_ns_per_step": "ns",
    "cpu_cores_matched": "ratio",
    "sd_sqrt_n": "ratio",
    "oracle_sd_sqrt_n": "ratio",
}
#: The fields of a ``--sweep`` record.
SWEEP_FIELDS = {
    "kind": "name",
    "sweep": "name",
    "device": "name",
    "replicates": "count",
    "wall_s": "s",
    "launch_s": "s",
    "methods_core_s": "s",
}
#: The side-by-side record: this many launches of this case (0.33 s a launch on an H200,
#: 1,000 threads: a small part of the device, as paper-table1's n = 1e8 launches are).
SIDE_BY_SIDE_LAUNCHES = 4
SIDE_BY_SIDE_CASE = {"model": "quantile", "eps": 1.0, "n": 1_000_000, "replicates": 1_000}
#: The fields of the side-by-side record.
SIDE_BY_SIDE_FIELDS = {
    "kind": "name",
    "case": "name",
    "device": "name",
    "launches": "count",
    "one_after_another_s": "s",
    "side_by_side_s": "s",
    "ratio": "ratio",
}
#: ``--quick``'s sizes. In the simulator each replicate of a launch is a Python thread
#: that runs its n steps: the quick run took 4.0 to 5.8 CPU-seconds at n = 200 and 4
#: replicates, 2.9 to 3.8 at 50 and 2 (2026-11-30, 2 busy cores).
QUICK = {"n": 50, "replicates": 2, "repeats": 1, "cpu_n": 2_000}
FULL = {"repeats": 3, "cpu_n": 1_000_000}


def device_name() -> str:
    """The CUDA device's name, "simulator" in numba's CUDA simulator, "none" without one."""
    from numba import cuda
    from numba.core import config

    if config.ENABLE_CUDASIM:
        return "simulator"
    try:
        name = cuda.get_current_device().name
    except Exception:  # no driver, no device
        return "none"
    return name.decode() if isinstance(name, bytes) else str(name)


def cuda_problem() -> str:
    """Why numba's CUDA target cannot start here, in one line (its exception's type and
    text, at most 300 characters)."""
    from numba import cuda

    try:
        cuda.get_current_device()
    except Exception as exc:  # CudaSupportError, CudaDriverError, ...
        text = " ".join(str(exc).split())[:300]
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return "no device"


def case_name(case: dict[str, Any]) -> str:
    mechanism = case.get("mechanism", "randomized_response")
    count = f"R{case['replicates']}" if "replicates" in case else f"W{case['waves']}"
    return f"{case['model']}-{mechanism}-n{case['n']:.0e}-{count}"


def wave_replicates(setup: GridPointSetup, waves: int, device: str) -> int:
    """``waves`` times the replicates the GPU holds at once for ``setup``'s kernel (its
    registers from the compiled kernel, the multiprocessors from the device); in the
    simulator, ``waves`` times one block."""
    from ldpsim.tasks.gpu import kernel

    if device in ("simulator", "none"):
        return waves * kernel.THREADS_PER_BLOCK
    from numba import cuda

    rs = setup.spec
    compiled = kernel.compile_gpu_kernel(
        rs.model.name,
        rs.mechanism.name,
        rs.model.dim,
        setup.kernel_args[0].size,
        setup.kernel_args[1].size,
        needs_full_matrix(rs),
        int(rs.batch),
    )
    registers = max(compiled.get_regs_per_thread().values())
    multiprocessors = cuda.get_current_device().MULTIPROCESSOR_COUNT
    return waves * kernel.replicates_per_wave(registers, multiprocessors)


def case_spec(case: dict[str, Any]) -> dict[str, Any]:
    """The spec of a case: its items but the launch's size (replicates or waves)."""
    return {k: v for k, v in case.items() if k not in ("replicates", "waves")}


def gpu_setup(case: dict[str, Any]) -> GridPointSetup:
    """The GPU backend's set-up of a case's spec, with :data:`METHODS`."""
    return GridPointSetup.of(
        normalize_spec({**case_spec(case), "methods": METHODS, "backend": "gpu"})
    )


def measure(case: dict[str, Any], repeats: int, cpu_n: int, device: str) -> dict[str, Any]:
    """One record: the launch's median seconds, its stages, throughput and the CPU core
    beside it."""
    from ldpsim.tasks.gpu.kernel import LaunchTimes

    spec = case_spec(case)
    setup = gpu_setup(case)
    start = time.perf_counter()
    # A first launch, of one replicate, compiles (or loads from the kernel cache what an
    # earlier process compiled; once per process and kernel); a case of
    # whole waves then counts the compiled kernel's registers. (In numba's CUDA simulator
    # every replicate of a launch is a Python thread: 32 took 15 s at n = 200, d = 4.)
    setup.run_gpu(np.arange(1))
    count = case.get("replicates") or wave_replicates(setup, case["waves"], device)
    reps = np.arange(count)
    compile_s = time.perf_counter() - start
    walls, stages, outputs = [], [], None
    for _ in range(repeats):
        times = LaunchTimes()
        start = time.perf_counter()
        outputs = setup.run_gpu(reps, times)
        walls.append(time.perf_counter() - start)
        stages.append(times)
    launch_s = statistics.median(walls)

    def median(stage: str) -> float:
        return statistics.median(getattr(times, stage) for times in stages)

    kernel_s = median("kernel")
    n, d = case["n"], setup.spec.model.dim
    # theta_bar = shift + T_n / n at the last cut (StreamingStats.theta_bar), all at once.
    estimates = outputs[2][:, -1, :] + outputs[3][:, -1, :] / n
    sd_sqrt_n = float(np.std(estimates[:, 0], ddof=1) * math.sqrt(n))
    oracle = float(math.sqrt(setup.asymptotic_cov[0, 0]))
    cpu_setup = GridPointSetup.of(normalize_spec({**spec, "n": cpu_n, "methods": METHODS}))
    run_stats(cpu_setup.spec, np.random.default_rng(0), cpu_setup)  # compiles
    cpu_walls = []
    for repeat in range(repeats):  # the median, as the launches'
        start = time.perf_counter()
        run_stats(cpu_setup.spec, np.random.default_rng(1 + repeat), cpu_setup)
        cpu_walls.append(time.perf_counter() - start)
    cpu_ns = statistics.median(cpu_walls) / cpu_n * 1e9
    steps_per_s = n * len(reps) / launch_s

    def seconds(value: float) -> float:
        return float(f"{max(value, 1e-9):.4g}")  # a positive time, 4 digits

    return {
        "kind": "kernel",
        "case": case_name(case),
        "device": device,
        "d": d,
        "n": n,
        "replicates": len(reps),
        "repeats": repeats,
        "compile_s": round(compile_s, 3),
        "launch_s": seconds(launch_s),
        "steps_per_s": float(f"{steps_per_s:.4g}"),
        "ns_per_step_thread": round(launch_s / n * 1e9, 2),
        "kernel_s": seconds(kernel_s),
        "kernel_steps_per_s": float(f"{n * len(reps) / kernel_s:.4g}"),
        "kernel_ns_per_step_thread": round(kernel_s / n * 1e9, 2),
        "seeding_s": seconds(median("seeding")),
        "allocation_s": seconds(median("allocation")),
        "copies_s": seconds(median("copies")),
        "unpacking_s": seconds(median("unpacking")),
        "cpu_ns_per_step": round(cpu_ns, 2),
        "cpu_cores_matched": round(steps_per_s * cpu_ns * 1e-9, 1),
        "sd_sqrt_n": round(sd_sqrt_n, 4),
        "oracle_sd_sqrt_n": round(oracle, 4),
    }


def side_by_side(case: dict[str, Any], launches: int, device: str) -> dict[str, Any]:
    """``launches`` launches of ``case``: their seconds one after the other in this
    thread, and at once, one a thread (each thread's first launch, which sets up its
    context and buffers, before; a barrier starts the timed ones together)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    setup = gpu_setup(case)
    reps = np.arange(case["replicates"])
    setup.run_gpu(reps)  # compiles; this thread's buffers
    start = time.perf_counter()
    for _ in range(launches):
        setup.run_gpu(reps)
    one_after_another = time.perf_counter() - start
    ready = threading.Barrier(launches)

    def launch(_: int) -> tuple[float, float]:
        setup.run_gpu(reps)  # this thread's context and buffers
        ready.wait()
        begin = time.perf_counter()
        setup.run_gpu(reps)
        return begin, time.perf_counter()

    with ThreadPoolExecutor(launches) as pool:
        spans = list(pool.map(launch, range(launches)))
    together = max(stop for _, stop in spans) - min(begin for begin, _ in spans)
    return {
        "kind": "side_by_side",
        "case": case_name(case),
        "device": device,
        "launches": launches,
        "one_after_another_s": float(f"{max(one_after_another, 1e-9):.4g}"),
        "side_by_side_s": float(f"{max(together, 1e-9):.4g}"),
        "ratio": round(together / one_after_another, 3),
    }


def run_sweep_timed(name: str, device: str, replicates: int | None) -> dict[str, Any]:
    """``ldpsim run NAME --backend gpu --cluster local-gpu``; where its time went."""
    from ldpsim.pipeline import api

    sweep = api.load_sweep(name, replicates=replicates)
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / f"{name}.zarr"
        start = time.perf_counter()
        report = api.run_report(sweep, store, cluster="local-gpu", backend="gpu", progress=False)
        wall = time.perf_counter() - start
        ds = api.open_store(store)
        methods_s = float(np.nansum(ds["method_seconds"].values))
        replicate_s = float(np.nansum(ds["seconds"].values))
    return {
        "kind": "sweep",
        "sweep": name,
        "device": device,
        "replicates": int(report["total"]),
        "wall_s": round(wall, 2),
        "launch_s": round(max(replicate_s - methods_s, 0.0), 2),
        "methods_core_s": round(methods_s, 2),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark with the command-line arguments ``argv``; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="JSON records on stdout")
    parser.add_argument("--quick", action="store_true", help="tiny runs: a smoke test")
    parser.add_argument("--repeats", type=int, help="timed launches per case (3)")
    parser.add_argument("--sweep", action="append", default=[], help="a built-in sweep to run")
    parser.add_argument("--sweep-replicates", type=int, help="override the sweeps' replicates")
    parser.add_argument("--skip-kernels", action="store_true", help="only the --sweep runs")
    parser.add_argument(
        "--case", type=int, action="append", help="run only these CASES (indices, from 0)"
    )
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    repeats = args.repeats or sizes["repeats"]
    device = device_name()
    if device == "none":
        # Every launch would raise CudaSupportError, with a traceback of numba's driver:
        # one line instead, with numba's own reason (no driver, a driver too old, no
        # visible device, ...).
        print(
            f"gpu.py: numba cannot use a CUDA GPU here ({cuda_problem()}) and its CUDA "
            "simulator is off: run it on a GPU, or in the simulator with "
            "NUMBA_ENABLE_CUDASIM=1 (whose figures mean nothing).",
            file=sys.stderr,
        )
        return 2
    records = []
    chosen = [c for i, c in enumerate(CASES) if args.case is None or i in args.case]
    if args.quick:
        # Cases that differ only in n and the replicates are one quick run: run it once.
        quick = [
            {
                **{k: v for k, v in c.items() if k != "waves"},
                **{k: QUICK[k] for k in ("n", "replicates")},
            }
            for c in chosen
        ]
        chosen = [c for i, c in enumerate(quick) if c not in quick[:i]]
    for case in [] if args.skip_kernels else chosen:
        records.append(measure(case, repeats, sizes["cpu_n"], device))
        if not args.json:
            print(json.dumps(records[-1]), flush=True)
    if not args.skip_kernels:
        case = SIDE_BY_SIDE_CASE
        if args.quick:
            case = {**case, **{k: QUICK[k] for k in ("n", "replicates")}}
        records.append(side_by_side(case, SIDE_BY_SIDE_LAUNCHES, device))
        if not args.json:
            print(json.dumps(records[-1]), flush=True)
    for name in args.sweep:
        records.append(run_sweep_timed(name, device, args.sweep_replicates))
        if not args.json:
            print(json.dumps(records[-1]), flush=True)
    if args.json:
        json.dump(records, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
