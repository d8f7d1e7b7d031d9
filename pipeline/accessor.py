"""The ``ldpsim`` xarray accessor: select by label on any dimension of a store, ``method`` too."""

from __future__ import annotations

import json
import numbers
import sys
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ldpsim.pipeline.errors import InputError, InputTypeError, shown_value

if TYPE_CHECKING:  # xarray is imported when it is first used (see _RegisterOnImport)
    import pandas as pd
    import xarray as xr

    from ldpsim.pipeline.sweep import Sweep

#: The attribute under which :class:`LdpsimAccessor` is registered: ``ds.ldpsim``.
ACCESSOR_NAME = "ldpsim"
#: Labels a message lists in full; longer axes show their first and last few.
SHOWN_LABELS = 12

T = TypeVar("T", "xr.Dataset", "xr.DataArray")


class LdpsimAccessor(Generic[T]):
    """``ds.ldpsim``: select by label or position on any dimension, ``method`` included.

    ``method`` is the fill-method keyword of xarray's ``sel``: ``ds.sel(method="bb")``
    returns every method, and ``ds.sel(method="bb", tau=0.5)`` raises "Invalid fill
    method". ``ds.ldpsim.sel(method="bb", tau=0.5)`` is ``ds.sel({"method": "bb",
    "tau": 0.5})``, with every dimension and label checked first. Registered on
    ``xarray.Dataset`` and ``xarray.DataArray`` by :func:`register`: when ldpsim opens a
    store or takes a Dataset, or when its API is imported after xarray.

    Parameters
    ----------
    obj : xarray.Dataset or xarray.DataArray
        The object the accessor belongs to (xarray passes it).

    Examples
    --------
    >>> import xarray as xr
    >>> from ldpsim.pipeline.accessor import register
    >>> register()  # done by open_store, run, summarize, ...
    >>> ds = xr.Dataset(
    ...     {"lower": (("tau", "method"), [[1.0, 2.0], [3.0, 4.0]])},
    ...     coords={"tau": [0.5, 0.9], "method": ["bb", "sn"]},
    ... )
    >>> float(ds.ldpsim.sel(method="sn", tau=0.9)["lower"])
    4.0
    """

    def __init__(self, obj: T) -> None:
        self._obj = obj

    def _where(self, verb: str) -> str:
        import xarray as xr

        return f"{'ds' if isinstance(self._obj, xr.Dataset) else 'da'}.ldpsim.{verb}"

    def sel(self, indexers: Mapping[Hashable, Any] | None = None, /, **labels: Any) -> T:
        """Select by label on any dimension: xarray's ``sel`` with a dict, checked first.

        Parameters
        ----------
        indexers : mapping of str to object, optional
            Dimension -> label(s), as xarray's ``sel`` takes them (positional only).
        **labels
            Dimension -> label(s): a label (the dimension is dropped, as by xarray), a
            list, tuple or array of labels (kept, in that order; each label once) or a
            slice of labels (not checked). ``method="bb"`` selects the method ``bb``.

        Returns
        -------
        xarray.Dataset or xarray.DataArray
            ``obj.sel({**indexers, **labels})``.

        Raises
        ------
        InputError
            An unknown dimension, a label not on its dimension (one line naming
            what there is) or given twice, a dimension given both in ``indexers``
            and as a keyword (a ValueError, as xarray's). ``indexers`` that is not
            a mapping, or labels nested in lists or in an array of more than one
            dimension (:class:`~ldpsim.pipeline.errors.InputTypeError`).

        Examples
        --------
        >>> import xarray as xr
        >>> from ldpsim.pipeline.accessor import register
        >>> register()
        >>> ds = xr.Dataset(coords={"tau": [0.5, 0.9], "method": ["bb", "sn"]})
        >>> ds.ldpsim.sel(method=["sn"], tau=0.5)["method"].values.tolist()
        ['sn']
        >>> ds.ldpsim.sel(method="oracle")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ldpsim.pipeline.errors.InputError: Cannot select method = 'oracle' (ds.ldpsim.sel): ...
        """
        where = self._where("sel")
        return self._obj.sel(check_labels(self._obj, _merged(indexers, labels, where), where))

    def isel(self, indexers: Mapping[Hashable, Any] | None = None, /, **positions: Any) -> T:
        """Select by position on any dimension: xarray's ``isel``, checked first.

        Parameters
        ----------
        indexers : mapping of str to object, optional
            Dimension -> position(s), as xarray's ``isel`` takes them (positional only).
        **positions
            Dimension -> an int (the dimension is dropped), a list of ints (each
            position once) or a slice, positions in [-size, size).

        Returns
        -------
        xarray.Dataset or xarray.DataArray
            ``obj.isel({**indexers, **positions})``.

        Raises
        ------
        InputError
            An unknown dimension, a position outside the dimension (one line naming
            what there is) or given twice, a dimension given both in ``indexers``
            and as a keyword (a ValueError, as xarray's). A position that is not an
            int or a slice, or ``indexers`` that is not a mapping
            (:class:`~ldpsim.pipeline.errors.InputTypeError`).

        Examples
        --------
        >>> import xarray as xr
        >>> from ldpsim.pipeline.accessor import register
        >>> register()
        >>> ds = xr.Dataset(coords={"tau": [0.5, 0.9], "method": ["bb", "sn"]})
        >>> ds.ldpsim.isel(method=-1)["method"].item()
        'sn'
        """
        where = self._where("isel")
        return self._obj.isel(
            check_positions(self._obj, _merged(indexers, positions, where), where)
        )


def check_labels(
    obj: xr.Dataset | xr.DataArray,
    indexers: Mapping[Hashable, Any],
    where: str,
    *,
    dims: Sequence[str] | None = None,
    dims_text: str = "no such dimension; the dimensions are",
    keep_dims: bool = False,
) -> dict[Hashable, Any]:
    """``indexers`` for ``obj.sel``, each dimension and label checked.

    Parameters
    ----------
    obj : xarray.Dataset or xarray.DataArray
        What is selected from.
    indexers : mapping of str to object
        Dimension -> a label, a list or array of labels, or a slice (not checked).
    where : str
        The function selecting, for the messages (``ds.ldpsim.sel``, ``open_store``).
    dims : sequence of str, optional
        The dimensions that may be selected on (default: all of ``obj``'s).
    dims_text : str, default "no such dimension; the dimensions are"
        Introduces ``dims`` in the message refusing another dimension.
    keep_dims : bool, default False
        Turn a single label into a list of one, so that no dimension is dropped, and
        refuse an empty list (a dimension of length 0).

    Returns
    -------
    dict
        The indexers to pass to ``obj.sel``.

    Raises
    ------
    InputError
        A dimension not in ``dims``, a label not on its dimension, a label given twice,
        or (with ``keep_dims``) an empty list.
    InputTypeError
        Labels nested in lists, or in an array of more than one dimension.
    """
    allowed = [str(d) for d in obj.dims] if dims is None else list(dims)
    out: dict[Hashable, Any] = {}
    for dim, value in indexers.items():
        if dim not in allowed:
            raise InputError(
                f"Cannot select on {dim!r} ({where}): {dims_text}: {', '.join(allowed)}."
            )
        if not _is_flat(value):
            raise InputTypeError(
                f"The labels of {dim!r} given to {where} must be a label, a flat list of "
                f"labels or a slice. Got {_shown_label(value)}."
            )
        labels = _labels(value)
        index = obj.indexes.get(dim)
        if keep_dims and labels == [] and index is not None:
            raise InputError(
                f"Cannot select no {dim} ({where}): give a label or a list of at least one; "
                f"the labels of {dim} are: {_labels_text(index)}."
            )
        if labels is not None and index is not None:
            for label in labels:
                if not _has_label(index, label):
                    raise InputError(
                        f"Cannot select {dim} = {_shown_label(label)} ({where}): no such "
                        f"label; the labels of {dim} are: {_labels_text(index)}."
                    )
            _refuse_repeats(dim, [index.get_loc(label) for label in labels], labels, where)
        # A single label kept as a list of one (keep_dims); a tuple as the list of its
        # labels (xarray would read a tuple as one label).
        listed = isinstance(value, tuple) or (keep_dims and _is_scalar(value))
        out[dim] = labels if listed and labels is not None else value
    return out


def _refuse_repeats(
    dim: Hashable, positions: list[Any], given: list[Any], where: str, *, by_label: bool = True
) -> None:
    """Refuse a selection that names a position of ``dim`` twice (``given``: the labels,
    or with ``by_label`` False the positions, as the caller gave them): its replicates
    would be counted twice by a summary."""
    seen: set[int] = set()
    for position, item in zip(positions, given, strict=True):
        if not isinstance(position, int):  # a label an index holds twice: not a store's
            continue
        if position in seen:
            if by_label:
                what = f"{dim} = {_shown_label(item)}"
            else:  # a position from the end is named with the one it stands for
                what = f"position {item}{'' if item == position else f' (= {position})'}"
                what += f" of {dim}"
            raise InputError(
                f"Cannot select {what} twice ({where}): each once (a summary would count "
                "its replicates twice)."
            )
        seen.add(position)


def check_positions(
    obj: xr.Dataset | xr.DataArray, indexers: Mapping[Hashable, Any], where: str
) -> dict[Hashable, Any]:
    """``indexers`` for ``obj.isel``, each dimension and position checked.

    Raises
    ------
    InputError
        A dimension ``obj`` does not have, a position outside [-size, size), or a
        position given twice.
    ldpsim.pipeline.errors.InputTypeError
        A position that is not an int (bools refused), a flat sequence of ints or a
        slice.
    """

    dims = [str(d) for d in obj.dims]
    for dim, value in indexers.items():
        if dim not in dims:
            raise InputError(
                f"Cannot select on {dim!r} ({where}): no such dimension; the dimensions "
                f"are: {', '.join(dims)}."
            )
        if isinstance(value, slice):
            continue
        positions = [value] if _is_scalar(value) else _labels(value)
        if positions is None or not _is_flat(value) or not all(_is_int(p) for p in positions):
            raise InputTypeError(
                f"The positions of {dim!r} given to {where} must be an int, a list of ints or "
                f"a slice. Got {_shown_label(value)}."
            )
        size = obj.sizes[dim]
        for position in positions:
            if not -size <= position < size:
                raise InputError(
                    f"Cannot select position {int(position)} of {dim} ({where}): {dim} has "
                    f"{size} positions, 0 to {size - 1} (or -{size} to -1 from the end)."
                )
        _refuse_repeats(dim, [int(p) % size for p in positions], positions, where, by_label=False)
    return dict(indexers)


def _merged(
    indexers: Mapping[Hashable, Any] | None, keywords: Mapping[str, Any], where: str
) -> dict[Hashable, Any]:
    """One mapping of the positional ``indexers`` and the keyword ones; a dimension twice
    is refused (xarray refuses both forms at once)."""

    if indexers is None:
        return dict(keywords)
    if not isinstance(indexers, Mapping):
        raise InputTypeError(
            f"The 'indexers' parameter of {where} must be a mapping of dimension names to "
            f"labels, or None. Got {shown_value(indexers)}."
        )
    twice = [str(dim) for dim in keywords if dim in indexers]
    if twice:
        raise InputError(
            f"Cannot select on {', '.join(map(repr, twice))} ({where}): given both in the "
            "mapping and as a keyword."
        )
    return {**indexers, **keywords}


def _is_scalar(value: Any) -> bool:
    import numpy as np

    return isinstance(value, str | bytes) or np.ndim(value) == 0


def _is_flat(value: Any) -> bool:
    """Whether ``value`` is one label or a flat sequence of them: no list of lists, and
    no array of more than one dimension (xarray's pandas indexing fails on those with
    an unhashable-type or array-element error). A DataArray of several dimensions is
    xarray's vectorized indexing and passes."""
    import numpy as np

    if _is_scalar(value) or hasattr(value, "dims"):
        return True
    if isinstance(value, np.ndarray):
        return value.ndim == 1
    return not any(
        isinstance(item, list | tuple | set | dict | np.ndarray) or np.ndim(item) > 0
        for item in getattr(value, "values", value)
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _labels(value: Any) -> list[Any] | None:
    """The labels ``value`` selects (a list), or None for a slice."""
    import numpy as np

    if isinstance(value, slice):
        return None
    if _is_scalar(value):
        return [value.item() if isinstance(value, np.generic | np.ndarray) else value]
    values = getattr(value, "values", value)  # a DataArray, a pandas Index or Series
    return np.asarray(values, dtype=object).ravel().tolist()


def _has_label(index: pd.Index, label: Any) -> bool:
    try:
        return bool(label in index)
    except (TypeError, ValueError):  # an unhashable label, or one pandas cannot compare
        return False


def _shown_label(value: Any) -> str:
    """A label as messages quote values (:func:`ldpsim.pipeline.errors.shown_value`)."""
    from ldpsim.pipeline.errors import shown_value

    return shown_value(value)


def _labels_text(index: pd.Index) -> str:
    """An axis's labels for a message: all of them, or the first and last few."""
    values = [str(v) for v in index.tolist()]
    if len(values) <= SHOWN_LABELS:
        return ", ".join(values)
    return f"{', '.join(values[:5])}, ..., {', '.join(values[-2:])} ({len(values)} labels)"


#: What a store's Dataset holds that a summary, a comparison and a figure read: variable
#: -> the dimensions it must keep.
STORE_VARIABLES = {
    "truth": ("coord",),
    "done": ("rep",),
    "estimate": ("rep", "coord"),
    "lower": ("method", "rep", "coord"),
    "upper": ("method", "rep", "coord"),
}


def _grid_axes(ds: xr.Dataset) -> list[str]:
    """The grid axes of the sweep stored with ``ds`` (its ``sweep`` attribute); none
    where there is no such record or it cannot be read."""
    try:
        grid = json.loads(ds.attrs.get("sweep") or "{}").get("grid") or {}
    except (ValueError, TypeError, AttributeError):  # not JSON text: no record to read
        return []
    return [str(axis) for axis in grid] if isinstance(grid, Mapping) else []


def check_store_dataset(ds: xr.Dataset, where: str) -> None:
    """Refuse a Dataset that is not a store's, or a selection of one that dropped a
    dimension, kept no label of one or repeats a label, in one line before anything is
    read.

    Parameters
    ----------
    ds : xarray.Dataset
        What :func:`ldpsim.pipeline.api.summarize`, ``compare`` or ``plot`` was given.
    where : str
        The function, for the messages.

    Raises
    ------
    InputError
        A variable of :data:`STORE_VARIABLES` or one of its dimensions missing, or a
        grid axis of the stored sweep (a selection of one label drops its dimension),
        a dimension without labels (an
        empty selection), or a label of a dimension given twice (its replicates would
        count twice).
    """
    what = f"The Dataset given to {where} is not a store's (from run or open_store)"
    for name, dims in STORE_VARIABLES.items():
        if name not in ds.data_vars:
            raise InputError(f"{what}: it has no variable {name!r}.")
        lost = next((dim for dim in dims if dim not in ds[name].dims), None)
        if lost is not None:
            keep = (
                f"ds.ldpsim.isel({lost}=[...])"
                if lost in ("rep", "coord")
                else f"ds.ldpsim.sel({lost}=[...]) or open_store(path, {lost}=...)"
            )
            raise InputError(
                f"{what}: {name!r} has no dimension {lost!r}. A selection of a single "
                f"label drops its dimension: select a list, {keep}."
            )
    # A grid axis of the stored sweep dropped by a selection of one label (tau=0.9): its
    # value would vanish from every caption, record and figure title.
    lost = next((axis for axis in _grid_axes(ds) if axis not in ds["done"].dims), None)
    if lost is not None:
        raise InputError(
            f"{what}: it has no dimension {lost!r}, a grid axis of its sweep. A selection "
            f"of a single label drops its dimension: select a list, "
            f"ds.ldpsim.sel({lost}=[...]) or open_store(path, {lost}=...)."
        )
    empty = [str(dim) for dim, size in ds.sizes.items() if size == 0]
    if empty:
        raise InputError(
            f"The Dataset given to {where} has no {empty[0]}: the selection kept none of "
            "its labels (a slice outside them, or an empty list)."
        )
    for dim, index in ds.indexes.items():
        if not index.is_unique:
            label = index[index.duplicated()][0]
            raise InputError(
                f"The Dataset given to {where} holds {dim} = {_shown_label(label)} twice: "
                "each label once (a summary would count its replicates twice)."
            )


def sweep_part(ds: xr.Dataset, sweep: Sweep) -> tuple[xr.Dataset, dict[str, Any] | None]:
    """The part of a store's Dataset that ``sweep`` asks for, and what else the store holds.

    Parameters
    ----------
    ds : xarray.Dataset
        The store's Dataset (:func:`ldpsim.pipeline.api.open_store`); the store holds
        ``sweep``'s grid points, methods and replicates (a run of ``sweep`` made it so).
    sweep : Sweep
        The sweep run.

    Returns
    -------
    xarray.Dataset
        ``ds`` at the sweep's grid values and method labels, in the sweep's order, and
        its first ``sweep.replicates`` replicates; every dimension is kept. A part has
        the ``sweep`` attribute of ``sweep``.
    dict or None
        None when that is the whole store; else what the store holds: ``replicates``
        (per grid point), ``methods`` (labels) and ``grid`` (axis -> values).

    Raises
    ------
    KeyError
        A grid value or method label of ``sweep`` that the store lacks.
    """
    from ldpsim.pipeline.store.layout import axis_position

    grid = {axis: ds.indexes[axis].tolist() for axis in sweep.grid}
    methods = ds.indexes["method"].tolist()
    positions: dict[Hashable, Any] = {
        axis: [axis_position(grid[axis], value) for value in values]
        for axis, values in sweep.grid.items()
    }
    positions["method"] = [axis_position(methods, label) for label in sweep.methods]
    positions["rep"] = list(range(min(sweep.replicates, ds.sizes["rep"])))
    # Only the dimensions that change are indexed: a lazy Dataset stays as it was opened.
    changed = {dim: p for dim, p in positions.items() if p != list(range(ds.sizes[dim]))}
    if "rep" in changed:
        changed["rep"] = slice(0, sweep.replicates)
    part = ds.isel(changed) if changed else ds
    if part.sizes == ds.sizes:
        return part, None
    # The part's own description: its tables' captions ("R of N replicates") and its
    # cell marks read the sweep attribute, which must be the part's, not the store's.
    part = part.copy()
    part.attrs["sweep"] = sweep.to_json()
    return part, {"replicates": ds.sizes["rep"], "methods": methods, "grid": grid}


def store_holds_text(holds: Mapping[str, Any], sweep: Sweep, store: str) -> str:
    """One line saying what a store holds beyond ``sweep`` (``holds`` from
    :func:`sweep_part`), for :func:`ldpsim.pipeline.api.run`'s log."""
    extra = []
    if holds["replicates"] > sweep.replicates:
        extra.append(
            f"{holds['replicates']} replicates per grid point (returned: the first "
            f"{sweep.replicates})"
        )
    for axis, values in holds["grid"].items():
        asked = sweep.grid[axis]
        more = [str(v) for v in values if not any(_same_label(v, a) for a in asked)]
        if more:
            extra.append(f"{axis} = {', '.join(more)}")
    more = [label for label in holds["methods"] if label not in sweep.methods]
    if more:
        extra.append(f"method{'s' if len(more) > 1 else ''} {', '.join(more)}")
    return (
        f"The store holds more than this sweep: {'; '.join(extra)}. The Dataset returned "
        f"holds the sweep's part; open_store({store!r}) gives all of it."
    )


def _same_label(a: Any, b: Any) -> bool:
    from ldpsim.pipeline.store.layout import axis_contains

    return axis_contains([a], b)


def register() -> None:
    """Register :class:`LdpsimAccessor` as ``ds.ldpsim`` and ``da.ldpsim`` (once).

    Called when this module is imported if xarray is imported already, and whenever the
    API opens a store (``open_store``, ``run``) or takes a Dataset (``summarize``,
    ``plot``): importing ldpsim's API does
    not import xarray (half a second for every command). A Dataset that xarray opened
    before ldpsim did anything gets ``.ldpsim`` once this is called.
    """
    import xarray as xr

    for cls, register_on in (
        (xr.Dataset, xr.register_dataset_accessor),
        (xr.DataArray, xr.register_dataarray_accessor),
    ):
        if ACCESSOR_NAME not in vars(cls):  # a second registration would warn
            register_on(ACCESSOR_NAME)(LdpsimAccessor)


if "xarray" in sys.modules:  # otherwise when ldpsim first opens a store (reading.py)
    register()
