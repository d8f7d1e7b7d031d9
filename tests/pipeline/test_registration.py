"""Units registered at run time (issue 34 item 7): checked as plugins are, shipped to the
workers of a user's own scheduler, recorded in the store by the hash of their source."""

from __future__ import annotations

import inspect
import json
import linecache
import pickle
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from ldpsim.pipeline import api
from ldpsim.tasks import plugins
from ldpsim.tasks.intervals.base import IntervalMethod
from ldpsim.tasks.mechanisms.base import Mechanism

SCRIPT = Path(__file__).parent / "scripts" / "inline_mechanism.py"


@pytest.fixture
def clean_registry(monkeypatch):
    """The registry of run-time units, empty for the test (and as it was after)."""
    monkeypatch.setattr(plugins, "_REGISTERED", {kind: {} for kind in plugins.GROUPS})


def test_register_checks_the_unit_as_a_plugin(clean_registry):
    with pytest.raises(api.InputTypeError, match="must be a subclass of"):
        api.register(dict)

    @dataclass(frozen=True, kw_only=True)
    class NoCallback(Mechanism):
        name = "no_callback"
        privatize = staticmethod(lambda d, g, params, s: s)
        eps: float | None = None

    with pytest.raises(api.InputError, match="sets no numba-compiled privatize"):
        api.register(NoCallback)

    @dataclass(frozen=True, kw_only=True)
    class Shadow(IntervalMethod):
        name = "bb"

        def interval(self, stats, level, rng):
            return stats.theta_bar, stats.theta_bar

    with pytest.raises(api.InputError, match="built-in method 'bb'"):
        api.register(Shadow)
    assert "no_callback" not in plugins.registry("mechanism")


def test_a_registered_method_is_used_by_sweeps_and_replaced_by_a_new_version(clean_registry):
    def make(scale):
        @dataclass(frozen=True, kw_only=True)
        class Point(IntervalMethod):
            name = "point_interval"

            def interval(self, stats, level, rng):
                return stats.theta_bar - scale, stats.theta_bar + scale

        return Point

    first, second = make(1.0), make(2.0)
    assert api.register(first) is first
    sweep = api.load_sweep(
        {
            "replicates": 2,
            "spec": {"model": "quantile", "n": 1000},
            "methods": {"point_interval": {}},
        },
        name="mine",
    )
    assert type(sweep.points()[0].normalized.methods["point_interval"]) is first
    api.register(second)  # the cell run again: replaced, no restart
    assert plugins.registry("method")["point_interval"] is second
    (record,) = plugins.registered("method")
    assert record.distribution == plugins.REGISTERED_ORIGIN and record.source_sha256


#: A notebook's cell: a mechanism whose class source inspect cannot read (its module has
#: no file), whose functions' sources it can (the kernel keeps each cell in linecache).
CELL = """
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.mechanisms.base import Mechanism
from ldpsim.tasks.rng import random


@njit
def _uniform(d, g, params, s):
    for j in range(d):
        u, s = random(s)
        g[j] += params[0] * (u - 0.5)
    return s


@dataclass(frozen=True, kw_only=True)
class CellNoise(Mechanism):
    name = "cell_noise"
    privatize = _uniform
    eps: float | None = None

    def params(self, model):
        return np.array([SCALE / self.eps])
"""


def _cell(code: str, filename: str) -> type:
    """The class CellNoise of ``code`` run as a notebook runs a cell: in a module without
    a file, the cell's lines in linecache under ``filename`` (None: kept nowhere, as
    exec of a string)."""
    module = types.ModuleType("notebook_kernel")  # like a kernel's __main__: no __file__
    if filename is not None:
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    sys.modules[module.__name__] = module  # while the cell runs (dataclass looks it up)
    try:
        exec(compile(code, filename or "<string>", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    return module.CellNoise


def test_a_notebook_class_is_known_by_the_source_of_its_functions(clean_registry):
    cells = {}
    versions = [("1.0", "None", "0.5"), ("1.0", "None", "0.5"), ("2.0", "None", "0.5")]
    versions += [("1.0", "0.5", "0.5"), ("1.0", "None", "0.25")]
    for n, (scale, default, callback) in enumerate(versions):
        code = CELL.replace("SCALE", scale).replace("(u - 0.5)", f"(u - {callback})")
        code = code.replace("eps: float | None = None", f"eps: float | None = {default}")
        cells[n] = _cell(code, f"/tmp/ipykernel_0/{n}.py")
    with pytest.raises((OSError, TypeError)):
        inspect.getsource(cells[0])  # what made the hash None
    shas = [
        api.register(cells[n]) and plugins.registered("mechanism")[0].source_sha256 for n in cells
    ]
    assert all(sha is not None and len(sha) == 64 for sha in shas)
    # The same cell run again: the same hash; a method's body, a default or the
    # compiled callback edited: another.
    assert shas[0] == shas[1] and len(set(shas[1:])) == 4
    # No source at all (exec of a string): refused, in one line.
    with pytest.raises(api.InputError) as refused:
        api.register(_cell(CELL.replace("SCALE", "1.0"), None))
    message = str(refused.value)
    assert "'CellNoise' cannot be registered" in message and "cannot be read" in message
    assert "\n" not in message and "notebook cell" in message
    assert plugins.registered("mechanism")[0].unit is cells[4]  # the last one kept


def test_the_registry_is_copied_on_write_and_workers_use_the_shipped_hash(clean_registry):
    from ldpsim.pipeline.registration import RegisteredUnits

    unit = _cell(CELL.replace("SCALE", "1.0"), "/tmp/ipykernel_0/shipped.py")
    before = plugins._REGISTERED
    RegisteredUnits([(unit, "f" * 64)]).setup(worker=None)  # as a worker sets it up
    assert before == {kind: {} for kind in plugins.GROUPS}  # not changed: replaced
    (record,) = plugins.registered("mechanism")
    assert record.unit is unit and record.source_sha256 == "f" * 64  # not read again


def test_a_unit_the_workers_cannot_unpickle_is_refused_in_one_line(clean_registry):
    from ldpsim.pipeline.registration import ship_registered

    class Refusing:
        def register_plugin(self, plugin):
            raise pickle.PicklingError("Can't pickle <class 'x'>:\nit is not the same object")

    api.register(_cell(CELL.replace("SCALE", "1.0"), "/tmp/ipykernel_0/refused.py"))
    sweep = api.load_sweep(
        {"replicates": 2, "spec": {"model": "quantile", "n": 1000, "mechanism": "cell_noise"}},
        name="mine",
    )
    with pytest.raises(api.InputError) as refused:
        ship_registered(Refusing(), sweep)
    message = str(refused.value)
    assert "\n" not in message and "PicklingError: Can't pickle <class 'x'>:" in message
    assert "cloudpickle.register_pickle_by_value" in message


def _registered_plugins(dask_scheduler) -> list[str]:
    return [name for name in dask_scheduler.worker_plugins if name.startswith("ldpsim-reg")]


def test_a_script_registers_a_mechanism_on_its_own_scheduler(local_cluster, tmp_path):
    store = tmp_path / "inline.zarr"

    def script(path: Path, replicates: int) -> subprocess.CompletedProcess:
        args = [sys.executable, str(path), local_cluster.scheduler_address, str(store)]
        return subprocess.run(
            [*args, str(replicates)], capture_output=True, text=True, timeout=300
        )

    ran = script(SCRIPT, 4)
    assert ran.returncode == 0, ran.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in ran.stdout.splitlines())
    assert lines["status"] == "complete 4"
    assert 0.0 < float(lines["coverage"]) <= 1.0
    (units,) = json.loads(lines["units"])
    origin = units["mechanism:inline_laplace"]
    assert origin["origin"] == "registered" and origin["class"] == "__main__.InlineLaplace"
    assert len(origin["source_sha256"]) == 64
    from distributed import Client

    with Client(local_cluster.scheduler_address) as client:  # the run took its plugin away
        assert client.run_on_scheduler(_registered_plugins) == []
    # The class edited (a line of its source): more replicates of it are refused.
    edited = tmp_path / "edited.py"
    edited.write_text(
        SCRIPT.read_text().replace(
            '    name = "inline_laplace"\n', '    name = "inline_laplace"  # v2\n'
        )
    )
    again = script(edited, 6)
    assert again.returncode == 2, again.stdout + again.stderr[-2000:]
    assert "mechanism 'inline_laplace' changed since the store" in again.stdout
    assert "registered at run time (__main__.InlineLaplace)" in again.stdout


def test_the_documented_mechanism_adds_the_variance_it_states(clean_registry):
    """docs/extending.md's noise-adding mechanism, run as written, registered: its reports
    of a fixed gradient have its variance() (within 4 Monte-Carlo standard errors)."""
    import numpy as np

    from ldpsim.tasks.spec import normalize_spec

    text = (Path(__file__).parents[2] / "docs" / "extending.md").read_text()
    (code,) = [
        b.split("```", 1)[0] for b in text.split("```python\n")[1:] if "InlineLaplace(" in b
    ]
    namespace: dict = {}
    # Its lines kept where inspect finds them, as a notebook's cell (the hash reads them).
    name = "<docs/extending.md: InlineLaplace>"
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    exec(compile(code, name, "exec"), namespace)
    api.register(namespace["InlineLaplace"])
    spec = normalize_spec(
        {"model": "quantile", "n": 1000, "mechanism": "inline_laplace", "eps": 0.5}
    )
    mechanism, model = spec.mechanism, spec.model
    assert mechanism.eps == 0.5 and type(mechanism) is namespace["InlineLaplace"]
    reports = mechanism.privatize_copies(mechanism.params(model), np.zeros(1), 40_000, seed=2)
    want = float(mechanism.variance(model)[0, 0])
    # The variance of Laplace noise has sd sqrt(Var(X^2)) / sqrt(N) = sqrt(5) var / sqrt(N).
    se = np.sqrt(5.0) * want / np.sqrt(len(reports))
    assert abs(float(np.var(reports[:, 0])) - want) < 4 * se
    assert abs(float(np.mean(reports[:, 0]))) < 4 * np.sqrt(want / len(reports))
