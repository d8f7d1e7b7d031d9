"""Failure records grouped by their traceback: what `ldpsim errors` prints.

A failure that repeats (a plugin's bug, a method that cannot handle a case) fails many
replicates with the same traceback. Printed one by one they bury everything else; grouped,
each distinct failure is one block: the count, where it happened (grid points and
replicates, with the seed that replays them) and its traceback once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


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


def split_traceback(text: str) -> tuple[str, str]:
    """(the frames and exception type, the exception line) of a traceback, or of a bare
    reason ``Type: message`` (no frames)."""
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
    group first."""
    groups: dict[tuple[str, str], FailureGroup] = {}
    for record in records:
        for kind, text in record_failures(record):
            frames, message = split_traceback(text)
            group = groups.get((kind, frames))
            if group is None:
                group = groups[kind, frames] = FailureGroup(kind, text, record.get("spec"))
            group.where.setdefault(str(record.get("key")), []).append(int(record.get("rep", -1)))
            group.seeds.add(record.get("seed"))
            group.messages.add(message)
    return sorted(groups.values(), key=lambda g: -g.count)


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


def format_group(group: FailureGroup) -> str:
    """One block: a header with the count, the grid points and replicates, the seed, the
    parameters of the first failure and the traceback."""
    noun = "failure" if group.count == 1 else "failures"
    seeds = ", ".join(str(s) for s in sorted(group.seeds, key=str))
    places = "; ".join(f"{key}: rep {rep_ranges(reps)}" for key, reps in group.where.items())
    lines = [
        f"--- {group.count} {group.kind} {noun} with this traceback (seed {seeds})",
        f"where: {places}",
        f"parameters (the first): {json.dumps(group.spec, default=str)}",
        group.traceback.rstrip(),
    ]
    if len(group.messages) > 1:
        lines.append(f"({len(group.messages)} distinct messages; the first is shown)")
    return "\n".join(lines)
