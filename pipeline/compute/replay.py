"""One replicate of a store rerun in this process: its recorded failure again, or its values."""

from __future__ import annotations

import itertools
import json
import math
import numbers
import shlex
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ldpsim.pipeline.compute.failures import GridNames, record_failures
from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.store.code_identity import (
    register_calls,
    registered_units,
    unregistered_units,
)
from ldpsim.pipeline.store.integrity import damaged
from ldpsim.pipeline.store.layout import META_GROUP

if TYPE_CHECKING:
    from ldpsim.tasks.replicate import ReplicateResult
    from ldpsim.tasks.spec import ReplicateSpec

#: Grid points listed in the message that asks for ``--point``, at most.
CHOICES_SHOWN = 8


@dataclass(frozen=True)
class ReplayTarget:
    """One replicate of a store, and the failure record it has, if any.

    Attributes
    ----------
    store : Path
        The store.
    index : tuple of int
        The grid point's position along each axis of the store.
    name : str
        The grid point by its axis values, ``tau = 0.5, n = 1e4``.
    rep : int
        The replicate.
    spec : dict
        The grid point's spec, as its task got it (the record's, or the stored sweep's).
    record_path : Path or None
        The failure record replayed (``STORE/ldpsim/errors/...``); None when the
        replicate has none (it did not fail).
    record : dict or None
        That record.
    point : dict of str to str
        The grid point as ``point=`` of :func:`ldpsim.pipeline.api.replay` takes it:
        each axis and its value as the tables write it (``{"n": "1e4"}``).
    """

    store: Path
    index: tuple[int, ...]
    name: str
    rep: int
    spec: dict[str, Any]
    record_path: Path | None
    record: dict[str, Any] | None
    point: dict[str, str] = field(default_factory=dict)

    @property
    def worker_failure(self) -> bool:
        """Whether the record is of the worker's failure (a ``task`` record: the worker
        was killed, e.g. out of memory or restarted past the task timeout), not of the
        computation's."""
        return self.record is not None and self.record.get("kind") == "task"

    @property
    def failed_methods(self) -> list[str]:
        """The labels of the interval methods the record says failed (a method record)."""
        if self.record is None or self.record.get("kind") != "method":
            return []
        return [str(label) for label in self.record.get("methods") or {}]

    def describe(self) -> str:
        """The line saying what is replayed: the record and its error, or the replicate."""
        seed = self.spec.get("seed")
        if self.record is None or self.record_path is None:
            return (
                f"Replaying rep {self.rep} of {self.name} (seed {seed}): no failure is "
                f"recorded for it."
            )
        failures = record_failures(self.record)
        kinds = ", ".join(kind for kind, _ in failures)
        error = self.record.get("error")
        when = " ".join(
            f"{word} {self.record[key]}"
            for word, key in (("on", "host"), ("at", "time"))
            if self.record.get(key)
        )
        return (
            f"Replaying {self.record_path} ({kinds} failure of rep {self.rep} at {self.name}, "
            f"seed {seed}{', recorded ' + when if when else ''}): {error}"
        )


def parse_point(items: Sequence[str]) -> dict[str, str]:
    """``--point AXIS=VALUE`` options as a mapping axis -> value text.

    Raises
    ------
    InputError
        An item without ``=``, or an axis given twice.
    """
    point: dict[str, str] = {}
    for item in items:
        axis, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not axis or not value:
            raise InputError(f"--point expects AXIS=VALUE, e.g. --point tau=0.5. Got {item!r}.")
        if axis in point:
            raise InputError(f"--point gives the axis {axis!r} twice; give each axis once.")
        point[axis] = value
    return point


def _same(stored: Any, label: str, given: Any) -> bool:
    """Whether ``given`` (a value, or the text of one) is the axis value ``stored``,
    which the tables write as ``label``."""
    if isinstance(given, str):
        if given in (label, str(stored)):
            return True
        if isinstance(stored, str):
            return False
        try:
            return float(given) == float(stored)
        except ValueError:
            return False
    if isinstance(stored, str) or isinstance(given, bool):
        return False
    if isinstance(given, numbers.Real) and isinstance(stored, numbers.Real):
        return float(given) == float(stored) or (
            math.isnan(float(given)) and math.isnan(float(stored))
        )
    return False


def _positions(
    axes: Mapping[str, list[Any]], names: GridNames, point: Mapping[str, Any]
) -> list[list[int]]:
    """The positions along each axis that ``point`` allows (all of an axis it leaves out).

    Raises
    ------
    InputError
        An axis the store does not have, or a value its axis does not hold.
    """
    for axis in point:
        if axis not in axes:
            listed = ", ".join(axes) if axes else "none (a sweep without a grid)"
            raise InputError(f"The store has no grid axis {axis!r}; its axes are: {listed}.")
    out = []
    for axis, values in axes.items():
        labels = names.labels[axis]
        if axis not in point:
            out.append(list(range(len(values))))
            continue
        given = point[axis]
        found = [
            i for i, (v, t) in enumerate(zip(values, labels, strict=True)) if _same(v, t, given)
        ]
        if not found:
            raise InputError(
                f"The grid axis {axis!r} has no value {given!r}; its values are: "
                f"{', '.join(labels)}."
            )
        out.append(found)
    return out


def recorded_failures(store: Path) -> dict[tuple[int, ...], set[int]]:
    """Grid position -> the replicates with a failure record, from the records' file names
    (``I_J__REP.json``, :func:`ldpsim.pipeline.store.store._error_name`)."""
    from ldpsim.pipeline.store.reading import error_record_place

    folder = store / META_GROUP / "errors"
    out: dict[tuple[int, ...], set[int]] = {}
    if not folder.is_dir():
        return out
    for file in folder.glob("*.json"):
        place = error_record_place(file.name)
        if place is not None:
            out.setdefault(place[0], set()).add(place[1])
    return out


def _record_path(store: Path, index: tuple[int, ...], rep: int) -> Path:
    from ldpsim.pipeline.store.store import _error_name  # the records' naming, in one place

    return store / META_GROUP / "errors" / _error_name(index, rep)


def find_target(
    store: str | Path, rep: int, point: Mapping[str, Any] | None = None
) -> ReplayTarget:
    """The replicate ``rep`` of the grid point of ``store`` that ``point`` names.

    Parameters
    ----------
    store : str or Path
        A store written by ``ldpsim run``.
    rep : int
        The replicate, in [0, R) (R replicates per grid point).
    point : mapping of str to object, optional
        Axis -> value (a value, or its text as the tables write it: ``n="1e4"``) for the
        axes that tell the grid point. An axis left out may take any value, as long as
        that leaves one grid point, or one with a recorded failure (of ``rep``, else of
        any replicate).

    Returns
    -------
    ReplayTarget

    Raises
    ------
    InputError
        Not a store, a ``rep`` out of range, an axis or value the store does not have,
        or several grid points to choose from (the message lists them); StoreDamage
        (an InputError) for a damaged store or record.
    """
    from ldpsim.pipeline.store.reading import check_store, read_sweep, stored_layout

    path = Path(store)
    attrs = check_store(path, read_chunks=False)
    # The replicate and the grid point from the stored sweep's grid (the layout's axes),
    # which needs no unit: a store of units this process lacks is refused with the call
    # that replays the point chosen here.
    sweep = read_sweep(path)
    if not 0 <= rep < sweep.replicates:
        raise InputError(
            f"The 'rep' parameter of replay must be an int in [0, {sweep.replicates - 1}] "
            f"(the store has {sweep.replicates} replicates per grid point). Got {rep}."
        )
    axes = {axis: list(values) for axis, values in sweep.grid.items()}
    names = GridNames.of(axes)
    candidates = list(itertools.product(*_positions(axes, names, point or {})))
    failed = recorded_failures(path)
    if len(candidates) > 1:
        for narrowed in (
            [c for c in candidates if rep in failed.get(c, ())],
            [c for c in candidates if c in failed],
        ):
            if narrowed:
                candidates = narrowed
                break
    if len(candidates) > 1:
        shown = [
            " ".join(
                f"--point {axis}={labels[i]}"
                for (axis, labels), i in zip(names.labels.items(), c, strict=True)
            )
            for c in candidates[:CHOICES_SHOWN]
        ]
        more = len(candidates) - len(shown)
        which = "with a recorded failure " if all(c in failed for c in candidates) else ""
        python = f"in Python: point={_labels_at(names, candidates[0])!r}, and so on"
        raise InputError(
            f"{len(candidates)} grid points {which}match; choose one: {' | '.join(shown)}"
            f" ({f'and {more} more; ' if more else ''}{python})."
        )
    (index,) = candidates
    _check_registered_units(path, attrs, rep, _labels_at(names, index))
    layout = stored_layout(path)  # the sweep's units checked (an unknown one: one line)
    record_path = _record_path(path, index, rep)
    record = None
    if record_path.is_file():
        try:
            record = json.loads(record_path.read_bytes())
        except (ValueError, OSError) as exc:
            raise damaged(path, f"error record {record_path.relative_to(path)}", exc) from None
    spec = record.get("spec") if isinstance(record, dict) else None
    if not isinstance(spec, dict):  # no record (the replicate did not fail), or an old one
        record = record if isinstance(record, dict) else None
        spec = _stored_spec(sweep, layout, index)
    return ReplayTarget(
        path,
        index,
        names.name(index),
        rep,
        spec,
        record_path if record else None,
        record,
        _labels_at(names, index),
    )


def _labels_at(names: GridNames, index: tuple[int, ...]) -> dict[str, str]:
    """Axis -> the value's text as the tables write it, at the grid position ``index``:
    the ``point`` that names it."""
    return {axis: labels[i] for (axis, labels), i in zip(names.labels.items(), index, strict=True)}


def replay_route(store: str | Path, attrs: Mapping[str, Any]) -> str:
    """The one line saying how to rerun a replicate of ``store``: what ``ldpsim errors``
    and the report say.

    ``ldpsim replay`` for a store of built-in units and installed plugins; for one that
    used units registered at run time, which only the user's code defines, Python:
    register them again, then :func:`ldpsim.pipeline.api.replay`.
    """
    units = registered_units(attrs)
    if not units:  # the path as a shell reads it back: a space, &, < or a quote in it
        path = shlex.quote(str(store))
        return f"Rerun one here: ldpsim replay {path} --rep R [--point AXIS=VALUE ...] [--pdb]."
    what, calls = register_calls(units)
    them = "them" if len(units) > 1 else "it"
    return (
        f"Rerun one in Python: the store used {what}, registered at run time, which "
        f"`ldpsim replay` cannot load; where your code defines {them}, run {calls}; then "
        f"ldpsim.pipeline.api.replay({str(store)!r}, rep=R, point={{AXIS: VALUE, ...}}, "
        "pdb=True)."
    )


def _check_registered_units(
    path: Path, attrs: Mapping[str, Any], rep: int, point: Mapping[str, str]
) -> None:
    """Refuse, with the way to replay it, a store that used units registered at run time
    that this process does not know (``ldpsim replay``: a new process).

    Raises
    ------
    InputError
        One line naming the units and the calls that replay from Python.
    """
    unknown = unregistered_units(attrs)
    if not unknown:
        return
    what, calls = register_calls(unknown)
    them = "them" if len(unknown) > 1 else "it"
    raise InputError(
        f"The store {str(path)!r} used {what}, registered at run time, and this process "
        f"has not registered {them}, so it cannot rerun its replicates: replay in "
        f"Python, where your code defines {them}: {calls}; then "
        f"ldpsim.pipeline.api.replay({str(path)!r}, rep={rep}, point={dict(point)!r}, "
        "pdb=True)."
    )


def _stored_spec(sweep: Any, layout: Any, index: tuple[int, ...]) -> dict[str, Any]:
    """The spec the tasks of the grid point at ``index`` get (the stored sweep's)."""
    from ldpsim.pipeline.store.layout import store_index

    for point in sweep.points():
        if store_index(layout, point) == index:
            return dict(point.spec)
    raise InputError(f"The store's sweep has no grid point at {index}.")  # not reached


def replay(
    target: ReplayTarget, *, pdb: bool = False, log: Callable[[str], Any] = print
) -> ReplicateResult:
    """Rerun ``target`` in this process; raise its failure again, or return its values.

    A replicate is rerun by :func:`ldpsim.tasks.run_replicate` on the recorded spec
    (its seed included), as its task ran it; a method failure by the same code
    (:func:`ldpsim.tasks.replicate.replicate_from_state`), for that method only and
    raising its exception instead of recording it, so that the exception and its
    traceback are the method's own. Warnings are ignored, as on a worker. ``log`` gets
    the line naming the record (:meth:`ReplayTarget.describe`); for a worker's failure
    (killed or timed out) one saying that the rerun has none of the worker's limits;
    then one saying how the rerun went.

    Parameters
    ----------
    target : ReplayTarget
        From :func:`find_target`.
    pdb : bool, default False
        On a failure, print its traceback and enter pdb's post-mortem debugger in the
        frame that raised, then raise it.
    log : callable, default print
        Takes each line said.

    Returns
    -------
    ReplicateResult
        The replicate's values, when nothing fails (a replicate that did not fail, or a
        recorded failure that does not happen again).

    Raises
    ------
    InputError
        The recorded spec no longer validates (a plugin uninstalled, a parameter
        renamed), in one line.
    Exception
        The replicate's or the method's own exception, when it fails.
    """
    log(target.describe())
    if target.worker_failure:
        log(
            "The recorded failure is the worker's (killed or timed out), not an error of "
            "the computation: replay runs the computation in this process, without the "
            "worker's memory and time limits."
        )
    spec = _recorded_spec(target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome = _rerun(target, spec)
    if not isinstance(outcome, tuple):
        if target.worker_failure:
            log(
                f"The computation ran to the end here ({outcome.seconds:.3g} s), without "
                "the worker's limits: the worker's failure came from its memory or time "
                "limit (or its machine), not from an error in the computation."
            )
        elif target.record is not None:
            log("The recorded failure did not happen again: the replicate ran without failing.")
        log(compare_with_store(target, spec, outcome).line())
        return outcome
    what, exc, text = outcome
    if target.worker_failure:
        log(f"The {what} failed here, without the worker's limits: {text}")
    else:
        _log_again(log, what, text, _recorded_error(target, what))
    if pdb:
        _post_mortem(exc)
    raise exc


@dataclass(frozen=True)
class StoreComparison:
    """A replicate computed again by replay beside the values its store holds.

    Values are equal when their bits are, except that any NaN equals any NaN (the
    store's NaN of a failed method, of a coordinate the model lacks, or of a model
    without an l1 ball, carries no value): so 0.0 and -0.0 differ, and no tolerance
    hides a change.

    Attributes
    ----------
    compared : list of str
        What was compared, in words: the estimate, the last iterate, the projected
        estimate (a store that has it), then the methods (each its bounds, its
        estimate and its failure flags).
    differing : list of str
        What differs, in words, each with its largest difference (``"bb's lower bound
        (largest difference 2.22e-16)"``); empty when all is equal.
    absent : str or None
        Why the store holds no values of the replicate to compare (failed, or not
        computed yet); None when it does.
    not_stored : list of str
        Methods of the store not computed for the replicate yet (added to the store,
        still pending), so not compared.
    stored_version : int or None
        The replicate's ``code_version`` (:mod:`ldpsim.pipeline.store.code_identity`); None
        where the store did not record it.
    current_version : int or None
        The latest of the store's code versions whose units (this grid point's model,
        mechanism and methods) have the source that this process runs; None when none
        has it (code changed since, not recorded by a run).
    versions : int
        The code versions the store records (0: a store of an older ldpsim).
    """

    compared: list[str]
    differing: list[str]
    absent: str | None
    not_stored: list[str]
    stored_version: int | None
    current_version: int | None
    versions: int

    @property
    def equal(self) -> bool:
        """Whether the replicate computed again equals the store's."""
        return self.absent is None and not self.differing

    def line(self) -> str:
        """The one line replay prints about it."""
        pending = (
            f" ({', '.join(self.not_stored)}: added to the store and not computed for this "
            "replicate yet, so not compared)"
            if self.not_stored
            else ""
        )
        if self.equal:
            return f"Equal to the store, bit for bit: {', '.join(self.compared)}{pending}."
        if self.absent is not None:  # nothing stored to compare: no code version to blame
            return f"Not compared: {self.absent}{pending}."
        what = "; ".join(self.differing)
        if not self.versions:
            return (
                "Differs from the store (which records no code versions: an older "
                f"ldpsim wrote it): {what}{pending}."
            )
        stored = (
            f"computed by code version {self.stored_version}"
            if self.stored_version is not None
            else "computed by code whose version the store did not record"
        )
        if self.current_version is None:
            now = "now code of no version the store records: changed since its last run"
        elif self.current_version == self.stored_version:
            now = (
                f"now version {self.current_version}, the same source: a module it "
                "imports may have changed"
            )
        else:
            now = f"now version {self.current_version}"
        return f"Differs from the store ({stored}; {now}): {what}{pending}."


def compare_with_store(
    target: ReplayTarget, spec: ReplicateSpec, result: ReplicateResult
) -> StoreComparison:
    """What the store holds for ``target``'s replicate beside ``result``, its values
    computed again (with ``spec``, the recorded spec normalized)."""
    from ldpsim.pipeline.store.code_identity import CODE_VERSION
    from ldpsim.pipeline.store.damage import find_damage
    from ldpsim.pipeline.store.reading import open_dataset

    # A missing or swapped file reads as NaN or another's values, and a changed byte
    # fails the read: a damaged store's values are not compared (not blamed on the code).
    # The files are compared with their digests (cheap); the replicate's own are decoded.
    def not_compared(reason: str) -> StoreComparison:
        return StoreComparison([], [], reason, [], None, None, 0)

    damage = find_damage(target.store, verify=False, recompute=False)
    if damage:
        return not_compared(f"the store is {damage.describe()}")
    ds = open_dataset(target.store)
    axes = [dim for dim in ds["done"].dims if dim != "rep"]
    stored = ds.isel({**dict(zip(axes, target.index, strict=True)), "rep": target.rep})
    try:
        stored = stored.load()
    except Exception as exc:  # a codec's checksum error: the message names no file
        return not_compared(
            f"the store is damaged: a file of this replicate does not decode "
            f"({type(exc).__name__}); `ldpsim status` names it, `ldpsim run` recomputes it"
        )
    version = int(stored[CODE_VERSION].values) if CODE_VERSION in stored else -1
    stored_version = version if version >= 0 else None
    versions, current_version = _current_version(ds.attrs, spec)
    labels = [str(label) for label in ds["method"].values]
    pending = _pending_methods(target.store, stored, labels)
    methods = [label for label in result.lower if label in labels and label not in pending]

    def outcome(absent: str | None, compared: list[str], differing: list[str]) -> StoreComparison:
        shown = [label for label in pending if label in result.lower]
        return StoreComparison(
            compared, differing, absent, shown, stored_version, current_version, versions
        )

    if not bool(stored["done"].values):
        failed = bool(stored["failed"].values)
        return outcome(
            "the store records this replicate as failed"
            if failed
            else "the store holds no values of this replicate yet (not computed)",
            [],
            [],
        )
    dim = np.shape(result.estimate)[-1]
    pairs: list[tuple[str, Any, Any]] = [
        ("the estimate", result.estimate, stored["estimate"].values[..., :dim])
    ]
    if "last" in stored:  # a store of an older ldpsim lacks it
        pairs.append(("the last iterate", result.last, stored["last"].values[..., :dim]))
    if "projected" in stored:
        projected = result.projected
        if projected is None:  # stored as NaN: the model states no ball
            projected = np.full(np.shape(result.estimate), np.nan)
        pairs.append(("the projected estimate", projected, stored["projected"].values[..., :dim]))
    compared = [what for what, _, _ in pairs]
    if methods:
        compared.append(f"the bounds, estimate and failure flag of {', '.join(methods)}")
    for label in methods:
        at = stored.isel(method=labels.index(label))
        pairs += [
            (f"{label}'s lower bound", result.lower[label], at["lower"].values[..., :dim]),
            (f"{label}'s upper bound", result.upper[label], at["upper"].values[..., :dim]),
            (f"{label}'s failure flag", result.method_failed[label], at["method_failed"].values),
        ]
        if "method_estimate" in at:
            pairs.append(
                (
                    f"{label}'s estimate",
                    result.method_estimate[label],
                    at["method_estimate"].values[..., :dim],
                )
            )
    differing = [
        f"{what}{_difference(computed, held)}"
        for what, computed, held in pairs
        if not same_values(computed, held)
    ]
    return outcome(None, compared, differing)


def same_values(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` have one shape and equal values bit for bit, any NaN
    equal to any NaN (:class:`StoreComparison`).

    Examples
    --------
    >>> same_values([1.0, float("nan")], [1.0, -float("nan")]), same_values([0.0], [-0.0])
    (True, False)
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind != "f" or b.dtype.kind != "f":
        return bool(np.array_equal(a, b))
    a, b = (np.ascontiguousarray(x, dtype=np.float64) for x in (a, b))
    nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(nan | (a.view(np.uint64) == b.view(np.uint64))))


def _difference(computed: Any, held: Any) -> str:
    """`` (largest difference X)`` between two float arrays of one shape; '' where that
    says nothing (flags, shapes that differ)."""
    a, b = np.asarray(computed), np.asarray(held)
    if a.shape != b.shape or a.dtype.kind != "f" or b.dtype.kind != "f":
        return ""
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return " (NaN in one, a number in the other)"
    with np.errstate(all="ignore"):
        gap = np.nanmax(np.abs(a - b), initial=0.0)
    return f" (largest difference {gap:.3g})" if gap > 0 else " (0.0 and -0.0)"


def _current_version(attrs: Mapping[str, Any], spec: ReplicateSpec) -> tuple[int, int | None]:
    """The code versions the store records, and the latest of them whose units of
    ``spec`` have the source this process runs
    (:func:`ldpsim.pipeline.store.code_identity.unit_origin`; None: none has)."""
    from ldpsim.pipeline.store.code_identity import read_generations, spec_units, unit_origin

    try:
        generations = read_generations(dict(attrs)) or []
    except InputError:  # the checks of a run say so
        generations = []
    now = {key: unit_origin(cls).get("source_sha256") for key, cls in spec_units(spec).items()}
    for index in range(len(generations) - 1, -1, -1):
        recorded = generations[index]
        if all((recorded.get(key) or {}).get("source_sha256") == sha for key, sha in now.items()):
            return len(generations), index
    return len(generations), None


def _pending_methods(store: Path, stored: Any, labels: list[str]) -> list[str]:
    """The methods added to ``store`` after it was made that the replicate ``stored``
    (one replicate's Dataset) has no ``method_seconds`` of yet: not computed for it
    (:mod:`ldpsim.pipeline.compute.added_methods`)."""
    import zarr

    from ldpsim.pipeline.store.pending import first_added

    if "method_seconds" not in stored:
        return []
    group = zarr.open_group(str(store), mode="r", zarr_format=3)
    first = first_added({"lower": group["lower"]})
    seconds = stored["method_seconds"].transpose("method", ...).values.reshape(len(labels), -1)
    return [label for m, label in enumerate(labels) if m >= first and np.isnan(seconds[m]).all()]


def _recorded_spec(target: ReplayTarget) -> ReplicateSpec:
    """The recorded spec, normalized as when it ran.

    Raises
    ------
    InputError
        It no longer validates (a plugin uninstalled, a parameter renamed), or a
        plugin's code raised on it (:func:`ldpsim.tasks.plugins.plugin_code_errors`).
    """
    from ldpsim.tasks import normalize_spec
    from ldpsim.tasks.plugins import PluginCodeError, plugin_code_errors

    which = f"The recorded spec of rep {target.rep} at {target.name}"
    try:
        with plugin_code_errors():
            return normalize_spec(target.spec)
    except PluginCodeError as exc:
        raise InputError(f"{which} cannot be set up: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"{which} no longer validates: {str(exc).rstrip('.')}. Was a plugin "
            "uninstalled, or a parameter renamed, since it ran?"
        ) from None


def _rerun(
    target: ReplayTarget, spec: ReplicateSpec
) -> ReplicateResult | tuple[str, BaseException, str]:
    """The replicate's values, or (what failed, its exception, the record's text for it)."""
    from ldpsim.tasks import run_replicate
    from ldpsim.tasks.grid_point import GridPointSetup
    from ldpsim.tasks.replicate import MethodFailure, replicate_from_state, replicate_start

    try:
        setup = GridPointSetup.of(spec)
        for label in (label for label in target.failed_methods if label in spec.methods):
            state, raw = replicate_start(setup, target.rep)
            streams = setup.method_streams(target.rep)
            try:
                replicate_from_state(
                    setup, state, streams, methods=(label,), raise_failures=True, raw=raw
                )
            except MethodFailure as failure:  # the method's own exception is the cause
                return f"method {label}", failure.__cause__ or failure, failure.reason
        return run_replicate(setup, target.rep)
    except Exception as exc:  # the replicate's own failure, raised again by replay
        return "replicate", exc, f"{type(exc).__name__}: {exc}"


def _recorded_error(target: ReplayTarget, what: str) -> str | None:
    """The error text the record has for ``what`` ("replicate" or "method LABEL")."""
    record = target.record
    if record is None:
        return None
    if what.startswith("method "):
        return str((record.get("methods") or {}).get(what.removeprefix("method ")))
    return None if record.get("kind") == "method" else str(record.get("error"))


def _log_again(log: Callable[[str], Any], what: str, text: str, recorded: str | None) -> None:
    if recorded is None:
        log(f"The {what} failed (no such failure was recorded): {text}")
    elif text == recorded:
        log(f"The {what} failed again, with the recorded error.")
    else:
        log(f"The {what} failed with another error than the recorded one ({recorded}): {text}")


def _post_mortem(exc: BaseException) -> None:
    import pdb

    traceback.print_exception(exc)
    pdb.post_mortem(exc.__traceback__)


def format_result(rep: int, result: ReplicateResult) -> str:
    """What replicate ``rep`` gave when it ran: its estimate and each method's interval
    (at n, the last checkpoint), a failed method's reason beside it."""

    def at_n(values: np.ndarray) -> str:
        values = np.asarray(values)
        row = values[-1] if result.checkpoints else values
        return np.array2string(row, precision=6, threshold=8)

    lines = [f"rep {rep}: done in {result.seconds:.3g} s"]
    width = max(len("estimate"), *(len(label) for label in result.lower))
    lines.append(f"  {'estimate':<{width}}  {at_n(result.estimate)}")
    for label in result.lower:
        failure = result.failures.get(label)
        reason = f" (failed: {failure})" if failure else ""
        bounds = f"{at_n(result.lower[label])} to {at_n(result.upper[label])}"
        lines.append(f"  {label:<{width}}  {bounds}{reason}")
    return "\n".join(lines)
