"""Numbers, levels and axis values as the tables and figures write them."""

from __future__ import annotations

import decimal
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

#: A text coordinate's value where a case does not set the parameter (and the sweep's
#: ``[spec]`` does not either); a numeric coordinate holds NaN there.
MISSING_TEXT = "-"


def native_value(value: Any) -> Any:
    """A numpy scalar as a plain Python value; NaN becomes None."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


#: From this magnitude on, a table's value is written in exponent form (1.23e+66), not
#: with every digit of its fixed-point form.
LARGE_VALUE = 1e6


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
    """A value with its standard error in brackets, ``0.902 (0.013)``; ``n/a`` for NaN;
    a value of magnitude :data:`LARGE_VALUE` or more in exponent form, ``1.23e+66
    (5.6e+64)`` (a diverged run's length).

    A positive standard error too small for the column's decimals is ``(<0.001)``, not
    ``(0.000)``: a zero reads as no uncertainty at all (a coordinate mean of 0.99996
    with se 0.00004 is ``1.000 (<0.001)``). One below 1e-9 of the value is rounding
    noise and stays ``(0.000)``.
    """
    digits = _length_digits(value) if significant else 3
    if not np.isfinite(value):
        return "n/a"
    if abs(round(value, digits)) >= LARGE_VALUE:  # a diverged run's: not every digit
        if not np.isfinite(se):
            se_text = "n/a"
        else:  # an se at the value's floating-point noise is 0, as below
            se_text = "0" if se <= 1e-9 * abs(value) else f"{se:.2g}"
        return f"{value:.3g} ({se_text})"
    se_text = _fmt_stat(se, digits)
    # Not a standard error at the value's floating-point noise (the lengths of a
    # fixed-width interval differ in their last bits): that one is 0.
    if np.isfinite(se) and se > 1e-9 * abs(value) and float(se_text) == 0:
        se_text = f"<{10.0**-digits:.{digits}f}"
    return f"{_fmt_stat(value, digits)} ({se_text})"


def count_text(value: float) -> str:
    """A count with thousands separators, ``5,682``; ``n/a`` for NaN."""
    return f"{int(value):,}" if np.isfinite(value) else "n/a"


#: Grid values and spec parameters that are sample sizes: written by
#: :func:`sample_size_text` wherever they are named (tables, figures, the report).
SAMPLE_SIZE_NAMES = ("n", "checkpoint")


def _round_parts(value: Any) -> tuple[float, int] | None:
    """(m, k) with value = m 10^k, m in [1, 10) of at most two significant digits, for
    a whole number >= 10 (50000 -> (5, 4), 250000 -> (2.5, 5)); None for any other."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 10:
        return None
    if not math.isfinite(value) or not float(value).is_integer():
        return None
    whole = int(value)
    exponent = len(str(whole)) - 1
    if whole % 10 ** (exponent - 1):
        return None
    return whole / 10**exponent, exponent


def _round_text(parts: tuple[float, int], fmt: str) -> str:
    """``5e4`` (``$5 \\times 10^{4}$`` in LaTeX; ``1e6`` and ``$10^{6}$`` for a power of ten)."""
    mantissa, exponent = parts
    if fmt == "latex":
        return (
            f"$10^{{{exponent}}}$"
            if mantissa == 1
            else f"${mantissa:g} \\times 10^{{{exponent}}}$"
        )
    return f"{mantissa:g}e{exponent}"


def sample_size_text(value: Any, fmt: str = "text") -> str:
    """A sample size as every table, figure and header writes it: from 1000 on, a whole
    number of two significant digits or fewer compact (``1e4``, ``5e4``, ``2.5e5``), any
    other in full (``500``, ``123456``); LaTeX for ``latex`` (``$5 \\times 10^{4}$``).

    Examples
    --------
    >>> [sample_size_text(v) for v in (50000.0, 100000, 250000, 123456, 500)]
    ['5e4', '1e5', '2.5e5', '123456', '500']
    """
    value = native_value(value)
    parts = _round_parts(value)
    if parts is not None and value >= 1000:
        return _round_text(parts, fmt)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return format_number(value) if isinstance(value, float) else str(value)


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

    An axis of whole numbers of two significant digits or fewer reaching 1000 (n = 1e4,
    5e4, 1e6) is written compact, 5e4 (5 \\times 10^{4} in LaTeX), as in the paper and
    as :func:`sample_size_text` writes one n; otherwise integers as such and floats
    with ``g``.
    """
    native = [native_value(v) for v in values]
    parts = [_round_parts(v) for v in native]
    if native and all(p is not None for p in parts) and max(native) >= 1000:
        return [_round_text(p, fmt) for p in parts if p is not None]
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


def named_text(name: str, value: Any, fmt: str) -> str:
    """A spec value of parameter ``name`` as a cell: a sample size (``n``,
    :data:`SAMPLE_SIZE_NAMES`) by :func:`sample_size_text`, any other by
    :func:`parameter_text`."""
    if (
        name in SAMPLE_SIZE_NAMES
        and isinstance(value, int | float)
        and not isinstance(value, bool)
    ):
        return sample_size_text(value, fmt)
    return parameter_text(value, fmt)


def parameter_text(value: Any, fmt: str) -> str:
    """A spec value as a table cell: ``-`` for None (unset, :data:`MISSING_TEXT`),
    numbers as :func:`format_number` writes them (ints in full: d = 1000, not 1e3),
    ``true`` and ``false``, strings as they are, lists in brackets; LaTeX-escaped for
    ``latex``.

    Parameters
    ----------
    value : Any
        A value of :func:`~ldpsim.pipeline.summary.case_parameters.case_parameters`.
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


#: LaTeX's special characters in text mode and what writes each as itself.
_LATEX_SPECIAL = {
    **{char: "\\" + char for char in "&%$#_{}"},
    "\\": r"\textbackslash{}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    # In text mode with pdflatex's default font encoding (OT1) these print as other
    # glyphs: "|" as a dash, "<" and ">" as inverted exclamation and question marks.
    "|": r"\textbar{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}


def latex_escape(text: str) -> str:
    """Text with LaTeX's special characters escaped (``a^b`` -> ``a\\textasciicircum{}b``).

    One pass, so that an escape's own backslash and braces are not escaped again.
    """
    return "".join(_LATEX_SPECIAL.get(char, char) for char in text)


def fmt_name(name: str, fmt: str) -> str:
    """An axis name as a column name: a symbol in LaTeX (tau -> $\\tau$), else as is."""
    if fmt == "latex":
        return _LATEX_NAMES.get(name, latex_escape(name))
    return name


def summary_line(text: str) -> str:
    """A docstring's (or a description's) summary as one line: its text up to the first
    blank line, whitespace runs made single spaces ('' for none). A summary wrapped over
    two source lines is shown whole, not cut after the first (``ldpsim list``)."""
    return " ".join(text.strip().split("\n\n")[0].split())
