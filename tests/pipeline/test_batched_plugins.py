"""Plugin interval methods with and without a batched path (``intervals_batch``) in one
sweep, through a real installed plugin package and a real Dask run.

The package ``batch-plugin`` (written here, installed with pip into a folder of its own)
has four methods: ``wide``, theta_bar +- 1 by ``interval`` alone, raising
ZeroDivisionError where theta_bar_0 > 0; ``wide_batch``, the same with an
``intervals_batch`` (NaN rows where theta_bar_0 > 0); ``noisy_batch``, which draws from
its stream (theta_bar +- (0.5 + U)) in both ways; and ``wrong_batch``, whose batched
path disagrees with its ``interval``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from conftest import ldpsim_with_site, pip_install

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.sweep import load_sweep
from ldpsim.tasks import plugins, run_replicate

REPLICATES = 12

PLUGIN = '''
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ldpsim.tasks.intervals.base import IntervalMethod


@dataclass(frozen=True, kw_only=True)
class Wide(IntervalMethod):
    """theta_bar +- 1, or a ZeroDivisionError when theta_bar_0 > 0."""

    name = "wide"

    def interval(self, stats, level, rng):
        centre = stats.theta_bar
        if centre[0] > 0:
            return 1 / 0
        return centre - 1.0, centre + 1.0


@dataclass(frozen=True, kw_only=True)
class WideBatch(Wide):
    """Wide, and all of a chunk at once."""

    name = "wide_batch"

    def intervals_batch(self, stats, level, rngs):
        centre = stats.theta_bar.copy()
        centre[centre[:, 0] > 0] = np.nan  # those replicates fail
        return centre - 1.0, centre + 1.0


@dataclass(frozen=True, kw_only=True)
class NoisyBatch(IntervalMethod):
    """theta_bar +- (0.5 + U), U uniform from the method's own stream."""

    name = "noisy_batch"
    uses_rng: ClassVar[bool] = True

    def interval(self, stats, level, rng):
        half = 0.5 + rng.random()
        return stats.theta_bar - half, stats.theta_bar + half

    def intervals_batch(self, stats, level, rngs):
        half = 0.5 + np.array([[rng.random()] for rng in rngs])
        return stats.theta_bar - half, stats.theta_bar + half


@dataclass(frozen=True, kw_only=True)
class WrongBatch(Wide):
    """A batched path that is not the method's: +- 2."""

    name = "wrong_batch"

    def interval(self, stats, level, rng):
        return stats.theta_bar - 1.0, stats.theta_bar + 1.0

    def intervals_batch(self, stats, level, rngs):
        return stats.theta_bar - 2.0, stats.theta_bar + 2.0
'''

PYPROJECT = """
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "batch-plugin"
version = "0.1.0"

[project.entry-points."ldpsim.methods"]
wide = "batch_plugin:Wide"
wide_batch = "batch_plugin:WideBatch"
noisy_batch = "batch_plugin:NoisyBatch"
wrong_batch = "batch_plugin:WrongBatch"

[tool.setuptools]
packages = ["batch_plugin"]
"""

SWEEP = """
description = "plugin methods with and without intervals_batch beside bb and the oracle"
replicates = {replicates}
seed = 8
rep_chunk = 5

[spec]
model = "quantile"
tau = 0.5
eps = 1.0
n = 2000
checkpoints = [500]

[methods.bb]
form = "basic"
B = 50

[methods.oracle]
{more}
"""

METHODS = """
[methods.wide]

[methods.wide_batch]

[methods.noisy_batch]
"""


@pytest.fixture(scope="module")
def batch_site(tmp_path_factory) -> Path:
    """The plugin, installed by pip (code and entry points) into a folder of its own."""
    root = tmp_path_factory.mktemp("batch")
    source = root / "source"
    (source / "batch_plugin").mkdir(parents=True)
    (source / "batch_plugin" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    (source / "pyproject.toml").write_text(PYPROJECT)
    site = root / "site"
    pip_install(source, site)
    return site


@pytest.fixture
def batch_importable(batch_site, monkeypatch):
    """The plugin importable in this process too (the store's verbs read its methods)."""
    monkeypatch.syspath_prepend(str(batch_site))
    plugins.plugins.cache_clear()
    yield
    plugins.plugins.cache_clear()


def test_a_plugin_method_and_a_batched_one_run_in_one_sweep(
    batch_site, batch_importable, tmp_path, capsys
):
    # Before: no intervals_batch; every plugin method ran replicate by replicate. Now
    # wide_batch runs a chunk at once beside wide (one at a time), with the same values
    # and the same failed cells, and noisy_batch draws each replicate's own stream, at
    # the checkpoint its child, as the replicate alone does.
    sweep, store = tmp_path / "batch.toml", tmp_path / "batch.zarr"
    sweep.write_text(SWEEP.format(replicates=REPLICATES, more=METHODS))
    run = ldpsim_with_site(
        ["run", str(sweep), "--store", str(store), "--workers", "1"], batch_site, tmp_path
    )
    assert run.returncode == 1, run.stderr  # method failures
    assert f"Computed {REPLICATES} replicates, 0 failed" in run.stdout
    ds = xr.open_zarr(store, consolidated=False).load()
    assert bool(ds["done"].all()) and not bool(ds["failed"].any())
    wide, wide_batch = (ds.sel({"method": label}) for label in ("wide", "wide_batch"))
    for name in ("lower", "upper", "method_failed"):
        np.testing.assert_array_equal(wide_batch[name].values, wide[name].values, err_msg=name)
    failing = ds["estimate"].values[..., 0] > 0  # (rep, checkpoint)
    assert (wide_batch["method_failed"].values == failing).all()
    assert 2 <= failing[:, -1].sum() <= REPLICATES - 2
    for label in ("bb", "oracle", "noisy_batch"):
        assert not ds["method_failed"].sel({"method": label}).values.any()
    # A batched method's time is its call's, divided evenly among the chunk's
    # replicates (rep_chunk 5); wide's is each replicate's own.
    for start in range(0, REPLICATES, 5):
        chunk = slice(start, start + 5)
        for label, same in (("noisy_batch", True), ("wide", False)):
            seconds = ds["method_seconds"].sel({"method": label}).values[chunk, -1]
            assert (np.unique(seconds).size == 1) == same, (label, seconds)
    # Each failure recorded with the method's own exception: the batched path's failed
    # replicates were computed again by interval().
    capsys.readouterr()
    assert main(["errors", str(store)]) == 1
    errors = capsys.readouterr().out
    assert "ZeroDivisionError" in errors and "wide_batch" in errors
    point = load_sweep(sweep).points()[0]
    noisy = ds.sel({"method": "noisy_batch"})
    for rep in range(REPLICATES):
        alone = run_replicate(point.spec, rep)
        np.testing.assert_array_equal(noisy["lower"].values[rep], alone.lower["noisy_batch"])
        np.testing.assert_array_equal(noisy["upper"].values[rep], alone.upper["noisy_batch"])
    half = (noisy["upper"] - noisy["lower"]).values / 2
    assert ((half > 0.5) & (half < 1.5)).all() and np.unique(half).size == half.size


def test_a_batched_path_that_disagrees_is_refused_in_one_line(batch_site, tmp_path):
    sweep, store = tmp_path / "wrong.toml", tmp_path / "wrong.zarr"
    sweep.write_text(SWEEP.format(replicates=4, more="[methods.wrong_batch]\n"))
    run = ldpsim_with_site(["run", str(sweep), "--store", str(store)], batch_site, tmp_path)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, lines
    for words in ("'wrong_batch'", "intervals_batch disagrees with its interval", "replicate 0"):
        assert words in lines[0], lines[0]
    assert not store.exists()
