"""The wheel a user installs with `pip install .` (not editable) runs a sweep by itself.

The wheel is built from this checkout and installed into a fresh virtualenv, which is
then used from a folder holding a statistician's own ``tasks.py`` and ``pipeline.py``:
neither may shadow or break ldpsim, whose layers are ``ldpsim.tasks`` and
``ldpsim.pipeline``.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: A user's own modules with the names of ldpsim's folders; importing either one fails.
USER_MODULE = 'raise SystemExit("a user module shadowed ldpsim")\n'

pytestmark = pytest.mark.slow


def run(command: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (command, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> dict[str, Path]:
    """A fresh virtualenv with ldpsim installed from a wheel of this checkout.

    The wheel is installed without its dependencies, which the virtualenv finds in this
    environment's site-packages (``.pth`` lines, read after its own): what is tested is
    the wheel's content, and resolving and installing numpy, numba, dask, ... again took
    half a minute. That folder's own ``.pth`` files are not read, so this checkout's
    editable ldpsim stays out of reach. A dependency missing from pyproject.toml goes
    unnoticed here; `make test`'s environment, installed from pyproject.toml, has only
    the declared ones (and the test extra's).
    """
    root = tmp_path_factory.mktemp("wheel")
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(REPO), "-w", str(root)], root
    )
    (wheel,) = root.glob("ldpsim-*.whl")
    venv = root / "venv"
    # Without a pip of its own (ensurepip took 5.3 CPU-seconds): this environment's pip
    # installs the wheel into it.
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], root)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    run([*pip, "install", "-q", "--no-deps", "--disable-pip-version-check", str(wheel)], root)
    purelib = run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], root
    ).stdout.strip()
    assert purelib != sysconfig.get_paths()["purelib"]
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (Path(purelib) / "dependencies.pth").write_text("".join(f"{p}\n" for p in ours))
    user = root / "user"
    user.mkdir()
    (user / "tasks.py").write_text(USER_MODULE)
    (user / "pipeline.py").write_text(USER_MODULE)
    return {"wheel": wheel, "bin": venv / "bin", "site": Path(purelib), "user": user}


def test_wheel_ships_the_runtime_files(wheel_venv):
    names = set(zipfile.ZipFile(wheel_venv["wheel"]).namelist())
    for name in ("local", "slurm", "pbs"):
        assert f"ldpsim/cluster/{name}.yaml" in names
    for sweep in (REPO / "pipeline" / "sweeps").glob("*.toml"):
        assert f"ldpsim/pipeline/sweeps/{sweep.name}" in names
    assert "ldpsim/tasks/intervals/sn_critical_values.npz" in names


def test_one_top_level_package(wheel_venv):
    site = wheel_venv["site"]
    top = {p.name for p in site.iterdir()}
    assert "ldpsim" in top
    assert not top & {"tasks", "pipeline", "cluster", "tasks.py", "pipeline.py"}
    # Every installed module lives under ldpsim/.
    record = next(site.glob("ldpsim-*.dist-info")) / "RECORD"
    paths = [line.split(",")[0] for line in record.read_text().splitlines()]
    modules = [p for p in paths if p.endswith(".py") and not p.startswith("../")]
    assert modules and all(p.startswith("ldpsim/") for p in modules), modules


def test_list_and_demo_from_a_folder_with_user_modules(wheel_venv):
    ldpsim, user = str(wheel_venv["bin"] / "ldpsim"), wheel_venv["user"]
    listing = run([ldpsim, "list"], user).stdout
    clusters = listing.split("Clusters")[1].split()
    assert {"local", "slurm", "pbs"} <= set(clusters), listing
    assert "demo" in listing
    store = user / "demo.zarr"
    # One worker: the installed package's numba functions compile once in this fresh
    # environment, not once in each of the machine's workers side by side.
    demo = ["run", "demo", "--replicates", "2", "--workers", "1", "--store", str(store)]
    proc = run([ldpsim, *demo], user)
    assert "0 failed" in proc.stdout, proc.stdout
    status = run([ldpsim, "status", str(store)], user).stdout
    assert "12/12 replicates done" in status, status
    # The user's modules are importable there; ldpsim simply never imports them.
    python = str(wheel_venv["bin"] / "python")
    code = "import ldpsim.tasks, ldpsim.pipeline.cli, sys; print(sys.modules.get('tasks'))"
    assert run([python, "-c", code], user).stdout.strip() == "None"
