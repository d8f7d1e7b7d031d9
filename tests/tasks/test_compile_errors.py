"""numba's error compiling a kernel, told in one line: which callback, where, why."""

from __future__ import annotations

import inspect
from pathlib import Path

from numba.core import ir
from numba.core.errors import TypingError

from ldpsim.tasks.kernel.compile_errors import kernel_compile_error
from ldpsim.tasks.mechanisms.laplace import Laplace
from ldpsim.tasks.streams import rng

NUMBA_TEXT = """Failed in nopython mode pipeline (step: nopython frontend)
failed to unpack none

File "rng.py", line 155:
"""


def _plugin_gradient(d, theta, params, s, g):  # stands for a plugin's callback
    g[0] = theta[0]


def test_an_error_in_ldpsims_code_is_blamed_on_the_plugin_callback():
    # A callback that returns no state fails where tasks.rng unpacks it: numba's location
    # is ldpsim's, the culprit the one callback that is not ldpsim's own.
    error = TypingError(NUMBA_TEXT, loc=ir.Loc(rng.__file__, 155))
    callbacks = {"sample_gradient": _plugin_gradient, "privatize": Laplace.privatize}
    found = kernel_compile_error(error, callbacks, d=1)
    line = inspect.getsourcelines(_plugin_gradient)[1]
    assert found.role == "sample_gradient" and found.line == line
    assert Path(found.filename).name == "test_compile_errors.py"
    assert "failed to unpack none (in ldpsim's code that calls it" in str(found)
    assert "\n" not in str(found) and found.detail == str(error)


def test_an_error_in_the_plugins_file_keeps_numbas_location():
    error = TypingError("No implementation of function add", loc=ir.Loc(__file__, 22))
    callbacks = {"sample_gradient": _plugin_gradient, "privatize": Laplace.privatize}
    found = kernel_compile_error(error, callbacks, d=3)
    assert (found.role, found.line) == ("sample_gradient", 22)
    assert str(found).startswith(
        "sample_gradient (test_compile_errors._plugin_gradient) does not compile into the "
        f"LDP-SGD kernel (d = 3) at {__file__}, line 22: No implementation of function add"
    )
