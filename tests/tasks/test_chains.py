"""A chunk's chains, seeded and run in one compiled call, equal the per-replicate kernel.

:meth:`GridPointSetup.run_chains` seeds each replicate's data stream in compiled code
and runs the chains one after another on shared working arrays. Row i of its outputs
must be, bit for bit, what the per-replicate path (:func:`ldpsim.tasks.replicate.run_kernel`
on numpy's own ``PCG64(SeedSequence(...))`` stream) gives for ``reps[i]``, for the
kernel of every grid point of every built-in sweep, reduced to a short run.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from ldpsim.pipeline.sweep import builtin_sweeps, load_sweep
from ldpsim.tasks.grid_point import GridPointSetup, gpu_row, kernel_key, needs_full_matrix
from ldpsim.tasks.intervals.self_normalized import SelfNormalized
from ldpsim.tasks.replicate import run_kernel
from ldpsim.tasks.spec import normalize_spec
from ldpsim.tasks.streams.rng import state_of
from ldpsim.tasks.streams.seeding import data_stream_from_words

#: The reduced runs' length: every method's cuts and a few powers of two (recentring).
N = 1500
#: Replicates of one call: out of order, repeated, words above 2**32 (two entropy words).
REPS = [4, 0, 1, 2**32 + 5, 4]


def reduced(spec: dict) -> dict:
    """``spec`` with n at most :data:`N` (and its checkpoints below that, then n)."""
    n = min(int(spec["n"]), N)
    spec = {**spec, "n": n}
    if spec.get("checkpoints"):
        below = [p for p in spec["checkpoints"] if p < n]
        spec["checkpoints"] = [*below[-3:], n]
    return spec


def kernel_points(name: str) -> list[dict]:
    """One reduced grid point of sweep ``name`` per kernel it compiles."""
    points = {}
    for point in load_sweep(name).points():
        points.setdefault(kernel_key(point.normalized), reduced(dict(point.spec)))
    return list(points.values())


def assert_rows_are_the_per_replicate_kernel(setup: GridPointSetup, reps: list[int]) -> None:
    stacked = setup.run_chains(reps)
    assert len(stacked) == 7 and all(output.shape[0] == len(reps) for output in stacked)
    for i, rep in enumerate(reps):
        stream = data_stream_from_words(setup.spec.seed, setup.path_words, rep)
        one = run_kernel(setup.spec, setup.cuts, stream)
        for got, want in zip(gpu_row(stacked, i), one, strict=True):
            assert got.shape == want.shape and got.dtype == want.dtype
            assert got.tobytes() == want.tobytes(), (setup.spec.model.name, rep)


@pytest.mark.parametrize("name", sorted(builtin_sweeps()))
def test_every_builtin_sweeps_kernels_run_a_chunk_as_replicates(name):
    for spec in kernel_points(name):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # outside-theory notes of the reduced runs
            setup = GridPointSetup.of({**spec, "backend": "cpu"})
        assert_rows_are_the_per_replicate_kernel(setup, REPS)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FullMatrixSN(SelfNormalized):
    """sn as a method that reads all of A would be: the kernel then keeps A in full."""

    needs_full_matrix = True


def test_a_kernel_that_keeps_all_of_a_runs_a_chunk_as_replicates():
    rs = normalize_spec(
        {
            "model": "quantile_regression",
            "mechanism": "laplace",
            "coef": [0.0, 1.0, -1.0, 0.5],
            "n": N,
            "methods": {"sn": {}},
        }
    )
    rs = dataclasses.replace(rs, methods={"sn": FullMatrixSN()})
    assert needs_full_matrix(rs)
    setup = GridPointSetup.of(rs)
    assert setup.run_chains([0])[5].shape[-2:] == (4, 4)
    assert_rows_are_the_per_replicate_kernel(setup, REPS)


def test_no_replicates_give_empty_outputs():
    setup = GridPointSetup.of({"model": "quantile", "n": 100, "methods": {"bm": {}}})
    stacked = setup.run_chains([])
    one = setup.run_kernel(setup.cuts, setup.data_state(0))
    assert [output.shape for output in stacked] == [(0, *o.shape) for o in one]


def test_a_replicate_alone_and_a_chunk_of_one_start_from_numpys_stream():
    # run_replicate (and ldpsim replay) start a replicate from data_state; a chunk of one
    # replicate seeds it in compiled code. Both must be numpy's own
    # PCG64(SeedSequence([seed, *path words, rep])) state, and the runs the same bits.
    setup = GridPointSetup.of({"model": "quantile", "n": 600, "methods": {"bm": {}}})
    for rep in (0, 7, 2**32 + 3):
        stream = data_stream_from_words(setup.spec.seed, setup.path_words, rep)
        want = np.array(state_of(stream), dtype=np.uint64)
        assert np.array_equal(setup.data_state(rep), want)
        assert np.array_equal(setup.data_states([rep])[0], want)
        alone = setup.run_kernel(setup.cuts, want.copy())
        for got, one in zip(gpu_row(setup.run_chains([rep]), 0), alone, strict=True):
            assert got.tobytes() == one.tobytes(), rep


def test_the_oracles_covariance_is_divided_by_the_batch():
    # SPEC 2: ghat_i is the mean of s privatized gradients, so Sigma = G^-1 S G^-1 / s.
    spec = {"model": "quantile_regression", "mechanism": "laplace", "n": 100}
    one = GridPointSetup.of({**spec, "batch": 1}).asymptotic_cov
    three = GridPointSetup.of({**spec, "batch": 3}).asymptotic_cov
    np.testing.assert_allclose(three * 3, one, rtol=1e-13)
