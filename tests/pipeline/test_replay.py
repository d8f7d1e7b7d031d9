"""Errors a researcher can act on: grid points by their values, a failure replayed in
process, a plugin's bug in one line, and the hint for a script without a __main__ guard.

The failures are real: c = 1e308 makes every SGD run overflow (the replicate fails with
NonFiniteRun), and a checkpoint at n = 3 is too early for bb's two blocks (the method
fails there, the replicate is kept).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from conftest import one_error_line, scheduler, write_sweep

from ldpsim.pipeline import api
from ldpsim.pipeline.cli import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, main
from ldpsim.pipeline.clusters import unguarded_main_script
from ldpsim.pipeline.failures import GridNames
from ldpsim.tasks import plugins

#: Two grid points: c = 1 runs, c = 1e308 overflows at the first step.
DIVERGING = {"grid": {"c": [1.0, 1e308]}, "spec": {"n": "1000"}}
#: Two grid points whose bb fails at the checkpoint n = 3 (one block) in every replicate.
EARLY = {"grid": {"tau": [0.5, 0.9]}, "spec": {"n": "1000", "checkpoints": "[3]"}}


def _store(tmp_path_factory, cluster, name: str, layout: dict) -> Path:
    folder = tmp_path_factory.mktemp(name)
    # One replicate per chunk: a grid point's failures come from two task keys.
    sweep = write_sweep(folder / f"{name}.toml", replicates=2, rep_chunk=1, **layout)
    store = folder / f"{name}.zarr"
    code = main(["run", str(sweep), "--store", str(store), *scheduler(cluster)])
    assert code == EXIT_FAILED
    return store


@pytest.fixture(scope="module")
def diverging(tmp_path_factory, local_cluster) -> Path:
    return _store(tmp_path_factory, local_cluster, "diverging", DIVERGING)


@pytest.fixture(scope="module")
def early(tmp_path_factory, local_cluster) -> Path:
    return _store(tmp_path_factory, local_cluster, "early", EARLY)


def _record(store: Path, name: str) -> dict:
    return json.loads((store / "ldpsim" / "errors" / name).read_bytes())


def test_errors_names_grid_points_by_their_values(diverging, capsys):
    assert main(["errors", str(diverging)]) == EXIT_FAILED
    out = capsys.readouterr().out
    # Both replicates, recorded by two tasks, under the grid point's values.
    assert "where: c = 1e+308: rep 0-1\n" in out, out
    assert "ldpsim-" not in out
    assert f"ldpsim replay {diverging} --rep R" in out
    names = GridNames.of({"tau": [0.5, 0.9], "n": [10_000, 100_000]})
    assert names.name_of_key("ldpsim-d064dd1e-1-0-c0") == "tau = 0.9, n = 1e4"
    assert names.name_of_key("not a key") == "not a key"


def test_replay_raises_the_recorded_failure_again(diverging, capsys):
    # One grid point failed: no --point needed.
    assert main(["replay", str(diverging), "--rep", "1"]) == EXIT_FAILED
    captured = capsys.readouterr()
    record = _record(diverging, "1__1.json")
    assert record["error"].startswith("NonFiniteRun: non-finite theta_bar")
    first = captured.out.splitlines()[0]
    assert first.startswith(f"Replaying {diverging}/ldpsim/errors/1__1.json (replicate failure")
    assert "rep 1 at c = 1e+308, seed 7" in first
    assert "The replicate failed again, with the recorded error." in captured.out
    lines = captured.err.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == f"ldpsim.tasks.diagnose.{record['error']}"


def test_replay_of_a_good_replicate_gives_its_stored_values(diverging, capsys):
    result = api.replay(diverging, rep=1, point={"c": "1"})
    assert "no failure is recorded for it" in capsys.readouterr().out
    ds = xr.open_zarr(diverging, consolidated=False).sel(c=1.0, rep=1)
    np.testing.assert_array_equal(result.estimate, ds["estimate"].values, strict=True)
    oracle = ds.sel({"method": "oracle"})
    np.testing.assert_array_equal(result.lower["oracle"], oracle["lower"].values)
    assert main(["replay", str(diverging), "--rep", "0", "--point", "c=1.0"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "rep 0: done in" in out and "oracle" in out


def test_replay_under_pdb_enters_the_debugger_where_it_failed(diverging, capsys, monkeypatch):
    import pdb

    seen = []
    monkeypatch.setattr(pdb, "post_mortem", seen.append)
    assert main(["replay", str(diverging), "--rep", "0", "--pdb"]) == EXIT_FAILED
    (tb,) = seen
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_frame.f_code.co_filename.endswith("replicate.py")  # raise NonFiniteRun
    assert capsys.readouterr().err.count("Traceback") == 1  # printed once, before pdb


def test_replay_refuses_bad_input_in_one_line(diverging, capsys):
    for argv, words in (
        (["--rep", "2"], ("'rep' parameter of replay", "[0, 1]")),
        (["--rep", "0", "--point", "tau=0.5"], ("no grid axis 'tau'", "axes are: c")),
        (["--rep", "0", "--point", "c=3"], ("has no value '3'", "values are: 1, 1e+308")),
        (["--rep", "0", "--point", "c"], ("--point expects AXIS=VALUE",)),
    ):
        code = main(["replay", str(diverging), *argv])
        one_error_line(capsys.readouterr(), code, words, EXIT_BAD_INPUT)


def test_replay_of_a_method_failure_raises_the_methods_own_error(early, capsys):
    # Both grid points failed: the choices, in one line.
    code = main(["replay", str(early), "--rep", "0"])
    line = one_error_line(capsys.readouterr(), code, ("2 grid points with a recorded failure",))
    assert "--point tau=0.5 | --point tau=0.9" in line
    assert main(["replay", str(early), "--rep", "1", "--point", "tau=0.9"]) == EXIT_FAILED
    captured = capsys.readouterr()
    recorded = _record(early, "1__1.json")["methods"]["bb"]
    assert recorded == "ValueError at n = 3: bb needs at least 2 blocks; n = 3 gives 1."
    assert "The method bb failed again, with the recorded error." in captured.out
    assert captured.err.strip().splitlines()[-1] == "ValueError: " + recorded.split(": ", 1)[1]


PLUGIN = """
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.models.base import Model


@njit(inline="always")
def _zero_gradient(d, theta, params, s, g):
    g[0] = 0.0
    return s


@dataclass(frozen=True, kw_only=True)
class Typo(Model):
    name = "typo_params"
    sample_gradient = _zero_gradient

    @property
    def dim(self):
        return 1

    def params(self):
        return np.zeros(self.gradient_rnge())  # the typo

    def truth(self):
        return np.zeros(1)

    def jacobian(self):
        return np.eye(1)

    def gradient_cov(self):
        return np.eye(1)


@dataclass(frozen=True, kw_only=True)
class Shaky(Typo):
    name = "shaky_init"

    def __post_init__(self):
        _check(self)


def _check(model):
    return 1 / 0
"""


@pytest.fixture
def typo_site(tmp_path, monkeypatch) -> Path:
    """An installed distribution (a dist-info folder) of the models above, importable."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "replay_units.py").write_text(PLUGIN)
    info = site / "replay_units-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: replay-units\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[ldpsim.models]\ntypo_params = replay_units:Typo\nshaky_init = replay_units:Shaky\n"
    )
    monkeypatch.syspath_prepend(str(site))
    plugins.plugins.cache_clear()
    yield site
    plugins.plugins.cache_clear()


def test_a_plugins_bug_is_one_line_naming_its_file_and_line(typo_site, tmp_path, capsys):
    lines = PLUGIN.splitlines()
    typo = next(i for i, text in enumerate(lines, 1) if "# the typo" in text)
    zero = next(i for i, text in enumerate(lines, 1) if "1 / 0" in text)
    store = tmp_path / "typo.zarr"
    for model, words in (
        (
            "typo_params",
            (
                "The model plugin 'typo_params' (replay_units:Typo, from replay-units 1.0)",
                f"Typo.params raised AttributeError at {typo_site / 'replay_units.py'}, "
                f"line {typo}: 'Typo' object has no attribute 'gradient_rnge'.",
            ),
        ),
        (
            "shaky_init",
            (
                "The model plugin 'shaky_init' (replay_units:Shaky",
                f"Shaky.__post_init__ (in _check) raised ZeroDivisionError at "
                f"{typo_site / 'replay_units.py'}, line {zero}: division by zero, at the grid "
                "point n = 1000.",
            ),
        ),
    ):
        sweep = write_sweep(
            tmp_path / f"{model}.toml",
            grid={"n": [1000]},
            spec={"model": f'"{model}"', "eps": "inf", "mechanism": '"none"'},
        )
        code = main(["run", str(sweep), "--store", str(store)])
        one_error_line(capsys.readouterr(), code, words, EXIT_BAD_INPUT)
        assert not store.exists()
    # An exception of ldpsim's own code (or the caller's) is not blamed on a plugin.
    try:
        _ = 1 / 0
    except ZeroDivisionError as exc:
        assert plugins.plugin_code_error(exc) is None


SCRIPT = """
import sys

from ldpsim.pipeline import api

sweep = api.load_sweep("demo", replicates=1, grid__n=[1000], grid__tau=[0.5])
try:
    api.run(sweep, {store!r}, workers=1, start_timeout=20, progress=False)
except api.InputError as exc:
    print("ERROR", exc)
    sys.exit(2)
"""


def test_a_script_without_a_main_guard_gets_the_hint(tmp_path):
    # pytest's own main module is guarded (or a package's __main__): no hint here.
    assert unguarded_main_script() is None
    script, store = tmp_path / "unguarded.py", tmp_path / "x.zarr"
    script.write_text(textwrap.dedent(SCRIPT.format(store=str(store))))
    env = {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stdout.splitlines() if line.startswith("ERROR")]
    assert any(
        "The local cluster could not start" in line
        and 'put the call under `if __name__ == "__main__":`' in line
        and str(script) in line
        for line in errors
    ), done.stdout
    assert not store.exists()
