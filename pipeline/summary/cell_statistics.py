"""Your own statistics of a summary's cells (``summarize(..., statistics={name: fn})``).

A statistic is a function of one :class:`Cell`: the replicates that one cell of the
summary counts (one grid point, one method, [one checkpoint,] one coordinate), as numpy
arrays. It returns either one value per replicate, whose mean is the statistic (its
Monte-Carlo standard error is then sd / sqrt(R), the sd with ddof 0 as in coverage's
sqrt(p (1 - p) / R)), or one number (its standard error is then a bootstrap over the
cell's replicates, :data:`BOOTSTRAP_RESAMPLES` resamples drawn from a generator seeded by
:data:`BOOTSTRAP_SEED` and the cell's labels). Statistics are per coordinate: a summary
shown as means over the coordinates refuses them. Installed packages offer statistics to
``ldpsim summarize --statistic NAME`` through the entry-point group
:data:`STATISTICS_GROUP`, loaded and checked as the unit plugins are
(:mod:`ldpsim.tasks.plugins`): lazily, once per process, a broken one left out with one
line saying why.
"""

from __future__ import annotations

import functools
import inspect
import json
import keyword
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
import xarray as xr

from ldpsim.pipeline.errors import InputError, shown_value
from ldpsim.pipeline.formatting import summary_line

#: Entry-point group of the statistics that ``ldpsim summarize --statistic NAME`` finds.
STATISTICS_GROUP = "ldpsim.statistics"
#: Bootstrap resamples of a cell's replicates for the standard error of a statistic that
#: returns one number (not a mean of per-replicate values).
BOOTSTRAP_RESAMPLES = 1000
#: Seed of those resamples. Every cell draws from a generator of its own, seeded with this
#: number and a SHA-256 of the cell's labels (its grid values, method, [checkpoint,]
#: coord; :func:`ldpsim.tasks.streams.seeding.stable_hash`): a cell's standard error depends on
#: nothing but its replicates and labels, so the same store gives the same numbers, and
#: the cells draw different resample indices (their bootstrap errors are independent).
BOOTSTRAP_SEED = 34
#: How a statistic's standard error is computed: ``mean`` (sd / sqrt(R) of its
#: per-replicate values, sd with ddof 0) or ``bootstrap``; ``none`` when no cell had a
#: replicate.
SeRule = Literal["mean", "bootstrap", "none"]
#: Each rule in words: the ``NAME_se_method`` field of the csv and json records.
SE_RULE_TEXT: dict[str, str] = {
    "mean": "sd / sqrt(R)",
    "bootstrap": f"bootstrap, B = {BOOTSTRAP_RESAMPLES}",
    "none": "n/a",
}
#: The summary attribute listing the statistics (a JSON list of names).
STATISTICS_ATTR = "statistics"


@dataclass(frozen=True)
class Cell:
    """The replicates that one summary cell counts, as read-only numpy arrays.

    A cell is one grid point, one method, [one checkpoint,] one coordinate j. Its
    replicates are those the cell's ``coverage`` counts (``n_done``, R): done, with
    finite bounds of this method at this cell; a replicate that failed, or in which
    the method failed here, is not among them. All arrays have shape (R,), in replicate
    order.

    Attributes
    ----------
    lower, upper : numpy.ndarray
        The interval's bounds.
    estimate : numpy.ndarray
        The method's own estimate of theta*_j: theta_bar_n for bb, bm, sn and the
        oracle, a competitor's own (SPEC 10).
    truth : numpy.ndarray
        theta*_j, the same value repeated R times (so that ``c.upper >= c.truth`` reads
        per replicate).
    level : float
        The nominal level 1 - alpha of the intervals.
    labels : mapping of str to object
        Where the cell is: its grid values, ``method``, [``checkpoint``,] ``coord``.

    Examples
    --------
    >>> import numpy as np
    >>> c = Cell(
    ...     lower=np.array([0.1, 0.4]),
    ...     upper=np.array([0.6, 0.9]),
    ...     estimate=np.array([0.35, 0.65]),
    ...     truth=np.array([0.5, 0.5]),
    ...     level=0.9,
    ...     labels={"method": "bb", "coord": 0},
    ... )
    >>> c.replicates, float(np.mean(c.upper >= c.truth))
    (2, 1.0)
    """

    lower: np.ndarray
    upper: np.ndarray
    estimate: np.ndarray
    truth: np.ndarray
    level: float
    labels: Mapping[str, Any]

    @property
    def replicates(self) -> int:
        """R, the replicates of the cell."""
        return len(self.lower)


#: A statistic: a function of a :class:`Cell` returning one number (shape () or (1,)), or
#: one number per replicate (shape (R,)) whose mean is the statistic. Where R = 1 the two
#: read alike; such a cell is read as the statistic's other cells are.
Statistic = Callable[[Cell], Any]


def check_statistics(
    statistics: Mapping[str, Statistic] | None, reserved: Collection[str] = ()
) -> dict[str, Statistic]:
    """The ``statistics`` parameter of summarize, checked: name -> function.

    A name becomes a summary variable, with ``NAME_se`` (and a ``NAME_se_method``
    field in csv and json), so it must be a Python identifier that names none of the
    summary's own statistics or dimensions (``reserved``).

    Parameters
    ----------
    statistics : mapping of str to callable, or None
        None is no statistic.
    reserved : collection of str
        Names taken by the summary.

    Returns
    -------
    dict
        The statistics, in the order given.

    Raises
    ------
    TypeError
        Not a mapping, a name that is not a str, a value that is not callable.
    InputError
        A name that is not an identifier, or taken by the summary.

    Examples
    --------
    >>> import numpy as np
    >>> list(check_statistics({"upper_cover": lambda c: c.upper >= c.truth}))
    ['upper_cover']
    """
    if statistics is None:
        return {}
    example = "e.g. {'upper_cover': lambda c: c.upper >= c.truth}"
    if not isinstance(statistics, Mapping):
        raise TypeError(
            "The 'statistics' parameter of summarize must be a mapping of names to "
            f"functions of a Cell, {example}. Got {shown_value(statistics)}."
        )
    out: dict[str, Statistic] = {}
    taken = set(reserved)  # and the variables of the statistics before
    for name, fn in statistics.items():
        if not isinstance(name, str):
            raise TypeError(
                f"The names in the 'statistics' parameter of summarize must be str. Got {name!r}."
            )
        if not callable(fn):
            raise TypeError(
                f"The statistic {name!r} must be a function of a Cell ({example}). "
                f"Got {shown_value(fn)}."
            )
        problem = name_problem(name, taken)
        if problem is not None:
            raise InputError(f"The statistic {name!r} {problem}.")
        out[name] = fn
        taken.update((name, f"{name}_se", f"{name}_se_method"))
    return out


def name_problem(name: str, reserved: Collection[str]) -> str | None:
    """Why ``name`` cannot name a statistic (words after "The statistic NAME"); None if
    it can."""
    if not name.isidentifier() or keyword.iskeyword(name):
        return (
            "is not a valid name: it becomes a column of the tables, so use letters, "
            "digits and underscores, not starting with a digit"
        )
    clash = [n for n in (name, f"{name}_se", f"{name}_se_method") if n in reserved]
    if clash:
        return f"would replace the summary's {clash[0]!r}; give it another name"
    return None


def statistic_names(summary: xr.Dataset) -> list[str]:
    """The names of the statistics a summary was given ([] for none)."""
    raw = summary.attrs.get(STATISTICS_ATTR)
    return list(json.loads(raw)) if raw else []


def se_rule(summary: xr.Dataset, name: str) -> SeRule:
    """How the standard error of the statistic ``name`` was computed."""
    return summary[f"{name}_se"].attrs.get("se_method", "none")


def compute(
    statistics: Mapping[str, Statistic],
    lower: xr.DataArray,
    upper: xr.DataArray,
    estimate: xr.DataArray,
    truth: xr.DataArray,
    use: xr.DataArray,
    level: xr.DataArray,
) -> xr.Dataset:
    """Each statistic and its Monte-Carlo standard error in every cell.

    Parameters
    ----------
    statistics : mapping of str to callable
        Checked by :func:`check_statistics`.
    lower, upper, estimate, truth : xarray.DataArray
        The store's bounds, the methods' own estimates and theta*; broadcast to ``use``.
    use : xarray.DataArray
        bool, with a ``rep`` dim: the replicates each cell counts.
    level : xarray.DataArray
        The nominal level (0-d, or along a ``level`` grid axis).

    Returns
    -------
    xarray.Dataset
        ``NAME`` and ``NAME_se`` for each statistic, with the dims of ``use`` but
        ``rep``; NaN where a cell has no replicate. A statistic of per-replicate values
        (shape (R,)) is their mean, with the standard error of coverage's rule: sd /
        sqrt(R) with the sd of ddof 0, so that the coverage indicators give exactly
        ``coverage_se`` = sqrt(p (1 - p) / R) (0 for R = 1, as there). A statistic of
        one number (shape () or (1,)) gets the sd (ddof 1) of its values on
        :data:`BOOTSTRAP_RESAMPLES` resamples (with replacement, R of R) of the cell's
        replicates, from a generator of the cell's own (:data:`BOOTSTRAP_SEED`); NaN
        for R = 1. A cell of one replicate whose statistic returns shape (1,) is read
        as the statistic's other cells are (per-replicate where none says otherwise).
        The ``NAME_se`` attribute ``se_method`` says which rule.

    Raises
    ------
    InputError
        A statistic raised, returned something that is not a number or an array of R
        numbers, or returned one number in one cell and per-replicate values in
        another; the message names it and the cell (its values as the tables write
        them).
    """
    from ldpsim.pipeline.formatting import axis_labels  # it imports summary, which imports us

    # Grid axes first, as the summary orders its dims (and a cell's labels read).
    inner = ("rep", "method", "checkpoint", "coord")
    cell_dims = [str(d) for d in use.dims if d not in inner]
    cell_dims += [d for d in inner[1:] if d in use.dims]
    order = [*cell_dims, "rep"]
    mask = use.transpose(*order).values
    columns = [a.broadcast_like(use).transpose(*order).values for a in (lower, upper, estimate)]
    truths = truth.broadcast_like(use).transpose(*order).values
    shape = mask.shape[:-1]
    plane = use.isel(rep=0, drop=True)
    levels = level.broadcast_like(plane).transpose(*cell_dims).values
    axis_values = [[_native(v) for v in use[d].values] for d in cell_dims]
    # The messages name a cell as the tables write its values (n = 1e4).
    axis_texts = [axis_labels(values, "text") for values in axis_values]
    values = {name: np.full(shape, np.nan) for name in statistics}
    ses = {name: np.full(shape, np.nan) for name in statistics}
    rules: dict[str, SeRule] = dict.fromkeys(statistics, "none")
    # Cells of one replicate where the statistic returned shape (1,): either kind.
    undecided: dict[str, list[tuple[int, ...]]] = {name: [] for name in statistics}
    for idx in np.ndindex(*shape):
        keep = mask[idx]
        count = int(keep.sum())
        if count == 0:
            continue
        labels = {d: v[i] for d, v, i in zip(cell_dims, axis_values, idx, strict=True)}
        where = "the cell " + ", ".join(
            f"{d} = {texts[i]}" for d, texts, i in zip(cell_dims, axis_texts, idx, strict=True)
        )
        lo, hi, est = (_read_only(col[idx][keep]) for col in columns)
        cell = Cell(
            lower=lo,
            upper=hi,
            estimate=est,
            truth=_read_only(truths[idx][keep]),
            level=float(levels[idx]),
            labels=MappingProxyType(labels),
        )
        for name, fn in statistics.items():
            value, se, rule = _evaluate(name, fn, cell, where)
            values[name][idx] = value
            if rule is None:
                undecided[name].append(idx)
                continue
            if rules[name] not in ("none", rule):
                raise InputError(
                    f"The statistic {name!r} returned {_rule_words(rule)} at {where} "
                    f"but {_rule_words(rules[name])} elsewhere; return one kind in every "
                    "cell."
                )
            rules[name] = rule
            ses[name][idx] = se
    for name, cells in undecided.items():
        if cells and rules[name] == "none":
            rules[name] = "mean"
        for idx in cells:  # R = 1: the mean rule's sd / sqrt(1) is 0, a bootstrap's NaN
            ses[name][idx] = 0.0 if rules[name] == "mean" else math.nan
    out = xr.Dataset(coords={d: use[d] for d in cell_dims if d in use.coords})
    for name in statistics:
        out[name] = (cell_dims, values[name], _value_attrs(name))
        out[f"{name}_se"] = (cell_dims, ses[name], _se_attrs(name, rules[name]))
    return out


def _evaluate(
    name: str, fn: Statistic, cell: Cell, where: str
) -> tuple[float, float, SeRule | None]:
    """The statistic in ``cell``, its standard error and how that was computed (None:
    R = 1 and shape (1,), which reads as either kind; the caller decides)."""
    result = _call(name, fn, cell, where)
    count = cell.replicates
    if result.shape == (1,) and count == 1:
        return float(result[0]), math.nan, None
    if result.shape in ((), (1,)):
        return float(result.reshape(())), _bootstrap_se(name, fn, cell, where), "bootstrap"
    if result.shape == (count,):
        # Coverage's rule: the sd with ddof 0 (sqrt(p (1 - p)) for indicators).
        mean, sd = mean_and_sd(result, ddof=0)
        return mean, sd / math.sqrt(count), "mean"
    raise InputError(
        f"The statistic {name!r} returned an array of shape {result.shape} at {where}; "
        f"return one number (shape () or (1,)), or one value per replicate (shape "
        f"({count},)) whose mean is the statistic."
    )


def _bootstrap_se(name: str, fn: Statistic, cell: Cell, where: str) -> float:
    """The sd of the statistic over :data:`BOOTSTRAP_RESAMPLES` resamples of the cell's
    replicates (NaN for fewer than 2 replicates), from the cell's own generator."""
    count = cell.replicates
    if count < 2:
        return math.nan
    rng = bootstrap_generator(cell.labels)
    draws = np.empty(BOOTSTRAP_RESAMPLES)
    for b in range(BOOTSTRAP_RESAMPLES):
        rows = rng.integers(0, count, size=count)
        resample = Cell(
            lower=_read_only(cell.lower[rows]),
            upper=_read_only(cell.upper[rows]),
            estimate=_read_only(cell.estimate[rows]),
            truth=_read_only(cell.truth[rows]),
            level=cell.level,
            labels=cell.labels,
        )
        value = _call(name, fn, resample, where)
        if value.shape not in ((), (1,)):
            raise InputError(
                f"The statistic {name!r} returned one number at {where} but an array of "
                f"shape {value.shape} on a bootstrap resample of it; return one kind."
            )
        draws[b] = value.reshape(())
    return mean_and_sd(draws, ddof=1)[1]


def mean_and_sd(values: np.ndarray, ddof: int) -> tuple[float, float]:
    """The mean and the sd (``ddof``) of ``values``, without overflow and without numpy's
    warnings.

    Finite values near the largest float (1e308) overflow numpy's sum and squares; they
    are then averaged in units of a power of two near the largest of them (an exact
    rescaling), so the mean, at most the largest |value|, is finite, and so is the sd
    unless it exceeds the float range itself. Other values are computed as numpy does,
    bit for bit. Values with NaN or inf give what IEEE arithmetic gives (NaN, inf),
    silently, as any other NaN of a summary.

    Examples
    --------
    >>> mean_and_sd(np.array([1.7e308, 1.7e308]), ddof=0)
    (1.7e+308, 0.0)
    """
    with np.errstate(all="ignore"):
        mean, sd = np.mean(values), np.std(values, ddof=ddof)
        if not (np.isfinite(mean) and np.isfinite(sd)) and np.isfinite(values).all():
            _, exponent = np.frexp(np.max(np.abs(values)))
            scaled = np.ldexp(values, -exponent)  # in [-1, 1]: no sum or square overflows
            mean = np.ldexp(np.mean(scaled), exponent)
            sd = np.ldexp(np.std(scaled, ddof=ddof), exponent)
    return float(mean), float(sd)


def bootstrap_generator(labels: Mapping[str, Any]) -> np.random.Generator:
    """The generator of a cell's bootstrap resamples: seeded with :data:`BOOTSTRAP_SEED`
    and the SHA-256 of the cell's labels (grid values, method, [checkpoint,] coord).

    Examples
    --------
    >>> a = bootstrap_generator({"tau": 0.5, "method": "bb", "coord": 0})
    >>> b = bootstrap_generator({"tau": 0.5, "method": "bb", "coord": 1})
    >>> bool(a.integers(0, 2**31) != b.integers(0, 2**31))
    True
    """
    # Imported here: the tasks' seeding module loads numba, which a summary without a
    # bootstrap does not need.
    from ldpsim.tasks.streams.seeding import stable_hash

    # Grid values are numbers and strings; anything else is hashed by its text.
    plain = {k: v if isinstance(v, str | int | float) else str(v) for k, v in labels.items()}
    return np.random.default_rng([BOOTSTRAP_SEED, *stable_hash(plain)])


def _call(name: str, fn: Statistic, cell: Cell, where: str) -> np.ndarray:
    """``fn(cell)`` as a float array; any exception of it as one InputError line."""
    try:
        result = fn(cell)
    except Exception as exc:  # the user's code: any error is reported the same way
        text = " ".join(str(exc).split())
        # The statistic's own frame: where it raised, or called what raised.
        own = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        line = (
            f" ({own.tb_frame.f_code.co_filename}, line {own.tb_lineno})"
            if own is not None
            else ""
        )
        raise InputError(
            f"The statistic {name!r} raised {type(exc).__name__}"
            f"{': ' + text if text else ''}{line} at {where}."
        ) from exc
    try:
        values = np.asarray(result)
        complex_values = np.iscomplexobj(values)
        # Numbers only: None (a forgotten return) would become NaN and a numeric
        # string a number, silently.
        if values.dtype.kind in "biuf":
            return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        complex_values = False
    if complex_values:  # a float conversion would drop the imaginary part silently
        raise InputError(
            f"The statistic {name!r} returned complex values at {where}; return real "
            "numbers (the real part, or the absolute value, whichever you mean)."
        )
    raise InputError(
        f"The statistic {name!r} returned {shown_value(result)} at {where}, not a "
        "number or an array of numbers."
    )


def _value_attrs(name: str) -> dict[str, str]:
    return {
        "long_name": f"the statistic {name!r} given to summarize",
        "description": (
            "over the replicates the cell's coverage counts (n_done): the mean of its "
            "per-replicate values, or the one number it returns"
        ),
    }


def _se_attrs(name: str, rule: SeRule) -> dict[str, Any]:
    if rule == "bootstrap":
        how = (
            f"sd of {name} over {BOOTSTRAP_RESAMPLES} bootstrap resamples (with "
            f"replacement) of the cell's replicates, seeded with {BOOTSTRAP_SEED} and the "
            "cell's labels"
        )
        extra: dict[str, Any] = {
            "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
            "bootstrap_seed": BOOTSTRAP_SEED,
        }
    elif rule == "mean":
        how = f"sd (ddof 0, as coverage_se) of the per-replicate values of {name} / sqrt(R)"
        extra = {}
    else:
        how = "none: no cell had a replicate"
        extra = {}
    return {
        "long_name": f"Monte-Carlo standard error of {name}: {how}",
        "se_method": rule,
        **extra,
    }


def _rule_words(rule: SeRule) -> str:
    return "one number" if rule == "bootstrap" else "one value per replicate"


def _read_only(values: np.ndarray) -> np.ndarray:
    """A copy of ``values`` that no statistic can change: its memory is a ``bytes``
    object, so ``setflags(write=True)`` raises (on it and on its base), and a cell's
    statistics all see the stored values."""
    values = np.ascontiguousarray(values)
    return np.frombuffer(values.tobytes(), dtype=values.dtype).reshape(values.shape)


def _native(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


# -- plugins ------------------------------------------------------------------------------
@dataclass(frozen=True)
class StatisticPlugin:
    """One entry point of :data:`STATISTICS_GROUP`, loaded and checked.

    Attributes
    ----------
    name : str
        The entry point's name: the statistic's name (``--statistic NAME``).
    target : str
        What the entry point names, ``module:attribute``.
    distribution : str
        The installed package that declares it (e.g. ``my-stats 0.1.0``).
    function : callable or None
        The statistic, when it loaded and passed the checks.
    problem : str or None
        Why it was left out, one line; None when it is usable.
    """

    name: str
    target: str
    distribution: str
    function: Statistic | None
    problem: str | None

    @property
    def description(self) -> str:
        """The statistic's docstring summary, whole, on one line ('' without one)."""
        doc = getattr(self.function, "__doc__", None)
        return summary_line(inspect.cleandoc(doc)) if isinstance(doc, str) else ""

    def left_out(self) -> str:
        """The line saying why the plugin is left out."""
        return (
            f"The statistic plugin {self.name!r} ({self.target}, from {self.distribution}) "
            f"{self.problem}; it is left out."
        )


@functools.cache
def statistic_plugins() -> tuple[StatisticPlugin, ...]:
    """Every installed statistic plugin, loaded and checked once per process."""
    from ldpsim.pipeline.summary.variables import reserved_names
    from ldpsim.tasks.plugins import distribution_of

    reserved = reserved_names()
    found = []
    for entry_point in sorted(entry_points(group=STATISTICS_GROUP), key=lambda e: e.name):
        function = None
        try:
            loaded = entry_point.load()
        except Exception as exc:  # a plugin's own error must not stop ldpsim
            problem: str | None = f"cannot be imported ({type(exc).__name__}: {exc})"
        else:
            problem = (
                f"is {shown_value(loaded)}, not a function of a Cell"
                if not callable(loaded)
                else name_problem(entry_point.name, reserved)
            )
            function = loaded if problem is None else None
        found.append(
            StatisticPlugin(
                name=entry_point.name,
                target=entry_point.value,
                distribution=distribution_of(entry_point),
                function=function,
                problem=problem,
            )
        )
    return tuple(found)


def load_statistics(names: Sequence[str]) -> dict[str, Statistic]:
    """The installed statistics ``names`` (``ldpsim summarize --statistic NAME``).

    Raises
    ------
    InputError
        A name no installed package declares (the message lists those installed), or a
        plugin left out (the line saying why).
    """
    if not names:  # no plugin loaded (each imports ldpsim.tasks: half a second)
        return {}
    plugins = {p.name: p for p in statistic_plugins()}
    out: dict[str, Statistic] = {}
    for name in names:
        plugin = plugins.get(name)
        if plugin is None:
            usable = [p.name for p in plugins.values() if p.function is not None]
            installed = ", ".join(usable) if usable else "none is installed"
            raise InputError(
                f"Unknown statistic {name!r} for --statistic; the installed ones (entry "
                f"points of {STATISTICS_GROUP}, docs/extending.md): {installed}."
            )
        if plugin.function is None:
            raise InputError(plugin.left_out())
        out[name] = plugin.function
    return out


def statistic_problems() -> list[str]:
    """One line per statistic plugin left out, saying why."""
    return [p.left_out() for p in statistic_plugins() if p.problem is not None]
