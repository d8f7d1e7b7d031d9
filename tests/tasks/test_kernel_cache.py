"""The disk cache of compiled kernels: fresh code always runs, failures fall back.

Each test compiles a kernel with test-only callbacks written to a temporary folder, in
fresh processes that share a temporary cache folder (``LDPSIM_CACHE_DIR``), and checks
the kernel's numbers against the recursion computed here in Python. numba's own
counters (``Dispatcher.stats``) tell whether a process loaded the kernel from the
cache (a hit) or compiled it (a miss).
"""

from __future__ import annotations

import importlib
import io
import itertools
import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ldpsim.tasks import compile_lock
from ldpsim.tasks.compile_lock import (
    CACHE_DIR_VARIABLE,
    LOCK_SUBFOLDER,
    cache_folder,
    compile_signature,
)
from ldpsim.tasks.kernel import sgd_loop
from ldpsim.tasks.kernel.cache import (
    KERNEL_SUBFOLDER,
    code_fingerprint,
    compile_template,
    pin_template,
)
from ldpsim.tasks.kernel.sgd import compile_kernel, ldp_sgd
from ldpsim.tasks.kernel.step_sizes import eta_schedule
from ldpsim.tasks.mechanisms.laplace import Laplace
from ldpsim.tasks.models.quantile_regression import QuantileRegression

# The kernel's arguments in every test: d = 1, one model parameter, no privacy noise.
PARAM, THETA0, C, GAMMA, N = 0.3, 0.0, 0.5, 0.6, 1000

# The test-only callbacks: g = SCALE * (theta - target), where target is computed by a
# function of another module from a module constant (OFFSET) and a table read from a
# data file at import (like the ziggurat tables of tasks.rng). privatize adds nothing.
CALLBACKS = """\
from numba import njit

from kc_helper import target

SCALE = {scale!r}


@njit(inline="always")
def sample_gradient(d, theta, params, s, g):
    for j in range(d):
        g[j] = SCALE * (theta[j] - target(params))
    return s


@njit(inline="always")
def privatize(d, g, params, s):
    return s
"""
HELPER = """\
from pathlib import Path

import numpy as np
from numba import njit

OFFSET = {offset!r}
TABLE = np.load(Path(__file__).with_name("table.npy"))


@njit(inline="always")
def target(params):
    return params[0] + OFFSET + TABLE[0]
"""

# A fresh process: run the kernel once; report theta_n, numba's cache counters and the
# file the kernel was compiled from.
CHILD = f"""
import json
import numpy as np
import kc_callbacks
from ldpsim.tasks.kernel.sgd import compile_kernel, ldp_sgd
st = np.zeros(4, dtype=np.uint64)
theta, *_ = ldp_sgd(
    kc_callbacks.sample_gradient, kc_callbacks.privatize, np.array([{PARAM!r}]),
    np.zeros(1), np.array([{THETA0!r}]), {C!r}, {GAMMA!r}, 1, np.array([{N}]), st,
)
kernel = compile_kernel(kc_callbacks.sample_gradient, kc_callbacks.privatize, 1, 1, 1)
print(json.dumps({{
    "theta": float(theta[0]),
    "hits": sum(kernel.stats.cache_hits.values()),
    "misses": sum(kernel.stats.cache_misses.values()),
    "file": kernel.py_func.__code__.co_filename,
}}))
"""


def write_callbacks(folder: Path, *, scale=1.0, offset=0.0, table=0.0) -> tuple[float, float]:
    """Write the test callbacks into ``folder``; their SCALE and target."""
    folder.mkdir(exist_ok=True)
    (folder / "kc_callbacks.py").write_text(CALLBACKS.format(scale=scale))
    (folder / "kc_helper.py").write_text(HELPER.format(offset=offset))
    np.save(folder / "table.npy", np.array([table]))
    return scale, PARAM + offset + table


def expected_theta(scale: float, target: float) -> float:
    """theta_N of theta_i = theta_{i-1} - eta_i SCALE (theta_{i-1} - target), in Python."""
    eta = eta_schedule(N, C, GAMMA)
    theta = THETA0
    for i in range(N):
        theta -= float(eta[i]) * (scale * (theta - target))
    return theta


def child_env(plugins: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    # No .pyc files: a rewritten callback module of the same size within the same
    # second would otherwise be imported from its stale bytecode.
    env |= {"PYTHONPATH": str(plugins), CACHE_DIR_VARIABLE: str(cache)}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def start_child(plugins: Path, cache: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD],
        env=child_env(plugins, cache),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return {**json.loads(out.strip().splitlines()[-1]), "stderr": err}


def run_child(plugins: Path, cache: Path) -> dict:
    return finish(start_child(plugins, cache))


def test_changed_code_runs_never_the_old_cache(tmp_path):
    plugins, cache = tmp_path / "plugins", tmp_path / "cache"
    original = write_callbacks(plugins)
    first = run_child(plugins, cache)
    assert (first["misses"], first["hits"]) == (1, 0)
    assert first["theta"] == expected_theta(*original)
    assert Path(first["file"]).parent == cache / KERNEL_SUBFOLDER
    # numba checks only the source file of the function it caches (the kernel's): none
    # of the changes below touches it, so numba alone would run the old machine code.
    changes = {
        "the callback's own module": {"scale": 0.5},
        "a module the callback calls into": {"scale": 0.5, "offset": 0.25},
        "a data file read into a global constant": {"scale": 0.5, "offset": 0.25, "table": 1.0},
    }
    previous = first["theta"]
    for what, change in changes.items():
        changed = write_callbacks(plugins, **change)
        out = run_child(plugins, cache)
        assert (out["misses"], out["hits"]) == (1, 0), what
        assert out["theta"] == expected_theta(*changed), what
        assert out["theta"] != previous, what
        previous = out["theta"]
    # Back to the original code: its entry is still there, loaded, not compiled.
    write_callbacks(plugins)
    back = run_child(plugins, cache)
    assert (back["misses"], back["hits"]) == (0, 1)
    assert back["theta"] == first["theta"]


def test_unwritable_cache_folder_compiles_in_memory(tmp_path):
    plugins = tmp_path / "plugins"
    (tmp_path / "a-file").write_text("")
    unwritable = tmp_path / "a-file" / "cache"  # under a file: no user can create it
    write_callbacks(plugins)
    out = run_child(plugins, unwritable)
    assert out["theta"] == expected_theta(1.0, PARAM)
    assert out["file"].startswith("<ldpsim kernel")  # compiled in memory
    assert "cannot cache compiled kernels" in out["stderr"]
    assert CACHE_DIR_VARIABLE in out["stderr"]


#: A user without a home folder: HOME unset and no entry in the password database (a
#: container run under an arbitrary user id, ``docker run --user 4242``).
NO_HOME = """\
import os, pwd
def _no_entry(uid):
    raise KeyError(f"getpwuid(): uid not found: {uid}")
pwd.getpwuid = _no_entry
for name in ("HOME", "XDG_CACHE_HOME", "LDPSIM_CACHE_DIR"):
    os.environ.pop(name, None)
"""


def test_no_home_folder_compiles_in_memory(tmp_path):
    # Before: pathlib's RuntimeError ("Could not determine home directory.") from
    # cache_folder, a traceback at the import of the package's compiled functions.
    plugins = tmp_path / "plugins"
    write_callbacks(plugins)
    proc = subprocess.run(
        [sys.executable, "-c", NO_HOME + CHILD],
        env=child_env(plugins, tmp_path / "unused"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["theta"] == expected_theta(1.0, PARAM)
    assert out["file"].startswith("<ldpsim kernel")  # compiled in memory
    assert "Traceback" not in proc.stderr
    assert "cannot cache compiled kernels in the cache folder" in proc.stderr
    assert "HOME is unset" in proc.stderr
    assert CACHE_DIR_VARIABLE in proc.stderr


def test_no_home_folder_ldpsim_list(tmp_path):
    command = "from ldpsim.pipeline.cli import main; raise SystemExit(main(['list']))"
    proc = subprocess.run(
        [sys.executable, "-c", NO_HOME + command],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Built-in sweeps:" in proc.stdout
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []  # no '~' folder made in the working folder


def test_cache_folder_without_home(monkeypatch):
    for name in (CACHE_DIR_VARIABLE, "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)

    def no_entry(uid):
        raise KeyError(uid)

    monkeypatch.setattr("pwd.getpwuid", no_entry)
    with pytest.raises(OSError, match="HOME is unset"):
        cache_folder()
    monkeypatch.setenv("XDG_CACHE_HOME", "/x")
    assert cache_folder() == Path("/x/ldpsim")


def test_processes_compiling_the_same_entry_at_once_compile_it_once(tmp_path):
    plugins, cache = tmp_path / "plugins", tmp_path / "cache"
    expected = expected_theta(*write_callbacks(plugins))
    together = [start_child(plugins, cache) for _ in range(2)]
    outs = list(map(finish, together))
    for out in outs:
        assert out["theta"] == expected
        assert out["hits"] + out["misses"] == 1
    # One compiled it; the other waited for its lock and loaded its machine code (both
    # compiled, side by side, before the lock).
    assert sorted(out["misses"] for out in outs) == [0, 1]
    later = run_child(plugins, cache)
    assert (later["misses"], later["hits"]) == (0, 1)
    assert later["theta"] == expected
    folder = cache / KERNEL_SUBFOLDER
    assert len(list(folder.glob("*.py"))) == 1
    assert not [p for p in folder.rglob("*") if ".tmp" in p.name]  # no debris


def test_callbacks_without_an_import_name_compile_in_memory():
    # Callbacks made inside a function cannot be imported by another process: the
    # kernel is compiled in memory, from the same source, and runs.
    from numba import njit

    target = 0.75

    @njit(inline="always")
    def sample_gradient(d, theta, params, s, g):
        for j in range(d):
            g[j] = theta[j] - target
        return s

    @njit(inline="always")
    def privatize(d, g, params, s):
        return s

    args = (np.zeros(1), np.zeros(1), np.array([THETA0]), C, GAMMA, 1, np.array([N]))
    theta, *_ = ldp_sgd(sample_gradient, privatize, *args, np.zeros(4, dtype=np.uint64))
    kernel = compile_kernel(sample_gradient, privatize, 1, 1, 1)
    assert kernel.py_func.__code__.co_filename.startswith("<ldpsim kernel")
    assert theta[0] == expected_theta(1.0, target)


def test_fingerprint_covers_every_module_the_kernel_calls_into():
    model, mechanism = QuantileRegression(), Laplace()
    roots = [sgd_loop.kernel, type(model).sample_gradient, type(mechanism).privatize]
    fingerprint = code_fingerprint(roots)
    assert set(fingerprint["modules"]) == {
        "ldpsim.tasks.kernel.sgd_loop",
        "ldpsim.tasks.kernel.step_sizes",
        "ldpsim.tasks.kernel.pointers",
        "ldpsim.tasks.streams.rng",
        "ldpsim.tasks.streams.seed_sequence",  # a chunk's chains are seeded in the kernel
        "ldpsim.tasks.models.quantile_regression",
        "ldpsim.tasks.mechanisms.laplace",
    }
    constants = {(module, name) for module, name, _ in fingerprint["constants"]}
    for table in ("wi_double", "ki_double", "fi_double", "we_double", "ke_double"):
        assert ("ldpsim.tasks.streams.rng", table) in constants


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({CACHE_DIR_VARIABLE: "/shared/ldpsim", "XDG_CACHE_HOME": "/x"}, "/shared/ldpsim"),
        ({"XDG_CACHE_HOME": "/x"}, "/x/ldpsim"),
        ({"HOME": "/home/u"}, "/home/u/.cache/ldpsim"),
    ],
)
def test_cache_folder(monkeypatch, variables, expected):
    for name in (CACHE_DIR_VARIABLE, "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert cache_folder() == Path(expected)


#: The settings of both keys (the CPU kernels' environment, the GPU kernels' numba-cuda
#: settings), printed by a fresh process.
SETTINGS_SCRIPT = """\
import json
from ldpsim.tasks.gpu.kernel import cuda_settings
from ldpsim.tasks.kernel.cache import environment_fingerprint
print(json.dumps([environment_fingerprint()["numba_settings"], cuda_settings()]))
"""


def test_a_numba_config_file_keys_the_kernels_as_its_variables_do(tmp_path):
    # numba and numba-cuda read a .numba_config.yaml in the working folder as NUMBA_*
    # variables; both kernels' keys must see what their compilers see, from either.
    def settings(folder: Path, **variables: str) -> list:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
        environment["NUMBA_ENABLE_CUDASIM"] = "1"
        done = subprocess.run(
            [sys.executable, "-c", SETTINGS_SCRIPT],
            cwd=folder,
            env={**environment, **variables},
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(done.stdout)

    plain, configured = tmp_path / "plain", tmp_path / "configured"
    plain.mkdir()
    configured.mkdir()
    (configured / ".numba_config.yaml").write_text("boundscheck: 1\ncuda_debuginfo: 1\n")
    default = settings(plain)
    from_file = settings(configured)
    assert from_file == settings(plain, NUMBA_BOUNDSCHECK="1", NUMBA_CUDA_DEBUGINFO="1")
    assert from_file[0] != default[0] and from_file[1] != default[1]


def test_fingerprint_follows_the_loaded_code_not_only_the_file():
    # A long-lived process that imported a module before its file was edited holds the
    # old code: its key must differ from the one a fresh process computes from the new
    # file and code, or that process would store old machine code under the new key.
    model = QuantileRegression()
    gradient = type(model).sample_gradient.py_func
    before = code_fingerprint([gradient])
    original = gradient.__code__
    try:
        gradient.__code__ = original.replace(co_consts=(*original.co_consts, "edited"))
        after = code_fingerprint([gradient])
    finally:
        gradient.__code__ = original
    assert after["modules"] == before["modules"]  # the file did not change
    assert after["code"] != before["code"]
    assert code_fingerprint([gradient]) == before


def fingerprint_of(folder: Path, files: dict[str, str | bytes], module: str) -> dict:
    """code_fingerprint of ``module.sample_gradient``, imported afresh from ``files``
    written into ``folder`` (each case's two folders hold modules of the same names)."""
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    names = {module, *(n.removesuffix(".py").replace("/", ".") for n in files)}
    names |= {n.removesuffix(".__init__") for n in names}
    sys.path.insert(0, str(folder))
    try:
        for name in names:
            sys.modules.pop(name, None)
        return code_fingerprint([importlib.import_module(module).sample_gradient])
    finally:
        sys.path.remove(str(folder))
        for name in names:
            sys.modules.pop(name, None)


def npy(values, dtype=np.float64) -> bytes:
    """The bytes of a .npy file of ``values``."""
    buffer = io.BytesIO()
    np.save(buffer, np.array(values, dtype=dtype))
    return buffer.getvalue()


#: What a callback reads through something its own file does not show (a setting read
#: at import, a submodule's table, a compile option), in two versions that must key
#: two kernels. The callback's file is the same in both: only the fingerprint's walk of
#: what the code reads can tell them apart (found by an independent hunt, 2026-12-01).
READ_AT_IMPORT = """\
import json
from pathlib import Path

import numpy as np
from numba import njit

SETTING = json.loads(Path(__file__).with_name("setting.json").read_text())
"""
UNSEEN_CHANGES = {
    "a numpy ufunc chosen by a setting": (
        READ_AT_IMPORT
        + """LINK = getattr(np, SETTING)


@njit
def sample_gradient(d, theta, params, s, g):
    g[0] = LINK(theta[0])
""",
        {"setting.json": '"tanh"'},
        {"setting.json": '"sinh"'},
    ),
    "a compile option chosen by a setting": (
        READ_AT_IMPORT
        + """

def _target(p):
    return (p + 1e16) - 1e16


target = njit(fastmath=SETTING)(_target)


@njit
def sample_gradient(d, theta, params, s, g):
    g[0] = theta[0] - target(params[0])
""",
        {"setting.json": "false"},
        {"setting.json": "true"},
    ),
    "a number beside a function in a tuple": (
        READ_AT_IMPORT
        + """

@njit
def shift(x):
    return x


PAIR = (SETTING, shift)


@njit
def sample_gradient(d, theta, params, s, g):
    g[0] = PAIR[1](theta[0]) - PAIR[0]
""",
        {"setting.json": "0.0"},
        {"setting.json": "1.0"},
    ),
    "a number in a closure cell of a wrapped callback": (
        READ_AT_IMPORT
        + """import functools


def shifted(by):
    def wrap(f):
        compiled = njit(f)

        @functools.wraps(f)  # importable by its name: cached on disk
        def inner(d, theta, params, s, g):
            compiled(d, theta, params, s, g)
            g[0] -= by

        return inner

    return wrap


@njit
@shifted(SETTING)
def sample_gradient(d, theta, params, s, g):
    g[0] = theta[0]
""",
        {"setting.json": "0.0"},
        {"setting.json": "1.0"},
    ),
    "a table of a submodule read through its package": (
        """\
import kc_tables.values
from numba import njit


@njit
def sample_gradient(d, theta, params, s, g):
    g[0] = theta[0] - kc_tables.values.TABLE[0]
""",
        {
            "kc_tables/__init__.py": "",
            "kc_tables/values.py": "from pathlib import Path\nimport numpy as np\n"
            'TABLE = np.load(Path(__file__).with_name("table.npy"))\n',
            "kc_tables/table.npy": npy([0.0]),
        },
        {"kc_tables/table.npy": npy([1.0])},
    ),
    "a module read by two functions for two different attributes": (
        """\
import kc_util
from numba import njit


@njit
def first(x):
    return kc_util.f(x)


@njit
def sample_gradient(d, theta, params, s, g):
    g[0] = first(theta[0]) + kc_util.g(theta[0])
""",
        {
            "kc_util.py": "from kc_f import f\nfrom kc_g import g\n",
            "kc_f.py": "from numba import njit\n\n\n@njit\ndef f(x):\n    return x + 1\n",
            "kc_g.py": "from numba import njit\n\n\n@njit\ndef g(x):\n    return x + 2\n",
        },
        {"kc_g.py": "from numba import njit\n\n\n@njit\ndef g(x):\n    return x + 3\n"},
    ),
    "a structured table's field names": (
        """\
from pathlib import Path

import numpy as np
from numba import njit

TABLE = np.load(Path(__file__).with_name("table.npy"))


@njit
def sample_gradient(d, theta, params, s, g):
    g[0] = theta[0] - TABLE[0]["lo"]
""",
        {"table.npy": npy([(1.0, 2.0)], dtype=[("lo", "f8"), ("hi", "f8")])},
        {"table.npy": npy([(1.0, 2.0)], dtype=[("hi", "f8"), ("lo", "f8")])},
    ),
    "a module of the user's that takes a standard library name": (
        """\
import statistics
from numba import njit


@njit
def sample_gradient(d, theta, params, s, g):
    g[0] = theta[0] - statistics.OFFSET
""",
        {"statistics.py": "OFFSET = 0.0\n"},
        {"statistics.py": "OFFSET = 0.25\n"},
    ),
}


@pytest.mark.parametrize("case", sorted(UNSEEN_CHANGES))
def test_what_a_callback_reads_beyond_its_file_keys_its_kernel(case, tmp_path, monkeypatch):
    source, files, changed = UNSEEN_CHANGES[case]
    if "statistics.py" in files:  # the user's statistics, not Python's, while imported
        monkeypatch.delitem(sys.modules, "statistics", raising=False)
    first = fingerprint_of(tmp_path / "a", {"kc_reads.py": source, **files}, "kc_reads")
    again = fingerprint_of(tmp_path / "b", {"kc_reads.py": source, **files}, "kc_reads")
    assert again == first  # the same files: the same key, in any folder and import
    other = fingerprint_of(tmp_path / "c", {"kc_reads.py": source, **files, **changed}, "kc_reads")
    assert other != first


def test_class_constants_key_as_loaded_when_the_file_changes_after_the_import(tmp_path):
    # An enumeration's member, edited on disk after the import: this process compiles
    # the old value, so its key must differ from a fresh process's (the new file and
    # value), as for a module's constants and code.
    source = """\
import enum
from numba import njit


class Shift(enum.IntEnum):
    TARGET = {target}


@njit
def sample_gradient(d, theta, params, s, g):
    g[0] = theta[0] - Shift.TARGET
"""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "kc_enum.py").write_text(source.format(target=0))
    sys.path.insert(0, str(folder))
    try:
        module = importlib.import_module("kc_enum")
        (folder / "kc_enum.py").write_text(source.format(target=1))
        during = code_fingerprint([module.sample_gradient])
        del sys.modules["kc_enum"]
        fresh = code_fingerprint([importlib.import_module("kc_enum").sample_gradient])
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("kc_enum", None)
    assert during["modules"] == fresh["modules"]  # the same file hash
    assert during != fresh


TEMPLATE = """\
from numba import njit

# <bindings> test template
OFFSET = 0.0
cache_to_disk = False
# </bindings>


@njit(cache=cache_to_disk)
def shifted(x):
    return x + OFFSET + {step!r}
"""


def test_a_template_edited_after_import_compiles_as_imported(tmp_path, monkeypatch, caplog):
    # A sweep ran its workers from an editable install while a branch that changed
    # sgd_loop.py was merged: workers that compiled a new kernel after the merge read
    # the new template but held the old bindings, and every such replicate failed. A
    # pinned template compiles as it was when its binder was imported, and says so.
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "kc_template.py"
    path.write_text(TEMPLATE.format(step=1.0), encoding="utf-8")
    template = importlib.import_module("kc_template")
    assert pin_template(template) == path.read_text(encoding="utf-8")
    path.write_text(TEMPLATE.format(step=2.0), encoding="utf-8")  # edited under it
    with caplog.at_level(logging.WARNING, logger="ldpsim.tasks.kernel.cache"):
        shifted = compile_template(template, "shifted", {"OFFSET": 0.5})
        compile_template(template, "shifted", {"OFFSET": 0.25})
    assert shifted(1.0) == 2.5  # 1 + 0.5 + the imported step 1.0, not the edited 2.0
    edited = [r for r in caplog.records if "changed on disk" in r.getMessage()]
    assert len(edited) == 1 and str(path) in edited[0].getMessage()


#: A process's first call of one of the package's compiled functions through in_turn,
#: their machine code in the test's cache folder (package/): it waits for its sibling
#: (both imported), so that the two calls start together.
FIRST_CALL = """
import json, pathlib, sys, time
import numpy as np
from ldpsim.tasks.compile_lock import in_turn
from ldpsim.tasks.stats import pairwise_sum
barrier = pathlib.Path(sys.argv[1])
(barrier / str(time.monotonic_ns())).touch()
while len(list(barrier.iterdir())) < 2:
    time.sleep(0.001)
value = in_turn(pairwise_sum)(np.arange(10.0))
print(json.dumps({
    "value": value,
    "hits": sum(pairwise_sum.stats.cache_hits.values()),
    "misses": sum(pairwise_sum.stats.cache_misses.values()),
}))
"""


def test_processes_calling_a_package_function_first_at_once_compile_it_once(tmp_path):
    # The workers of a new cluster reach the chunk's compiled functions together; with
    # an empty cache (the test's own cache folder, which holds the package's machine
    # code) one compiles, the other waits for its lock and loads the machine code. The
    # lock is in the cache folder, not in the package.
    cache, barrier = tmp_path / "cache", tmp_path / "barrier"
    barrier.mkdir()
    env = child_env(tmp_path, cache)
    command = [sys.executable, "-c", FIRST_CALL, str(barrier)]
    together = [
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = list(map(finish, together))
    assert [out["value"] for out in outs] == [45.0, 45.0]
    assert sorted((out["misses"], out["hits"]) for out in outs) == [(0, 1), (1, 0)]
    assert (cache / LOCK_SUBFOLDER / f"ldpsim.tasks.stats@{socket.gethostname()}.lock").exists()


def lockable_module(tmp_path: Path, monkeypatch, name: str):
    """A module ``name`` in ``tmp_path`` with a cached compiled ``twice``, imported; the
    test is skipped where there is no fcntl (nothing is locked)."""
    if compile_lock.fcntl is None:
        pytest.skip("no fcntl here: nothing is locked")
    (tmp_path / f"{name}.py").write_text(
        "from numba import njit\n\n@njit(cache=True)\ndef twice(x):\n    return 2.0 * x\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(name)


@pytest.mark.timeout(60)
def test_a_held_lock_is_waited_for_only_so_long(tmp_path, monkeypatch):
    # A holder that is stopped (a suspended job) or stuck: past LOCK_WAIT_S the process
    # compiles beside it, as without the lock. Another open file description of the
    # lock file conflicts as another process's would.
    module = lockable_module(tmp_path, monkeypatch, "kc_held")
    monkeypatch.setattr(compile_lock, "LOCK_WAIT_S", 0.2)
    with open(tmp_path / "kc_held.py.lock", "a") as holder:
        compile_lock.fcntl.flock(holder, compile_lock.fcntl.LOCK_EX)
        compile_signature(module.twice, "float64(float64)")
    assert module.twice(1.5) == 3.0 and len(module.twice.signatures) == 1


def test_a_folder_that_cannot_lock_still_compiles(tmp_path, monkeypatch):
    # Some network file systems refuse advisory locks: the entry compiles without one.
    module = lockable_module(tmp_path, monkeypatch, "kc_lockless")

    tries = []

    def refuse(handle, operation):
        tries.append(operation)
        raise OSError(37, "No locks available")

    monkeypatch.setattr(compile_lock.fcntl, "flock", refuse)
    compile_signature(module.twice, "float64(float64)")
    assert module.twice(1.5) == 3.0 and len(module.twice.signatures) == 1
    # Tried once, not again until LOCK_WAIT_S as for a lock held (a mutation hunt, h16l).
    assert len(tries) == 1
    assert (tmp_path / "kc_lockless.py.lock").exists()


def test_an_empty_or_home_relative_cache_variable(monkeypatch):
    # An empty variable is unset (as the XDG spec says of XDG_CACHE_HOME), not the working
    # folder; "~" is the home folder (a mutation hunt, h16l: both passed the tests).
    home = "/home/u"
    cases = [
        ({CACHE_DIR_VARIABLE: "", "XDG_CACHE_HOME": "/x"}, "/x/ldpsim"),
        ({CACHE_DIR_VARIABLE: "~/c"}, f"{home}/c"),
        ({"XDG_CACHE_HOME": ""}, f"{home}/.cache/ldpsim"),
        ({"XDG_CACHE_HOME": "~/xc"}, f"{home}/xc/ldpsim"),
    ]
    for variables, expected in cases:
        for name in (CACHE_DIR_VARIABLE, "XDG_CACHE_HOME"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HOME", home)
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        assert cache_folder() == Path(expected), variables


def test_in_turn_compiles_under_the_lock_then_is_the_dispatcher_itself(tmp_path, monkeypatch):
    # The first call compiles under the module's lock (beside a module outside the
    # package, whatever its name starts with); later calls go straight to numba (a
    # mutation hunt, h16l: a first call without the lock, a lock file of the package's
    # for a module named ldpsim_*, and a lock taken at every call passed the tests).
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    module = lockable_module(tmp_path, monkeypatch, "ldpsim_turn")
    first = compile_lock.in_turn(module.twice)
    assert first is not module.twice and first(1.5) == 3.0
    assert compile_lock.in_turn(module.twice) is module.twice
    assert (tmp_path / "ldpsim_turn.py.lock").exists()
    assert not (tmp_path / "cache").exists()


def test_a_waiter_looks_again_at_least_every_fiftieth_of_a_second(tmp_path, monkeypatch):
    # Its pause doubles from 1 ms up to 50 ms, never more: a holder that finishes is
    # followed within 50 ms, not after a pause that kept doubling (a mutation hunt, h16l).
    # The pauses are recorded, and slept.
    module = lockable_module(tmp_path, monkeypatch, "kc_pauses")
    monkeypatch.setattr(compile_lock, "LOCK_WAIT_S", 0.6)
    pauses = []
    sleep = compile_lock.time.sleep

    def recorded(seconds):
        pauses.append(seconds)
        sleep(seconds)

    monkeypatch.setattr(compile_lock.time, "sleep", recorded)
    with open(tmp_path / "kc_pauses.py.lock", "a") as holder:
        compile_lock.fcntl.flock(holder, compile_lock.fcntl.LOCK_EX)
        compile_signature(module.twice, "float64(float64)")
    assert pauses[:3] == [0.001, 0.002, 0.004]
    assert all(b == min(2 * a, 0.05) for a, b in itertools.pairwise(pauses))
    assert module.twice(1.5) == 3.0


def test_a_package_lock_that_cannot_be_made_is_done_without(tmp_path, monkeypatch):
    # A cache folder under a file (its folder cannot be made), and a lock path that is a
    # folder (it cannot be opened): the block runs without the lock, as documented (a
    # mutation hunt, h16l: either error raised instead, and passed the tests).
    blocker = tmp_path / "file"
    blocker.write_text("")
    ran = []
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(blocker / "cache"))
    with compile_lock.package_lock("kc_unmade"):
        ran.append("unmade")
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    (tmp_path / "cache" / LOCK_SUBFOLDER / f"kc_folder@{socket.gethostname()}.lock").mkdir(
        parents=True
    )
    with compile_lock.package_lock("kc_folder"):
        ran.append("unopened")
    assert ran == ["unmade", "unopened"]


def test_a_package_lock_makes_its_folders_and_holds_its_file(tmp_path, monkeypatch):
    # A hunt (h21f): a cache folder that does not exist yet (a fresh machine) gets its
    # locks/ folder and the file locks/<name>@<host>.lock, held for the block; without
    # its parents made, the block ran with no lock at all and passed the tests.
    if compile_lock.fcntl is None:
        pytest.skip("no fcntl here: nothing is locked")
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path / "new" / "cache"))
    lock = tmp_path / "new" / "cache" / LOCK_SUBFOLDER / f"kc_new@{socket.gethostname()}.lock"
    with compile_lock.package_lock("kc_new"), open(lock, "a") as other:
        with pytest.raises(BlockingIOError):  # another open file of it cannot lock it
            compile_lock.fcntl.flock(
                other, compile_lock.fcntl.LOCK_EX | compile_lock.fcntl.LOCK_NB
            )
