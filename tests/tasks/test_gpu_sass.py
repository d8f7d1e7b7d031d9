"""The GPU kernel's registers and instruction mix, from its SASS compiled offline.

benchmarks/gpu_sass.py compiles the kernel for compute capability 9.0 with numba-cuda,
ptxas and nvdisasm (PyPI wheels: the test extra installs them; no GPU, no driver). The
figures recorded here are the kernel's as committed: a change that doubles one of them,
or that puts the quantile kernel above 64 registers or makes its step loop touch local
memory, fails. Skipped where the toolchain is not installed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "benchmarks" / "gpu_sass.py"
#: ``python benchmarks/gpu_sass.py`` on the committed kernel (docs/performance.md).
RECORDED = {
    "quantile-rr": {
        "registers": 64,
        "instructions": 1304,
        "loop_instructions": 474,
        "loop_fp64": 103,
    },
    "mean-gaussian-d4": {
        "registers": 112,
        "instructions": 2992,
        "loop_instructions": 294,
        "loop_fp64": 81,
    },
}
#: How far a figure may grow before the test fails: half as much again (a doubling, or
#: a second copy of the step's draws, is far past it; a compiler's reordering is not).
GROWTH = 1.5


@pytest.fixture(scope="module")
def records() -> dict[str, dict]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    run = subprocess.run(
        [sys.executable, str(TOOL), "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    if run.returncode == 2 and "toolchain is missing" in run.stderr:
        pytest.skip(run.stderr.strip())
    assert run.returncode == 0, run.stderr[-3000:]
    return {record["case"]: record for record in json.loads(run.stdout)}


def test_the_quantile_kernel_fits_64_registers_and_its_step_keeps_to_registers(records):
    record = records["quantile-rr"]
    assert record["max_registers"] == 64
    assert record["registers"] <= 64  # 8 blocks of 128 threads a multiprocessor
    assert record["loop_local"] == 0  # no spill inside the step loop
    assert record["loop_calls"] == 0  # no call into libdevice's slow paths


def test_no_figure_grew_by_half_since_it_was_recorded(records):
    assert set(records) == set(RECORDED)
    for case, recorded in RECORDED.items():
        for name, value in recorded.items():
            assert records[case][name] <= GROWTH * value, (case, name, records[case][name])


def test_the_records_have_the_documented_fields(records):
    readme = (REPO / "benchmarks" / "README.md").read_text(encoding="utf-8")
    section = readme.split("## `gpu_sass.py`")[1].split("\n## ")[0]
    documented = dict(re.findall(r"^\| `([^`]+)` \| ([^|]+?) \|", section, flags=re.MULTILINE))
    fields = {}
    for line in TOOL.read_text(encoding="utf-8").split("JSON_FIELDS = {")[1].splitlines()[1:]:
        if line.startswith("}"):
            break
        name, unit = re.findall(r'"([^"]+)"', line)
        fields[name] = unit
    assert documented == fields
    for record in records.values():
        assert set(record) == set(fields)
        counts = [record[name] for name, unit in fields.items() if unit == "count"]
        assert all(isinstance(value, int) and value >= 0 for value in counts)
