"""The paths that moved when the layers became folders still import, with a warning."""

from __future__ import annotations

import importlib

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
