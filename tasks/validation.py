"""Parameter checks shared by every unit; each returns the normalized value."""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import math
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized

import numpy as np

__all__ = [
    "MAX_SPARSE_DIM",
    "check_budget_range",
    "check_choice",
    "check_distinct",
    "check_finite_constants",
    "check_float",
    "check_int",
    "check_square",
    "check_vector",
    "did_you_mean",
    "reading_recorded",
    "recorded_specs",
]

#: Largest dimension d of the sparse models (sparse_mean, one_hot_quantile_regression).
#: A step costs O(d), but the oracle's covariance and the noise covariance it is built
#: from are d x d float64 arrays (8 d^2 bytes each, 200 MB at d = 5000), a few at a time
#: while a task builds its grid point's set-up, one kept after (a worker computing
#: d = 5000 peaks at about 700 MB: 705 and 710 MB measured for the two models).
MAX_SPARSE_DIM = 5_000


_RECORDED = contextvars.ContextVar("ldpsim_recorded_specs", default=False)


@contextlib.contextmanager
def recorded_specs() -> Iterator[None]:
    """Within it, the ranges that ldpsim narrowed after a store could have been made
    (randomized response's eps >= 1e-6, huber's sigma >= 0.01, |loc| <= 1e6, B >= 2) are
    those of before, so that a store's recorded sweep still reads (its status, summary,
    report); a run of such values is still refused."""
    token = _RECORDED.set(True)
    try:
        yield
    finally:
        _RECORDED.reset(token)


def reading_recorded() -> bool:
    """Whether a store's recorded specs are being read (:func:`recorded_specs`)."""
    return _RECORDED.get()


def _fmt(value: object) -> str:
    """The value as a message shows it: its repr, cut to 60 characters (and its length
    told) when the repr is longer than 80."""
    text = repr(value)
    if len(text) <= 80:
        return text
    try:
        length = f" (length {len(value)})" if isinstance(value, Sized) else ""
    except TypeError:  # a 0-d array is Sized but has no len
        length = ""
    return f"{text[:60]}...{length}"


def _int_text(value: int) -> str:
    """An integer bound as written in messages: 10**k from 1e9 on as 1ek (not 19 digits)."""
    exponent = len(str(value)) - 1
    if value >= 10**9 and value == 10**exponent:
        return f"1e{exponent}"
    return str(value)


def _where(owner: str | None) -> str:
    return f" of {owner}" if owner else ""


def check_float(
    value: object,
    name: str,
    *,
    owner: str | None = None,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = True,
    high_open: bool = True,
    allow_inf: bool = False,
) -> float:
    """Validate a real number in an interval and return it as ``float``.

    Parameters
    ----------
    value : object
        The value received.
    name, owner : str
        Parameter name and the unit it belongs to, for the message.
    low, high : float
        Interval bounds; ``low_open``/``high_open`` say whether they are excluded.
    allow_inf : bool
        Whether ``+inf`` is allowed (``high`` must then be ``inf`` and closed).

    Raises
    ------
    TypeError
        If ``value`` is not a real number (bools and strings are rejected).
    ValueError
        If ``value`` is NaN, infinite when not allowed, or outside the interval.
    """
    lb = "(" if low_open else "["
    hb = ")" if high_open and not allow_inf else "]"
    allowed = f"a float in {lb}{low:g}, {high:g}{hb}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"The {name!r} parameter{_where(owner)} must be {allowed}. Got {_fmt(value)}."
        )
    v = float(value)
    ok = not math.isnan(v)
    if ok and math.isinf(v):
        ok = allow_inf and v > 0
    if ok and not math.isinf(v):
        ok = (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
    if not ok:
        raise ValueError(
            f"The {name!r} parameter{_where(owner)} must be {allowed}. Got {_fmt(value)}."
        )
    return v


def check_int(
    value: object,
    name: str,
    *,
    owner: str | None = None,
    low: int | None = None,
    high: int | None = None,
) -> int:
    """Validate an integer in ``[low, high]`` and return it as ``int``.

    Integral floats such as ``1e6`` are accepted (TOML users write ``n = 1e6``).

    Raises
    ------
    TypeError
        If ``value`` is not an integer or an integral float.
    ValueError
        If ``value`` is outside ``[low, high]``.
    """
    lo = "-inf" if low is None else _int_text(low)
    hi = "inf" if high is None else _int_text(high)
    allowed = f"an int in [{lo}, {hi}]"
    if isinstance(value, bool):
        raise TypeError(
            f"The {name!r} parameter{_where(owner)} must be {allowed}. Got {_fmt(value)}."
        )
    if isinstance(value, numbers.Integral):
        v = int(value)
    elif isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
        v = int(value)
    else:
        exc = ValueError if isinstance(value, numbers.Real) else TypeError
        raise exc(f"The {name!r} parameter{_where(owner)} must be {allowed}. Got {_fmt(value)}.")
    if (low is not None and v < low) or (high is not None and v > high):
        raise ValueError(
            f"The {name!r} parameter{_where(owner)} must be {allowed}. Got {_fmt(value)}."
        )
    return v


def did_you_mean(name: object, allowed: Iterable[str]) -> str:
    """The hint ``" (did you mean 'X'?)"`` where ``name`` is a string close to an allowed
    name X (a typo: :func:`difflib.get_close_matches` with its default cutoff 0.6, the
    closest one), else ``""``: written after the name in the messages that refuse an
    unknown name and list the allowed ones."""
    if not isinstance(name, str):
        return ""
    close = difflib.get_close_matches(name, [str(a) for a in allowed], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_choice(value: object, name: str, choices: Iterable[str], *, owner: str | None = None):
    """Validate that ``value`` is one of ``choices`` (strings) and return it."""
    choices = list(choices)
    listed = ", ".join(repr(c) for c in choices)
    if not isinstance(value, str):
        raise TypeError(
            f"The {name!r} parameter{_where(owner)} must be one of {listed}. Got {_fmt(value)}."
        )
    if value not in choices:
        raise ValueError(
            f"The {name!r} parameter{_where(owner)} must be one of {listed}. Got {_fmt(value)}"
            f"{did_you_mean(value, choices)}."
        )
    return value


def check_vector(
    value: object, name: str, d: int, *, owner: str | None = None
) -> tuple[float, ...]:
    """Validate a finite real scalar or length-``d`` sequence; return a tuple of floats.

    A scalar is broadcast to length ``d``.
    """
    allowed = f"a finite float or a list of {d} finite floats"
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        items: Sequence[object] = [value] * d
    elif isinstance(value, Sequence | np.ndarray) and not isinstance(value, str):
        items = list(value)
    else:
        raise TypeError(
            f"The {name!r} parameter{_where(owner)} must be {allowed}. Got {_fmt(value)}."
        )
    if len(items) != d:
        raise ValueError(
            f"The {name!r} parameter{_where(owner)} must be {allowed}. Got {_fmt(value)}."
        )
    out = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, numbers.Real):
            raise TypeError(
                f"The {name!r} parameter{_where(owner)} must be {allowed}. Got {_fmt(value)}."
            )
        if not math.isfinite(float(item)):
            raise ValueError(
                f"The {name!r} parameter{_where(owner)} must be {allowed}. Got {_fmt(value)}."
            )
        out.append(float(item))
    return tuple(out)


def check_square(value: object, d: int, what: str) -> np.ndarray:
    """``value`` (a unit's ``jacobian()``, ``gradient_cov()`` or ``variance()``) as the
    (d, d) matrix it must be.

    At d = 1 one number in any shape (a float, (1,), (1, 1)) is that matrix, as numpy's
    broadcasting made it before this check; at d > 1 the shape must be (d, d): a plugin's
    (1, 1) ``gradient_cov()`` at d = 2 filled every entry of S, and the oracle's bounds
    were wrong at exit 0 (a hunt, 2026-12-02). Values are not converted.

    Raises
    ------
    ValueError
        Another shape: "``what`` must be a (d, d) = (2, 2) matrix. Got shape (1, 1)."
    """
    matrix = np.asarray(value)
    if matrix.shape == (d, d):
        return matrix
    if d == 1 and matrix.size == 1:
        return matrix.reshape(1, 1)
    raise ValueError(f"{what} must be a (d, d) = ({d}, {d}) matrix. Got shape {matrix.shape}.")


def check_budget_range(
    value: object, name: str = "budget_range", *, owner: str | None = None
) -> tuple[float, float]:
    """Validate a range ``[low, high]`` of per-user privacy budgets; return it as a tuple.

    Allowed: two finite floats with 0 < low <= high (low = high draws every user the
    same budget).

    Raises
    ------
    TypeError
        If ``value`` is not a list of two real numbers.
    ValueError
        If a bound is NaN or infinite, ``low <= 0`` or ``low > high``.
    """
    allowed = "a list [low, high] of two finite floats with 0 < low <= high"
    message = f"The {name!r} parameter{_where(owner)} must be {allowed}. Got {_fmt(value)}."
    if isinstance(value, str) or not isinstance(value, Sequence | np.ndarray):
        raise TypeError(message)
    items = list(value)
    if len(items) != 2:
        raise ValueError(message)
    if any(isinstance(v, bool) or not isinstance(v, numbers.Real) for v in items):
        raise TypeError(message)
    low, high = float(items[0]), float(items[1])
    if not (math.isfinite(low) and math.isfinite(high) and 0 < low <= high):
        raise ValueError(message)
    return (low, high)


def check_distinct(values: Iterable[object], subject: str) -> None:
    """Refuse a list that holds one value twice, numbers compared by value (1 and 1.0 alike).

    Parameters
    ----------
    values : iterable
        The values as given (numbers or strings).
    subject : str
        What lists them, as the message starts: "The grid axis 'n'", "The 'checkpoints'
        parameter".

    Raises
    ------
    ValueError
        Two equal values; the message names both as given.
    """
    seen: dict[object, object] = {}
    for value in values:
        number = isinstance(value, numbers.Real) and not isinstance(value, bool)
        key = float(value) if number else value
        if key in seen:
            raise ValueError(
                f"{subject} lists the same value twice: {seen[key]!r} and {value!r} (numbers "
                "are compared by value). Each value may appear once."
            )
        seen[key] = value


#: Constants of a unit at one value of a parameter: their names, as a message shows them
#: ("the noise scale Delta1 / eps"), to functions computing them (a float or an array).
Constants = Mapping[str, Callable[[], object]]


def check_finite_constants(
    constants: Callable[[float], Constants],
    value: float,
    name: str,
    *,
    owner: str | None = None,
    allowed: str = "a float in [{low}, inf]",
    good: float = 1.0,
    context: str = "",
    got: object = None,
    instead: str = "",
) -> float:
    """Refuse a parameter value at which a unit's derived constants are not finite floats.

    A mechanism derives constants from its privacy parameter (a noise scale Delta1 / eps,
    a flip probability, a variance); in float64 they overflow, or divide by a difference
    that rounds to 0, when the parameter is tiny. Such a value is in the parameter's
    nominal range but cannot be run; it is refused with the smallest value that can,
    found by bisection between ``value`` and ``good`` (the constants are taken to grow as
    the parameter shrinks, as every budget's do).

    Parameters
    ----------
    constants : callable
        ``constants(v)``: the constants at the parameter value ``v``, a mapping from their
        names to functions computing them; one that raises ArithmeticError (OverflowError,
        ZeroDivisionError) counts as not finite.
    value : float
        The value received, already in the parameter's nominal range.
    name, owner : str
        Parameter name and the unit it belongs to, for the message.
    allowed : str
        What is allowed, with ``{low}`` where the smallest allowed value goes.
    good : float
        A value above ``value`` at which the constants are finite (a budget of 1).
    context : str
        Said after the allowed range, e.g. " for model 'quantile'".
    got : object, optional
        The value to show as received, when it is not ``value`` itself (a budget range
        whose low end is checked).
    instead : str, optional
        What else sets the constants (a model's sensitivity), named as the cause where
        they are not finite at ``good`` either: the parameter is then not to blame.

    Returns
    -------
    float
        ``value``.

    Raises
    ------
    ValueError
        A constant is infinite or NaN at ``value``; the message names it and gives the
        smallest allowed value.
    """
    bad = _not_finite(constants, value)
    if not bad:
        return value
    shown = _fmt(value if got is None else got)
    what = " and ".join(bad)
    what += " is not a finite float64" if len(bad) == 1 else " are not finite float64 numbers"
    low = _smallest_finite(constants, value, good) if value < good else None
    if low is None and instead and _not_finite(constants, good):
        also = "" if value == good or got is not None else f", and at {name} = {good:g} too"
        raise ValueError(
            f"{instead[:1].upper()}{instead[1:]} is too large for {owner or name}: "
            f"{what} at {name} = {shown}{also}. Make the model parameter that scales its "
            "gradients smaller."
        )
    if low is None:
        raise ValueError(
            f"The {name!r} parameter{_where(owner)} gives constants that cannot be "
            f"computed{context}: {what}. Got {shown}."
        )
    range_text = allowed.format(low=f"{low:g}")
    raise ValueError(
        f"The {name!r} parameter{_where(owner)} must be {range_text}{context}: below "
        f"that, {what}. Got {shown}."
    )


def _not_finite(constants: Callable[[float], Constants], value: float) -> list[str]:
    """The names of the constants that are infinite, NaN or raise ArithmeticError at ``value``."""
    bad = []
    with np.errstate(all="ignore"):
        for label, compute in constants(value).items():
            try:
                result = np.asarray(compute(), dtype=np.float64)
            except ArithmeticError:
                bad.append(label)
                continue
            if not np.all(np.isfinite(result)):
                bad.append(label)
    return bad


def _smallest_finite(
    constants: Callable[[float], Constants], bad: float, good: float
) -> float | None:
    """The smallest value in (bad, good] whose constants are finite, rounded up to 3
    significant digits; None if they are not finite at ``good``. Positive floats are
    ordered as their bit patterns, so the bisection takes at most 64 steps."""
    if _not_finite(constants, good):
        return None
    lo, hi = (int(np.float64(v).view(np.int64)) for v in (bad, good))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _not_finite(constants, float(np.int64(mid).view(np.float64))):
            lo = mid
        else:
            hi = mid
    smallest = float(np.int64(hi).view(np.float64))
    mantissa, exponent = f"{smallest:.2e}".split("e")
    if float(f"{mantissa}e{exponent}") < smallest:  # rounded down: the next 3 digits up
        mantissa = f"{float(mantissa) + 0.01:.2f}"
    return float(f"{mantissa}e{exponent}")


def lookup(registry: dict, name: object, kind: str):
    """Return ``registry[name]`` or raise with the list of valid names (and the closest
    one, :func:`did_you_mean`)."""
    if not isinstance(name, str) or name not in registry:
        valid = ", ".join(repr(k) for k in sorted(registry))
        exc = TypeError if not isinstance(name, str) else ValueError
        raise exc(
            f"Unknown {kind} {name!r}{did_you_mean(name, registry)}. Available {kind}s are: "
            f"{valid}."
        )
    return registry[name]
