"""Every public function of the API shows an example, and the examples that run, pass."""

from __future__ import annotations

import doctest
import inspect

from ldpsim.pipeline import accessor, api


def test_every_public_function_has_an_example():
    functions = [
        name
        for name in api.__all__
        if inspect.isfunction(getattr(api, name)) and getattr(api, name).__module__ == api.__name__
    ]
    assert {"run", "open_store", "summarize", "compare", "plot", "replay"} <= set(functions)
    lacking = [name for name in functions if "Examples" not in inspect.getdoc(getattr(api, name))]
    assert not lacking, lacking


def test_the_examples_that_run_give_what_they_show():
    for module in (api, accessor):
        results = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert results.failed == 0, module.__name__
        assert results.attempted > 0, module.__name__
