"""numba's error compiling a kernel, told in one line: which callback, where, why."""

from __future__ import annotations

import inspect
import pickle
from pathlib import Path

from numba import njit
from numba.core import ir
from numba.core.errors import TypingError

from ldpsim.tasks.compile_lock import cache_folder
from ldpsim.tasks.kernel.compile_errors import (
    blame,
    kernel_compile_error,
    short_reason,
    source_location,
)
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


def _plugin_privatize(d, g, params, s):  # a second plugin's callback, in this file too
    return s


#: numba's text of a call with no matching signature (its layout, lines indented).
NO_MATCH_TEXT = """Failed in nopython mode pipeline (step: nopython frontend)
No implementation of function Function(<built-in function add>) found for signature:

 >>> add(float64, unicode_type)

There are 2 candidate implementations:
"""


def test_numbas_reason_in_one_line():
    # A hunt (h21d): the header dropped, a trailing colon, the signature that has no match.
    assert short_reason(NUMBA_TEXT) == "failed to unpack none"
    assert short_reason(NO_MATCH_TEXT) == (
        "No implementation of function Function(<built-in function add>) found for "
        "signature: add(float64, unicode_type)"
    )
    assert short_reason("Failed in nopython mode pipeline (step: x)\n\n") == (
        "numba gave no reason"
    )


def test_a_callbacks_def_line_past_its_decorators():
    # A hunt (h21d): a dispatcher's Python function, an indented def under a decorator,
    # and code without source (exec'ed; a lambda has no def line).
    @njit
    def nested(d, g, params, s):
        return s

    decorator_line = nested.py_func.__code__.co_firstlineno  # Python's: the decorator
    assert source_location(nested) == (__file__, decorator_line + 1)
    assert source_location(_plugin_privatize) == (
        __file__,
        _plugin_privatize.__code__.co_firstlineno,
    )
    space: dict = {}
    exec(compile("\n\ndef made(s):\n    return s\n", "<made>", "exec"), space)
    assert source_location(space["made"]) == ("<made>", 3)
    line = inspect.currentframe().f_lineno + 1
    same_line = lambda s: s  # noqa: E731
    assert source_location(same_line) == (__file__, line)
    assert source_location(object()) == (None, None)


def _write_function(path: Path, name: str):
    """A function defined in the file ``path`` (its source there, as a plugin's is)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = f"def {name}(d, g, params, s):\n    return s\n"
    path.write_text(text)
    space: dict = {}
    exec(compile(text, str(path), "exec"), space)
    return space[name]


def test_a_file_is_blamed_on_the_callback_of_its_own_file_or_package(tmp_path):
    # A hunt (h21d): which callback a file numba names belongs to; none when it is
    # ambiguous (two callbacks in that file, or in its package) or unknown.
    for package in ("pkg", "pkg/sub", "other"):
        (tmp_path / package).mkdir(parents=True)
        (tmp_path / package / "__init__.py").write_text("")
    gradient = _write_function(tmp_path / "pkg" / "a.py", "gradient")
    privatize = _write_function(tmp_path / "other" / "c.py", "privatize")
    apart = {"sample_gradient": gradient, "privatize": privatize}
    assert blame(str(tmp_path / "pkg" / "a.py"), apart) == "sample_gradient"
    assert blame(str(tmp_path / "pkg" / "sub" / "b.py"), apart) == "sample_gradient"
    assert blame(str(tmp_path / "other" / "d.py"), apart) == "privatize"
    assert blame(str(tmp_path / "elsewhere.py"), apart) is None
    assert blame(None, apart) is None
    together = {"sample_gradient": gradient, "privatize": gradient}
    assert blame(str(tmp_path / "pkg" / "a.py"), together) is None
    second = _write_function(tmp_path / "pkg" / "e.py", "privatize")
    package = {"sample_gradient": gradient, "privatize": second}
    assert blame(str(tmp_path / "pkg" / "sub" / "b.py"), package) is None


def test_numbas_typing_lines_name_the_callbacks_own_line():
    # A hunt (h21d): numba names the outermost call (ldpsim's kernel); its innermost
    # "During: typing" line outside ldpsim is the callback's.
    detail = (
        f"{NUMBA_TEXT}\nDuring: typing of call at {__file__} (7)\n"
        f"During: typing of call at {rng.__file__} (155)\n"
    )
    error = TypingError(detail, loc=ir.Loc("<ldpsim kernel sgd_loop>", 3))
    callbacks = {"sample_gradient": _plugin_gradient, "privatize": Laplace.privatize}
    found = kernel_compile_error(error, callbacks, d=1)
    assert (found.role, found.filename, found.line) == ("sample_gradient", __file__, 7)
    assert found.reason == "failed to unpack none"


def test_ldpsims_own_code_blames_a_callback_only_when_one_is_a_plugins():
    # A hunt (h21d): two plugin callbacks, numba stopped in ldpsim's code (a generated
    # kernel in the cache folder): neither is named, numba's place is kept.
    kernel = str(cache_folder() / "kernel_ab12.py")
    error = TypingError(NUMBA_TEXT, loc=ir.Loc(kernel, 40))
    callbacks = {"sample_gradient": _plugin_gradient, "privatize": _plugin_privatize}
    found = kernel_compile_error(error, callbacks, d=2)
    assert (found.role, found.filename, found.line) == (None, kernel, 40)
    assert str(found) == (
        f"a callback does not compile into the LDP-SGD kernel (d = 2) at {kernel}, "
        "line 40: failed to unpack none"
    )
    # numba names no place: no callback is blamed, none is pointed at.
    found = kernel_compile_error(TypingError(NUMBA_TEXT), {"sample_gradient": _plugin_gradient}, 1)
    assert (found.role, found.filename) == (None, None)
    assert str(found).endswith("kernel (d = 1): failed to unpack none")
    # One built-in callback alone is not blamed for ldpsim's own code.
    error = TypingError(NUMBA_TEXT, loc=ir.Loc(rng.__file__, 155))
    assert kernel_compile_error(error, {"privatize": Laplace.privatize}, 1).role is None


def test_a_compile_error_comes_back_from_a_worker_whole():
    # A hunt (h21d): pickled (a Dask worker sends it), every field and the message kept.
    error = TypingError("No implementation of function add", loc=ir.Loc(__file__, 22))
    found = kernel_compile_error(error, {"sample_gradient": _plugin_gradient}, d=3)
    back = pickle.loads(pickle.dumps(found))
    assert type(back) is type(found) and str(back) == str(found)
    fields = ("role", "filename", "line", "reason", "detail")
    assert [getattr(back, f) for f in fields] == [getattr(found, f) for f in fields]
    assert (found.line, found.reason) == (22, "No implementation of function add")
