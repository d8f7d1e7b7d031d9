"""Whether a store may take a requested sweep: the same specification, the same streams.

Extending or resuming a store is refused when the requested sweep differs in what
identifies it (seed, axes, base specification, methods) or when this ldpsim would draw
other random numbers for it than the store's creator did.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.store.reading import read_attrs, read_sweep
from ldpsim.pipeline.store.streams_record import running_fingerprint
from ldpsim.pipeline.sweep import CASE_AXIS, Sweep, adopt_recorded_choices
from ldpsim.tasks.intervals.batch_means import BatchMeans
from ldpsim.tasks.intervals.bootstrap import DEFAULT_BETA, BlockBootstrap
from ldpsim.tasks.spec import build_methods, build_unit, find_unit
from ldpsim.tasks.streams.seeding import (
    STREAMS_VERSION,
    has_negative_zero,
    stable_hash,
    streams_changed_since,
)

#: The release from which a new store records the choices of
#: :func:`~ldpsim.pipeline.sweep.recommended_choices` (issue 24); before it, a method
#: that named no choice got its class's default (bb: the basic form, the sup-t band).
CHOICES_RECORDED_SINCE = "0.2"


def adopt_store_choices(sweep: Sweep, path: str | Path) -> Sweep:
    """``sweep`` as the store at ``path`` resolved the choices its file leaves out.

    A new store records the recommended choices
    (:func:`~ldpsim.pipeline.sweep.recommended_choices`); an existing one keeps those it
    was made with, so resuming it never changes a method
    (:func:`~ldpsim.pipeline.sweep.adopt_recorded_choices`).
    ``sweep`` is returned unchanged when there is no readable store at ``path`` (the
    checks that follow report what is wrong with it).
    """
    if not sweep.defaulted:
        return sweep
    try:
        if not (Path(path) / "zarr.json").is_file():
            return sweep
        stored = read_sweep(path)
    except (InputError, OSError, ValueError, KeyError):  # e.g. a name too long
        return sweep
    return adopt_recorded_choices(sweep, stored)


def new_store_notes(sweep: Sweep, path: str | Path) -> list[str]:
    """Check ``sweep`` for a new store at ``path``, and say which defaults it applies.

    For a new store (nothing at ``path`` holds a ``zarr.json``): two method labels that
    make the same method are refused (:func:`check_distinct_methods`), and the lines of
    :func:`moved_default_lines` are returned, for the run to print. An existing store
    keeps the methods it recorded (:func:`adopt_store_choices`): nothing is checked or
    said; the checks of the store follow.

    Parameters
    ----------
    sweep : Sweep
        A validated sweep (:func:`ldpsim.pipeline.sweep.load_sweep`).
    path : str or pathlib.Path
        The store the run writes.

    Returns
    -------
    list of str
        One line per method label given a default that an earlier release set otherwise.

    Raises
    ------
    InputError
        Two labels of one method (one line naming them).

    Examples
    --------
    >>> from ldpsim.pipeline.sweep import load_sweep
    >>> sweep = load_sweep("demo", [("methods", {"bb": {}, "sn": {}})], None)
    >>> new_store_notes(sweep, "never-made.zarr")  # doctest: +NORMALIZE_WHITESPACE
    ['bb: no form given, so the t form (ldpsim >= 0.2; before: basic). Set
      methods.bb.form = "basic" for the old intervals.']
    """
    try:
        if (Path(path) / "zarr.json").exists():
            return []
    except OSError:  # e.g. a name too long: the store's own checks say so
        return []
    check_distinct_methods(sweep)
    return moved_default_lines(sweep)


def moved_default_lines(sweep: Sweep) -> list[str]:
    """A line for each choice that ``sweep`` filled in and an earlier release did not.

    A method that names no ``form`` (or, simultaneous, no ``band``) gets the recommended
    one in a new store (:func:`~ldpsim.pipeline.sweep.recommended_choices`); before
    ldpsim :data:`CHOICES_RECORDED_SINCE` it got its class's default. Where the two
    differ, the line names the label and how to get the old behaviour.

    Returns
    -------
    list of str
        E.g. ``bb: no form given, so the t form (ldpsim >= 0.2; before: basic). Set
        methods.bb.form = "basic" for the old intervals.``; none for a sweep read from a
        store (its ``defaulted`` is empty).
    """
    lines = []
    for label, filled in sweep.defaulted.items():
        params = sweep.methods[label]
        unit = find_unit("method", params.get("method", label))
        defaults = {f.name: f.default for f in dataclasses.fields(unit)}
        for param in filled:
            before, now = defaults.get(param, dataclasses.MISSING), params[param]
            if before is dataclasses.MISSING or before == now:
                continue
            lines.append(
                f"{label}: no {param} given, so the {now} {param} (ldpsim >= "
                f"{CHOICES_RECORDED_SINCE}; before: {before}). Set methods.{label}.{param} = "
                f"{json.dumps(before)} for the old intervals."
            )
    return lines


def check_distinct_methods(sweep: Sweep) -> None:
    """Refuse two method labels that make the same method.

    Labels are compared once each is resolved: its kind (``method``, else the label),
    the parameters it names, the choices filled in for it and its class's defaults
    (``bb = {}`` is ``bb_t = {method = "bb", form = "t"}`` in a new sweep). Such labels
    compute the same intervals on other random streams, and a comparison of them
    measures noise.

    Raises
    ------
    InputError
        One line naming every such group of labels and the method they make.
    """
    methods = build_methods(sweep.methods)
    groups: list[list[str]] = []
    for label, method in methods.items():
        same = next((g for g in groups if methods[g[0]] == method), None)
        if same is None:
            groups.append([label])
        else:
            same.append(label)
    clashes = [g for g in groups if len(g) > 1]
    if not clashes:
        return
    parts = []
    for group in clashes:
        named = sorted({k for label in group for k in sweep.methods[label] if k != "method"})
        method = methods[group[0]]
        setting = ", ".join(f"{k} = {json.dumps(getattr(method, k), default=str)}" for k in named)
        what = f"{method.name} with {setting}" if setting else f"{method.name} with its defaults"
        labels = ", ".join(repr(label) for label in group[:-1]) + f" and {group[-1]!r}"
        parts.append(f"the method labels {labels} resolve to the same method ({what})")
    text = "; ".join(parts)
    raise InputError(
        f"{text[0].upper()}{text[1:]}: they would compute the same intervals on other "
        "random streams. Keep one label, or make them differ."
    )


def check_streams(path: Path, sweep: Sweep, *, fingerprint: bool = True) -> None:
    """Refuse a store whose random streams differ from this ldpsim's for ``sweep``.

    Stores written before the ``streams_version`` attribute existed drew version 1. A
    newer version changes the numbers of some mechanisms or methods only
    (``STREAMS_CHANGED``); a store that uses none of them gets the same numbers and may
    be resumed or extended.

    The ``streams_fingerprint`` attribute holds hashes of numpy's numbers as the
    store's creator drew them (:func:`ldpsim.tasks.streams.seeding.streams_fingerprint`); a part
    that the sweep uses (the data stream, its multiplier laws) and that differs under
    the running numpy is refused. A store without the attribute (made before it
    existed) is accepted, and the attribute is not added: nobody can tell which numpy
    drew its replicates. ``fingerprint`` False leaves the fingerprint out (it draws
    numbers with the compiled samplers, which takes a moment): a run with nothing to
    compute changes no number and checks it only when it computes.
    """
    attrs = read_attrs(path)
    check_gpu_streams(path, attrs, sweep)
    raw = attrs.get("streams_version", 1)
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= STREAMS_VERSION:
        raise InputError(
            f"The store {str(path)!r} has an invalid 'streams_version' attribute {raw!r} "
            f"(an integer in [1, {STREAMS_VERSION}] is allowed); refusing to change it."
        )
    points = sweep.points()
    changed = streams_changed_since(raw)
    clash = [
        f"the mechanism {name}"
        for name in sorted({point.normalized.mechanism.name for point in points} & changed)
    ]
    # Version 3 changed bm only where its default batch count follows a bb whose beta
    # is not the 0.75 that bm used before.
    for label, params in sweep.methods.items():
        method = points[0].normalized.methods[label]
        if (
            isinstance(method, BatchMeans)
            and method.name in changed
            and not {"n_batches", "beta"} & set(params)
            and method.beta != DEFAULT_BETA
        ):
            clash.append(f"the method {label} (its default n_batches)")
    # Version 4 keys a value written as -0.0 as 0.0: the store's replicates drawn with
    # such a key came from other streams than the new ones would.
    if raw < 4:
        clash += _negative_zero_keys(read_sweep(path))
    if clash:
        raise InputError(
            f"The store {str(path)!r} was written with random streams of version {raw}, "
            f"and this ldpsim (streams version {STREAMS_VERSION}) computes different numbers "
            f"for {', '.join(clash)}; refusing to compute into it. Use another --store "
            f"path, or the ldpsim release that wrote it."
        )
    if fingerprint:
        _check_fingerprint(path, attrs, sweep)


def check_added_streams(path: Path, grown: Sweep) -> None:
    """Refuse to add a stream key holding -0.0 to a store of streams version 3 or older.

    This ldpsim draws such a key's streams as those of 0.0 (version 4), but the store,
    still of its older version, would then record -0.0, which its version drew from
    other streams: every later run would be refused as if its replicates came from
    them (:func:`check_streams`). Written as 0.0 the same replicates are recorded truly.

    Parameters
    ----------
    path : Path
        The store.
    grown : Sweep
        The sweep it would record (:func:`ldpsim.pipeline.store.store.grown_sweep`),
        its own keys already checked by :func:`check_streams`.

    Raises
    ------
    InputError
        Naming the values and what to write instead.
    """
    raw = read_attrs(path).get("streams_version", 1)
    keys = _negative_zero_keys(grown) if raw < 4 else []
    if keys:
        raise InputError(
            f"The store {str(path)!r} was written with random streams of version {raw}, "
            f"which drew other numbers for -0.0 than for 0.0; this run would add "
            f"{', '.join(keys)}, refused so that the store's record stays true: write the "
            "value as 0.0 (the same value, the same replicates), or use another --store "
            "path."
        )


def _negative_zero_keys(sweep: Sweep) -> list[str]:
    """The stream keys of ``sweep``'s grid points that hold a value -0.0, named."""
    named: set[str] = set()
    for point in sweep.points():
        spec = point.normalized
        path_key = spec.path_key()
        named |= {
            f"the value -0.0 of {key}" for key in path_key if has_negative_zero(path_key[key])
        }
        named |= {
            f"the value -0.0 in the method {label}"
            for label in spec.methods
            if has_negative_zero(spec.method_key(label))
        }
    return sorted(named)


def check_gpu_streams(path: Path, attrs: dict[str, Any], sweep: Sweep) -> None:
    """Refuse a GPU store whose Philox streams are of another version than this ldpsim's.

    Raises
    ------
    InputError
        The store's ``gpu_streams`` differs from
        :data:`ldpsim.tasks.streams.philox.STREAMS_VERSION` (new replicates would not come from
        the streams of the stored ones).
    """
    if sweep.backend != "gpu":
        return
    from ldpsim.tasks.streams.philox import STREAMS_VERSION as GPU_STREAMS

    recorded = attrs.get("gpu_streams")
    if recorded != GPU_STREAMS:
        raise InputError(
            f"The store {str(path)!r} was written with the GPU streams {recorded!r}, and this "
            f"ldpsim draws {GPU_STREAMS!r}; refusing to compute into it. Use another --store "
            "path, or the ldpsim release that wrote it."
        )


def _check_fingerprint(path: Path, attrs: dict[str, Any], sweep: Sweep) -> None:
    """Refuse a store whose recorded numpy draws differ from the running numpy's."""
    if "streams_fingerprint" not in attrs:
        return  # made before the fingerprint existed; see check_streams
    raw = attrs["streams_fingerprint"]
    try:
        recorded = json.loads(raw)
        if not isinstance(recorded, dict) or not all(
            isinstance(v, str) for v in recorded.values()
        ):
            raise ValueError
    except (TypeError, ValueError, RecursionError):  # RecursionError: nested too deep
        raise InputError(
            f"The store {str(path)!r} has an invalid 'streams_fingerprint' attribute "
            f"{raw!r} (a JSON object of part -> hash is allowed); refusing to change it."
        ) from None
    used = {"data"} | {
        method.multiplier
        for point in sweep.points()
        for method in point.normalized.methods.values()
        if isinstance(method, BlockBootstrap)
    }
    running = running_fingerprint()
    differ = sorted(
        part for part in used if part in recorded and recorded[part] != running.get(part)
    )
    if differ:
        try:
            written = json.loads(attrs.get("versions", "{}")).get("numpy", "unknown")
        except (TypeError, ValueError, AttributeError, RecursionError):
            written = "unknown"
        raise InputError(
            f"The store {str(path)!r} was written with numpy {written}, whose random "
            f"numbers differ from this numpy {np.__version__}'s for "
            f"{', '.join(_fingerprint_label(part) for part in differ)} (streams "
            f"fingerprint); refusing to compute into it, new replicates would not be "
            f"comparable. Use another --store path, or the numpy that wrote it ({written})."
        )


def _fingerprint_label(part: str) -> str:
    return "the data stream" if part == "data" else f"the {part} multipliers"


def identity_diff(stored: Sweep, requested: Sweep) -> list[str]:
    """Human-readable differences that forbid extending ``stored`` with ``requested``.

    A method label that ``stored`` lacks is no difference: the store grows along its
    ``method`` axis (:func:`added_methods`). A stored label that ``requested`` lacks,
    or names with other parameters, is one.
    """
    a = json.loads(json.dumps(stored.identity(), sort_keys=True, default=str))
    b = json.loads(json.dumps(requested.identity(), sort_keys=True, default=str))
    out = []
    for key in ("seed", "axes"):
        if a[key] != b[key]:
            out.append(f"{key}: {a[key]!r} -> {b[key]!r}")
    # A spec key or a case written otherwise (a default written out, another spelling)
    # is no difference where it gives every grid point the same replicate spec and
    # streams: the grid points are normalized again only for such keys, all at once.
    stored_cases, requested_cases = a.get("cases", {}), b.get("cases", {})
    written = [
        ("spec", k, a["base"].get(k, "<absent>"), b["base"].get(k, "<absent>"))
        for k in sorted(set(a["base"]) | set(b["base"]))
    ] + [
        ("cases", label, stored_cases[label], requested_cases[label])
        for label in sorted(set(stored_cases) & set(requested_cases))
    ]
    differing = [entry for entry in written if not _same(entry[2], entry[3])]
    # A case the request does not run is compared as written: nothing would show that
    # a table redefined there disagrees with the store.
    run = {str(label) for label in requested.grid.get(CASE_AXIS, [])}
    comparable = [(kind, key) for kind, key, *_ in differing if kind == "spec" or key in run]
    if comparable and len(comparable) == len(differing):
        if _same_points(stored, requested, comparable):
            differing = []
    if len(differing) > 1:  # which of them differ (a refusal names only those)
        differing = [
            entry
            for entry in differing
            if (entry[0], entry[1]) not in comparable
            or not _same_points(stored, requested, [(entry[0], entry[1])])
        ]
    out += [
        f"spec.{key}: {was!r} -> {now!r}" for kind, key, was, now in differing if kind == "spec"
    ]
    for k in sorted(set(a["methods"]) | set(b["methods"])):
        va, vb = a["methods"].get(k, "<absent>"), b["methods"].get(k, "<absent>")
        if k not in a["methods"] or _same_method(k, va, vb):
            continue
        out.append(f"methods.{k}: {va!r} -> {vb!r}")
    out += _follower_diffs(stored, requested)
    out += [
        f"cases.{key}: {was!r} -> {now!r}" for kind, key, was, now in differing if kind == "cases"
    ]
    return out


def _same_points(stored: Sweep, requested: Sweep, written: list[tuple[str, str]]) -> bool:
    """Whether the spec keys and case tables ``written`` (("spec", key) or ("cases",
    label)), written otherwise in the two sweeps, mean the same.

    They do when every grid point of ``requested`` gives the same replicate
    specification and the same stream keys with the stored base's values of those keys
    (or without them, where the store has none) and the stored case tables: a default
    written out (``c = 1.0``, ``theta0 = 0.0``, the model's own mechanism) or another
    spelling of a value, the same streams and numbers. The stream keys are compared
    too: a plugin's field that keeps an int as written (``loc = 0`` for ``0.0``) is
    equal in the spec but keys other streams.
    """
    base, cases = dict(requested.base), dict(requested.cases)
    for kind, key in written:
        if kind == "cases":
            cases[key] = stored.cases[key]
        elif key in stored.base:
            base[key] = stored.base[key]
        else:
            base.pop(key, None)
    try:
        other = dataclasses.replace(requested, base=base, cases=cases)
        pairs = zip(requested.points(), other.points(), strict=True)
        return all(
            p.normalized == q.normalized and _stream_keys(p) == _stream_keys(q) for p, q in pairs
        )
    except (InputError, TypeError, ValueError):
        return False


def _stream_keys(point: Any) -> tuple:
    """The seed and the hashed keys of a grid point's data stream and of every method's
    stream (:class:`ldpsim.tasks.grid_point.GridPointSetup`)."""
    spec = point.normalized
    methods = {label: stable_hash(spec.method_key(label)) for label in spec.methods}
    return spec.seed, stable_hash(spec.path_key()), methods


def _follower_diffs(stored: Sweep, requested: Sweep) -> list[str]:
    """The stored bm methods whose default batch count the requested methods change.

    A bm that sets neither ``n_batches`` nor ``beta`` takes the beta of the sweep's bb
    (:func:`~ldpsim.tasks.intervals.batch_means.follow_bootstrap`; 0.75 without one), so
    a bb added to a store of such a bm would change the intervals of its new replicates
    under the same label, though its own table is unchanged.
    """
    try:
        before, after = build_methods(stored.methods), build_methods(requested.methods)
    except (TypeError, ValueError):  # the sweep's own checks say what is wrong
        return []
    out = []
    for label, was in before.items():
        now = after.get(label)
        if not (isinstance(was, BatchMeans) and isinstance(now, BatchMeans)):
            continue
        if was.n_batches is not None or now.n_batches is not None:
            continue
        old_beta = DEFAULT_BETA if was.beta is None else was.beta
        new_beta = DEFAULT_BETA if now.beta is None else now.beta
        if old_beta != new_beta:
            out.append(
                f"methods.{label}: its default n_batches is the block count of the sweep's "
                f"bb, beta = {old_beta} in the store -> beta = {new_beta} with the requested "
                "methods"
            )
    return out


def added_methods(stored: Sweep, requested: Sweep) -> dict[str, dict[str, Any]]:
    """The method labels of ``requested`` that ``stored`` lacks, with their parameters,
    in ``requested``'s order: the store's ``method`` axis grows by these.

    Raises
    ------
    InputError
        An added label makes the same method as another label of ``requested`` (it
        would compute the same intervals on another random stream).
    """
    added = {label: p for label, p in requested.methods.items() if label not in stored.methods}
    if not added:
        return {}
    methods = build_methods(requested.methods)
    for label in added:
        same = [other for other in methods if other != label and methods[other] == methods[label]]
        if same:
            raise InputError(
                f"The added method label {label!r} makes the same method as "
                f"{', '.join(map(repr, same))} ({methods[label].name}): it would compute the "
                "same intervals on another random stream. Give it other parameters, or "
                "leave it out."
            )
    return added


def _same_method(label: str, a: Any, b: Any) -> bool:
    """Whether two methods' parameter tables make the same method: equal once every
    parameter is resolved (a parameter named at its default equals one left out)."""
    try:
        return _method_values(label, a) == _method_values(label, b)
    except (TypeError, ValueError):
        return False


def _method_values(label: str, params: Any) -> dict[str, Any]:
    params = dict(params)
    kind = params.pop("method", label)
    method = build_unit(find_unit("method", kind), params, "method")
    return json.loads(json.dumps({"method": kind, **dataclasses.asdict(method)}, default=str))


def _same(a: Any, b: Any) -> bool:
    """Equality that treats 1 and 1.0 alike, recursively."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    return a == b
