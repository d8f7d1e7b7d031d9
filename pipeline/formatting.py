"""Numbers, levels and axis values as the tables and figures write them."""

from __future__ import annotations

import decimal
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ldpsim.pipeline.case_parameters import MISSING_TEXT
from ldpsim.pipeline.records import native_value


def _fmt_stat(value: float, digits: int | None = None) -> str:
    if not np.isfinite(value):
        return "n/a"
    return f"{value:.{3 if digits is None else digits}f}"


def _length_digits(value: float) -> int:
    """Decimals that show three significant digits of a length (at least 3)."""
    if not np.isfinite(value) or value == 0:
        return 3
    return max(3, 2 - math.floor(math.log10(abs(value))))


def cell_text(value: float, se: float, significant: bool) -> str:
    """A value with its standard error in brackets, ``0.902 (0.013)``; ``n/a`` for NaN."""
    digits = _length_digits(value) if significant else 3
    if not np.isfinite(value):
        return "n/a"
    return f"{_fmt_stat(value, digits)} ({_fmt_stat(se, digits)})"


def count_text(value: float) -> str:
    """A count with thousands separators, ``5,682``; ``n/a`` for NaN."""
    return f"{int(value):,}" if np.isfinite(value) else "n/a"


def _is_power_of_ten(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 10:
        return False
    if not math.isfinite(value) or not float(value).is_integer():
        return False
    return 10 ** round(math.log10(value)) == int(value)


def format_number(value: float) -> str:
    """A float as ``g`` writes it (0.9, 1e+06) unless that hides digits: then in full.

    ``f"{0.9999999:g}"`` is '1'; this gives '0.9999999', so that distinct values never
    print alike.
    """
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


def format_level(level: float) -> str:
    """A confidence level as a percentage with every digit it has: 0.9 -> '90%',
    0.9999999 -> '99.99999%' (never rounded up to '100%')."""
    percent = decimal.Decimal(repr(float(level))) * 100
    return f"{percent.normalize():f}%"


def axis_labels(values: Sequence[Any], fmt: str) -> list[str]:
    """Labels of an axis's values, in one style for the whole axis.

    An axis of powers of ten reaching 1000 (n = 1e6, 1e7, 1e8) is written 1e6 (10^{6} in
    LaTeX), as in the paper; otherwise integers as such and floats with ``g``.
    """
    native = [native_value(v) for v in values]
    if native and all(_is_power_of_ten(v) for v in native) and max(native) >= 1000:
        exps = [round(math.log10(v)) for v in native]
        return [f"$10^{{{e}}}$" if fmt == "latex" else f"1e{e}" for e in exps]
    out = []
    for v in native:
        if isinstance(v, float) and math.isinf(v):
            text = (r"$\infty$" if fmt == "latex" else "inf") if v > 0 else "-inf"
        elif isinstance(v, float):
            text = format_number(v)
        else:
            text = str(v)
            if fmt == "latex":
                text = latex_escape(text)
        out.append(text)
    return out


def parameter_text(value: Any, fmt: str) -> str:
    """A spec value as a table cell: ``-`` for None (unset, :data:`MISSING_TEXT`),
    numbers as :func:`format_number` writes them (ints in full: d = 1000, not 1e3),
    ``true`` and ``false``, strings as they are, lists in brackets; LaTeX-escaped for
    ``latex``.

    Parameters
    ----------
    value : Any
        A value of :func:`~ldpsim.pipeline.case_parameters.case_parameters`.
    fmt : str
        The table's format (``latex`` escapes; any other does not).

    Returns
    -------
    str
        The cell's text.
    """
    if value is None:
        return MISSING_TEXT
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isinf(value):
        return (r"$\infty$" if fmt == "latex" else "inf") if value > 0 else "-inf"
    if isinstance(value, float):
        return format_number(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(parameter_text(v, fmt) for v in value) + "]"
    return latex_escape(str(value)) if fmt == "latex" else str(value)


_LATEX_NAMES = {
    "tau": r"$\tau$",
    "eps": r"$\varepsilon$",
    "delta": r"$\delta$",
    "mu": r"$\mu$",
    "n": "$n$",
    "gamma": r"$\gamma$",
}


def latex_escape(text: str) -> str:
    """Text with LaTeX's special characters escaped."""
    for char in ("\\", "&", "%", "$", "#", "_", "{", "}"):
        text = text.replace(char, "\\" + char)
    return text


def fmt_name(name: str, fmt: str) -> str:
    """An axis name as a column name: a symbol in LaTeX (tau -> $\\tau$), else as is."""
    if fmt == "latex":
        return _LATEX_NAMES.get(name, latex_escape(name))
    return name
