"""The paths that moved when the layers became folders still import, with a warning."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import types

import pytest

from ldpsim.pipeline.store import reading
from ldpsim.pipeline.store.store import Store


def test_an_old_module_path_gives_the_new_modules_names_with_a_warning():
    old = importlib.import_module("ldpsim.pipeline.reading")
    with pytest.warns(DeprecationWarning, match=r"ldpsim\.pipeline\.reading moved to ldpsim"):
        assert old.load_dataset is reading.load_dataset
    with pytest.raises(AttributeError, match=r"'ldpsim\.pipeline\.reading' has no attribute"):
        old.no_such_name  # noqa: B018


def test_an_old_package_path_gives_its_modules_names_and_leaves_submodules_alone():
    package = importlib.import_module("ldpsim.pipeline.store")
    with pytest.warns(DeprecationWarning, match=r"store\.Store moved to .*store\.store\.Store"):
        assert package.Store is Store
    with pytest.raises(AttributeError):
        package.__no_such_dunder__  # noqa: B018
    assert importlib.import_module("ldpsim.pipeline.store.lock").__name__.endswith("lock")


def own_functions(module: types.ModuleType) -> list[str]:
    """The public functions (and classes) that ``module`` defines itself."""
    return [
        name
        for name, value in vars(module).items()
        if callable(value)
        and getattr(value, "__module__", None) == module.__name__
        and name[0] != "_"
    ]


#: Every old module path and the module its names are in now (docs/changelog.md, 0.3).
MOVED = {
    "ldpsim.pipeline.case_parameters": "ldpsim.pipeline.summary.case_parameters",
    "ldpsim.pipeline.cell_statistics": "ldpsim.pipeline.summary.cell_statistics",
    "ldpsim.pipeline.compare": "ldpsim.pipeline.summary.compare",
    "ldpsim.pipeline.provenance": "ldpsim.pipeline.store.provenance",
    "ldpsim.pipeline.reading": "ldpsim.pipeline.store.reading",
    "ldpsim.pipeline.tables": "ldpsim.pipeline.summary.tables",
}


@pytest.mark.parametrize(("old", "new"), MOVED.items())
def test_every_old_module_path_gives_its_new_modules_functions(old, new):
    # A hunt (2026-12-02): ldpsim.pipeline.case_parameters pointed at another module
    # and no test noticed; each old path is checked with every function defined in
    # its new module.
    module = importlib.import_module(new)
    functions = own_functions(module)
    assert functions, new
    for name in functions:
        with pytest.warns(DeprecationWarning, match=rf"{old} moved to {new}"):
            assert getattr(importlib.import_module(old), name) is getattr(module, name)


#: The layers' packages that were modules, and the module their names are in now.
MOVED_PACKAGES = {
    "ldpsim.pipeline.report": "ldpsim.pipeline.report.report",
    "ldpsim.pipeline.store": "ldpsim.pipeline.store.store",
    "ldpsim.pipeline.summary": "ldpsim.pipeline.summary.summary",
}


@pytest.mark.parametrize(("old", "new"), MOVED_PACKAGES.items())
def test_every_old_package_path_gives_its_new_modules_functions(old, new):
    # A mutation hunt (h15b): either package pointed at another module, and no test noticed.
    module = importlib.import_module(new)
    package = importlib.import_module(old)
    # A name that is also one of the package's submodules is that submodule.
    functions = [
        name for name in own_functions(module) if importlib.util.find_spec(f"{old}.{name}") is None
    ]
    assert functions, new
    for name in functions:
        with pytest.warns(
            DeprecationWarning, match=rf"{old}\.{name} moved to {new}\.{name}"
        ) as got:
            assert getattr(package, name) is getattr(module, name)
        assert got[0].filename == __file__  # the caller's line, where Python shows it


def test_importing_a_submodule_of_a_moved_package_warns_of_nothing():
    # The package's own submodule, not yet imported, though the module its old names
    # moved to holds one of that name (summary.summary imports cell_statistics).
    code = "from ldpsim.pipeline.summary import cell_statistics; print(cell_statistics.__name__)"
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ldpsim.pipeline.summary.cell_statistics"
