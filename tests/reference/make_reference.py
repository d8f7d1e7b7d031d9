"""Write the reference results of reduced built-in sweeps (tests/reference/*.npz).

Each built-in sweep (and the example plugin's) is reduced (small n, a few replicates,
some cases) and every replicate is computed one at a time by
:func:`ldpsim.tasks.run_replicate`. The files were written by the code of commit
f101eff, before grid-point set-up was shared by the replicates of a task; the tests
(tests/tasks/test_reference_results.py) check that today's task path gives the same
numbers, bit for bit.

Usage: ``python tests/reference/make_reference.py [NAME ...]`` (the example plugin must
be importable for ``plugin``).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

#: Sweep name -> (source, --set overrides, replicates): small n, the cheap cases.
REDUCED: dict[str, tuple[str, list[str], int]] = {
    "demo": ("demo", ["grid.n=[2000, 5000]"], 3),
    "paper-table1": ("paper-table1", ["grid.n=[3000]"], 2),
    "paper-table2": ("paper-table2", ["grid.n=[3000]"], 2),
    "paper-figure1": (
        "paper-figure1",
        ["n=20000", "checkpoints=[100, 1000, 10000]"],
        2,
    ),
    "undercoverage": ("undercoverage", ["grid.n=[2000]"], 2),
    "price-of-privacy": ("price-of-privacy", ["grid.n=[1000, 3000]"], 2),
    "shi-coverage": ("shi-coverage", ["grid.n=[3000]"], 2),
    "shi-fig1-clipping": ("shi-fig1-clipping", ["n=12000", "checkpoints=[1000, 3000]"], 2),
    "shi-fig2-budgets": ("shi-fig2-budgets", ["n=12000", "checkpoints=[1000, 3000]"], 2),
    "shi-fig4-mechanisms": ("shi-fig4-mechanisms", ["n=12000", "checkpoints=[1000, 3000]"], 2),
    "shi-fig5-steps": ("shi-fig5-steps", ["n=12000", "checkpoints=[1000, 3000]"], 2),
    "sparse": (
        "sparse",
        [
            "n=3000",
            'grid.case=["d10-s1-laplace-sparse", "d10-s4-laplace-dense", '
            '"d10-s4-gaussian-sparse", "d100-s4-laplace-sparse"]',
        ],
        2,
    ),
    "plugin": (str(REPO / "examples" / "plugin" / "sweep.toml"), ["grid.n=[2000]"], 2),
}
FIELDS = ("estimate", "last", "lower", "upper", "method_estimate", "method_failed", "projected")


def reduced_sweep(name: str):
    from ldpsim.pipeline.sweep import load_sweep

    source, overrides, replicates = REDUCED[name]
    return load_sweep(source, overrides, replicates)


def results(name: str) -> dict[str, np.ndarray]:
    """name's reduced sweep, replicate by replicate: arrays keyed 'FIELD/POINT/REP'."""
    from ldpsim.tasks import run_replicate

    sweep = reduced_sweep(name)
    out: dict[str, np.ndarray] = {}
    for point in sweep.points():
        label = "-".join(map(str, point.index)) or "0"
        for rep in range(sweep.replicates):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = run_replicate(point.spec, rep)
            for field in FIELDS:
                value = getattr(result, field)
                if isinstance(value, dict):
                    value = np.stack([value[m] for m in sweep.methods])
                if value is None:
                    continue
                out[f"{field}/{label}/{rep}"] = np.asarray(value)
    return out


def main(names: list[str]) -> None:
    for name in names or list(REDUCED):
        np.savez_compressed(HERE / f"{name}.npz", **results(name))
        print(f"wrote {name}.npz")


if __name__ == "__main__":
    main(sys.argv[1:])
