"""Every benchmark script runs with ``--quick --json`` and prints the fields it documents.

Each script in benchmarks/ names its JSON fields and their units in a ``JSON_FIELDS``
constant; benchmarks/README.md lists the same in a table per script. These tests run
the scripts as fresh processes and check the output against the constant, and the
constant against the README, so that neither can drift. They check types and signs,
never a timing or a ratio: the figures of a quick run mean nothing.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import runpy
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS = REPO / "benchmarks"
README = BENCHMARKS / "README.md"
SCRIPTS = ("kernels.py", "pipeline.py", "competitors.py", "gpu.py", "scaling.py")
#: pipeline.py's parts; its ``compile`` part (fresh processes compiling the kernel with
#: empty caches: one busy core for 10 s or more) runs in a process of its own beside the
#: others, so that both cores of a small machine are used.
PIPELINE_PARTS = ("scale", "overhead", "speedup", "rss", "compile")
#: The runs: a name, the script, and its arguments besides ``--quick --json``.
RUNS = {
    "kernels": ("kernels.py", []),
    "competitors": ("competitors.py", []),
    # In numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, set by conftest.py and inherited).
    "gpu": ("gpu.py", []),
    # Through pipeline.py's --scaling (issue 35 names that command), which runs scaling.py.
    "scaling": ("pipeline.py", ["--scaling"]),
    "pipeline": ("pipeline.py", ["--skip", "compile"]),
    "pipeline-compile": (
        "pipeline.py",
        [arg for part in PIPELINE_PARTS if part != "compile" for arg in ("--skip", part)],
    ),
}
#: Seconds all runs together may take: a minute with a warm kernel cache, a few with
#: an empty one.
RUN_TIMEOUT_S = 400


def finite(value: Any) -> bool:
    """Whether ``value`` is a finite int or float (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def positive(value: Any) -> bool:
    """Whether ``value`` is a finite number > 0."""
    return finite(value) and value > 0


#: What a value of each unit of benchmarks/README.md must be: a time, a memory or a rate
#: is positive; a ratio is finite (its value is not checked).
UNIT_CHECKS = {
    "name": lambda value: isinstance(value, str) and value != "",
    "count": lambda value: isinstance(value, int) and not isinstance(value, bool) and value > 0,
    "ratio": finite,
    **{unit: positive for unit in ("ns", "us", "ms", "s", "MB", "1/s")},
}
#: The unit of a difference of two measurements: noise can make it negative.
DIFFERENCE = ", difference"


def known_unit(unit: str) -> bool:
    """Whether ``unit`` is one of the README's units: a list "[...]" of one, or a
    difference of a time or a memory."""
    if unit.startswith("[") and unit.endswith("]"):
        return known_unit(unit[1:-1])
    if unit.endswith(DIFFERENCE):
        return positive is UNIT_CHECKS.get(unit.removesuffix(DIFFERENCE))
    return unit in UNIT_CHECKS


def fits_unit(unit: str, value: Any) -> bool:
    """Whether ``value`` is a value of ``unit`` (a known unit)."""
    if unit.startswith("[") and unit.endswith("]"):
        return (
            isinstance(value, list)
            and bool(value)
            and all(fits_unit(unit[1:-1], v) for v in value)
        )
    if unit.endswith(DIFFERENCE):
        return finite(value)
    return UNIT_CHECKS[unit](value)


@functools.cache
def script_constants(script: str) -> dict[str, Any]:
    """The module-level names of benchmarks/``script`` (run, not as ``__main__``)."""
    return runpy.run_path(str(BENCHMARKS / script), run_name=f"benchmark_{Path(script).stem}")


def readme_fields(script: str, heading: str | None = None) -> dict[str, str]:
    """The field table of ``script``'s section of benchmarks/README.md (the section whose
    heading starts with ``heading``, default the script's name in backticks): unit by
    field."""
    heading = f"`{script}`" if heading is None else heading
    sections = re.split(r"^## ", README.read_text(encoding="utf-8"), flags=re.MULTILINE)
    [section] = [s for s in sections if s.startswith(heading)]
    rows = re.findall(r"^\| `([^`]+)` \| ([^|]+?) \|", section, flags=re.MULTILINE)
    assert len(rows) == len(dict(rows)), f"a field of {script} is listed twice"
    return dict(rows)


def check_record(record: Any, fields: dict[str, str], where: str) -> None:
    """``record`` is a dict with exactly ``fields``, each value of its unit."""
    assert isinstance(record, dict), f"{where}: not a JSON object: {record!r}"
    assert set(record) == set(fields), (
        f"{where}: missing {sorted(set(fields) - set(record))}, "
        f"undocumented {sorted(set(record) - set(fields))}"
    )
    wrong = {name: value for name, value in record.items() if not fits_unit(fields[name], value)}
    assert not wrong, f"{where}: values that are not of their unit: " + ", ".join(
        f"{name} = {value!r} ({fields[name]})" for name, value in wrong.items()
    )


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, Any]:
    """The parsed JSON of every run of :data:`RUNS`, all started at once."""
    folder = tmp_path_factory.mktemp("benchmarks")
    procs = {}
    try:
        for name, (script, args) in RUNS.items():
            with (
                (folder / f"{name}.out").open("w") as out,
                (folder / f"{name}.err").open("w") as err,
            ):
                procs[name] = subprocess.Popen(
                    [sys.executable, str(BENCHMARKS / script), "--quick", "--json", *args],
                    cwd=REPO,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,  # its cluster's processes go with it on a timeout
                )
        deadline = time.monotonic() + RUN_TIMEOUT_S
        for proc in procs.values():
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    results = {}
    for name, proc in procs.items():
        stderr = (folder / f"{name}.err").read_text()[-3000:]
        assert proc.returncode == 0, f"{name} exited with {proc.returncode}:\n{stderr}"
        results[name] = json.loads((folder / f"{name}.out").read_text())
    return results


@pytest.mark.parametrize("script", SCRIPTS)
def test_readme_lists_every_field_with_its_unit(script):
    fields = script_constants(script)["JSON_FIELDS"]
    assert readme_fields(script) == fields
    assert all(known_unit(unit) for unit in fields.values()), fields


def test_kernels_output_has_the_documented_fields(outputs):
    constants = script_constants("kernels.py")
    records = outputs["kernels"]
    assert isinstance(records, list)
    assert [r.get("model") for r in records] == [case["model"] for case in constants["CASES"]]
    for record in records:
        check_record(record, constants["JSON_FIELDS"], f"kernels.py {record['model']}")


def test_pipeline_output_has_the_documented_fields(outputs):
    constants = script_constants("pipeline.py")
    parts = outputs["pipeline"], outputs["pipeline-compile"]
    assert all(isinstance(part, dict) for part in parts)
    assert not set(parts[0]) & set(parts[1]), "two parts report the same field"
    fields = {
        name: unit
        for name, unit in constants["JSON_FIELDS"].items()
        if name not in constants["FULL_ONLY_FIELDS"]
    }
    check_record({**parts[0], **parts[1]}, fields, "pipeline.py --quick")


def test_pipeline_full_only_fields_are_documented():
    constants = script_constants("pipeline.py")
    assert set(constants["FULL_ONLY_FIELDS"]) <= set(constants["JSON_FIELDS"])


def test_competitors_output_has_the_documented_fields(outputs):
    constants = script_constants("competitors.py")
    report = outputs["competitors"]
    assert isinstance(report, dict)
    assert list(report) == list(constants["MODELS"])
    for model, record in report.items():
        check_record(record, constants["JSON_FIELDS"], f"competitors.py {model}")


def test_gpu_output_has_the_documented_fields(outputs):
    constants = script_constants("gpu.py")
    records = outputs["gpu"]
    assert isinstance(records, list)
    # --quick runs once the cases that differ only in their sizes (which it sets).
    sized = ("n", "replicates", "waves")
    cases = {
        json.dumps({k: v for k, v in case.items() if k not in sized}, sort_keys=True)
        for case in constants["CASES"]
    }
    *kernels, together = records
    assert len(kernels) == len(cases)
    for record in kernels:
        check_record(record, constants["JSON_FIELDS"], f"gpu.py {record['case']}")
        assert record["kind"] == "kernel" and record["device"] == "simulator"
    # Then the launches side by side (in the simulator one at a time: a lock).
    check_record(together, constants["SIDE_BY_SIDE_FIELDS"], "gpu.py side_by_side")
    assert together["kind"] == "side_by_side"
    assert together["launches"] == constants["SIDE_BY_SIDE_LAUNCHES"]


def test_scaling_output_has_the_documented_fields(outputs):
    constants = script_constants("scaling.py")
    records = outputs["scaling"]
    assert isinstance(records, list) and records
    assert records[0]["workers"] == 1 and records[0]["speedup"] == 1.0
    margin = "driver_margin_replicates_per_cpu_s"
    largest = max(record["workers"] for record in records)
    without = {k: v for k, v in constants["JSON_FIELDS"].items() if k != margin}
    for record in records:
        # The driver's margin in the largest count's record only; null where --quick's
        # difference of two tiny runs was noise.
        assert (margin in record) == (record["workers"] == largest)
        checked = {k: v for k, v in record.items() if k != margin or v is not None}
        fields = constants["JSON_FIELDS"] if margin in checked else without
        check_record(checked, fields, f"scaling.py {record['workers']}")


#: A fresh process that must succeed, its output as text.
RUN_OK: dict[str, Any] = {"capture_output": True, "text": True, "check": True, "timeout": 120}


def test_the_fit_recovers_the_model_that_made_the_records():
    # Records written by the model itself: c1 = 100 us, +2% a worker, u = 10 us in the
    # task, D = 1e5 replicates/s, f = 1.5 s, a 5 ns step; up to 8 workers none is bound
    # by the driver ((c(8) + u) / 8 = 15.5 us > 1 / D). The driver is the ceiling where
    # w / (c(w) + u) = D: w = D (c1 (1 - s) + u) / (1 - D c1 s) = 10.8 / 0.8 = 13.5.
    fit = script_constants("scaling.py")["fit"]
    c1, s, u, driver, fixed, step, replicates = 1e-4, 0.02, 1e-5, 1e5, 1.5, 5e-9, 200_000
    records = []
    for w in (1, 2, 4, 8):
        own = c1 * (1 + s * (w - 1))
        records.append(
            {
                "workers": w,
                "machine": "synthetic",
                "replicates": replicates,
                "compute_s": replicates * own,
                "wall_s": fixed + replicates * (own + u) / w,
                "driver_replicates_per_cpu_s": driver,
                "probe_replicates": 64,
                "probe_n": 20_000_000,
                "probe_compute_s": 64 * 20_000_000 * step,
            }
        )
    model = fit(records)
    assert model["core_s_per_replicate"] == pytest.approx(c1, rel=1e-9)
    assert model["contention_per_worker"] == pytest.approx(s, rel=1e-9)
    assert model["task_s_per_replicate"] == pytest.approx(u, rel=1e-9)
    assert model["driver_replicates_per_s"] == driver
    assert model["fixed_s"] == pytest.approx(fixed, rel=1e-9)
    assert model["step_s"] == pytest.approx(step, rel=1e-12)
    assert model["saturating_workers"] == pytest.approx(13.5, rel=1e-9)
    assert model["predicted_wall_s"] == pytest.approx(model["measured_wall_s"], abs=1e-3)
    projected = {(p["n"], p["nodes"]): p for p in model["projections"]}
    # n = 1e3 on one node: (100 us + 250 x 5 ns) x 1.62 + 10 us = 174 us a replicate;
    # 32 cores make 184,000 a second, more than the driver takes: 1e7 / 1e5 + 1.5 s.
    assert projected[1_000, 1]["driver_bound"]
    assert projected[1_000, 1]["wall_s"] == pytest.approx(101.5)
    assert projected[1_000, 100]["wall_s"] == pytest.approx(101.5)  # more nodes add nothing
    # n = 1e6: 8.27 ms a replicate; 32 cores make 3,870 a second, 100 nodes the driver's 1e5.
    cost = (c1 + (1_000_000 - 750) * step) * (1 + 31 * s) + u
    assert not projected[1_000_000, 1]["driver_bound"]
    assert projected[1_000_000, 1]["wall_s"] == pytest.approx(fixed + 1e7 * cost / 32, abs=0.1)
    assert projected[1_000_000, 100]["driver_bound"]
    # A record with the driver's margin: D is that, not the whole runs' rate.
    records[-1]["driver_margin_replicates_per_cpu_s"] = 2e6
    assert fit(records)["driver_replicates_per_s"] == 2e6


def test_the_fit_of_the_quick_run_has_the_documented_fields(outputs, tmp_path):
    constants = script_constants("scaling.py")
    assert readme_fields("scaling.py", "The cost model fitted") == constants["FIT_FIELDS"]
    records = tmp_path / "scaling.json"
    records.write_text(json.dumps(outputs["scaling"]))
    command = [sys.executable, str(BENCHMARKS / "scaling.py"), "--fit", str(records)]
    model = json.loads(subprocess.run([*command, "--json"], **RUN_OK).stdout)
    fields = dict(constants["FIT_FIELDS"])
    del fields["projections"]  # records of their own, checked below
    if model["saturating_workers"] is None:  # null: the driver never binds
        del fields["saturating_workers"]
    check_record({k: v for k, v in model.items() if k in fields}, fields, "scaling.py --fit")
    assert set(model) == set(constants["FIT_FIELDS"])
    assert model["worker_counts"] == [r["workers"] for r in outputs["scaling"]]
    projected = model["projections"]
    assert len(projected) == 6
    for p in projected:
        assert isinstance(p["driver_bound"], bool)
        numbers = {k: v for k, v in p.items() if k != "driver_bound"}
        assert all(positive(v) for v in numbers.values()), p
    text = subprocess.run(command, **RUN_OK).stdout
    assert "1e7 replicates, n = 1e6, 100 x 32 cores" in text


def test_gpu_py_without_a_gpu_or_the_simulator_stops_in_one_line():
    # A hunt (2026-12-01): with NUMBA_ENABLE_CUDASIM unset on a machine without a GPU,
    # `gpu.py --quick` ended in a 41-line traceback of numba's driver (CudaSupportError:
    # CUDA driver library cannot be found), exit 1.
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    probe = "from numba import cuda; print(cuda.is_available())"
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    if found.stdout.strip() == "True":
        pytest.skip("a CUDA GPU is here: gpu.py would run on it")
    command = [sys.executable, str(BENCHMARKS / "gpu.py"), "--quick", "--case", "0"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "numba cannot use a CUDA GPU here (" in line and "NUMBA_ENABLE_CUDASIM=1" in line
