"""Modules imported on first use (ldpsim.tasks.lazy_import), from several threads at once."""

from __future__ import annotations

import sys
import threading

import pytest

from ldpsim.tasks.lazy_import import lazy_module

SLOW_MODULE = """
import time
time.sleep(0.3)  # a second thread arrives while this one executes the module
VALUE = 42
def twice(x):
    return 2 * x
"""


def test_threads_that_first_use_a_module_together_all_see_it_whole(tmp_path, monkeypatch):
    """A GPU worker's threads set up their first grid points at once: each must read the
    module whole (importlib's LazyLoader let a thread see a module still executing, on
    Python 3.11: AttributeError). Nothing is imported before the first use."""
    (tmp_path / "ldpsim_slow_module.py").write_text(SLOW_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "ldpsim_slow_module", raising=False)
    module = lazy_module("ldpsim_slow_module")
    assert "ldpsim_slow_module" not in sys.modules
    seen: list[object] = []

    def use() -> None:
        try:
            seen.append((module.VALUE, module.twice(3)))
        except Exception as exc:  # what a thread saw is the result
            seen.append(repr(exc))

    threads = [threading.Thread(target=use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [(42, 6)] * 8
    assert sys.modules["ldpsim_slow_module"].VALUE == 42
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018


def test_a_missing_module_is_refused_at_once():
    with pytest.raises(ModuleNotFoundError, match="ldpsim_no_such_module"):
        lazy_module("ldpsim_no_such_module")
