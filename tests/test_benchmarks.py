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


def readme_fields(script: str) -> dict[str, str]:
    """The field table of ``script``'s section of benchmarks/README.md: unit by field."""
    sections = re.split(r"^## ", README.read_text(encoding="utf-8"), flags=re.MULTILINE)
    [section] = [s for s in sections if s.startswith(f"`{script}`")]
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
    assert len(records) == len(constants["CASES"])
    for record in records:
        check_record(record, constants["JSON_FIELDS"], f"gpu.py {record['case']}")
        assert record["kind"] == "kernel" and record["device"] == "simulator"


def test_scaling_output_has_the_documented_fields(outputs):
    constants = script_constants("scaling.py")
    records = outputs["scaling"]
    assert isinstance(records, list) and records
    assert records[0]["workers"] == 1 and records[0]["speedup"] == 1.0
    for record in records:
        check_record(record, constants["JSON_FIELDS"], f"scaling.py {record['workers']}")
