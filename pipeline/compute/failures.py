"""Failure records grouped by their traceback: what `ldpsim errors` prints.

A failure that repeats (a plugin's bug, a method that cannot handle a case) fails many
replicates with the same traceback. Printed one by one they bury everything else; grouped,
each distinct failure is one block: the count, where it happened (grid points by their
axis values, and replicates, with the seed that replays them) and its traceback once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ldpsim.pipeline.compute.task_keys import CHUNK_KEY
from ldpsim.pipeline.formatting import axis_labels


@dataclass
class FailureGroup:
    """The failures of one kind (``replicate``, or ``method LABEL``) with one traceback.

    Tracebacks are the same when their frames and exception type are: the message may
    differ (a step number, a value). ``traceback`` is the first one seen, ``messages``
    the distinct exception lines; ``where`` maps a grid point's key to the replicates it
    failed in; ``seeds`` are the sweep seeds seen and ``spec`` the parameters of the
    first failure.
    """

    kind: str
    traceback: str
    spec: Any = None
    where: dict[str, list[int]] = field(default_factory=dict)
    seeds: set[Any] = field(default_factory=set)
    messages: set[str] = field(default_factory=set)

    @property
    def count(self) -> int:
        """The failures in the group."""
        return sum(len(reps) for reps in self.where.values())


def record_failures(record: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, traceback) of each failure in a record: one for a failed replicate, one per
    failed method of a replicate whose methods failed (the reason where a record of an
    older ldpsim has no traceback)."""
    if record.get("kind") == "method" and isinstance(record.get("methods"), dict):
        tracebacks = record.get("tracebacks") or {}
        return [
            (f"method {label}", str(tracebacks.get(label) or reason))
            for label, reason in record["methods"].items()
        ]
    return [(str(record.get("kind")), str(record.get("traceback") or record.get("error")))]


#: The lines of a chained traceback between its exceptions (Python's own words).
CHAIN_SEPARATOR = re.compile(
    r"^(During handling of the above exception, another exception occurred:"
    r"|The above exception was the direct cause of the following exception:)$"
    r"(?=\n\n(?:Traceback|  \+ Exception Group Traceback))",  # not a message's own words
    re.MULTILINE,
)


def split_traceback(text: str) -> tuple[str, str]:
    """(the frames and exception types, the exception lines) of a traceback, or of a
    bare reason ``Type: message`` (no frames).

    A chained traceback (an exception raised while handling another, or ``raise ...
    from``) is split at each link: its key holds every exception's frames and type, so
    that two failures which differ only in their last exception are two groups.
    """
    links = CHAIN_SEPARATOR.split(text.rstrip())
    frames, messages = [], []
    for i, link in enumerate(links):
        if i % 2:  # the separator itself, kept in the key
            frames.append(link)
            continue
        link_frames, message = _split_one(link.strip("\n"))
        frames.append(link_frames)
        messages.append(message)
    return "\n".join(frames), "\n".join(m for m in messages if m)


def _split_one(text: str) -> tuple[str, str]:
    """(the frames and exception type, the exception line) of one exception's traceback."""
    lines = text.rstrip().splitlines()
    start = 1 if lines and lines[0].startswith("Traceback") else 0
    # The exception line: the first line after the frames that is not indented.
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith(" ")), None)
    if end is None:
        return text, ""
    line = lines[end]
    exc_type = line.split(":", 1)[0].split(" ", 1)[0]
    return "\n".join([*lines[:end], exc_type]), "\n".join(lines[end:])


def group_failures(records: Iterable[dict[str, Any]]) -> list[FailureGroup]:
    """Group failure records by kind and traceback (frames and exception type), largest
    group first; the records in grid order (groups of equal size, and the grid points
    of a group, as the grid lists them), not in their files' name order (``-10-`` before
    ``-2-``)."""
    groups: dict[tuple[str, str], FailureGroup] = {}
    for record in sorted(records, key=_grid_order):
        for kind, text in record_failures(record):
            frames, message = split_traceback(text)
            group = groups.get((kind, frames))
            if group is None:
                group = groups[kind, frames] = FailureGroup(kind, text, record.get("spec"))
            group.where.setdefault(str(record.get("key")), []).append(int(record.get("rep", -1)))
            group.seeds.add(record.get("seed"))
            group.messages.add(message)
    return sorted(groups.values(), key=lambda g: -g.count)


def _grid_order(record: dict[str, Any]) -> tuple:
    """A failure record's place: its chunk key's grid position and chunk (by number:
    ``-c10`` after ``-c2``), then its replicate; a key that is no chunk key after every
    one that is."""
    key = str(record.get("key"))
    match = CHUNK_KEY.fullmatch(key)
    rep = record.get("rep")
    rep = rep if isinstance(rep, int) and not isinstance(rep, bool) else -1
    if match is None:
        return (1, (), 0, key, rep)
    index = tuple(int(i) for i in match["index"].split("-"))
    return (0, index, int(match["chunk"]), key, rep)


def rep_ranges(reps: Iterable[int]) -> str:
    """Replicates as ranges: ``0-4, 7, 9-10``."""
    ordered = sorted(set(reps))
    parts: list[str] = []
    start = previous = None
    for rep in [*ordered, None]:
        if start is not None and (rep is None or rep != previous + 1):
            parts.append(f"{start}" if start == previous else f"{start}-{previous}")
            start = None
        if rep is not None and start is None:
            start = rep
        previous = rep
    return ", ".join(parts)


@dataclass(frozen=True)
class GridNames:
    """Names of a store's grid points by their axis values: ``tau = 0.5, n = 1e4``.

    Attributes
    ----------
    labels : dict of str to list of str
        Each grid axis, in the store's order, and its values as the tables write them
        (:func:`ldpsim.pipeline.formatting.axis_labels`).
    """

    labels: dict[str, list[str]]

    @classmethod
    def of(cls, axes: Mapping[str, Sequence[Any]]) -> GridNames:
        """The names of the grid of ``axes`` (axis -> its values, in the store's order)."""
        return cls({axis: axis_labels(list(values), "text") for axis, values in axes.items()})

    @classmethod
    def of_dataset(cls, ds: Any) -> GridNames:
        """The names of the grid of a store's Dataset (the dimensions of ``done`` but
        ``rep``)."""
        axes = [dim for dim in ds["done"].dims if dim != "rep"]
        return cls.of({axis: ds[axis].values.tolist() for axis in axes})

    def name(self, index: Sequence[int]) -> str:
        """The grid point at ``index`` (a position along each axis).

        Raises
        ------
        IndexError
            ``index`` is not a position in the grid.
        """
        if len(index) != len(self.labels):
            raise IndexError(f"{tuple(index)} is not a position in a grid of {len(self.labels)}")
        if not self.labels:
            return "the grid point"  # a sweep without grid axes has one
        return ", ".join(
            f"{axis} = {labels[i]}"
            for (axis, labels), i in zip(self.labels.items(), index, strict=True)
        )

    def name_of_key(self, key: str) -> str:
        """The grid point of a failure record's ``key`` (a task chunk's), or the key itself
        when it names no position in this grid."""
        match = CHUNK_KEY.fullmatch(key)
        if match is None:
            return key
        index = [int(i) for i in match["index"].split("-")]
        if not self.labels and index == [0]:
            index = []  # the chunk key of a grid without axes says "0"
        try:
            return self.name(index)
        except IndexError:
            return key


def format_group(group: FailureGroup, names: Callable[[str], str] | None = None) -> str:
    """One block: a header with the count, the grid points and replicates, the seed, the
    parameters of the first failure and the traceback.

    ``names`` gives a record key's grid point (:meth:`GridNames.name_of_key`); the chunks
    of one grid point are then listed together. Without it the keys are shown.
    """
    noun = "failure" if group.count == 1 else "failures"
    seeds = ", ".join(str(s) for s in sorted(group.seeds, key=str))
    where: dict[str, list[int]] = {}
    for key, reps in group.where.items():
        where.setdefault(key if names is None else names(key), []).extend(reps)
    places = "; ".join(f"{name}: rep {rep_ranges(reps)}" for name, reps in where.items())
    lines = [
        f"--- {group.count} {group.kind} {noun} with this traceback (seed {seeds})",
        f"where: {places}",
        f"parameters (the first): {json.dumps(group.spec, default=str)}",
        group.traceback.rstrip(),
    ]
    if len(group.messages) > 1:
        lines.append(f"({len(group.messages)} distinct messages; the first is shown)")
    return "\n".join(lines)
