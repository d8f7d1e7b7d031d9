"""A mechanism defined in a script, registered at run time, run on a given scheduler.

``python inline_mechanism.py SCHEDULER STORE REPLICATES``: runs a tiny sweep of it and
prints the run's status line and the store's units; an InputError is printed, one line.
tests/pipeline/test_registration.py runs it, and a copy with the class edited.
"""

import math
import sys
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.pipeline import api
from ldpsim.tasks.mechanisms.base import Mechanism
from ldpsim.tasks.streams.rng import random


@njit(inline="always")
def _laplace(d, g, params, s):
    # Laplace(0, b) noise on each coordinate by the inverse CDF of u ~ U(0, 1).
    for j in range(d):
        u, s = random(s)
        v = u - 0.5
        g[j] -= params[0] * math.copysign(1.0, v) * math.log1p(-2.0 * abs(v))
    return s


@dataclass(frozen=True, kw_only=True)
class InlineLaplace(Mechanism):
    """Laplace noise of scale Delta1 / eps on each coordinate."""

    name = "inline_laplace"
    privatize = _laplace
    eps: float | None = None

    def params(self, model):
        return np.array([self.sensitivity(model) / self.eps])

    def sensitivity(self, model):
        return model.l1_sensitivity()

    def variance(self, model):
        return 2.0 * (self.sensitivity(model) / self.eps) ** 2 * np.eye(model.dim)


if __name__ == "__main__":
    api.register(InlineLaplace)
    sweep = api.load_sweep(
        {
            "replicates": int(sys.argv[3]),
            "seed": 3,
            "rep_chunk": 2,
            "spec": {"model": "quantile", "mechanism": "inline_laplace", "eps": 1.0},
            "grid": {"n": [1000]},
            "methods": {"oracle": {}, "bm": {}},
        },
        name="inline",
    )
    try:
        ds = api.run(sweep, sys.argv[2], scheduler=sys.argv[1], progress=False)
    except api.InputError as exc:
        print("error", exc)
        sys.exit(2)
    print("status", ds.attrs["run_report"]["status"], ds.attrs["run_report"]["computed"])
    print("units", ds.attrs["units"])
    print("coverage", float(api.summarize(ds)["coverage"].mean()))
