"""benchmarks/gpu_machine.py, the script a lent GPU machine runs, on a machine without one.

Its dry run checks every part's commands against their programs' ``--help`` and skips
the GPU parts with a line saying so; a part given a time limit too short is reported as
run out, and the parts after it still run. So the script cannot rot between uses.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "gpu_machine.py"
PARTS = ["gpu-benchmark", "validation", "kill-resume", "scaling", "end-to-end"]
#: What a lent machine sends back from $OUT: at most 8 files.
MAX_FILES = 8


def written(out: Path) -> list[str]:
    """The files the script left under ``out``: no more than a lent machine sends back."""
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert len(names) <= MAX_FILES, names
    return names


def machine_script(*args: str, out: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, str(SCRIPT), *args, "--out", str(out)]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=180)


def test_the_dry_run_checks_every_part_and_skips_the_gpu_parts(tmp_path):
    result = machine_script("--dry-run", out=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("machine: GPU ") and " cores " in lines[0]  # first
    assert lines[1].startswith("install: ")
    for part in PARTS:
        [skip] = [line for line in lines if line.startswith(f"SKIP {part}: dry run")]
        assert skip.endswith("options checked"), skip  # no option unknown to its --help
    assert "SKIP gpu-benchmark: dry run (a GPU part)" in result.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [s["part"] for s in summary["parts"]] == PARTS
    assert {s["status"] for s in summary["parts"]} == {"skipped"}
    machine = summary["machine"]
    assert machine["cores"] >= 1 and isinstance(machine["gpus"], list)
    assert written(tmp_path) == ["log.txt", "summary.json"]


def test_a_part_that_runs_out_of_time_is_reported_and_the_rest_still_run(tmp_path):
    # No GPU here: the GPU parts are skipped, the scaling part (a CPU part) starts its
    # benchmark and is killed after 2 s; the end-to-end part after it still comes.
    limits = ["--limit", "scaling=2", "--limit", "end-to-end=2"]
    result = machine_script("--only", "scaling", "--only", "end-to-end", *limits, out=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    timeout = lines.index("TIMEOUT scaling: ran out of its 2 s; the next part starts")
    assert any(line.startswith("-- end-to-end: ") for line in lines[timeout:])
    record = json.loads((tmp_path / "summary.json").read_text())
    summary = {s["part"]: s for s in record["parts"]}
    assert summary["scaling"]["status"] == "TIMEOUT"
    assert summary["scaling"]["seconds"] < 10  # killed, not waited for
    assert summary["end-to-end"]["status"] in ("skipped", "TIMEOUT")
    log = (tmp_path / "log.txt").read_text()
    assert "== scaling\n" in log and "scaling.py --json" in log
    assert "summary.json" in written(tmp_path)


def test_a_help_that_fails_is_reported_as_such_not_as_unknown_options(tmp_path, monkeypatch):
    # A hunt (2026-12-01): run by a python3 where ldpsim does not import, every --help
    # failed with ModuleNotFoundError and the dry run reported each command's options as
    # "not in --help" (gpu-benchmark: "options not in --help: ['--json']").
    spec = importlib.util.spec_from_file_location("gpu_machine", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_machine", module)  # its dataclasses look it up
    spec.loader.exec_module(module)
    broken = tmp_path / "broken.py"
    broken.write_text("import ldpsim_not_installed_here\n")
    env = dict(os.environ)
    [problem] = module.check_against_help([sys.executable, str(broken), "--json"], env)
    assert "broken.py --help` exited 1" in problem, problem
    assert "No module named 'ldpsim_not_installed_here'" in problem, problem
    # A program whose --help works: the options it does not list, and nothing for those
    # it lists.
    script = [sys.executable, str(REPO / "benchmarks" / "gpu.py")]
    assert module.check_against_help([*script, "--json", "--quick"], env) == []
    [unknown] = module.check_against_help([*script, "--json", "--no-such-option"], env)
    assert unknown == "options not in --help: ['--no-such-option']"
