"""A non-finite theta_bar is explained after the fact: the run replayed step by step names
the first non-finite gradient, or the step where the iterates overflowed."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from numba import njit

from ldpsim.tasks.diagnose import checked_function, diagnose_nonfinite
from ldpsim.tasks.grid_point import GridPointSetup, kernel_key
from ldpsim.tasks.kernel.step_sizes import eta_schedule
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.spec import normalize_spec
from ldpsim.tasks.streams.rng import random, state_of

SEED = 5
N = 4000


@njit(inline="always")
def _rare_nan_gradient(d, theta, params, s, g):
    # X ~ U(0, 1), gradient theta - X; NaN when the uniform falls below params[0].
    u, s = random(s)
    g[0] = math.nan if u < params[0] else theta[0] - u
    return s


@dataclasses.dataclass(frozen=True, kw_only=True)
class RareNan(Model):
    """The mean of U(0, 1), whose gradient is NaN when the draw is below ``below``."""

    name = "rare_nan"
    sample_gradient = _rare_nan_gradient
    below: float = 0.0

    @property
    def dim(self):
        return 1

    def params(self):
        return np.array([self.below])

    def truth(self):
        return np.array([0.5])

    def jacobian(self):
        return np.eye(1)

    def gradient_cov(self):
        return np.eye(1) / 12


def _setup(**values) -> GridPointSetup:
    below = values.pop("below", 0.0)
    spec = normalize_spec({"model": "mean", "mechanism": "none", "n": N, **values})
    return GridPointSetup.of(dataclasses.replace(spec, model=RareNan(below=below)))


def _start() -> np.ndarray:
    return np.array(state_of(np.random.Generator(np.random.PCG64(SEED))), dtype=np.uint64)


def test_a_nan_gradient_is_named_with_its_step_and_theta():
    # One uniform per step (the mechanism draws nothing): the first draw below 1e-3 is at
    # a step numpy tells independently of the kernel.
    draws = np.random.Generator(np.random.PCG64(SEED)).random(N)
    step = int(np.argmax(draws < 1e-3)) + 1
    assert 1 < step < N and (draws < 1e-3).sum() >= 1
    setup = _setup(below=1e-3)
    start = _start()
    theta, *_ = setup.run_kernel(setup.cuts, start.copy())
    assert np.isnan(theta).all()  # the kernel itself checks nothing
    message = diagnose_nonfinite(setup, start)
    assert message.startswith(f"rare_nan: non-finite gradient at step {step:,} ("), message
    assert "gradient = [nan]" in message and "theta = [0." in message, message
    assert np.array_equal(start, _start())  # the caller's state is not advanced
    # With mini-batches of 3, draw k (from 0) is draw k % 3 + 1 of step k // 3 + 1.
    first = int(np.argmax(draws < 1e-3))
    message = diagnose_nonfinite(_setup(below=1e-3, batch=3), start)
    expected = f"at step {first // 3 + 1:,}, draw {first % 3 + 1} of the mini-batch ("
    assert message.startswith(f"rare_nan: non-finite gradient {expected}"), message


def test_overflowing_iterates_name_the_step_and_what_to_lower():
    # eta_1 = c = 1e6: |theta_i| grows by about eta_i per step until it overflows; a
    # Python loop on the kernel's step sizes and numpy's draws finds the step.
    c, gamma = 1e6, 0.51
    draws = np.random.Generator(np.random.PCG64(SEED)).random(N)
    etas = eta_schedule(N, c, gamma)
    theta, step = 0.0, None
    largest, largest_step = 0.0, 0  # the largest finite |theta_i| and its step i
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(N):
            theta = theta - etas[i] * (theta - draws[i])
            if not math.isfinite(theta):
                step = i + 1
                break
            if abs(theta) > largest:
                largest, largest_step = abs(theta), i + 1
    assert step is not None and largest_step > 0
    setup = _setup(c=c, gamma=gamma)
    message = diagnose_nonfinite(setup, _start())
    assert message.startswith(
        f"the iterates overflowed at step {step:,} "
        f"(largest |theta| {largest:.3g} at step {largest_step:,}, "
    ), message
    assert "lower c (1e+06) or raise gamma (0.51" in message, message


def test_a_finite_run_is_reported_as_such_and_replays_the_kernel_bit_for_bit():
    setup = _setup(batch=2)
    message = diagnose_nonfinite(setup, _start())
    assert message.startswith(
        f"replaying the run found no non-finite gradient, report or iterate in {N:,} steps"
    ), message
    # The checked loop's last iterate is the kernel's, bit for bit.
    theta, *_ = setup.run_kernel(setup.cuts, _start())
    last = np.empty(1)
    loop = checked_function(kernel_key(setup.spec), "checked_loop")
    loop(*setup.kernel_args, 2, N, _start(), last)
    assert theta.tobytes() == last.tobytes()


@pytest.mark.parametrize(
    "spec",
    [
        {"model": "mean", "d": 2, "mechanism": "laplace", "batch": 2},
        {"model": "quantile_regression", "mechanism": "laplace", "batch": 1},
        {"model": "huber_regression", "mechanism": "gdp", "mu": 0.5, "batch": 3},
    ],
    ids=["mean-d2-batch2", "qr-d4", "huber-d5-projected-batch3"],
)
def test_the_checked_loop_replays_the_kernel_bit_for_bit_at_d_above_1(spec):
    # The loop over d coordinates (pointers, the mini-batch mean in gsum, the projection)
    # is another code path than d = 1's: its last iterate is the kernel's too.
    setup = GridPointSetup.of({**spec, "n": N, "methods": {"oracle": {}}})
    theta, *_ = setup.run_kernel(setup.cuts, _start())
    last = np.empty(theta.size)
    loop = checked_function(kernel_key(setup.spec), "checked_loop")
    kind, *_ = loop(*setup.kernel_args, spec["batch"], N, _start(), last)
    assert kind == 0  # FINITE
    assert theta.size > 1 and theta.tobytes() == last.tobytes()
