"""cluster/slurm-local.sh leaves the machine's SLURM as it found it (issue 43).

`make test` runs its pytest processes under `slurm-local.sh around`: SLURM is started
if it is not running, and afterwards only the daemons that this start started are
stopped (the start records them: name, pid and start time). A SLURM that was running
before, the user's or another session's, stays running. The daemons are real; the test
takes seconds. Under `make test` SLURM is running (the first case below); run alone on
a machine without a running SLURM, it checks the second.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]

SCRIPT = Path(__file__).resolve().parents[1] / "cluster" / "slurm-local.sh"
#: slurm-local.sh exit codes meaning "SLURM cannot be installed/run here": skip, not fail.
CANNOT_INSTALL = {3: "packages missing / install failed", 6: "not root, no sudo"}
DAEMONS = ("slurmctld", "slurmd", "munged")


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=600
    )


def _running() -> dict[str, str] | None:
    """Pids of the daemons `status` names when the node is up; None when it is not."""
    status = _script("status")
    if status.returncode != 0:
        return None
    return dict(re.findall(rf"\b({'|'.join(DAEMONS)})=(\S+)", status.stdout))


def _alive(pid: str) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0]
    except (FileNotFoundError, ValueError):
        return False
    return state not in ("Z", "X")


def _skip_if_unavailable(result: subprocess.CompletedProcess) -> None:
    unavailable = re.search(r"SLURM unavailable \(exit (\d+)\)", result.stderr)
    code = int(unavailable.group(1)) if unavailable else result.returncode
    if code in CANNOT_INSTALL and not os.environ.get("CI"):
        pytest.skip(f"SLURM unavailable ({CANNOT_INSTALL[code]}): {result.stderr[-500:]}")


def test_around_leaves_slurm_as_it_found_it(tmp_path):
    before = _running()
    inside = tmp_path / "inside.txt"
    # The command sees a running SLURM; its exit status is the script's.
    around = _script("around", "--", "bash", "-c", f'bash "$0" status >{inside}', str(SCRIPT))
    _skip_if_unavailable(around)
    assert around.returncode == 0, around.stderr
    assert re.search(r"state=(idle|mixed|allocated|completing) ", inside.read_text())
    after = _running()
    if before is not None:
        # Running before: nothing started, nothing stopped, the same daemons.
        assert "started: nothing (SLURM was running)" in around.stderr, around.stderr
        assert after == before
    else:
        # Not running before: started for the command, and all of it stopped after.
        started = re.search(r"started: (.*)", around.stderr).group(1).split()
        # munged too, unless the machine's was running (then used as it is)
        assert {"slurmctld", "slurmd"} <= set(started) <= set(DAEMONS), around.stderr
        assert after is None
        names = re.findall(rf"({'|'.join(DAEMONS)}) running \(pid (\d+)\)", around.stderr)
        assert names and not [pid for _, pid in names if _alive(pid)], around.stderr


def test_stop_with_a_record_stops_only_what_it_lists(tmp_path):
    before = _running()
    if before is None:
        start = _script("start")
        _skip_if_unavailable(start)
        assert start.returncode == 0, start.stderr
    try:
        running = _running()
        assert running is not None
        # A start while SLURM runs records nothing, and its stop stops nothing.
        record = tmp_path / "started"
        assert _script("start", "--record", str(record)).returncode == 0
        assert record.read_text() == ""
        stop = _script("stop", "--record", str(record))
        assert stop.returncode == 0 and "nothing to stop" in stop.stdout, stop
        # A record naming the running slurmctld's pid with another start time names
        # another process (the pid reused): it is not stopped either.
        pid = running["slurmctld"]
        record.write_text(f"slurmctld {pid} 1\n")
        stop = _script("stop", "--record", str(record))
        assert stop.returncode == 0 and "nothing to stop" in stop.stdout, stop
        assert _running() == running
    finally:
        if before is None:
            _script("stop")
    assert (_running() is None) == (before is None)
