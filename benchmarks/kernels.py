"""Kernel benchmark: LDP-SGD ns/step against its random-number floor and plain Python.

Usage: ``python benchmarks/kernels.py [--json] [--quick] [--n N] [--python-n N] [--repeats R]``.

``--quick`` runs every case through the same code on short runs (:data:`QUICK`: n = 1e5,
2,000 Python steps, 2 repeats) in seconds: a check that the benchmark still works,
whose figures mean nothing.

For each (model, mechanism) it reports, as medians over ``--repeats`` runs in one
process:

- ``ns_per_step``: :func:`ldpsim.tasks.kernel.sgd.ldp_sgd` with every streaming statistic on,
  called as :func:`ldpsim.tasks.replicate.run_stats` calls it, on the cuts of a real replicate with
  the interval methods bb, bm and sn;
- ``floor_ns_per_step``: a compiled loop drawing the same random numbers from
  the same generator (numpy's PCG64 and distributions, inlined by :mod:`ldpsim.tasks.streams.rng`,
  as the kernel draws them) and doing nothing else (the draws are summed into the
  returned value so the compiler cannot drop them); for sparse_mean (d = 1000, s = 4)
  the d Laplace noise draws of a step alone (issue 13's floor; its 2 s data uniforms
  are left out), run for ``--n`` / 500 steps (Python: ``--python-n`` / 100);
- ``python_ns_per_step``: the plain-Python reference loop that the tests check the
  kernel against (``tests/tasks/sgd_reference.py``; short run), with one change: the
  Laplace noise comes from numpy's ``Generator.laplace``, the fastest plain-Python
  sampler. The kernel's sampler (a random sign times numpy's exponential) written in
  Python is slower and would flatter the speed-up.

The three are timed in turn within each repeat; ``ratio_to_floor`` and
``speedup_over_python`` are medians of the per-repeat ratios.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from ldpsim.tasks.grid_point import replicate_cuts
from ldpsim.tasks.replicate import run_kernel
from ldpsim.tasks.spec import normalize_spec
from ldpsim.tasks.streams.rng import laplace, random, standard_normal, state_of

# The tests' plain-Python reference loop, so that only one such loop exists.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "tasks"))
from sgd_reference import FASTEST_PRIVATIZERS, reference_path

METHODS = {"bb": {"B": 500}, "bm": {}, "sn": {}}
CASES = [
    {"model": "quantile", "mechanism": "randomized_response", "tau": 0.5, "eps": 1.0},
    {
        "model": "quantile_regression",
        "mechanism": "laplace",
        "tau": 0.5,
        "coef": [0.0, 0.0, 1.0, -1.0],
        "eps": 1.0,
    },
    {"model": "huber_regression", "mechanism": "gdp", "d": 5, "mu": 1.0},
    {"model": "logistic_regression", "mechanism": "gdp", "d": 5, "mu": 1.0},
    # SPEC 11: d = 1000, s = 4, sparse Laplace; a step costs O(d) (issue 13).
    {"model": "sparse_mean", "mechanism": "laplace", "d": 1000, "sparsity": 4, "eps": 1.0},
]
#: The fields of each JSON record and their units ("name": text; "count": an integer;
#: "ns": nanoseconds per SGD step; "ratio": a ratio of two times). benchmarks/README.md
#: lists the same fields, and tests/test_benchmarks.py checks both against the output.
JSON_FIELDS = {
    "model": "name",
    "mechanism": "name",
    "d": "count",
    "n": "count",
    "n_cuts": "count",
    "repeats": "count",
    "ns_per_step": "ns",
    "floor_ns_per_step": "ns",
    "python_ns_per_step": "ns",
    "python_n": "count",
    "ratio_to_floor": "ratio",
    "speedup_over_python": "ratio",
}
#: Kernel steps, Python steps and repeats: the full measurement and ``--quick``.
FULL = {"n": 1e7, "python_n": 2e4, "repeats": 5}
QUICK = {"n": 1e5, "python_n": 2e3, "repeats": 2}
#: Models whose step costs hundreds of times more than the others': their kernel and
#: Python runs are this many times shorter than ``--n`` and ``--python-n`` (the same
#: number of random draws in about the same time).
STEP_DIVISORS = {"sparse_mean": (500, 100)}


@njit
def floor_draws(n, normals, uniforms, s):
    """``normals`` standard normals and ``uniforms`` uniforms per step."""
    acc = 0.0
    for _ in range(n):
        for _ in range(normals):
            z, s = standard_normal(s)
            acc += z
        for _ in range(uniforms):
            u, s = random(s)
            acc += u
    return acc


def draws_per_step(model_name: str, p: int) -> tuple[int, int]:
    """(normals, uniforms) a step of these models draws, p coordinates, gdp noise.

    quantile: the datum and the randomized-response coin. huber_regression: p - 2
    covariates, the error and p noise normals. logistic_regression: p - 1 covariates,
    the label's uniform and p noise normals.
    """
    if model_name == "quantile":
        return 1, 1
    if model_name == "huber_regression":
        return 2 * p - 1, 0
    return 2 * p - 1, 1


@njit
def floor_qr(n, d, scale, s):
    """d - 1 truncated normals by rejection, one normal error, d Laplace per step."""
    acc = 0.0
    for _ in range(n):
        for _ in range(1, d):
            z, s = standard_normal(s)
            while abs(z) > 1.0:
                z, s = standard_normal(s)
            acc += z
        z, s = standard_normal(s)
        acc += z
        for _ in range(d):
            z, s = laplace(s, 0.0, scale)
            acc += z
    return acc


@njit
def floor_laplace(n, d, scale, s):
    """d Laplace noise draws per step: a sparse model's floor (its data draws, 2 s
    uniforms, and the gradient's d writes are the kernel's overhead over it)."""
    acc = 0.0
    for _ in range(n):
        for _ in range(d):
            z, s = laplace(s, 0.0, scale)
            acc += z
    return acc


def timed(fn: Callable[[], object]) -> float:
    """Wall seconds of one call of ``fn``."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(case: dict[str, Any], n: int, n_python: int, repeats: int) -> dict[str, Any]:
    """One JSON record (:data:`JSON_FIELDS`) of the (model, mechanism) ``case``.

    Parameters
    ----------
    case : dict
        The replicate specification, without ``n`` and ``methods``.
    n : int
        Steps of each timed kernel and floor run, >= 1.
    n_python : int
        Steps of each timed plain-Python run, >= 1.
    repeats : int
        Timed runs of each of the three, interleaved; the record holds their medians.

    Returns
    -------
    dict
        The record: the case, its sizes, and the medians in ns per step and ratios.
    """
    rs = normalize_spec({**case, "n": n, "methods": METHODS})
    cuts = replicate_cuts(rs)
    model, mech = rs.model, rs.mechanism
    d = model.dim
    scale = float(mech.params(model)[0]) if mech.name == "laplace" else 0.0

    def gen(seed):
        return np.random.Generator(np.random.PCG64(seed))

    if model.name == "quantile_regression":

        def floor(seed, steps=n):
            return floor_qr(steps, d, scale, state_of(gen(seed)))
    elif model.gradient_sparsity() is not None:

        def floor(seed, steps=n):
            return floor_laplace(steps, d, scale, state_of(gen(seed)))
    else:
        normals, uniforms = draws_per_step(model.name, d)

        def floor(seed, steps=n):
            return floor_draws(steps, normals, uniforms, state_of(gen(seed)))

    # Compile (and warm) both on a short run.
    small = replicate_cuts(normalize_spec({**case, "n": 1000, "methods": METHODS}))
    run_kernel(rs, small, gen(0))
    floor(0, 10)
    rs_py = normalize_spec({**case, "n": n_python, "methods": METHODS})
    fastest = FASTEST_PRIVATIZERS
    reference_path(normalize_spec({**case, "n": 10, "methods": METHODS}), gen(0), fastest)
    kern, flo, py = [], [], []
    for r in range(repeats):  # interleaved, so load changes hit all three alike
        kern.append(timed(lambda r=r: run_kernel(rs, cuts, gen(r))) / n * 1e9)
        flo.append(timed(lambda r=r: floor(r)) / n * 1e9)
        py.append(timed(lambda r=r: reference_path(rs_py, gen(r), fastest)) / n_python * 1e9)
    ratios = [k / f for k, f in zip(kern, flo, strict=True)]
    speedups = [p / k for p, k in zip(py, kern, strict=True)]
    ns, fl, pn = statistics.median(kern), statistics.median(flo), statistics.median(py)
    return {
        "model": model.name,
        "mechanism": mech.name,
        "d": d,
        "n": n,
        "n_cuts": int(cuts.shape[0]),
        "repeats": repeats,
        "ns_per_step": round(ns, 2),
        "floor_ns_per_step": round(fl, 2),
        "python_ns_per_step": round(pn, 1),
        "python_n": n_python,
        "ratio_to_floor": round(statistics.median(ratios), 3),
        "speedup_over_python": round(statistics.median(speedups), 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark with the command-line arguments ``argv``; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="JSON records on stdout")
    parser.add_argument(
        "--quick", action="store_true", help="short runs (n = 1e5, 2 repeats): a smoke test"
    )
    parser.add_argument("--n", type=float, help="kernel steps (1e7; --quick: 1e5)")
    parser.add_argument("--python-n", type=float, help="Python steps (2e4; --quick: 2e3)")
    parser.add_argument("--repeats", type=int, help="runs per median (5; --quick: 2)")
    parser.add_argument("--model", choices=[c["model"] for c in CASES], action="append")
    args = parser.parse_args(argv)
    for name, default in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    cases = [c for c in CASES if not args.model or c["model"] in args.model]
    records = []
    for case in cases:
        kernel_div, python_div = STEP_DIVISORS.get(case["model"], (1, 1))
        n, n_python = int(args.n) // kernel_div, int(args.python_n) // python_div
        records.append(measure(case, n, n_python, args.repeats))
    if args.json:
        json.dump(records, sys.stdout, indent=1)
        print()
        return 0
    head = f"{'model':<20} {'mechanism':<20} {'n':>9} {'ns/step':>8} {'floor':>7}"
    print(f"{head} {'x floor':>8} {'python':>8} {'x python':>9}")
    for r in records:
        print(
            f"{r['model']:<20} {r['mechanism']:<20} {r['n']:>9.0e} {r['ns_per_step']:>8.2f} "
            f"{r['floor_ns_per_step']:>7.2f} {r['ratio_to_floor']:>8.2f} "
            f"{r['python_ns_per_step']:>8.0f} {r['speedup_over_python']:>9.0f}"
        )
    return 0 if all(math.isfinite(r["ns_per_step"]) for r in records) else 1


if __name__ == "__main__":
    raise SystemExit(main())
