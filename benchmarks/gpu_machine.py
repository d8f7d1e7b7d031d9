"""Everything a lent GPU machine must show, in at most 9 minutes: one committed script.

Usage: ``python3 benchmarks/gpu_machine.py [--dry-run] [--quick] [--out DIR] [--only PART
...] [--limit PART=SECONDS ...]``.

A machine with a GPU and 16 cores is lent now and then, for 15 minutes. This script is
what it runs, first thing, so that none of those minutes goes to preparation:

1. ``machine``: the GPU (name, driver, memory), the cores, Python: printed first.
2. ``install``: where ldpsim, dask, distributed and zarr do not import (the lent
   machine's Python 3.12 has numba and numba-cuda but not those), the wheels of
   ``.whl/`` are installed into a temporary folder that the parts then import from.
   ``.whl/`` is git-ignored; fill it before the machine is called::

       mkdir -p .whl && cp ../shared/device/wheels/*.whl .whl/
       .venv/bin/pip wheel -q --no-deps -w .whl .      # ldpsim itself

3. The parts, in order of value, each in a process of its own with its own time limit
   (:data:`PARTS`); a part that runs out is killed and reported as ``TIMEOUT``, and the
   next one starts. Together they fit in :data:`BUDGET_S`:

   - ``gpu-benchmark``: ``benchmarks/gpu.py`` (kernel-only and end to end, stage by
     stage, every case; 4 launches one after the other and side by side);
   - ``validation``: the cells of docs/studies/gpu.md on the GPU (all 8 measured on an
     H200, 2026-11-29; a rerun checks the kernel of the day), each summarized as JSON;
   - ``kill-resume``: a GPU sweep killed (SIGKILL) part-way and resumed, against an
     uninterrupted run: bit-identical or not;
   - ``scaling``: ``benchmarks/scaling.py`` on 1, 2, 4, ... 16 workers, and ``--fit``;
   - ``end-to-end``: ``ldpsim run paper-table1 --backend gpu`` and ``ldpsim run scale
     --backend gpu``, timed, then ``scale`` twice on one more cluster, its workers fresh
     and then warm, with Dask's task stream summed for its launches and methods (and
     each worker's first task).

``--quick`` runs every part with tiny sizes, and the GPU parts in numba's CUDA simulator
where ``NUMBA_ENABLE_CUDASIM=1`` (minutes): a check of the parts' code before a machine
is called. The records go under ``--out`` (default ``$OUT`` where set, else
outputs/gpu-machine), in at most 8 files, as many as a lent machine sends back:
``summary.json`` (the machine, each part's status and seconds), ``log.txt`` (every
part's output), and the parts' records ``gpu.json``, ``validation.json``,
``kill-resume.json``, ``scaling.json``, ``scaling-fit.json`` and ``end-to-end.json``.
``--dry-run`` runs the same script where there is no GPU, in seconds: the
install check and the machine are real, the GPU parts are skipped with a line saying so,
and every command of every part is checked against its program's ``--help`` (an option
that no longer exists fails the dry run). tests/test_gpu_machine.py runs it in
``make test``.

Since 2026-12-01 the GPU kernel is kept compiled on disk (numba-cuda's ``cache=True``, in
ldpsim's kernel cache folder), which no machine has run yet. Should the first launches
fail with an error of numba-cuda's cache, ``LDPSIM_CACHE_DIR=/dev/null/none python3
benchmarks/gpu_machine.py`` (a folder that cannot be made) compiles every kernel in
memory, as before (a warning says so); the parts inherit the variable.

Only the standard library is imported here: the parts import ldpsim in their own
processes, after the install.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: Seconds the whole script may take (the machine is lent for 15 minutes, of which its
#: start and the copies take some).
BUDGET_S = 540
#: Seconds the install may take.
INSTALL_LIMIT_S = 60
#: What each validation run computes: the cells of docs/studies/gpu.md (the three that
#: the first GPU streams lacked first, as measured on 2026-11-29).
VALIDATION_CELLS = [
    ("demo", 0.5, 100_000),
    ("demo", 0.9, 10_000),
    ("paper-table1", 0.9, 1_000_000),
    ("demo", 0.5, 10_000),
    ("demo", 0.5, 1_000_000),
    ("demo", 0.9, 100_000),
    ("demo", 0.9, 1_000_000),
    ("paper-table1", 0.5, 1_000_000),
]
VALIDATION_REPLICATES = 2_000
#: ``--quick``: every part through the same code with tiny sizes (minutes in numba's CUDA
#: simulator, where the GPU parts then run): a check of the script, not a measurement.
QUICK_ENV = "LDPSIM_GPU_MACHINE_QUICK"
QUICK_N = 300
QUICK_REPLICATES = 4
#: The kill-and-resume sweep: small chunks, so that a kill lands between writes. At
#: n = 1e5 (2 x 4,000 replicates) the whole sweep took 2 s once the workers had compiled, on
#: both H200 runs, and its store's first done flags came with the last: nothing was
#: interrupted. At n = 1e6 a launch of 100 replicates takes about 0.3 s.
KILL_SWEEP = """
description = "kill and resume on the GPU"
replicates = 2000
seed = 44
rep_chunk = 100
backend = "gpu"
[spec]
model = "quantile"
n = 1_000_000
eps = 1.0
[grid]
tau = [0.5, 0.9]
[methods.bb]
B = 200
[methods.bm]
[methods.sn]
[methods.oracle]
"""
#: The fields compared bit for bit after the kill and resume.
KILL_FIELDS = ("estimate", "last", "lower", "upper", "method_estimate", "done", "failed")

#: Written as ``sitecustomize.py`` beside the installed wheels (every process of a part,
#: workers included, imports it first): numpy's removed alias that numba-cuda still needs.
ROW_STACK_SHIM = """import numpy

if not hasattr(numpy, "row_stack"):
    numpy.row_stack = numpy.vstack
"""


@dataclasses.dataclass(frozen=True)
class Part:
    """One part of the script: its name, its time limit and whether it needs a GPU."""

    name: str
    limit_s: float
    gpu: bool


#: The parts in order of value (the first ones run when the machine's time is short).
PARTS = [
    Part("gpu-benchmark", 90, gpu=True),
    Part("validation", 100, gpu=True),
    Part("kill-resume", 70, gpu=True),
    Part("scaling", 130, gpu=False),
    Part("end-to-end", 150, gpu=True),
]


def ldpsim(*args: str) -> list[str]:
    """The ``ldpsim`` command line (as a module: it imports from the install's folder)."""
    return [sys.executable, "-m", "ldpsim.pipeline", *args]


def benchmark(script: str, *args: str) -> list[str]:
    return [sys.executable, str(REPO / "benchmarks" / script), *args]


def quick() -> bool:
    """Whether the parts run with :data:`QUICK_N` steps and few replicates (``--quick``)."""
    return os.environ.get(QUICK_ENV) == "1"


def validation_commands(sweep: str, tau: float, n: int, store: Path, scheduler: str):
    """The run of one validation cell (its sweep, tau and n) and its summary."""
    replicates, n = (QUICK_REPLICATES, QUICK_N) if quick() else (VALIDATION_REPLICATES, n)
    run = ldpsim(
        "run", sweep, "--replicates", str(replicates), "--backend", "gpu",
        "--set", f"grid.tau=[{tau}]", "--set", f"grid.n=[{n}]", "--store", str(store),
        "--scheduler", scheduler,
    )  # fmt: skip
    return run, ldpsim("summarize", str(store), "--format", "json")


def part_commands(name: str, out: Path, work: Path) -> list[list[str]]:
    """The commands part ``name`` runs (``--scheduler`` with a placeholder address where
    the part starts its own cluster): what the dry run checks against ``--help``."""
    scheduler = "tcp://ADDRESS"
    if name == "gpu-benchmark":
        return [benchmark("gpu.py", "--json", *(["--quick", "--case", "0"] if quick() else []))]
    if name == "validation":
        sweep, tau, n = VALIDATION_CELLS[0]
        return list(validation_commands(sweep, tau, n, work / "cell.zarr", scheduler))
    if name == "kill-resume":
        store = str(work / "killed.zarr")
        return [ldpsim("run", str(work / "kill.toml"), "--store", store, "--scheduler", scheduler)]
    if name == "scaling":
        records = str(out / "scaling.json")
        return [
            benchmark("scaling.py", "--json"),
            benchmark("scaling.py", "--fit", records, "--json"),
        ]
    if name == "end-to-end":
        quick_sizes = ["--replicates", str(QUICK_REPLICATES), "--set", f"grid.n=[{QUICK_N}]"]
        small = quick_sizes if quick() else []
        cold = [
            ldpsim(
                "run", sweep, "--backend", "gpu", "--cluster", "local-gpu",
                "--store", str(work / f"{sweep}.zarr"), *small,
            )
            for sweep in ("paper-table1", "scale")
        ]  # fmt: skip
        warm = ldpsim(
            "run", "scale", "--backend", "gpu", "--scheduler", scheduler,
            "--store", str(work / "scale-warm.zarr"), *small,
        )  # fmt: skip
        return [*cold, warm]
    raise ValueError(f"no part {name!r}")


# --- The parts: each runs in a process of its own (``--part NAME``). ------------------


def say(text: str) -> None:
    print(text, flush=True)


def run_command(
    command: list[str], log: Path | None = None, quiet: bool = False
) -> subprocess.CompletedProcess:
    """Run ``command``, raising on failure; its output kept in ``log`` when given, else
    its tail printed unless ``quiet`` (and the tail of its errors either way)."""
    say("$ " + " ".join(command))
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    if log is not None:
        log.write_text(result.stdout)
    shown = log is None and not quiet
    tail = (result.stdout if shown else "")[-2000:] + result.stderr[-2000:]
    if tail.strip():
        say(tail.rstrip())
    if result.returncode != 0 and command[3:4] == ["run"] and "--store" in command:
        # A run whose replicates failed exits 1: show why, for the next machine's fix.
        store = command[command.index("--store") + 1]
        errors = subprocess.run(ldpsim("errors", store), capture_output=True, text=True)
        say((errors.stdout + errors.stderr)[-3000:].rstrip())
    result.check_returncode()
    return result


def gpu_benchmark(out: Path, work: Path) -> None:
    [command] = part_commands("gpu-benchmark", out, work)
    result = run_command(command, out / "gpu.json")
    for record in json.loads(result.stdout):
        fields = ("case", "replicates", "kernel_steps_per_s", "kernel_ns_per_step_thread")
        say(json.dumps({k: record[k] for k in (*fields, "launch_s", "kernel_s")}))


def own_cluster():
    """A local-gpu cluster for the part's runs (one start for all of them)."""
    from ldpsim.pipeline.compute.clusters import build_cluster, load_cluster_config

    return build_cluster(load_cluster_config("local-gpu"))


def validation(out: Path, work: Path) -> None:
    """Each cell's run and summary; ``validation.json`` rewritten after each cell, so the
    cells done before a timeout are kept."""
    records = []
    with own_cluster() as cluster:
        for sweep, tau, n in VALIDATION_CELLS[: 2 if quick() else None]:
            store = work / f"{sweep}-{tau}-{n}.zarr"
            run, summarize = validation_commands(sweep, tau, n, store, cluster.scheduler_address)
            start = time.perf_counter()
            run_command(run)
            wall = time.perf_counter() - start
            record = {"sweep": sweep, "tau": tau, "n": n, "wall_s": round(wall, 2)}
            record["summary"] = json.loads(run_command(summarize, quiet=True).stdout)
            records.append(record)
            (out / "validation.json").write_text(json.dumps(records, indent=1))
            say(f"validation: {sweep} tau = {tau} n = {n}: {wall:.1f} s")


def kill_resume(out: Path, work: Path) -> None:
    import numpy as np

    from ldpsim.pipeline.store.reading import open_dataset

    sweep = work / "kill.toml"
    text = KILL_SWEEP
    if quick():
        text = text.replace("2000", "24").replace("1_000_000", str(QUICK_N))
    sweep.write_text(text)
    with own_cluster() as cluster:
        address = ["--scheduler", cluster.scheduler_address]
        baseline, killed = work / "baseline.zarr", work / "killed.zarr"
        start = time.perf_counter()
        run_command(ldpsim("run", str(sweep), "--store", str(baseline), *address))
        wall = time.perf_counter() - start
        command = ldpsim("run", str(sweep), "--store", str(killed), *address)
        # Each task's results written as they come (not every 2 s): the kill lands
        # between writes even where the whole run takes a few seconds.
        proc = subprocess.Popen(
            command,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "LDPSIM_WRITE_EVERY": "0"},
        )
        done, total = 0, 0
        try:
            deadline = time.monotonic() + 4 * wall + 30
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    ds = open_dataset(killed)
                    done, total = int(ds["done"].sum()), int(ds["done"].size)
                except Exception:  # not created yet
                    done = 0
                if done > 0:  # the first chunks are stored: kill now
                    break
                time.sleep(0.05)
            finished_first = proc.poll() is not None
            if not finished_first:
                os.killpg(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        run_command(command)
        base, resumed = open_dataset(baseline).load(), open_dataset(killed).load()
        same = {
            name: bool(np.array_equal(base[name].values, resumed[name].values, equal_nan=True))
            for name in KILL_FIELDS
        }
    record = {
        "replicates": total,
        "done_at_kill": done,
        "killed_before_the_end": not finished_first and done < total,
        "uninterrupted_wall_s": round(wall, 2),
        "bit_identical": same,
    }
    (out / "kill-resume.json").write_text(json.dumps(record, indent=1))
    say("kill-resume: " + json.dumps(record))


def scaling(out: Path, work: Path) -> None:
    measure, fit = part_commands("scaling", out, work)
    run_command(measure, out / "scaling.json")
    result = run_command(fit, out / "scaling-fit.json")
    say(result.stdout[-3000:])


def end_to_end(out: Path, work: Path) -> None:
    """paper-table1 and scale, each on a cluster of its own (the issues' targets), then
    scale twice on one more cluster, with Dask's task stream summed by kind of task:
    first on its fresh workers (what their first tasks cost), then on the same workers,
    warm (where a warm run's seconds go)."""
    *cold, warm = part_commands("end-to-end", out, work)
    records: list[dict[str, Any]] = []

    def timed(command: list[str], name: str) -> dict[str, Any]:
        start = time.perf_counter()
        result = run_command(command)
        wall = time.perf_counter() - start
        computed = [line for line in result.stdout.splitlines() if line.startswith("Computed")]
        store = command[command.index("--store") + 1]
        summary = run_command(ldpsim("summarize", store), quiet=True).stdout.splitlines()
        seconds = [line for line in summary if line.startswith("median seconds")]
        records.append({"command": name, "wall_s": wall, "run": computed + seconds})
        say(f"end-to-end: {name} --backend gpu: {wall:.1f} s")
        (out / "end-to-end.json").write_text(json.dumps(records, indent=1))
        return records[-1]

    for command in cold:
        timed(command, " ".join(command[3:5]))
    from distributed import Client

    with own_cluster() as cluster, Client(cluster.scheduler_address) as client:
        address = cluster.scheduler_address
        command = [address if arg == "tcp://ADDRESS" else arg for arg in warm]
        store = command.index("--store") + 1

        def stored_in(name: str) -> list[str]:
            return [*command[:store], str(work / name), *command[store + 1 :]]

        client.get_task_stream()  # starts the scheduler's record
        workers = client.scheduler_info(n_workers=-1)["workers"]
        names = {address: info.get("name") for address, info in workers.items()}
        # The first run gives every worker tasks (41 on 16 workers): the second's are warm.
        for name, label in (("scale-fresh.zarr", "fresh workers"), (None, "warm workers")):
            start = time.time()
            record = timed(stored_in(name) if name else command, f"run scale ({label})")
            stream = client.get_task_stream(start=start)
            record["tasks"] = task_stream_totals(stream, start, names)
            (out / "end-to-end.json").write_text(json.dumps(records, indent=1))


def task_stream_totals(
    stream: list[dict[str, Any]], start: float, names: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Dask's task stream since ``start`` (seconds since the epoch), summed by kind of
    task (the GPU launches, whose keys end in ``-gpu``, and the tasks that run the
    methods on their outputs): tasks, seconds computing and transferring, first start
    and last stop from ``start``; and, by worker (``names``: address -> worker name),
    the seconds of each worker's first task of that kind (a fresh worker's first task
    loads its compiled code)."""
    totals: dict[str, dict[str, Any]] = {}
    firsts: dict[str, dict[str, float]] = {}
    for record in sorted(stream, key=lambda r: min(p["start"] for p in r["startstops"])):
        name = "launches" if str(record["key"]).endswith("-gpu") else "methods"
        entry = totals.setdefault(
            name, {"tasks": 0, "compute_s": 0.0, "transfer_s": 0.0, "first_s": 1e9, "last_s": 0.0}
        )
        entry["tasks"] += 1
        compute = 0.0
        for part in record["startstops"]:
            seconds = part["stop"] - part["start"]
            if part["action"] == "compute":
                entry["compute_s"] += seconds
                compute += seconds
            elif part["action"] == "transfer":
                entry["transfer_s"] += seconds
            entry["first_s"] = min(entry["first_s"], part["start"] - start)
            entry["last_s"] = max(entry["last_s"], part["stop"] - start)
        worker = str((names or {}).get(record.get("worker"), record.get("worker")))
        firsts.setdefault(name, {}).setdefault(worker, round(compute, 3))
    out: dict[str, Any] = {
        name: {k: round(v, 4) for k, v in entry.items()} for name, entry in totals.items()
    }
    for name in out:
        out[name]["first_task_s_by_worker"] = firsts[name]
    return out


RUNNERS = {
    "gpu-benchmark": gpu_benchmark,
    "validation": validation,
    "kill-resume": kill_resume,
    "scaling": scaling,
    "end-to-end": end_to_end,
}


# --- The driver: install, machine, each part within its limit. -----------------------


def ensure_installed(out: Path, dry_run: bool) -> dict[str, str]:
    """The environment the parts run in: this one, or with ``.whl/`` installed."""
    env = dict(os.environ)
    probe = [sys.executable, "-c", "import ldpsim.pipeline, dask, distributed, zarr"]
    if subprocess.run(probe, capture_output=True).returncode == 0:
        say("install: ldpsim, dask, distributed and zarr import; nothing to install")
        return env
    wheels = sorted(str(p) for p in (REPO / ".whl").glob("*.whl"))
    if not wheels or dry_run:
        say(f"install: ldpsim does not import and .whl/ holds {len(wheels)} wheels")
        return env
    target = tempfile.mkdtemp(prefix="ldpsim-wheels-")
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
    command += ["--no-compile", "--no-cache-dir", "--upgrade", "--target", target, *wheels]
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_LIMIT_S)
    say(f"install: {len(wheels)} wheels into {target} in {time.perf_counter() - start:.1f} s")
    if result.returncode != 0:
        say(f"install: pip failed: {result.stderr[-2000:]}")
    # Bytecode for every module, on all cores, as pip makes it by default: without it, a
    # machine that sets PYTHONDONTWRITEBYTECODE compiles dask's, distributed's and
    # ldpsim's sources again in every process (the driver, each spawned worker), which
    # no user's install does (here: 2.8 s more for a process importing them).
    start = time.perf_counter()
    compiled = subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", target],
        capture_output=True,
        text=True,
        timeout=INSTALL_LIMIT_S,
    )
    state = "" if compiled.returncode == 0 else f" (compileall exit {compiled.returncode})"
    say(f"install: bytecode compiled in {time.perf_counter() - start:.1f} s{state}")
    say(f"install: PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE')!r}")
    # numba-cuda 0.30.4 registers an overload of np.row_stack, which numpy 2.5 removed:
    # without it every CUDA compile fails (found on the first lent H200, numpy 2.5.2).
    (Path(target) / "sitecustomize.py").write_text(ROW_STACK_SHIM)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [target, env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([str(Path(target) / "bin"), env.get("PATH", "")])
    return env


def machine(out: Path) -> dict[str, Any]:
    """The machine, printed first: GPU, driver, memory, cores, Python."""
    record: dict[str, Any] = {"gpus": []}
    smi = shutil.which("nvidia-smi")
    if smi:
        query = "--query-gpu=name,driver_version,memory.total"
        result = subprocess.run(
            [smi, query, "--format=csv,noheader"], capture_output=True, text=True
        )
        lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
        record["gpus"] = [
            dict(zip(("name", "driver", "memory"), line.split(", "), strict=False))
            for line in lines
        ]
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [
            line.split(":", 1)[1].strip()
            for line in cpuinfo.read_text().splitlines()
            if line.startswith("model name")
        ]
        model = names[0] if names else ""
    record["cores"] = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    )
    record["cpu"] = model or platform.processor()
    record["python"] = platform.python_version()
    gpus = "; ".join(
        f"{g.get('name')} (driver {g.get('driver')}, {g.get('memory')})" for g in record["gpus"]
    )
    say(
        f"machine: GPU {gpus or 'none'}; {record['cores']} cores ({record['cpu']}); "
        f"Python {record['python']}"
    )
    return record


def check_against_help(command: list[str], env: dict[str, str]) -> list[str]:
    """What is wrong with ``command`` against its program's ``--help``: the options that
    it does not list, or, where ``--help`` itself fails (the program does not import:
    ldpsim not installed), that failure, in one line."""
    # python -m ldpsim.pipeline SUBCOMMAND, or python SCRIPT
    program = command[:4] if command[1] == "-m" else command[:2]
    result = subprocess.run(
        [*program, "--help"], capture_output=True, text=True, env=env, cwd=REPO
    )
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines() or ["no output"]
        shown = " ".join(Path(arg).name if "/" in arg else arg for arg in program)
        return [f"`{shown} --help` exited {result.returncode}: {lines[-1]}"]
    options = [arg.split("=")[0] for arg in command if arg.startswith("--")]
    unknown = [option for option in options if option not in result.stdout]
    return [f"options not in --help: {unknown}"] if unknown else []


def run_part(part: Part, limit: float, out: Path, env: dict[str, str]) -> str:
    """Run ``part`` in a process of its own for at most ``limit`` seconds; its status."""
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--part",
        part.name,
        "--out",
        str(out),
    ]
    log = (out / "log.txt").open("a")
    log.write(f"== {part.name}\n")
    proc = subprocess.Popen(
        command, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip

    def copy() -> None:
        for line in proc.stdout:
            print(f"  {line}", end="", flush=True)
            log.write(line)

    reader = threading.Thread(target=copy, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=limit)
        status = "ok" if proc.returncode == 0 else f"failed (exit {proc.returncode})"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # the part's finally blocks end what it started
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        status = "TIMEOUT"
    reader.join(timeout=5)
    log.close()
    return status


def main(argv: list[str] | None = None) -> int:
    """Run the script with the command-line arguments ``argv``; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="no GPU: check, skip GPU parts")
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes; GPU parts in numba's simulator too"
    )
    parser.add_argument("--out", help="where the records go (default $OUT or outputs/gpu-machine)")
    parser.add_argument("--only", action="append", choices=[p.name for p in PARTS])
    parser.add_argument("--limit", action="append", default=[], metavar="PART=SECONDS")
    parser.add_argument("--part", choices=list(RUNNERS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    default_out = os.environ.get("OUT") or str(REPO / "outputs" / "gpu-machine")
    out = Path(args.out or default_out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.part:  # one part, in its own process
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        with tempfile.TemporaryDirectory(prefix=f"gpu-machine-{args.part}-") as work:
            RUNNERS[args.part](out, Path(work))
        return 0
    limits = {}
    for item in args.limit:
        name, _, seconds = item.partition("=")
        if name not in RUNNERS or not seconds.replace(".", "", 1).isdigit():
            parser.error(f"--limit {item!r}: PART=SECONDS with PART one of {', '.join(RUNNERS)}")
        limits[name] = float(seconds)
    start = time.monotonic()
    (out / "log.txt").write_text("")  # the parts append to it
    found = machine(out)
    env = ensure_installed(out, args.dry_run)
    simulator = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    has_gpu = (bool(found["gpus"]) or (args.quick and simulator)) and not args.dry_run
    if args.quick:
        env[QUICK_ENV] = "1"
    summary = []
    for part in PARTS:
        if args.only and part.name not in args.only:
            continue
        begun = time.monotonic()
        if args.dry_run:
            with tempfile.TemporaryDirectory() as work:
                commands = part_commands(part.name, out, Path(work))
            problems = [p for command in commands for p in check_against_help(command, env)]
            status = f"failed: {'; '.join(dict.fromkeys(problems))}" if problems else "checked"
            what = "a GPU part" if part.gpu else "it starts clusters for minutes"
            say(
                f"SKIP {part.name}: dry run ({what}); "
                f"its {len(commands)} commands' options {status}"
            )
            status = "skipped" if not problems else status
        elif part.gpu and not has_gpu:
            say(f"SKIP {part.name}: no GPU on this machine")
            status = "skipped"
        else:
            left = BUDGET_S - (time.monotonic() - start)
            limit = min(limits.get(part.name, part.limit_s), max(left, 1.0))
            say(f"== {part.name} (limit {limit:.0f} s)")
            status = run_part(part, limit, out, env)
            if status == "TIMEOUT":
                say(f"TIMEOUT {part.name}: ran out of its {limit:.0f} s; the next part starts")
        seconds = round(time.monotonic() - begun, 2)
        summary.append({"part": part.name, "status": status, "seconds": seconds})
        say(f"-- {part.name}: {status} ({seconds} s)")
    record = {"machine": found, "parts": summary}
    (out / "summary.json").write_text(json.dumps(record, indent=1))
    say(f"done in {time.monotonic() - start:.0f} s; records in {out}")
    return 0 if all(not s["status"].startswith("failed") for s in summary) else 1


if __name__ == "__main__":
    raise SystemExit(main())
