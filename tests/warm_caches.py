"""Fill the caches that every process of `make test` would otherwise fill for itself.

`make test` runs this once, beside its lint and install steps (which leave a core idle),
before the test processes start side by side:

- **Bytecode of ldpsim's modules.** The package is installed editable, so its modules are
  compiled to bytecode by the first process that imports them; where
  ``PYTHONDONTWRITEBYTECODE`` is set (as on this project's CI machines) none is written,
  and every process (each test process, each Dask worker, each ``ldpsim`` subprocess)
  compiled all of them again from source: about 0.4 s a process. ``compileall`` writes
  the bytecode regardless of that variable, and Python reads it.
- **numba's compiled package functions** (``cache=True``: the interval methods' streaming
  statistics, quantiles, multipliers, the random streams' slow paths). A process that
  finds no cache compiles them, about 9 CPU-seconds; the test processes and the session
  cluster's workers start together, so each of them compiled them beside the others. One
  chunk of the demo's model and mechanism with every form of bb, bm, sn and the oracle
  compiles them once (and the demo's kernel, which the tests use too) and writes them to
  the caches the tests read.

Nothing here is a test and nothing depends on it: without it the tests compile the same
code themselves.
"""

from __future__ import annotations

import compileall
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: The demo's grid point with every built-in method that has a batched path, in each of
#: bb's forms and multipliers.
SPEC = {
    "model": "quantile",
    "tau": 0.5,
    "eps": 1.0,
    "n": 1000,
    "seed": 1,
    "methods": {
        "bb": {"B": 20},
        "bb_pct": {"method": "bb", "form": "percentile", "B": 20, "multiplier": "rademacher"},
        "bb_mammen": {"method": "bb", "B": 20, "multiplier": "mammen"},
        "bb_t": {"method": "bb", "form": "t"},
        "band": {"method": "bb", "simultaneous": True, "B": 20},
        "bm": {},
        "sn": {},
        "oracle": {},
    },
}


def main() -> int:
    start = time.perf_counter()
    results = [compileall.compile_dir(REPO / name, quiet=1) for name in ("pipeline", "tasks")]
    compiled = all(results)
    from ldpsim.pipeline.compute.worker import run_chunk

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = run_chunk(SPEC, [0, 1], list(SPEC["methods"]), 1, "warm-up")
    failed = bool(out["failed"].any() or out["method_failed"].any())
    print(
        f"caches warmed in {time.perf_counter() - start:.1f} s"
        f" (bytecode {'written' if compiled else 'partly written'};"
        f" the warm-up chunk {'failed' if failed else 'ran'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
