"""Sweep specifications (TOML): loading, validation and expansion into grid points."""

from __future__ import annotations

import copy
import itertools
import json
import math
import numbers
import tomllib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ldpsim.pipeline.errors import InputError
from ldpsim.tasks import normalize_spec
from ldpsim.tasks.spec import SPEC_KEYS, ReplicateSpec, model_param_keys
from ldpsim.tasks.validation import check_int

#: Top-level keys of a sweep file.
SWEEP_KEYS = ("description", "replicates", "seed", "spec", "grid", "methods", "rep_chunk")
BUILTIN_DIR = "sweeps"


def builtin_sweeps() -> dict[str, str]:
    """Name -> description of the sweeps shipped with ldpsim."""
    out = {}
    for entry in sorted(resources.files("ldpsim.pipeline").joinpath(BUILTIN_DIR).iterdir()):
        if entry.name.endswith(".toml"):
            data = tomllib.loads(entry.read_text())
            out[entry.name[: -len(".toml")]] = data.get("description", "")
    return out


@dataclass(frozen=True)
class GridPoint:
    """One configuration of a sweep: its grid index, axis values and replicate spec."""

    index: tuple[int, ...]
    values: dict[str, Any]
    spec: dict[str, Any]
    normalized: ReplicateSpec = field(repr=False, compare=False)


@dataclass(frozen=True)
class Sweep:
    """A validated sweep: fixed spec values, grid axes, methods, replicates, seed."""

    name: str
    description: str
    replicates: int
    seed: int
    base: dict[str, Any]
    grid: dict[str, list[Any]]
    methods: dict[str, dict[str, Any]]
    rep_chunk: int | None = None

    def identity(self) -> dict[str, Any]:
        """What must match for a store to be extended by this sweep (all but the sizes)."""
        return {
            "seed": self.seed,
            "base": self.base,
            "axes": list(self.grid),
            "methods": self.methods,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "replicates": self.replicates,
            "seed": self.seed,
            "spec": self.base,
            "grid": self.grid,
            "methods": self.methods,
            "rep_chunk": self.rep_chunk,
        }

    def to_json(self) -> str:
        # Not sort_keys: the order of the grid axes is the order of the store's dimensions.
        return json.dumps(self.to_dict(), default=_json_default)

    def points(self) -> list[GridPoint]:
        """Every grid point, validated (raises InputError naming the point)."""
        axes = list(self.grid)
        out = []
        for index in itertools.product(*(range(len(self.grid[a])) for a in axes)):
            values = {a: self.grid[a][i] for a, i in zip(axes, index, strict=True)}
            spec = {**self.base, **values, "methods": self.methods, "seed": self.seed}
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    normalized = normalize_spec(spec)
            except (TypeError, ValueError) as exc:
                where = f" at {values}" if values else ""
                raise InputError(f"{exc}{where}") from None
            out.append(
                GridPoint(index=tuple(index), values=values, spec=spec, normalized=normalized)
            )
        return out

    def check_theory(self) -> list[str]:
        """Messages of the OutsideTheoryWarnings that any grid point raises."""
        messages: list[str] = []
        for point in self.points():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                normalize_spec(point.spec)
            for w in caught:
                if str(w.message) not in messages:
                    messages.append(str(w.message))
        return messages


def _json_default(obj: object) -> object:
    if isinstance(obj, float) and not math.isfinite(obj):
        return repr(obj)
    raise TypeError(f"not JSON serializable: {obj!r}")


def _parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare word such as a model name


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``--set key=value`` overrides (TOML values) to a parsed sweep.

    ``key`` is a spec key (``eps=2``), ``grid.KEY`` (``grid.n=[1e4, 1e5]``),
    ``methods.LABEL.PARAM`` (``methods.bb.B=100``) or a top-level key
    (``replicates=20``, ``seed=3``).
    """
    data = copy.deepcopy(data)
    for item in overrides:
        if "=" not in item:
            raise InputError(f"--set expects key=value. Got {item!r}.")
        key, text = (s.strip() for s in item.split("=", 1))
        value = _parse_value(text)
        parts = key.split(".")
        if parts[0] in ("grid", "methods", "spec") and len(parts) > 1:
            target = data.setdefault(parts[0], {})
            for part in parts[1:-1]:
                target = target.setdefault(part, {})
            target[parts[-1]] = value
            if parts[0] == "grid" and parts[-1] in data.get("spec", {}):
                del data["spec"][parts[-1]]
        elif key in SWEEP_KEYS:
            data[key] = value
        else:
            data.setdefault("spec", {})[key] = value
            data.get("grid", {}).pop(key, None)
    return data


def load_sweep(
    source: str | Path, overrides: list[str] | None = None, replicates: int | None = None
) -> Sweep:
    """Load a sweep by built-in name or TOML path, apply overrides and validate it.

    Raises
    ------
    InputError
        Missing file, TOML syntax error, unknown key, or any invalid value (the
        message names the key and what is allowed).
    """
    source = str(source)
    builtins = builtin_sweeps()
    if source in builtins:
        text = (
            resources.files("ldpsim.pipeline").joinpath(BUILTIN_DIR, f"{source}.toml").read_text()
        )
        name = source
    else:
        path = Path(source)
        if not path.exists():
            names = ", ".join(builtins)
            raise InputError(
                f"Sweep {source!r} is neither a file nor a built-in sweep. Built-in sweeps "
                f"are: {names}."
            )
        if not path.is_file():
            raise InputError(f"Sweep {source!r} is not a regular file.")
        text = path.read_text()
        name = path.stem
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"Sweep file {source!r} is not valid TOML: {exc}.") from None
    data = apply_overrides(data, overrides or [])
    if replicates is not None:
        data["replicates"] = replicates
    return validate_sweep(data, name)


def validate_sweep(data: Mapping[str, Any], name: str) -> Sweep:
    """Check a parsed sweep and every one of its grid points."""
    for key in data:
        if key not in SWEEP_KEYS:
            raise InputError(
                f"Unknown key {key!r} in sweep {name!r}. "
                f"Allowed keys are: {', '.join(SWEEP_KEYS)}."
            )
    try:
        replicates = check_int(data.get("replicates"), "replicates", low=1, high=10**7)
        seed = check_int(data.get("seed", 0), "seed", low=0, high=2**63 - 1)
        rep_chunk = data.get("rep_chunk")
        if rep_chunk is not None:
            rep_chunk = check_int(rep_chunk, "rep_chunk", low=1, high=10**5)
    except (TypeError, ValueError) as exc:
        raise InputError(str(exc)) from None
    base = data.get("spec", {})
    grid = data.get("grid", {})
    methods = data.get("methods", {"bb": {}, "bm": {}, "sn": {}, "oracle": {}})
    for section, value in (("spec", base), ("grid", grid), ("methods", methods)):
        if not isinstance(value, Mapping):
            raise InputError(f"The {section!r} section must be a table. Got {value!r}.")
    allowed = set(SPEC_KEYS) | model_param_keys()
    for key in base:
        if key in ("methods", "seed"):
            raise InputError(
                f"The {key!r} key belongs at the top level of the sweep, not in [spec]."
            )
        if key not in allowed:
            raise InputError(
                f"Unknown key {key!r} in [spec]. Allowed keys are: {', '.join(sorted(allowed))}."
            )
    for axis, values in grid.items():
        if axis not in allowed or axis in ("methods", "seed", "checkpoints"):
            raise InputError(
                f"Unknown grid axis {axis!r}. Axes can be any spec key: "
                f"{', '.join(sorted(allowed - {'methods', 'seed', 'checkpoints'}))}."
            )
        if axis in base:
            raise InputError(f"The key {axis!r} is both in [spec] and in [grid]; keep one.")
        if not isinstance(values, list) or not values:
            raise InputError(f"The grid axis {axis!r} must be a non-empty list. Got {values!r}.")
        for v in values:
            if not isinstance(v, numbers.Real | str) or isinstance(v, bool):
                raise InputError(
                    f"The grid axis {axis!r} must list scalar values (numbers or strings). "
                    f"Got {v!r}."
                )
        if axis == "n":
            grid = {**grid, "n": [_as_int(v, "n") for v in values]}
        if len(set(map(repr, grid[axis]))) != len(grid[axis]):
            raise InputError(f"The grid axis {axis!r} lists a value twice: {values!r}.")
    for label, params in methods.items():
        if params is not None and not isinstance(params, Mapping):
            raise InputError(
                f"The parameters of method {label!r} must be a table. Got {params!r}."
            )
    if "n" in base:
        base = {**base, "n": _as_int(base["n"], "n")}
    sweep = Sweep(
        name=name,
        description=str(data.get("description", "")),
        replicates=replicates,
        seed=seed,
        base=dict(base),
        grid={k: list(v) for k, v in grid.items()},
        methods={k: dict(v or {}) for k, v in methods.items()},
        rep_chunk=rep_chunk,
    )
    sweep.points()  # validate every grid point eagerly
    return sweep


def _as_int(value: Any, name: str) -> Any:
    try:
        return check_int(value, name, low=2)
    except (TypeError, ValueError) as exc:
        raise InputError(str(exc)) from None
