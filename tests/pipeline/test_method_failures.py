"""A failing interval method costs only its own bounds, through a real installed plugin.

The plugin package ``flaky-plugin`` (written here, installed with pip into a folder of its
own) adds the interval method ``flaky``, which raises ZeroDivisionError whenever
theta_bar_n > 0: at tau = 0.5 (theta* = 0) in about half the replicates. Every replicate
must still be done, bb's and the oracle's bounds finite everywhere, the run's exit code 1,
and the summary must count flaky's failures and mark its cells.
"""

from __future__ import annotations

import csv
import io
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from conftest import ldpsim_with_site, pip_install

from ldpsim.pipeline.cli import main
from ldpsim.tasks import plugins

REPLICATES = 16

PLUGIN = '''
from dataclasses import dataclass

from ldpsim.tasks.intervals.base import IntervalMethod


@dataclass(frozen=True, kw_only=True)
class Flaky(IntervalMethod):
    """theta_bar +- 1, or a ZeroDivisionError when theta_bar_0 > 0."""

    name = "flaky"

    def interval(self, stats, level, rng):
        centre = stats.theta_bar
        if centre[0] > 0:
            return 1 / 0
        return centre - 1.0, centre + 1.0
'''

PYPROJECT = """
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "flaky-plugin"
version = "0.1.0"

[project.entry-points."ldpsim.methods"]
flaky = "flaky_plugin:Flaky"

[tool.setuptools]
packages = ["flaky_plugin"]
"""

SWEEP = """
description = "bb and the oracle beside a method that fails in half the replicates"
replicates = {replicates}
seed = 5
{more}
[spec]
model = "quantile"
tau = 0.5
eps = 1.0
n = 2000

[methods.bb]
form = "basic"
B = 50

[methods.oracle]

[methods.flaky]
"""


@pytest.fixture(scope="module")
def flaky_site(tmp_path_factory) -> Path:
    """The plugin, installed by pip (code and entry points) into a folder of its own."""
    root = tmp_path_factory.mktemp("flaky")
    source = root / "source"
    (source / "flaky_plugin").mkdir(parents=True)
    (source / "flaky_plugin" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    (source / "pyproject.toml").write_text(PYPROJECT)
    site = root / "site"
    pip_install(source, site)
    return site


@pytest.fixture
def flaky_importable(flaky_site, monkeypatch):
    """The plugin importable in this process too (the store's verbs read its methods)."""
    monkeypatch.syspath_prepend(str(flaky_site))
    plugins.plugins.cache_clear()
    yield
    plugins.plugins.cache_clear()


def test_a_failing_plugin_method_loses_only_its_own_bounds(
    flaky_site, flaky_importable, tmp_path, capsys
):
    sweep, store = tmp_path / "flaky.toml", tmp_path / "flaky.zarr"
    sweep.write_text(SWEEP.format(replicates=REPLICATES, more=""))
    run = ldpsim_with_site(
        ["run", str(sweep), "--store", str(store), "--workers", "1"], flaky_site, tmp_path
    )
    assert run.returncode == 1, run.stderr
    assert f"Computed {REPLICATES} replicates, 0 failed" in run.stdout
    ds = xr.open_zarr(store, consolidated=False)
    assert bool(ds["done"].all()) and not bool(ds["failed"].any())
    flaky = ds["method_failed"].sel({"method": "flaky"}).values
    # theta_bar_0 > 0 exactly where flaky failed: about half of 16 (binomial, p = 1/2).
    assert (flaky == (ds["estimate"].values[:, 0] > 0)).all()
    assert 2 <= flaky.sum() <= REPLICATES - 2
    for method in ("bb", "oracle"):
        bounds = ds[["lower", "upper"]].sel({"method": method})
        assert np.isfinite(bounds["lower"].values).all() and np.isfinite(bounds["upper"]).all()
        assert not ds["method_failed"].sel({"method": method}).values.any()
    failures = int(flaky.sum())
    assert f"Interval methods failed: flaky in {failures} replicates" in run.stdout

    # Each failure recorded once, grouped: one block, its count and the traceback.
    capsys.readouterr()
    assert main(["errors", str(store)]) == 1
    errors = capsys.readouterr().out
    assert errors.count("--- ") == 1
    assert f"--- {failures} method flaky failures with this traceback" in errors
    assert "ZeroDivisionError" in errors and "flaky_plugin" in errors

    # The summary counts them in flaky's cells, which it marks; --strict exits 1.
    assert main(["summarize", str(store), "--format", "csv"]) == 0
    rows = {r["method"]: r for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert rows["flaky"]["n_done"] == str(REPLICATES - failures)
    assert rows["flaky"]["n_failed"] == str(failures)
    assert (rows["bb"]["n_done"], rows["bb"]["n_failed"]) == (str(REPLICATES), "0")
    assert main(["summarize", str(store), "--strict"]) == 1
    text = capsys.readouterr()
    assert "--strict" in text.err
    flaky_row = next(line for line in text.out.splitlines() if line.startswith("flaky "))
    assert flaky_row.rstrip().endswith("*")
    assert f"{REPLICATES - failures} counted, {failures} lost" in text.out

    # --max-failures stops the sweep at the first grid point with that many failures:
    # of 1,000 tasks of 2 replicates, those not started when the first failures arrive
    # are cancelled. What finished is kept.
    many, stopped = tmp_path / "many.toml", tmp_path / "stopped.zarr"
    many.write_text(SWEEP.format(replicates=2000, more="rep_chunk = 2"))
    args = ["run", str(many), "--store", str(stopped), "--workers", "1", "--max-failures", "3"]
    stop = ldpsim_with_site(args, flaky_site, tmp_path)
    assert stop.returncode == 1, stop.stderr
    assert "Stopped: " in stop.stdout and "failed (--max-failures 3)" in stop.stdout
    kept = xr.open_zarr(stopped, consolidated=False)
    assert 3 <= int(kept["done"].sum()) < 1000
    assert int(kept["method_failed"].sel({"method": "flaky"}).sum()) >= 3
    # The message counts what the store holds, the chunks that finished as the run
    # stopped included (before: those were written but not counted, "3" for a store of 4).
    said = int(re.search(r"Stopped: (\d+) replicates of the only grid", stop.stdout).group(1))
    failed = kept["failed"] | kept["method_failed"].any("method")
    assert said == int(failed.sum()) >= 3, stop.stdout


def test_the_failure_limit_counts_the_chunks_that_finish_as_the_run_stops():
    # A hunt (2026-12-01): --max-failures 5 said "Stopped: 6 replicates ... failed" where
    # the store ended with 8: the chunks drained after the limit was reached were written
    # but not counted. Now the message counts every chunk taken, before and after.
    from ldpsim.pipeline.compute.failures import GridNames
    from ldpsim.pipeline.compute.plan import Work
    from ldpsim.pipeline.compute.runner import FailureLimit
    from ldpsim.pipeline.sweep import GridPoint

    point = GridPoint(index=(0,), values={"n": 1000}, spec={}, normalized=None)
    limit = FailureLimit(5)

    def chunk(failed_reps: list[int], reps: int = 4) -> dict[str, np.ndarray]:
        failed = np.zeros(reps, dtype=bool)
        method_failed = np.zeros((1, reps, 2), dtype=bool)  # (checkpoint, rep, method)
        method_failed[0, failed_reps, 1] = True
        failed[failed_reps[:1]] = True  # a replicate that failed whole counts once
        return {"failed": failed, "method_failed": method_failed}

    work = Work(point=point, index=(0,), chunk=0, reps=[0, 1, 2, 3], key="w")
    limit.add(work, chunk([0, 1, 2]))
    assert limit.reached is None
    limit.add(work, chunk([0, 1, 2]))  # 6 >= 5: reached here
    assert limit.reached is work
    limit.add(work, chunk([3]))  # finished as the run stopped: written, and counted
    assert limit.counts[(0,)] == 7
    # Named by the store's axes, as `errors` and `status` name it: n = 5e2 beside 2e3.
    names = GridNames.of({"n": [500, 2000]})
    assert limit.message(0, names).startswith("Stopped: 7 replicates of n = 5e2 failed")
