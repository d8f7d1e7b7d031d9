"""The warm-up of a process: each interval method's first call, timed apart.

The first call of an interval method in a process compiles or loads the compiled code
it reaches (numba's, in the streaming statistics and the competitors' replays) and
fills Python's and numpy's first-use caches: 0.005 s with warm kernel caches, 0.5 to
3 s with empty ones, against 1e-4 s for a call after it (the demo's bb). Timed inside
the replicate, that start-up would read as the method's compute time. So the first
replicate that calls a method in a process, for a model and mechanism, calls it once
(and, for a competitor that replays its users, for each compiled replay: per d and
length of the parameter vectors, and per mechanism callback) before its timed pass, on
the same statistics and on a copy of the method's stream, and reports those seconds as
its warm-up instead
(:attr:`ldpsim.tasks.ReplicateResult.warm_up_seconds`). The replicate's values do not
change: the timed pass draws from the untouched stream. The extra call costs one
replicate's work of that method once per process (for a competitor that replays its
users, a replay), which the warm-up's seconds then include.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

#: What each process has called once already: (method class, model, mechanism, replay).
#: The compiled code a method reaches depends on its class and, for a competitor's
#: replay, on what the replay is compiled for (:meth:`ldpsim.tasks.users.Users.loop_key`:
#: the model's and mechanism's callbacks, d, the lengths of their parameter vectors;
#: ``replay`` is None for the other methods); not on the grid point's other values.
WARMED_UP: set[tuple] = set()
#: (class, "one" or "batch"): the paths of ldpsim's own statistics methods whose first
#: calls this process made under :func:`ldpsim.tasks.compile_lock.package_lock`
#: (:func:`ldpsim.tasks.chunk.compute_rows`): a replicate alone, and the batched path.
IN_TURN_WARM: set[tuple[type, str]] = set()


def warm_up_methods(
    methods: Mapping[str, Any],
    model: str,
    mechanism: str,
    level: float,
    stats: Any,
    users: Any,
    method_rngs: Mapping[str, np.random.Generator],
) -> float:
    """Call once each method of ``methods`` this process has not called for ``model``
    and ``mechanism`` (and, for a competitor, ``users``' compiled replay:
    :data:`WARMED_UP`), and record it there.

    Parameters
    ----------
    methods : mapping label -> IntervalMethod
        The methods the replicate computes.
    model, mechanism : str
        The names of the replicate's model and mechanism.
    level : float
        Nominal coverage, in (0, 1).
    stats : StreamingStats
        The replicate's statistics (for the methods that use them).
    users : Users or None
        The replicate's users (for the competitors that replay them).
    method_rngs : mapping label -> Generator
        The methods' streams; each call draws from a copy, so the streams the timed
        pass uses are left as they were.

    Returns
    -------
    float
        The seconds the calls took, >= 0 (0 when every method had run).
    """
    replay = None if users is None else users.loop_key()
    keys = {
        label: (
            f"{type(method).__module__}.{type(method).__qualname__}",
            model,
            mechanism,
            replay if method.own_estimate else None,
        )
        for label, method in methods.items()
    }
    cold = {label: key for label, key in keys.items() if key not in WARMED_UP}
    if not cold:
        return 0.0
    start = time.perf_counter()
    for label, key in cold.items():
        method = methods[label]
        rng = method_rngs.get(label)
        rng = None if rng is None else copy.deepcopy(rng)
        try:
            with np.errstate(all="raise"):
                if method.own_estimate:
                    method.estimate_interval(users, level, rng)
                else:
                    method.interval(stats, level, rng)
        except Exception:  # the timed pass records the failure; here only the start-up counts
            pass
        WARMED_UP.add(key)
    return time.perf_counter() - start
