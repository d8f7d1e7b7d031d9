"""The warm-up of a process's first replicate: each method's first call, timed apart.

The first call of an interval method in a process compiles or loads the compiled code
it reaches (numba's, in the streaming statistics and the competitors' replays) and
fills Python's and numpy's first-use caches: 0.005 s with warm kernel caches, 0.5 to
3 s with empty ones, against 1e-4 s for a call after it (the demo's bb). Timed inside
the replicate, that start-up would read as the method's compute time. So the first
replicate of a grid point in a process calls each of its methods once before its timed
pass, on the same statistics and on copies of the methods' streams, and reports those
seconds as its warm-up instead (:attr:`ldpsim.tasks.ReplicateResult.warm_up_seconds`).
The replicate's values do not change: the timed pass draws from the untouched streams.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from typing import Any

import numpy as np


def warm_up_methods(
    warmed: set[str],
    methods: Mapping[str, Any],
    level: float,
    stats: Any,
    users: Any,
    method_rngs: Mapping[str, np.random.Generator],
) -> float:
    """Call once each method of ``methods`` not in ``warmed``, and add it there.

    Parameters
    ----------
    warmed : set of str
        Labels of the methods that already ran in this process for this grid point
        (:attr:`ldpsim.tasks.grid_point.GridPointSetup.warmed`); updated in place.
    methods : mapping label -> IntervalMethod
        The methods the replicate computes.
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
    cold = [label for label in methods if label not in warmed]
    if not cold:
        return 0.0
    start = time.perf_counter()
    for label in cold:
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
        warmed.add(label)
    return time.perf_counter() - start
