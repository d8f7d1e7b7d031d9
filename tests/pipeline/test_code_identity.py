"""Code identity: a store records its units' origins and refuses code that changed since.

The plugin is a real installed distribution (a module, or a package, and a dist-info
folder with its entry points) in a temporary folder on ``sys.path``, here and on the
session cluster's workers; "the plugin changed" is a file of it edited (and its version
bumped, or not), then imported afresh everywhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import inspect
import json
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from conftest import edit_root_attrs, one_error_line, scheduler, tree_hash, write_sweep

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.report.report import unit_origins
from ldpsim.pipeline.store.code_identity import (
    UNRECORDED,
    code_versions,
    package_files,
    package_sha256,
    plan_units,
    read_generations,
    sweep_units,
)
from ldpsim.pipeline.store.provenance import read_runs
from ldpsim.pipeline.store.reading import iter_errors
from ldpsim.pipeline.summary.partial_cells import footnote, partial
from ldpsim.pipeline.summary.summary import summarize
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
    _dist_info(site, "cv-plugin", release, f"half_width = {MODULE}:HalfWidth")


def _dist_info(
    site: Path, name: str, version: str, entry_point: str = "", record: list[str] | None = None
) -> Path:
    """A distribution's metadata folder in ``site``, as pip writes one: METADATA, the
    ``ldpsim.methods`` entry point ``entry_point`` ("name = module:Class") where given,
    and a RECORD of the files ``record`` (and of itself) where given."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if entry_point:
        (info / "entry_points.txt").write_text(f"[ldpsim.methods]\n{entry_point}\n")
    if record is not None:
        listed = [*record, f"{info.name}/METADATA", f"{info.name}/RECORD"]
        (info / "RECORD").write_text("".join(f"{file},,\n" for file in listed))
    return info


def _use_site(site: str) -> None:
    """In a process (this one or a worker): the plugin as installed in ``site`` now."""
    from ldpsim.tasks import plugins as found
    from ldpsim.tasks.grid_point import _setup_of_token

    if site not in sys.path:
        sys.path.insert(0, site)
    for name in [m for m in sys.modules if m.startswith("cv_plugin")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    found.plugins.cache_clear()
    # A worker keeps its grid points' units built: a fresh worker imports the plugin anew.
    _setup_of_token.cache_clear()


def _leave_site(site: str) -> None:
    from ldpsim.tasks import plugins as found

    while site in sys.path:
        sys.path.remove(site)
    for name in [m for m in sys.modules if m.startswith("cv_plugin")]:
        del sys.modules[name]
    found.plugins.cache_clear()


@contextlib.contextmanager
def _on_cluster(site: Path, local_cluster) -> Iterator[Callable[[], None]]:
    """``site`` on sys.path here and on the cluster's workers (then removed); gives the
    function that imports its plugins afresh everywhere."""
    from distributed import Client

    def use() -> None:
        _use_site(str(site))
        with Client(local_cluster.scheduler_address) as client:
            client.run(_use_site, str(site))

    use()
    try:
        yield use
    finally:
        _leave_site(str(site))
        with Client(local_cluster.scheduler_address) as client:
            client.run(_leave_site, str(site))


@pytest.fixture
def plugin_site(tmp_path, local_cluster):
    """The plugin folder, on sys.path here and on the cluster's workers (then removed)."""
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "0.01", "0.1")
    with _on_cluster(site, local_cluster) as use:
        yield site, use


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
    new = sweep_units(load_sweep(str(sweep), [], None))["method:half_width"]
    new_sha, new_package = new["source_sha256"], new["package_sha256"]
    assert new_sha != hw["source_sha256"] and new_package != hw["package_sha256"]
    old_text = f"source {hw['source_sha256'][:8]}, package {hw['package_sha256'][:8]}"
    new_text = f"source {new_sha[:8]}, package {new_package[:8]}"
    before = tree_hash(store)
    capsys.readouterr()
    code = main([*run, "--replicates", "6"])
    line = one_error_line(
        capsys.readouterr(),
        code,
        words=(
            "interval method 'half_width' changed",
            f"plugin cv-plugin 0.1, {old_text}",
            f"plugin cv-plugin 0.2, {new_text}",
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
            "old": f"plugin cv-plugin 0.1, {old_text}",
            "new": f"plugin cv-plugin 0.2, {new_text}",
        }
    ]
    assert {
        "kind": "method",
        "name": "bb",
        "origin": f"ldpsim {bb['version']}, source {bb['source_sha256'][:8]}",
    } in origins["units"]


PACKAGE = "cv_plugin_pkg"
#: A plugin package whose method's module imports its half-width from a helper module.
PACKAGE_FILES = {
    "__init__.py": '"""A plugin whose method reads its half-width from a helper module."""\n',
    "units.py": """
from dataclasses import dataclass

from ldpsim.tasks.intervals.base import IntervalMethod

from cv_plugin_pkg.widths import HALF_WIDTH

SCALE = {scale}


@dataclass(frozen=True, kw_only=True)
class PackageHalfWidth(IntervalMethod):
    name = "package_half_width"

    def interval(self, stats, level, rng):
        return stats.theta_bar - SCALE * HALF_WIDTH, stats.theta_bar + SCALE * HALF_WIDTH
""",
    "widths.py": "HALF_WIDTH = {half_width}\n",
}


def _install_package(site: Path, half_width: str, scale: str) -> None:
    """Write (or rewrite) the plugin distribution ``cv-plugin-pkg`` 0.1 in ``site``."""
    folder = site / PACKAGE
    folder.mkdir(exist_ok=True)
    for name, text in PACKAGE_FILES.items():
        (folder / name).write_text(text.format(half_width=half_width, scale=scale))
    # An edit that keeps a file's size within its second would not be recompiled.
    shutil.rmtree(folder / "__pycache__", ignore_errors=True)
    _dist_info(
        site, "cv-plugin-pkg", "0.1", f"package_half_width = {PACKAGE}.units:PackageHalfWidth"
    )


@pytest.fixture
def package_site(tmp_path, local_cluster):
    """The plugin package's folder, on sys.path here and on the cluster's workers."""
    site = tmp_path / "site"
    site.mkdir()
    _install_package(site, "0.02", "1")
    with _on_cluster(site, local_cluster) as use:
        yield site, use


def test_an_edited_helper_module_of_a_plugin_is_a_new_code_version(
    tmp_path, package_site, local_cluster, capsys
):
    # Issue 40, items 9 and 8: editing a module that a plugin imports from its package
    # is a change of its code, as editing its own module is; a store of an ldpsim that
    # did not hash the package resumes unrefused; and the footnote counts every version
    # that computed a cell.
    site, use = package_site
    sweep = write_sweep(tmp_path / "s.toml", replicates=4, grid={"tau": [0.5], "n": [2000]})
    sweep.write_text(sweep.read_text() + '[methods.phw]\nmethod = "package_half_width"\n')
    store = tmp_path / "S.zarr"
    run = ["run", str(sweep), "--store", str(store), *scheduler(local_cluster)]
    assert main(run) == 0

    # The store as an ldpsim without package hashes wrote it: the plugin known by the
    # file of its module, the same hash as now (bb by its module and the helpers it
    # names: test_a_built_in_units_source_covers_the_helper_modules_it_names).
    (generation,) = read_generations(xr.open_zarr(store).attrs)
    file = Path(inspect.getsourcefile(plugins.registry("method")["package_half_width"]))
    digest = hashlib.sha256(file.read_bytes()).hexdigest()
    assert generation["method:package_half_width"]["source_sha256"] == digest
    older = {key: dict(origin) for key, origin in generation.items()}
    assert older["method:package_half_width"].pop("package_sha256")
    assert not any("package_sha256" in origin for origin in older.values())
    edit_root_attrs(store, units=json.dumps([older], sort_keys=True))
    assert main([*run, "--replicates", "6"]) == 0  # resumed, unrefused; the hash recorded
    (generation,) = read_generations(xr.open_zarr(store).attrs)
    unit = generation["method:package_half_width"]
    source, package = unit["source_sha256"], unit["package_sha256"]

    # The helper edited (the half-width 0.02 -> 0.06), the method's own file not.
    _install_package(site, "0.06", "1")
    _use_site(str(site))  # in this process; the workers keep the helper they imported
    new_package = sweep_units(load_sweep(str(sweep), [], None))["method:package_half_width"]
    assert new_package["source_sha256"] == source != new_package["package_sha256"] != package
    before = tree_hash(store)
    capsys.readouterr()
    code = main([*run, "--replicates", "8"])
    one_error_line(
        capsys.readouterr(),
        code,
        words=(
            "interval method 'package_half_width' changed",
            f"(plugin cv-plugin-pkg 0.1, source {source[:8]}, package {package[:8]} -> "
            f"plugin cv-plugin-pkg 0.1, source {source[:8]}, package "
            f"{new_package['package_sha256'][:8]})",
        ),
    )
    assert tree_hash(store) == before
    # Accepted, but the workers run the old helper: they refuse to compute with it.
    more = [*run, "--replicates", "8", "--accept-code-change"]
    assert main(more) == 1
    errors = [record["error"] for record in iter_errors(store)]
    assert len(errors) == 2 and all("Restart the workers" in error for error in errors)
    assert all(f"source {source[:8]}, package {package[:8]})" in error for error in errors)
    use()  # the workers restarted, in effect
    assert main(more) == 0
    _install_package(site, "0.06", "2")  # now the method's own file: twice the half-width
    use()
    assert main([*run, "--replicates", "10", "--accept-code-change"]) == 0

    ds = xr.open_zarr(store)
    versions = ds["code_version"].values.reshape(-1)
    np.testing.assert_array_equal(versions, [0] * 6 + [1] * 2 + [2] * 2)
    half = (ds["upper"] - ds["lower"]).sel({"method": "phw"}).values.reshape(10, -1) / 2
    np.testing.assert_allclose(half[:6], 0.02)
    np.testing.assert_allclose(half[6:8], 0.06)
    np.testing.assert_allclose(half[8:], 0.12)
    # The footnote's count is the number of generations that computed the cell.
    summary = summarize(ds)
    assert int(summary["code_versions"].sel({"method": "phw"}).max()) == len(set(versions)) == 3
    assert int(summary["code_versions"].sel({"method": "bb"}).max()) == 1
    assert footnote(summary, ["coverage"], "text").startswith(
        "* mixes replicates of 3 code versions"
    )


def test_a_plugin_package_is_its_folder_and_what_its_distribution_lists(tmp_path):
    # A plugin module at the top level of site-packages, beside a helper module of its
    # distribution, the finder of an editable install and another distribution's module.
    site = tmp_path / "site"
    site.mkdir()
    files = {
        "cv_plugin_single.py": "from cv_plugin_helpers import W\n\nclass Single:\n    w = W\n",
        "cv_plugin_helpers.py": "W = 0.1\n",
        "__editable___cv_plugin_single_0_1_finder.py": "MAPPING = {'x': '/home/a/checkout'}\n",
        "cv_plugin_other.py": "OTHER = 1\n",
    }
    for name, text in files.items():
        (site / name).write_text(text)
    _dist_info(site, "cv-plugin-single", "0.1", record=list(files)[:3])
    _use_site(str(site))
    try:
        single = importlib.import_module("cv_plugin_single").Single
        found = package_files(single, "cv-plugin-single")
        assert sorted(found) == ["cv_plugin_helpers.py", "cv_plugin_single.py"]
        first = package_sha256(single, "cv-plugin-single")
        for name in ("__editable___cv_plugin_single_0_1_finder.py", "cv_plugin_other.py"):
            (site / name).write_text(files[name] + "# edited\n")
        assert package_sha256(single, "cv-plugin-single") == first  # none of its code
        (site / "cv_plugin_helpers.py").write_text("W = 0.3\n")
        assert package_sha256(single, "cv-plugin-single") != first
    finally:
        _leave_site(str(site))


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


def _two_generations(first: dict, second: dict) -> xr.Dataset:
    """A store's variables for ``code_versions``: one grid point (quantile, laplace, n =
    500), methods bb and hw (a plugin ``half_width``), replicates 0-1 of the units'
    generation ``first`` and 2-3 of ``second``."""
    sweep = {"spec": {"model": "quantile", "mechanism": "laplace"}, "grid": {"n": [500]}}
    sweep["methods"] = {"bb": {}, "hw": {"method": "half_width"}}
    return xr.Dataset(
        {
            "done": (("n", "rep"), np.ones((1, 4), dtype=bool)),
            "code_version": (("n", "rep"), np.array([[0, 0, 1, 1]], dtype=np.int16)),
        },
        coords={"n": [500], "method": ["bb", "hw"], "rep": np.arange(4)},
        attrs={"sweep": json.dumps(sweep), "units": json.dumps([first, second])},
    )


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
    store = _two_generations(first, second)
    versions = code_versions(store)
    assert versions.sel({"method": "bb"}).item() == 1
    assert versions.sel({"method": "hw"}).item() == 2
    # A grid axis of strings, as a store reads it (an object array of str; a hunt,
    # 2026-12-01: AttributeError, str has no .item()).
    mechanisms = ["laplace", "randomized_response"]
    sweep = json.loads(store.attrs["sweep"])
    by_mechanism = {**sweep, "spec": {"model": "quantile"}, "grid": {"mechanism": mechanisms}}
    ds = xr.Dataset(
        {
            "done": (("mechanism", "rep"), np.ones((2, 4), dtype=bool)),
            "code_version": (("mechanism", "rep"), np.array([[0, 0, 1, 1]] * 2, np.int16)),
        },
        coords={
            "mechanism": np.array(mechanisms, dtype=object),
            "method": ["bb", "hw"],
            "rep": np.arange(4),
        },
        attrs={"sweep": json.dumps(by_mechanism), "units": json.dumps([first, second])},
    )
    versions = code_versions(ds)
    assert versions.sel({"mechanism": "laplace"}).values.tolist() == [1, 2]


def test_a_built_in_units_source_covers_the_helper_modules_it_names(tmp_path, monkeypatch):
    """bb's identity covers its compiled intervals, quantiles and multiplier laws
    (``source_modules``): an edit of any is a new code version; a unit that names none
    hashes its own module's file alone, as stores have always recorded it."""
    from ldpsim.pipeline.store.code_identity import unit_origin
    from ldpsim.tasks.intervals.batch_means import BatchMeans
    from ldpsim.tasks.intervals.bootstrap import BlockBootstrap

    def file_sha256(cls: type) -> str:
        return hashlib.sha256(Path(inspect.getsourcefile(cls)).read_bytes()).hexdigest()

    assert unit_origin(BatchMeans)["source_sha256"] == file_sha256(BatchMeans)
    assert unit_origin(BlockBootstrap)["source_sha256"] != file_sha256(BlockBootstrap)
    assert BlockBootstrap.source_modules == (
        "ldpsim.tasks.intervals.bootstrap_bounds",
        "ldpsim.tasks.quantiles",
        "ldpsim.tasks.streams.multipliers",
    )
    # A unit of its own whose helper module is edited.
    (tmp_path / "identity_helper.py").write_text("SCALE = 1.0\n")
    (tmp_path / "identity_unit.py").write_text(
        "import identity_helper\n\n\nclass Unit:\n    source_modules = ('identity_helper',)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    unit = importlib.import_module("identity_unit").Unit
    before = unit_origin(unit)["source_sha256"]
    (tmp_path / "identity_helper.py").write_text("SCALE = 2.0\n")
    assert unit_origin(unit)["source_sha256"] != before


def test_a_units_source_hash_is_its_file_then_each_named_helper(tmp_path, monkeypatch):
    """The recorded ``source_sha256`` is pinned: the unit's file, then for every module of
    ``source_modules`` (the second too) a NUL, its name, a NUL and its file. Another
    formula would refuse every store written before it as changed code; one that skips a
    helper would keep the code version across an edit of it (a mutation hunt,
    2026-12-02: both passed the tests)."""
    from ldpsim.pipeline.store.code_identity import unit_origin

    files = {
        "pinned_helper_a.py": "A = 1.0\n",
        "pinned_helper_b.py": "B = 1.0\n",
        "pinned_unit.py": (
            "import pinned_helper_a, pinned_helper_b\n\n\nclass Unit:\n"
            "    source_modules = ('pinned_helper_a', 'pinned_helper_b')\n"
        ),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    unit = importlib.import_module("pinned_unit").Unit

    def expected() -> str:
        data = (tmp_path / "pinned_unit.py").read_bytes()
        for name in unit.source_modules:
            data += b"\0" + name.encode() + b"\0" + (tmp_path / f"{name}.py").read_bytes()
        return hashlib.sha256(data).hexdigest()

    before = unit_origin(unit)["source_sha256"]
    assert before == expected()
    (tmp_path / "pinned_helper_b.py").write_text("B = 2.0\n")  # the last helper named
    after = unit_origin(unit)["source_sha256"]
    assert after == expected() != before


def test_a_plugins_package_hash_covers_its_subpackages_and_its_listed_modules(tmp_path):
    """A plugin's ``package_sha256`` as a run records it (:func:`unit_origin`) changes
    with an edit of a module in a subpackage of its package, and of a top-level module
    that its distribution's RECORD lists (a mutation hunt, 2026-12-02: a hash that
    walked no subfolder, or read no RECORD, passed the tests)."""
    from ldpsim.pipeline.store.code_identity import unit_origin

    site = tmp_path / "site"
    folder = site / "cv_plugin_deep"
    (folder / "sub").mkdir(parents=True)
    files = {
        "cv_plugin_deep/__init__.py": "",
        "cv_plugin_deep/sub/__init__.py": "",
        "cv_plugin_deep/sub/helper.py": "W = 0.1\n",
        "cv_plugin_deep/units.py": PLUGIN_SOURCE.format(half_width="0.01")
        .replace("HalfWidth", "DeepHalfWidth")
        .replace('"half_width"', '"deep_half_width"'),
        "cv_plugin_deep_extra.py": "X = 1\n",
    }
    for name, text in files.items():
        (site / name).write_text(text)
    # As an editable install lists it: the package's folder is not in its RECORD.
    entry = "deep_half_width = cv_plugin_deep.units:DeepHalfWidth"
    _dist_info(site, "cv-plugin-deep", "0.1", entry, record=["cv_plugin_deep_extra.py"])
    _use_site(str(site))
    try:
        unit = plugins.registry("method")["deep_half_width"]
        first = unit_origin(unit)
        assert first["distribution"] == "cv-plugin-deep" and first["package_sha256"]
        seen = {first["package_sha256"]}
        for name, edit in (
            ("cv_plugin_deep/sub/helper.py", "W = 0.3\n"),
            ("cv_plugin_deep_extra.py", "X = 2\n"),
        ):
            (site / name).write_text(edit)
            now = unit_origin(unit)
            assert now["source_sha256"] == first["source_sha256"]
            assert now["package_sha256"] not in seen, name
            seen.add(now["package_sha256"])
    finally:
        _leave_site(str(site))
        for name in [m for m in sys.modules if m.startswith("cv_plugin_deep")]:
            del sys.modules[name]


def test_a_package_hash_recorded_from_some_generation_on_is_no_change():
    """A store written before ldpsim recorded package hashes, then a change of another
    unit accepted: the plugin's cells count one code version, its package hash is in
    the later generation only (a mutation hunt, 2026-12-02: a count that compared the
    hash where any generation had it passed the tests)."""
    unit = {"origin": "ldpsim", "version": "0.2", "source_sha256": "a" * 64}
    old_plugin = {
        "origin": "plugin",
        "distribution": "p",
        "version": "1",
        "source_sha256": "b" * 64,
    }
    first = {k: unit for k in ("model:quantile", "mechanism:laplace", "method:bb")}
    first["method:half_width"] = old_plugin
    second = {**first, "method:bb": {**unit, "source_sha256": "c" * 64}}
    second["method:half_width"] = {**old_plugin, "package_sha256": "d" * 64}
    versions = code_versions(_two_generations(first, second))
    assert versions.sel({"method": "bb"}).item() == 2
    assert versions.sel({"method": "hw"}).item() == 1


def test_a_unit_registered_once_then_installed_is_not_asked_to_be_registered():
    """The latest generation's origin of a unit decides (a mutation hunt, 2026-12-02: a
    unit registered in an earlier generation only stayed registered, and a run would ask
    for it to be registered again)."""
    from ldpsim.pipeline.store.code_identity import registered_units

    registered = {
        "origin": "registered",
        "class": "m.HalfWidth",
        "version": None,
        "source_sha256": "a" * 64,
    }
    installed = {
        "origin": "plugin",
        "distribution": "p",
        "version": "1",
        "source_sha256": "b" * 64,
    }
    units = [{"method:half_width": registered}, {"method:half_width": installed}]
    assert registered_units({"units": json.dumps(units)}) == {}
    assert registered_units({"units": json.dumps(units[::-1])}) == {
        "method:half_width": registered
    }


def test_a_plugins_package_hash_is_pinned(tmp_path):
    """The recorded ``package_sha256`` is pinned: for every file, sorted by its name
    (relative to the folder that holds the package, as RECORD names it), the name, a
    NUL, its size, a NUL, then its bytes; a file RECORD lists that is gone is skipped.
    Another formula (names from the root, no names, the order of the walk) would refuse
    every store written before it as changed code; one that stops at a missing file
    would keep the code version across an edit of the files after it (a mutation hunt,
    h16l: all passed the tests)."""
    site = tmp_path / "site"
    files = {
        "b_pinned_extra.py": "X = 1\n",
        "zz_pinned_pkg/__init__.py": "",
        "zz_pinned_pkg/units.py": "class Unit:\n    pass\n",
        "zz_pinned_pkg/sub/helper.py": "W = 0.1\n",
    }
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    # RECORD lists a module removed by hand (sorted first) and one beside the package.
    _dist_info(site, "zz-pinned", "0.1", record=["a_pinned_gone.py", "b_pinned_extra.py"])
    _use_site(str(site))
    try:
        unit = importlib.import_module("zz_pinned_pkg.units").Unit
        found = package_files(unit, "zz-pinned")
        assert sorted(found) == ["a_pinned_gone.py", *sorted(files)]

        def expected() -> str:
            digest = hashlib.sha256()
            for name in sorted(files):
                data = (site / name).read_bytes()
                digest.update(f"{name}\0{len(data)}\0".encode() + data)
            return digest.hexdigest()

        before = package_sha256(unit, "zz-pinned")
        assert before == expected()
        (site / "zz_pinned_pkg/units.py").write_text("class Unit:\n    w = 2\n")  # the last
        assert package_sha256(unit, "zz-pinned") == expected() != before
    finally:
        _leave_site(str(site))
        for name in [m for m in sys.modules if m.startswith("zz_pinned_pkg")]:
            del sys.modules[name]


def test_units_without_a_distribution_are_known_by_their_own_files(tmp_path, monkeypatch):
    """A top-level plugin module that no distribution lists is its own package (its file,
    by its name); two such units of one run hash each its own module; a module named
    like ``ldpsim_*`` is not ldpsim's; a class without a file has no package hash, and
    one whose helper module cannot be imported no source hash (a mutation hunt, h16l:
    each passed the tests)."""
    from ldpsim.pipeline.store.code_identity import unit_origin

    for name, w in (("cv_solo_a", 1), ("cv_solo_b", 2), ("ldpsim_solo", 3)):
        (tmp_path / f"{name}.py").write_text(f"class Unit:\n    w = {w}\n")
    (tmp_path / "cv_solo_gone.py").write_text(
        "class Unit:\n    source_modules = ('cv_solo_no_such_helper',)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    a, b, ours, gone = (
        importlib.import_module(name).Unit
        for name in ("cv_solo_a", "cv_solo_b", "ldpsim_solo", "cv_solo_gone")
    )
    assert package_files(a, None) == {"cv_solo_a.py": str(tmp_path / "cv_solo_a.py")}
    hashes: dict = {}  # as sweep_units shares them between the units of one run
    first, second = unit_origin(a, hashes), unit_origin(b, hashes)
    assert (first["origin"], first["distribution"], first["version"]) == ("plugin", None, None)
    assert first["package_sha256"] == package_sha256(a, None)
    assert second["package_sha256"] == package_sha256(b, None) != first["package_sha256"]
    assert unit_origin(ours)["origin"] == "plugin"
    assert package_sha256(type("Floating", (), {"__module__": "cv_solo_nowhere"}), None) is None
    assert unit_origin(gone)["source_sha256"] is None


def test_a_hash_that_only_one_origin_knows_is_not_compared():
    """``code_differs`` compares the hashes both origins know, whichever lacks one (a
    store written before package hashes, a worker's task without one)."""
    from ldpsim.pipeline.store.code_identity import code_differs

    source, package = {"source_sha256": "a" * 64}, {"package_sha256": "b" * 64}
    both = {**source, **package}
    assert not code_differs(source, both) and not code_differs(both, source)
    assert not code_differs(package, source) and not code_differs({}, both)
    assert code_differs(both, {**source, "package_sha256": "c" * 64})
    assert code_differs({**source, "package_sha256": None}, {"source_sha256": "d" * 64})


def test_a_sweeps_units_are_those_of_every_grid_point():
    sweep = load_sweep(
        "demo", [("grid.n", [1000]), ("grid.mechanism", ["laplace", "randomized_response"])], None
    )
    units = sweep_units(sweep)
    assert {"mechanism:laplace", "mechanism:randomized_response", "model:quantile"} <= set(units)


@pytest.mark.parametrize(
    "raw",
    ["", "[]", "[1]", 5, '[{"method:bb": "x"}]', '[{"method:bb": {"source_sha256": 5}}]'],
)
def test_a_units_attribute_that_is_not_a_list_of_origins_is_refused_in_one_line(raw):
    """Each generation maps units to origins, each origin's hashes text: an empty text, an
    empty list, a generation or an origin of another type, or a hash that is not text is
    refused (a hunt, h16l: an origin of another type crashed ``run`` with an
    AttributeError traceback, exit 1); a reader then counts what it can."""
    from ldpsim.pipeline.store.code_identity import registered_units

    sweep = load_sweep("demo", [("grid.n", [1000])], None)
    with pytest.raises(InputError, match="is not a JSON list of unit origins"):
        plan_units("S.zarr", {"units": raw}, sweep, accept_code_change=True)
    assert registered_units({"units": raw}) == {}
    unit = {"origin": "ldpsim", "version": "0.2", "source_sha256": "a" * 64}
    store = _two_generations(unit, unit).assign_attrs(units=raw)
    assert code_versions(store).values.tolist() == [[0, 0]]


def test_a_run_records_the_new_code_and_keeps_the_units_it_does_not_use():
    """The latest generation keeps the units of the store that a run does not use (a
    method it does not compute); an accepted change records the new origin and its
    code version; a resume with the same code writes nothing (a mutation hunt, h16l:
    each passed the tests)."""
    sweep = load_sweep("demo", [("grid.n", [1000])], None)
    (current,) = json.loads(plan_units("S.zarr", None, sweep, False).attr)
    other = {"origin": "plugin", "distribution": "p", "version": "1", "source_sha256": "e" * 64}
    stored = {**current, "method:other": other}
    same = plan_units("S.zarr", {"units": json.dumps([stored], sort_keys=True)}, sweep, False)
    assert not same.write and same.code_version == 0 and not same.changes
    stale = {**stored, "method:bb": {**current["method:bb"], "source_sha256": "0" * 64}}
    plan = plan_units("S.zarr", {"units": json.dumps([stale])}, sweep, True)
    first, second = json.loads(plan.attr)
    assert first == stale and second == {**current, "method:other": other}
    (change,) = plan.changes
    assert change == {
        "unit": "method:bb",
        "old": stale["method:bb"],
        "new": current["method:bb"],
        "code_version": 1,
    }


def test_a_worker_checks_each_unit_against_the_hashes_its_task_carries(tmp_path, monkeypatch):
    """``check_running_units``: the code this process first imported, against the
    task's hashes (a bare source hash too; a unit the task does not name is not
    compared); a file edited after the import is not what the worker runs (a mutation
    hunt, h16l: a check that never refused, read a bare hash as none, or read the file
    again passed the tests without a cluster)."""
    from ldpsim.pipeline.store.code_identity import (
        check_running_units,
        running_code,
        task_hashes,
        unit_origin,
    )

    sweep = load_sweep("demo", [("grid.n", [1000])], None)
    point = sweep.points()[0].normalized
    units = sweep_units(sweep)
    check_running_units(point, task_hashes(units))
    check_running_units(point, {})
    bare = {key: origin["source_sha256"] for key, origin in units.items()}
    check_running_units(point, bare)
    bare["method:bb"] = "0" * 64
    with pytest.raises(RuntimeError, match=r"interval method 'bb' .*\(source 00000000\)"):
        check_running_units(point, bare)

    (tmp_path / "cv_running_unit.py").write_text("class Unit:\n    w = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    unit = importlib.import_module("cv_running_unit").Unit
    first = running_code(unit)
    (tmp_path / "cv_running_unit.py").write_text("class Unit:\n    w = 2\n")
    assert unit_origin(unit)["source_sha256"] != first["source_sha256"]
    assert running_code(unit) == first


def test_a_cells_units_are_its_grid_points_case_axis_and_default_mechanisms():
    """``code_versions`` counts for each cell the generations whose units of the cell
    (the mechanism of its grid axis or case; every mechanism of the store where the
    model's default is used) differ; a replicate not done, or of a generation the store
    does not describe, counts for none; the replicate axis may be anywhere (a mutation
    hunt, h16l: each passed the tests)."""
    unit = {"origin": "ldpsim", "version": "0.2", "source_sha256": "a" * 64}
    keys = ("model:quantile", "mechanism:laplace", "mechanism:randomized_response", "method:bb")
    first = {key: unit for key in keys}
    second = {**first, "mechanism:laplace": {**unit, "source_sha256": "c" * 64}}
    mechanisms = ["laplace", "randomized_response"]

    def counts(axis: str, labels: list[str], sweep: dict, versions: list, done: list) -> list:
        sweep = {"methods": {"bb": {}}, "spec": {"model": "quantile"}, **sweep}
        ds = xr.Dataset(
            {
                "done": ((axis, "rep"), np.array(done, dtype=bool)),
                "code_version": ((axis, "rep"), np.array(versions, dtype=np.int16)),
            },
            coords={axis: np.array(labels, dtype=object), "method": ["bb"], "rep": [0, 1, 2]},
            attrs={"sweep": json.dumps(sweep), "units": json.dumps([first, second])},
        )
        out = code_versions(ds.transpose("rep", axis, "method"))
        return out.transpose(axis, "method").values[:, 0].tolist()

    both, all_done = [[0, 1, 7]] * 2, [[True] * 3] * 2
    grid = {"grid": {"mechanism": mechanisms}}
    assert counts("mechanism", mechanisms, grid, both, all_done) == [2, 1]
    cases = {"cases": {"a": {"mechanism": "laplace"}, "b": {"mechanism": "randomized_response"}}}
    assert counts("case", ["a", "b"], cases, both, all_done) == [2, 1]
    # The model's default mechanism: any of the store's may have computed the cell.
    assert counts("n", [500, 1000], {"grid": {"n": [500, 1000]}}, both, all_done) == [2, 2]
    # Generation 1 computed a replicate not done (then failed), none of one cell done.
    done = [[True, False, True], [False] * 3]
    assert counts("mechanism", mechanisms, grid, [[0, 1, 0], [0, 1, 0]], done) == [1, 0]
