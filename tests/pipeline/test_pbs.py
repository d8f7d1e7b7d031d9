"""PBS: the job script that cluster/pbs.yaml produces, against a golden file.

No PBS server is packaged for Debian, so nothing here submits a job. Proven: the shipped
pbs.yaml loads through pipeline.clusters, is accepted by dask_jobqueue.PBSCluster and
gives exactly the #PBS directives, prologue and dask-worker command line of
tests/pipeline/golden/pbs_job_script.sh; `--cluster-option` style overrides replace
single options. Not proven: that a real qsub accepts the script (site rules on
`select=` vs `nodes=:ppn=`, memory units, queues), that workers on compute nodes reach
the scheduler, or the walltime/lifetime behaviour. Regenerate the golden file after an
intended change with LDPSIM_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from ldpsim.pipeline.compute.clusters import (
    build_cluster,
    load_cluster_config,
    parse_cluster_options,
)
from ldpsim.pipeline.errors import InputError

GOLDEN = Path(__file__).parent / "golden" / "pbs_job_script.sh"


def _job_script(overrides: dict) -> str:
    # interface lo: the shipped ib0 does not exist here (the scheduler binds to it)
    cluster = build_cluster(load_cluster_config("pbs"), {"interface": "lo", **overrides})
    try:
        return cluster.job_script()
    finally:
        cluster.close()


def _normalize(script: str, log_dir: Path) -> str:
    """Replace what varies between machines and runs: scheduler address, python, paths."""
    script = re.sub(r"tcp://[0-9.]+:\d+", "tcp://SCHEDULER:PORT", script)
    script = script.replace(sys.executable, "PYTHON")
    script = script.replace(str(log_dir), "LOG_DIRECTORY")
    return re.sub(r"--name \S+", "--name NAME", script)


def test_pbs_job_script_matches_golden(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # log_directory is relative to the driver's cwd
    script = _normalize(_job_script({}), tmp_path / "logs" / "dask-jobqueue")
    if os.environ.get("LDPSIM_UPDATE_GOLDEN"):
        GOLDEN.write_text(script)
    assert script == GOLDEN.read_text(), f"job script changed:\n{script}"
    assert (tmp_path / "logs" / "dask-jobqueue").is_dir()


def test_command_line_options_override_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    overrides = parse_cluster_options(
        [
            "queue=short",
            "account=proj42",
            "walltime=04:00:00",
            "cores=4",
            "processes=2",
            'worker_extra_args=["--lifetime", "3h50m"]',
            "python=/opt/venv/bin/python",
        ]
    )
    assert overrides["cores"] == 4 and overrides["account"] == "proj42"
    script = _job_script(overrides)
    for line in (
        "#PBS -q short",
        "#PBS -A proj42",
        "#PBS -l walltime=04:00:00",
        "ncpus=4",
        "/opt/venv/bin/python -m distributed.cli.dask_worker",
        "--nworkers 2",
        "--lifetime 3h50m",
    ):
        assert line in script, (line, script)
    assert "--lifetime-stagger" not in script


def test_bad_cluster_options_are_input_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="KEY=VALUE"):
        parse_cluster_options(["queue"])
    with pytest.raises(InputError, match=r"pbs cluster could not start.*no_such_option"):
        build_cluster(load_cluster_config("pbs"), {"no_such_option": 1})
