"""Per-replicate cost of every interval method, the competitors of SPEC 10 included.

Usage:
``python benchmarks/competitors.py [--json] [--quick] [--n N] [--eps EPS] [--replicates R]``.

Runs ``R`` replicates (after one warm-up replicate that compiles the kernels) of the
quantile model (tau = 0.5, randomized response) and the mean model (Laplace) with the
methods of the ``price-of-privacy`` sweep at their defaults, and reports for each
method the median of its ``method_seconds`` (a competitor's: all its work, the replay
of the users included; bb, bm, sn, oracle: the interval from the run's statistics),
and the median ``seconds`` of the whole replicate (the LDP run included). ``--quick``
runs the same replicates at n = 2,000, one of them (:data:`QUICK`), in seconds: a check
that the benchmark still works, whose figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from ldpsim.tasks.replicate import run_replicate
from ldpsim.tasks.spec import normalize_spec

METHODS = ("bb", "bm", "sn", "oracle", "fang", "cdp_blb_var", "cdp_blb_pct", "np_boot")
MODELS = {
    "quantile": {"model": "quantile", "tau": 0.5, "mechanism": "randomized_response"},
    "mean": {"model": "mean", "mechanism": "laplace"},
}
#: The fields of each model's JSON record and their units ("s": seconds per replicate).
#: benchmarks/README.md lists the same fields, and tests/test_benchmarks.py checks both
#: against the output.
JSON_FIELDS = {name: "s" for name in (*METHODS, "replicate")}
#: Users per replicate and timed replicates: the full measurement and ``--quick``. The
#: competitors' resampling grows with n: the quick run took 4.0 to 5.9 CPU-seconds at
#: n = 1e4 and 2 replicates, 3.2 to 3.9 at 2,000 and 1 (2026-11-30, 2 busy cores).
FULL = {"n": 1e6, "replicates": 3}
QUICK = {"n": 2e3, "replicates": 1}


def measure(model: str, n: int, eps: float, replicates: int) -> dict[str, float]:
    """Median seconds per replicate of each method, and of the whole replicate.

    Parameters
    ----------
    model : {"quantile", "mean"}
        A key of :data:`MODELS`.
    n : int
        Users per replicate.
    eps : float
        Privacy parameter, in (0, inf).
    replicates : int
        Timed replicates, >= 1, after one untimed warm-up replicate.

    Returns
    -------
    dict
        Seconds by method name, and ``"replicate"``: the record of :data:`JSON_FIELDS`.
    """
    spec = normalize_spec(
        {**MODELS[model], "eps": eps, "n": n, "methods": {name: {} for name in METHODS}}
    )
    run_replicate(spec, 10**6)  # warm-up: compiles or loads every kernel
    results = [run_replicate(spec, rep) for rep in range(replicates)]
    out = {
        name: statistics.median(float(r.method_seconds[name]) for r in results) for name in METHODS
    }
    out["replicate"] = statistics.median(r.seconds for r in results)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark with the command-line arguments ``argv``; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, help="users per replicate (1e6; --quick: 2e3)")
    parser.add_argument("--eps", type=float, default=1.0, help="privacy parameter (1.0)")
    parser.add_argument("--replicates", type=int, help="timed replicates (3; --quick: 1)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--quick", action="store_true", help="n = 2e3, 1 replicate: a smoke test")
    args = parser.parse_args(argv)
    for name, default in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    report = {m: measure(m, int(args.n), args.eps, args.replicates) for m in MODELS}
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
        return 0
    print(f"n = {int(args.n)}, eps = {args.eps}: median seconds per replicate")
    print(f"{'method':12s}" + "".join(f"{m:>12s}" for m in MODELS))
    for name in (*METHODS, "replicate"):
        print(f"{name:12s}" + "".join(f"{report[m][name]:12.3f}" for m in MODELS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
