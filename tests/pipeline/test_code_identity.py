"""Code identity: a store records its units' origins and refuses code that changed since.

The plugin is a real installed distribution (a module and a dist-info folder with its
entry points) in a temporary folder on ``sys.path``, here and on the session cluster's
workers; "the plugin changed" is its file edited (and its version bumped), then
imported afresh everywhere.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from conftest import one_error_line, scheduler, tree_hash, write_sweep

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.code_identity import (
    UNRECORDED,
    code_versions,
    plan_units,
    read_generations,
    sweep_units,
)
from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.partial_cells import footnote, partial
from ldpsim.pipeline.provenance import read_runs
from ldpsim.pipeline.reading import iter_errors
from ldpsim.pipeline.report import unit_origins
from ldpsim.pipeline.summary import summarize
from ldpsim.pipeline.sweep import load_sweep
from ldpsim.tasks import plugins

MODULE = "cv_plugin_units"
PLUGIN_SOURCE = """
from dataclasses import dataclass

from ldpsim.tasks.intervals.base import IntervalMethod

HALF_WIDTH = {half_width}


@dataclass(frozen=True, kw_only=True)
class HalfWidth(IntervalMethod):
    name = "half_width"

    def interval(self, stats, level, rng):
        return stats.theta_bar - HALF_WIDTH, stats.theta_bar + HALF_WIDTH
"""


def _install(site: Path, half_width: str, release: str) -> None:
    """Write (or rewrite) the plugin distribution ``cv-plugin`` in ``site``."""
    (site / f"{MODULE}.py").write_text(PLUGIN_SOURCE.format(half_width=half_width))
    for old in site.glob("cv_plugin-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    info = site / f"cv_plugin-{release}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: cv-plugin\nVersion: {release}\n")
    (info / "entry_points.txt").write_text(f"[ldpsim.methods]\nhalf_width = {MODULE}:HalfWidth\n")


def _use_site(site: str) -> None:
    """In a process (this one or a worker): the plugin as installed in ``site`` now."""
    from ldpsim.tasks import plugins as found
    from ldpsim.tasks.grid_point import _setup_of_token

    if site not in sys.path:
        sys.path.insert(0, site)
    sys.modules.pop(MODULE, None)
    importlib.invalidate_caches()
    found.plugins.cache_clear()
    # A worker keeps its grid points' units built: a fresh worker imports the plugin anew.
    _setup_of_token.cache_clear()


def _leave_site(site: str) -> None:
    from ldpsim.tasks import plugins as found

    while site in sys.path:
        sys.path.remove(site)
    sys.modules.pop(MODULE, None)
    found.plugins.cache_clear()


@pytest.fixture
def plugin_site(tmp_path, local_cluster):
    """The plugin folder, on sys.path here and on the cluster's workers (then removed)."""
    from distributed import Client

    site = tmp_path / "site"
    site.mkdir()
    _install(site, "0.01", "0.1")

    def use() -> None:
        _use_site(str(site))
        with Client(local_cluster.scheduler_address) as client:
            client.run(_use_site, str(site))

    use()
    yield site, use
    _leave_site(str(site))
    with Client(local_cluster.scheduler_address) as client:
        client.run(_leave_site, str(site))


def _sweep_file(tmp_path: Path) -> Path:
    path = write_sweep(tmp_path / "s.toml", replicates=4, grid={"tau": [0.5], "n": [2000]})
    path.write_text(path.read_text() + '[methods.hw]\nmethod = "half_width"\n')
    return path


def test_a_changed_plugin_is_refused_then_accepted_and_marked(
    tmp_path, plugin_site, local_cluster, capsys
):
    site, use = plugin_site
    sweep, store = _sweep_file(tmp_path), tmp_path / "S.zarr"
    run = ["run", str(sweep), "--store", str(store), *scheduler(local_cluster)]
    assert main(run) == 0
    (generation,) = read_generations(xr.open_zarr(store).attrs)
    hw, bb = generation["method:half_width"], generation["method:bb"]
    assert hw["origin"] == "plugin" and (hw["distribution"], hw["version"]) == ("cv-plugin", "0.1")
    assert bb["origin"] == "ldpsim" and len(bb["source_sha256"]) == 64
    assert {"model:quantile", "mechanism:randomized_response"} <= set(generation)

    _install(site, "0.1", "0.2")  # the half-width x10, a new release
    use()
    new_sha = sweep_units(load_sweep(str(sweep), [], None))["method:half_width"]["source_sha256"]
    assert new_sha != hw["source_sha256"]
    before = tree_hash(store)
    capsys.readouterr()
    code = main([*run, "--replicates", "6"])
    line = one_error_line(
        capsys.readouterr(),
        code,
        words=(
            "interval method 'half_width' changed",
            "plugin cv-plugin 0.1, source " + hw["source_sha256"][:8],
            "plugin cv-plugin 0.2, source " + new_sha[:8],
            "--accept-code-change",
        ),
    )
    assert "bb" not in line.split("changed")[0]
    assert tree_hash(store) == before

    assert main([*run, "--replicates", "6", "--accept-code-change"]) == 0
    ds = xr.open_zarr(store)
    versions = ds["code_version"].values.reshape(-1, 6)
    np.testing.assert_array_equal(versions, [[0, 0, 0, 0, 1, 1]])
    _, second = read_generations(ds.attrs)
    assert second["method:half_width"]["version"] == "0.2" and second["method:bb"] == bb
    half = (ds["upper"] - ds["lower"]).sel({"method": "hw"}).values.reshape(6, -1) / 2
    np.testing.assert_allclose(half[:4], 0.01)
    np.testing.assert_allclose(half[4:], 0.1)
    (change,) = read_runs(store)[-1]["code_changes"]
    assert change["unit"] == "method:half_width" and change["code_version"] == 1
    assert (change["old"]["version"], change["new"]["version"]) == ("0.1", "0.2")

    summary = summarize(ds)
    assert int(summary["code_versions"].max()) == 2
    marked = partial(summary, "coverage").any(["tau", "n", "coord"])
    assert marked.sel({"method": "hw"}).item()  # only the changed method's cells
    assert not marked.sel({"method": ["bb", "bm", "oracle"]}).any().item()
    note = footnote(summary, ["coverage"], "text")
    assert note.startswith("* mixes replicates of 2 code versions")
    capsys.readouterr()
    assert main(["summarize", str(store)]) == 0
    out = capsys.readouterr().out
    assert "mixes replicates of 2 code versions" in out and "*" in out
    origins = unit_origins(ds.attrs)
    assert origins["code_changes"] == [
        {
            "code_version": 1,
            "unit": "method half_width",
            "old": f"plugin cv-plugin 0.1, source {hw['source_sha256'][:8]}",
            "new": f"plugin cv-plugin 0.2, source {new_sha[:8]}",
        }
    ]
    assert {
        "kind": "method",
        "name": "bb",
        "origin": f"ldpsim {bb['version']}, source {bb['source_sha256'][:8]}",
    } in origins["units"]


def test_a_store_without_units_records_them_and_new_units_join_the_latest():
    sweep = load_sweep("demo", [("grid.n", [1000])], None)
    plan = plan_units("S.zarr", {}, sweep, accept_code_change=False)
    assert plan.write and plan.code_version == 0 and not plan.changes
    (generation,) = json.loads(plan.attr)
    # A unit the store does not know yet (a new method) joins the latest generation.
    fewer = {k: v for k, v in generation.items() if k != "method:bb"}
    plan = plan_units("S.zarr", {"units": json.dumps([fewer])}, sweep, False)
    assert plan.write and plan.code_version == 0 and json.loads(plan.attr) == [generation]
    # A changed hash is refused, or with the flag recorded as generation 1.
    stale = {**generation, "method:bb": {**generation["method:bb"], "source_sha256": "0" * 64}}
    with pytest.raises(InputError, match=r"interval method 'bb' changed .*source 00000000 ->"):
        plan_units("S.zarr", {"units": json.dumps([stale])}, sweep, False)
    plan = plan_units("S.zarr", {"units": json.dumps([stale])}, sweep, True)
    assert plan.code_version == 1 and [c["unit"] for c in plan.changes] == ["method:bb"]
    assert UNRECORDED == -1 and plugins.registry("method")["bb"].__module__.startswith("ldpsim")


def test_a_worker_that_kept_the_old_code_refuses_to_compute(
    tmp_path, plugin_site, local_cluster, capsys
):
    # A cluster kept up across the edit: its workers imported the old plugin. The store
    # would record the new code for replicates computed with the old one; they fail
    # instead, saying to restart the workers, and nothing is stored as done.
    site, use = plugin_site
    sweep, store = _sweep_file(tmp_path), tmp_path / "S.zarr"
    run = ["run", str(sweep), "--store", str(store), *scheduler(local_cluster)]
    assert main(run) == 0  # the workers import the plugin, version 0.1
    _install(site, "0.1", "0.2")
    _use_site(str(site))  # this process reads the new file; the workers keep the old code
    more = [*run, "--replicates", "6", "--accept-code-change"]
    assert main(more) == 1
    errors = [record["error"] for record in iter_errors(store)]
    assert len(errors) == 2 and all("Restart the workers" in error for error in errors)
    assert all("interval method 'half_width'" in error for error in errors)
    assert int(xr.open_zarr(store)["done"].sum()) == 4
    use()  # the workers restarted, in effect: they import the new file
    assert main(more) == 0
    ds = xr.open_zarr(store)
    np.testing.assert_array_equal(ds["code_version"].values.reshape(-1, 6), [[0] * 4 + [1] * 2])
    half = (ds["upper"] - ds["lower"]).sel({"method": "hw"}).values.reshape(6, -1) / 2
    np.testing.assert_allclose(half[4:], 0.1)


def test_a_change_marks_only_the_cells_whose_units_changed():
    # Generation 1 changed the method hw only: bb's cells of the same grid point, whose
    # model, mechanism and method kept their code, are not mixed.
    unit = {"origin": "ldpsim", "version": "0.2", "source_sha256": "a" * 64}
    first = {k: unit for k in ("model:quantile", "mechanism:laplace", "method:bb")}
    first["method:half_width"] = {**unit, "origin": "plugin", "source_sha256": "b" * 64}
    second = {
        **first,
        "method:half_width": {**first["method:half_width"], "source_sha256": "c" * 64},
    }
    sweep = {"spec": {"model": "quantile", "mechanism": "laplace"}, "grid": {"n": [500]}}
    sweep["methods"] = {"bb": {}, "hw": {"method": "half_width"}}
    ds = xr.Dataset(
        {
            "done": (("n", "rep"), np.ones((1, 4), dtype=bool)),
            "code_version": (("n", "rep"), np.array([[0, 0, 1, 1]], dtype=np.int16)),
        },
        coords={"n": [500], "method": ["bb", "hw"], "rep": np.arange(4)},
        attrs={"sweep": json.dumps(sweep), "units": json.dumps([first, second])},
    )
    versions = code_versions(ds)
    assert versions.sel({"method": "bb"}).item() == 1
    assert versions.sel({"method": "hw"}).item() == 2
