"""Units registered at run time (issue 34 item 7): checked as plugins are, shipped to the
workers of a user's own scheduler, recorded in the store by the hash of their source."""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import linecache
import os
import pickle
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import tree_hash

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


def test_register_refuses_a_built_in_name_a_missing_name_and_a_parameter_of_the_other_kind(
    clean_registry,
):
    # Each rule per kind (mutation hunt h16g: none was tested for models or mechanisms).
    from ldpsim.tasks.mechanisms.laplace import Laplace
    from ldpsim.tasks.models.quantile import Quantile

    @dataclass(frozen=True, kw_only=True)
    class MyQuantile(Quantile):
        name = "quantile"

    with pytest.raises(api.InputError, match="the name of the built-in model 'quantile'"):
        api.register(MyQuantile)

    @dataclass(frozen=True, kw_only=True)
    class Nameless(IntervalMethod):
        name = ""

        def interval(self, stats, level, rng):
            return stats.theta_bar, stats.theta_bar

    with pytest.raises(api.InputError, match="it sets no name"):
        api.register(Nameless)

    # A mechanism's parameter named like a model's (quantile's tau), a model's named like
    # a mechanism's (gdp's mu): a spec's key would mean either.
    @dataclass(frozen=True, kw_only=True)
    class TauNoise(Laplace):
        name = "tau_noise"
        tau: float = 1.0

    @dataclass(frozen=True, kw_only=True)
    class MuQuantile(Quantile):
        name = "mu_quantile"
        mu: float = 0.0

    for unit, clash in ((TauNoise, "tau"), (MuQuantile, "mu")):
        with pytest.raises(api.InputError, match=rf"named like other keys of a spec \({clash}\)"):
            api.register(unit)
    assert plugins.registered() == []

    # Under their own names and parameters, the same classes register.
    @dataclass(frozen=True, kw_only=True)
    class Noise(Laplace):
        name = "my_noise"
        spread: float = 1.0

    assert api.register(Noise) is Noise
    assert plugins.registry("mechanism")["my_noise"] is Noise


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
from ldpsim.tasks.streams.rng import random


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


def _cell(code: str, filename: str | None, name: str = "CellNoise") -> type:
    """The class ``name`` of ``code`` run as a notebook runs a cell: in a module without
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
    return getattr(module, name)


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
    assert plugins.registered("mechanism")[0].unit is cells[4]  # the last one kept
    # No source at all (exec of a string): registered, known by its code objects, which
    # tell the scales apart (the callback's constant too) as the source did.
    unread = [_cell(CELL.replace("SCALE", scale), None) for scale in ("1.0", "1.0", "2.0")]
    unread.append(_cell(CELL.replace("SCALE", "1.0").replace("(u - 0.5)", "(u - 0.25)"), None))
    with pytest.raises(OSError):
        inspect.getsource(unread[0].params)
    coded = [
        api.register(unit) and plugins.registered("mechanism")[0].source_sha256 for unit in unread
    ]
    assert coded[0] == coded[1] and len(set(coded[1:])) == 3 and not set(coded) & set(shas)


#: A notebook's cell whose class has a mixin of its own (an abc.ABC), typing.Generic, a
#: field's default factory, a property, a cached property and a class method.
MIXIN_CELL = """
import abc
import functools
import typing
from dataclasses import dataclass, field

from ldpsim.tasks.intervals.base import IntervalMethod

T = typing.TypeVar("T")


class Mixin(abc.ABC):
    def extra(self):
        return 2


@dataclass(frozen=True, kw_only=True)
class Mixed(Mixin, IntervalMethod, typing.Generic[T]):
    name = "mixed"
    table: list = field(default_factory=lambda: [1, 2])

    @property
    def p(self):
        return 1

    @functools.cached_property
    def c(self):
        return 3

    @classmethod
    def k(cls):
        return 4

    def interval(self, stats, level, rng):
        return stats.theta_bar - 1, stats.theta_bar + 1
"""


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11), reason="the hashes 35c5de7 recorded on Python 3.11"
)
def test_a_notebook_class_keeps_the_hash_that_stores_recorded_before(clean_registry, monkeypatch):
    # A store written before functions without source were hashed by their code holds
    # these hashes (35c5de7 computed them, on Python 3.11, whose dataclasses' repr they
    # include); the unchanged cells must keep them, or their stores would refuse to
    # resume. Python's own bases (abc.ABC, typing.Generic) and ldpsim's are not the
    # cell's code; its mixin is.
    cell = _cell(CELL.replace("SCALE", "1.0"), "/tmp/ipykernel_0/0.py")
    mixed = _cell(MIXIN_CELL, "/tmp/ipykernel_0/mixed.py", "Mixed")
    assert plugins.unit_source_sha256(cell) == (
        "885f8ad9f063b5d622502dbefa2ae2d0a4ef663ccc248b2899a3b4f853650f11"
    )
    assert plugins.unit_source_sha256(mixed) == (
        "2e7d821fd3be839c37ab93cf6e62c44d5e8670a9f23e567f263e99dd853251b3"
    )
    # A class whose source Python reads (a script's, a module's): its source and its
    # callbacks', as 35c5de7 hashed it, whatever the Python.
    spec = importlib.util.spec_from_file_location("inline_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, module.__name__, module)  # where inspect finds it
    spec.loader.exec_module(module)
    script = module.InlineLaplace
    text = [inspect.getsource(script), inspect.getsource(script.privatize.py_func)]
    want = hashlib.sha256("\n".join(text).encode()).hexdigest()
    assert api.register(script) and plugins.registered("mechanism")[0].source_sha256 == want


#: An interval method as a string that ``exec`` runs in a fresh namespace: its classes'
#: module is then ``builtins``, and none of its functions has a source that Python can
#: read. Each of EDITS changes one part of it.
EXEC_METHOD = """
from dataclasses import dataclass

from ldpsim.tasks.intervals.base import IntervalMethod

HALF_WIDTH = 0.1
UNUSED = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}


def widen(value, factor=2.0, *more):
    if value >= 0:
        return factor * value
    return -widen(-value, factor)  # reads itself: hashed once


def scaled(k):
    def scale(x):
        return k * x

    return scale


class Base(IntervalMethod):
    def centre(self, stats):
        return stats.theta_bar + 0.0


@dataclass(frozen=True, kw_only=True)
class ExecHalfWidth(Base):
    name = "exec_half_width"
    shrink = staticmethod(lambda width: width / 1.0)
    grow = staticmethod(scaled(1.0))
    scale: float = 1.0

    def interval(self, stats, level, rng, *, extra=0.0):
        def half():
            return self.grow(self.shrink(widen(HALF_WIDTH))) * self.scale / 2.0 + extra

        if self.name in {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "iota"}:
            raise ValueError(UNUSED)
        return self.centre(stats) - half(), self.centre(stats) + half()
"""
EDITS = {
    "a global constant": ("HALF_WIDTH = 0.1", "HALF_WIDTH = 0.3"),
    "a global set": ('"eta", "theta"}', '"eta", "kappa"}'),
    "a set in the code": ('"eta", "iota"}', '"eta", "lambda"}'),
    "a helper function of the namespace": ("factor * value", "factor * value * 1.5"),
    "a helper's default": ("factor=2.0", "factor=3.0"),
    "a base class's method": ("theta_bar + 0.0", "theta_bar + 0.01"),
    "a lambda": ("width / 1.0", "width / 3.0"),
    "a field's default": ("scale: float = 1.0", "scale: float = 2.0"),
    "a method's default": ("extra=0.0", "extra=0.5"),
    "a nested function": ("/ 2.0 + extra", "/ 4.0 + extra"),
    # Mutation hunt h19f: each of these changes only the part of the code it names (the
    # method's default above is keyword-only), which no edit changed alone before.
    "a comparison (the bytecode alone)": ("value >= 0", "value > 0"),
    "a star parameter's kind (the flags alone)": ("*more", "**more"),
    "a closure's value": ("scaled(1.0)", "scaled(1.5)"),
}


def _exec_class(code: str, namespace: dict | None = None) -> type:
    """ExecHalfWidth of ``code`` run by ``exec`` in ``namespace`` (a fresh one), as a
    process that imports nothing from ``__future__`` runs it (this module does)."""
    namespace = {} if namespace is None else namespace
    exec(compile(code, "<string>", "exec", dont_inherit=True), namespace)
    return namespace["ExecHalfWidth"]


def test_a_class_made_by_exec_is_known_by_its_code(clean_registry):
    written = _exec_class(EXEC_METHOD)
    assert written.__module__ == "builtins"
    sha = {
        "as written": plugins.unit_source_sha256(written),
        "run again": plugins.unit_source_sha256(_exec_class(EXEC_METHOD)),
    }
    for what, (old, new) in EDITS.items():
        assert EXEC_METHOD.count(old) == 1, what
        sha[what] = plugins.unit_source_sha256(_exec_class(EXEC_METHOD.replace(old, new)))
    assert sha["as written"] == sha["run again"]
    assert [what for what in EDITS if sha[what] == sha["as written"]] == []
    assert len(set(sha.values())) == len(EDITS) + 1
    assert api.register(written) is written  # accepted, as a notebook's class is
    (record,) = plugins.registered("method")
    assert record.source_sha256 == sha["as written"]
    # A namespace with a module name: the same rule (35c5de7 refused it).
    named = _exec_class(EXEC_METHOD, {"__name__": "scratch"})
    assert named.__module__ == "scratch" and api.register(named) is named
    assert plugins.registered("method")[0].source_sha256 not in sha.values()


#: Prints the hash of EXEC_METHOD's class, read from stdin, in a process of its own.
HASH_IN_A_PROCESS = """
import sys

from ldpsim.tasks.plugins import unit_source_sha256

namespace = {}
exec(sys.stdin.read(), namespace)
print(unit_source_sha256(namespace["ExecHalfWidth"]))
"""


def test_the_hash_of_a_class_made_by_exec_is_the_same_in_every_process():
    # A string's hash, hence the order of a set, is salted per process: two kernels of
    # the same notebook must still agree (a store refuses a hash it does not know).
    here = plugins.unit_source_sha256(_exec_class(EXEC_METHOD))
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        command = [sys.executable, "-c", HASH_IN_A_PROCESS]
        ran = subprocess.run(
            command, input=EXEC_METHOD, capture_output=True, text=True, env=env, timeout=120
        )
        assert ran.returncode == 0, ran.stderr[-2000:]
        assert ran.stdout.strip() == here


def test_an_edited_class_made_by_exec_is_refused_by_its_store_then_recorded(
    clean_registry, local_cluster, tmp_path
):
    from distributed import Client

    def sweep(replicates: int):
        spec = {"model": "quantile", "n": 1000}
        methods = {"hw": {"method": "exec_half_width"}}
        return api.load_sweep(
            {
                "replicates": replicates,
                "seed": 3,
                "rep_chunk": 2,
                "spec": spec,
                "methods": methods,
            },
            name="exec",
        )

    store = tmp_path / "exec.zarr"
    with Client(local_cluster, set_as_default=False) as client:
        api.register(_exec_class(EXEC_METHOD))
        api.run(sweep(4), store, client=client, progress=False)
        # The string edited (its half-width 0.1 -> 0.3) and run again: another version.
        api.register(_exec_class(EXEC_METHOD.replace(*EDITS["a global constant"])))
        before = tree_hash(store)
        with pytest.raises(api.InputError) as refused:
            api.run(sweep(6), store, client=client, progress=False)
        assert "interval method 'exec_half_width' changed since the store" in str(refused.value)
        assert "registered at run time (builtins.ExecHalfWidth)" in str(refused.value)
        assert tree_hash(store) == before
        ds = api.run(sweep(6), store, client=client, progress=False, accept_code_change=True)
    versions = ds["code_version"].values.reshape(-1)
    np.testing.assert_array_equal(versions, [0, 0, 0, 0, 1, 1])
    half = ((ds["upper"] - ds["lower"]).sel({"method": "hw"}) / 2).values.reshape(6, -1)
    np.testing.assert_allclose(half[:4], 0.1, rtol=1e-12)
    np.testing.assert_allclose(half[4:], 0.3, rtol=1e-12)
    assert int(api.summarize(ds, as_dataset=True)["code_versions"].max()) == 2


def test_the_registry_is_copied_on_write_and_workers_use_the_shipped_hash(clean_registry):
    from ldpsim.pipeline.compute.registration import RegisteredUnits

    unit = _cell(CELL.replace("SCALE", "1.0"), "/tmp/ipykernel_0/shipped.py")
    before = plugins._REGISTERED
    RegisteredUnits([(unit, "f" * 64)]).setup(worker=None)  # as a worker sets it up
    assert before == {kind: {} for kind in plugins.GROUPS}  # not changed: replaced
    (record,) = plugins.registered("mechanism")
    assert record.unit is unit and record.source_sha256 == "f" * 64  # not read again


def test_a_unit_the_workers_cannot_unpickle_is_refused_in_one_line(clean_registry):
    from ldpsim.pipeline.compute.registration import ship_registered

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
    assert "(mechanism 'cell_noise')" in message  # the kind, then the name
    assert "cloudpickle.register_pickle_by_value" in message


class SchedulerPlugins:
    """A client's worker plugins as its scheduler keeps them, by name; ``gone``: the
    scheduler has gone, and unregistering fails."""

    def __init__(self) -> None:
        self.plugins: dict[str, object] = {}
        self.gone = False

    def register_plugin(self, plugin) -> None:
        self.plugins[plugin.name] = plugin  # a name registered again is replaced

    def unregister_worker_plugin(self, name: str) -> None:
        if self.gone:
            raise OSError("Timed out trying to connect to tcp://127.0.0.1:8786")
        del self.plugins[name]


def test_a_run_keeps_its_units_shipped_until_it_ends_whatever_else_runs(clean_registry):
    # A mutation hunt (h15e): the plugin unregistered before the run's tasks, one name
    # for every version of a class, a scheduler gone raising at the run's end, or only
    # the sweep's first grid point looked at, passed every test.
    from ldpsim.pipeline.compute.registration import shipped_units

    def sweep():
        grid = {"mechanism": ["laplace", "cell_noise"]}  # the first point's is built in
        spec = {"model": "quantile", "n": 1000}
        return api.load_sweep({"replicates": 2, "spec": spec, "grid": grid}, name="mine")

    client = SchedulerPlugins()
    api.register(_cell(CELL.replace("SCALE", "1.0"), "/tmp/ipykernel_0/first.py"))
    with shipped_units(client, sweep()):
        (first,) = client.plugins  # workers that join during the run set it up too
        # Another run, on the same scheduler, of the class edited in the meantime.
        api.register(_cell(CELL.replace("SCALE", "2.0"), "/tmp/ipykernel_0/second.py"))
        with shipped_units(client, sweep()):
            assert len(client.plugins) == 2
        assert list(client.plugins) == [first]  # the other run's end left it alone
    assert client.plugins == {}
    client.gone = True  # the run ends because its scheduler went: that error, not this
    with pytest.raises(KeyError, match="the run's own"), shipped_units(client, sweep()):
        raise KeyError("the run's own")


def _registered_plugins(dask_scheduler) -> list[str]:
    return [name for name in dask_scheduler.worker_plugins if name.startswith("ldpsim-reg")]


def test_a_script_registers_a_mechanism_on_its_own_scheduler(local_cluster, tmp_path, capsys):
    store = tmp_path / "inline.zarr"

    def script(path: Path, replicates: int) -> subprocess.CompletedProcess:
        args = [sys.executable, str(path), local_cluster.scheduler_address, str(store)]
        return subprocess.run(
            [*args, str(replicates)], capture_output=True, text=True, timeout=300
        )

    # 2 replicates, one task (the script's rep_chunk is 2): the scheduler sets the
    # mechanism's plugin up on every worker, and each worker that runs a task prepares the
    # mechanism's kernel, 3.4 to 5 s of CPU (with 4 replicates, two tasks, both workers
    # did; measured 2026-11-30).
    ran = script(SCRIPT, 2)
    assert ran.returncode == 0, ran.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in ran.stdout.splitlines())
    assert lines["status"] == "complete 2"
    assert 0.0 < float(lines["coverage"]) <= 1.0
    (units,) = json.loads(lines["units"])
    origin = units["mechanism:inline_laplace"]
    assert origin["origin"] == "registered" and origin["class"] == "__main__.InlineLaplace"
    assert len(origin["source_sha256"]) == 64
    # `ldpsim status --verify` (this process has no inline_laplace) computes the truths
    # again with the mechanism: it names the class and the way round, in one line.
    from conftest import one_error_line

    from ldpsim.pipeline.cli import EXIT_BAD_INPUT, EXIT_OK, main

    capsys.readouterr()
    code = main(["status", "--verify", str(store)])
    one_error_line(
        capsys.readouterr(),
        code,
        (
            "computes them again with its model and mechanism, and the store used the "
            "mechanism 'inline_laplace' (class __main__.InlineLaplace), registered at run "
            "time, which this process has not registered",
            "in Python: ldpsim.pipeline.api.register(InlineLaplace); then "
            f"ldpsim.pipeline.cli.main(['status', '--verify', {str(store)!r}]).",
            "`ldpsim status` without --verify checks every file against its checksum.",
        ),
        EXIT_BAD_INPUT,
    )
    # Without --verify, status and errors read the checksummed store without the class
    # (a second read caught the first version of this fix refusing them too).
    assert main(["status", str(store)]) == EXIT_OK
    assert main(["errors", str(store)]) == EXIT_OK
    assert "No failures recorded" in capsys.readouterr().out
    # The way the line gives: the class registered in this process, then --verify.
    spec = importlib.util.spec_from_file_location("inline_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, module.__name__, module)
        patch.setattr(plugins, "_REGISTERED", {kind: {} for kind in plugins.GROUPS})
        spec.loader.exec_module(module)
        api.register(module.InlineLaplace)
        assert main(["status", "--verify", str(store)]) == EXIT_OK
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
    again = script(edited, 4)
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


def test_the_register_docstring_example_computes_intervals(clean_registry):
    # Its method called stats_.oracle_sd(), which StreamingStats has not: every replicate
    # of a sweep with it failed (a hunt, 2026-12-01). Run as written, it now gives the
    # oracle's interval (the same formula, scipy's normal quantile).
    import doctest

    import numpy as np

    from ldpsim.tasks import run_replicate

    examples = doctest.DocTestParser().get_examples(api.register.__doc__)
    code = "".join(e.source for e in examples if "register(" not in e.source)
    namespace: dict = {}
    name = "<ldpsim.pipeline.api.register's example>"
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    exec(compile(code.split("sweep = load_sweep")[0], name, "exec"), namespace)
    api.register(namespace["Wald"])
    spec = {"model": "quantile", "n": 1000, "methods": {"wald": {}, "oracle": {}}}
    for rep in range(3):
        result = run_replicate(spec, rep)
        assert not result.failures, result.failures
        for bound in (result.lower, result.upper):
            np.testing.assert_allclose(bound["wald"], bound["oracle"], rtol=1e-12)


def test_a_registered_unit_is_known_by_the_hash_of_its_registration(clean_registry):
    """A unit registered at run time is recorded, and checked on a worker, by the hash
    its registration carries (the client's), the latest registration's (a mutation hunt,
    h16l: the hash read from its file instead, or the first one kept, passed the tests)."""
    from ldpsim.pipeline.compute.registration import RegisteredUnits
    from ldpsim.pipeline.store.code_identity import running_code, unit_origin

    unit = _cell(CELL.replace("SCALE", "1.0"), "/tmp/ipykernel_0/recorded.py")
    for sha in ("f" * 64, "e" * 64):
        RegisteredUnits([(unit, sha)]).setup(worker=None)  # as a worker sets it up
        assert unit_origin(unit)["source_sha256"] == sha
        assert running_code(unit) == {"source_sha256": sha}


def test_a_competitor_needs_estimate_interval_and_no_interval(clean_registry):
    # Mutation hunt h19c: no test registered a competitor (own_estimate = True).
    @dataclass(frozen=True, kw_only=True)
    class Competitor(IntervalMethod):
        name = "h19c_competitor"
        own_estimate = True

        def estimate_interval(self, users, level, rng):
            return np.zeros(1), np.zeros(1), np.ones(1)

    @dataclass(frozen=True, kw_only=True)
    class NoEstimate(IntervalMethod):
        name = "h19c_no_estimate"
        own_estimate = True

    assert plugins.register(Competitor).unit is Competitor  # interval() not needed
    with pytest.raises(ValueError, match="sets own_estimate = True and does not implement"):
        plugins.register(NoEstimate)


def competitor(name: str, shift: float) -> type:
    """A competitor plugin class ``name`` whose estimate is ``shift``: a new class at
    each call, as a notebook cell run again after an edit makes one."""

    @dataclass(frozen=True, kw_only=True)
    class Competitor(IntervalMethod):
        own_estimate = True

        def estimate_interval(self, users, level, rng):
            return np.full(1, shift), np.zeros(1), np.ones(1)

    Competitor.name = name
    return Competitor


def test_registering_the_same_class_again_keeps_the_set_up_grid_points(clean_registry):
    # Mutation hunt h19c: only a replacement by another class makes grid points stale.
    first = competitor("h19c_competitor", 0.0)
    before = plugins.generation()
    plugins.register(first)
    plugins.register(first)  # a worker's set-up, a cell re-run without an edit
    assert plugins.generation() == before
    plugins.register(competitor("h19c_competitor", 1.0))  # an edited class, same name
    assert plugins.generation() == before + 1
    # One record per kind and name, listed under its kind only.
    assert [p.unit for p in plugins.registered("method")] == [
        plugins.registry("method")["h19c_competitor"]
    ]
    assert plugins.registered("model") == [] and plugins.registered("mechanism") == []


def test_a_sweep_s_grid_points_are_set_up_again_after_a_unit_is_registered(clean_registry):
    """Sweep.points caches its grid points, and sets them up again where a unit was
    registered since (a new one) or replaced by another class (the generation): a
    sweep's method then is the class registered last. Before: dropping either check
    passed every test (a mutation hunt, h24d)."""
    first = competitor("h24d_competitor", 0.0)
    plugins.register(first)
    tables = {"replicates": 2, "seed": 5, "grid": {"tau": [0.5]}}
    tables |= {"spec": {"model": "quantile", "eps": 1.0, "n": 200}}
    sweep = api.load_sweep({**tables, "methods": {"h24d_competitor": {}}}, name="h24d")
    points = sweep.points()
    assert sweep.points()[0] is points[0]  # set up once
    points.clear()  # a caller's list: the cache's own is not changed
    assert len(sweep.points()) == 1
    points = sweep.points()
    assert type(points[0].normalized.methods["h24d_competitor"]) is first

    @dataclass(frozen=True, kw_only=True)
    class Other(IntervalMethod):
        name = "h24d_other"

        def interval(self, stats, level, rng):
            return stats.theta_bar, stats.theta_bar

    plugins.register(Other)  # a new unit: the generation is unchanged
    again = sweep.points()
    assert again[0] is not points[0] and sweep.points()[0] is again[0]
    second = competitor("h24d_competitor", 1.0)
    plugins.register(second)  # the same name, another class: the count is unchanged
    assert type(sweep.points()[0].normalized.methods["h24d_competitor"]) is second
