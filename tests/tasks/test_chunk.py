"""A chunk computed whole (tasks/chunk.py): every batched method equals its per-replicate
path, failures planted in some rows stay in their cells, and the bounds are the old
numpy formulas' (to the order of a sum) and do not depend on the machine's BLAS."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import time
import warnings
from typing import ClassVar

import numpy as np
import pytest

import ldpsim.tasks.chunk as chunk_module
from ldpsim.pipeline.compute.worker import run_chunk
from ldpsim.tasks import warm_up
from ldpsim.tasks.chunk import (
    ChunkStreams,
    check_batch_api,
    compute_chunk,
    compute_rows,
    empty_outputs,
    run_chains,
)
from ldpsim.tasks.diagnose import NonFiniteRun
from ldpsim.tasks.grid_point import GridPointSetup
from ldpsim.tasks.intervals.base import has_batch
from ldpsim.tasks.intervals.bootstrap import block_bounds, t_critical
from ldpsim.tasks.intervals.critical_values import normal_quantile
from ldpsim.tasks.intervals.oracle import Oracle, oracle_bounds
from ldpsim.tasks.intervals.self_normalized import critical_value
from ldpsim.tasks.l1_projection import project_l1_ball
from ldpsim.tasks.replicate import checkpoint_stream, replicate_from_state, run_replicate
from ldpsim.tasks.spec import normalize_spec
from ldpsim.tasks.streams.multipliers import draw_multipliers

#: Every built-in method with a batched path, each form of bb and each multiplier, on a
#: model with an l1 ball (projected estimates, intersected intervals) and d = 3.
SPEC = {
    "model": "sparse_mean",
    "d": 3,
    "sparsity": 1,
    "magnitude": 1.0,
    "coef": 0.0,
    "mechanism": "laplace",
    "eps": 1.0,
    "n": 2000,
    "checkpoints": [600],
    "seed": 3,
    "methods": {
        "bb": {"form": "basic", "B": 99},
        "bb_pct": {"method": "bb", "form": "percentile", "B": 100, "multiplier": "rademacher"},
        "bb_gauss": {"method": "bb", "B": 50, "multiplier": "gaussian"},
        "bb_t": {"method": "bb", "form": "t", "intersect_constraint": True},
        "band": {"method": "bb", "simultaneous": True, "B": 101, "multiplier": "mammen"},
        "band_sidak": {"method": "bb", "simultaneous": True, "band": "sidak"},
        "bm": {},
        "sn": {},
        "oracle": {"intersect_constraint": True},
    },
}
REPLICATES = 240
#: Rows whose statistics are spoilt before the methods run, and how.
BLOCK_NAN = (5, 77)  # a NaN in T at bb's first block end: bb's bounds at n are NaN
COORDINATE_NAN = (30,)  # the same in one coordinate only
NORMALIZER_NAN = (9, 150)  # a NaN in b_n: sn's bounds are NaN
DIVERGED = (13,)  # theta_bar infinite: the replicate fails
CONSTANT = (21, 222)  # a chain that never moved: every sd is 0 (bb t and the bands fail)


@pytest.fixture(scope="module")
def chunk():
    """The set-up, the replicates and their chains' outputs with the failures planted."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        setup = GridPointSetup.of(normalize_spec(SPEC))
    reps = list(range(100, 100 + REPLICATES))
    raw, errors = run_chains(setup, reps)
    assert not errors
    _, seg_dev, seg_shift, snap_t, snap_b, snap_a, _ = raw
    block_end = int(np.searchsorted(setup.cuts, math.floor(2000**0.75)))
    assert setup.cuts[block_end] == 299
    snap_t[list(BLOCK_NAN), block_end] = np.nan
    snap_t[list(COORDINATE_NAN), block_end, 1] = np.nan
    snap_b[list(NORMALIZER_NAN), -1] = np.nan
    seg_shift[list(DIVERGED), -1] = np.inf
    for array in (seg_dev, snap_t, snap_b, snap_a):
        array[list(CONSTANT)] = 0.0
    seg_shift[list(CONSTANT)] = 0.25
    return setup, reps, raw


def test_every_builtin_method_with_statistics_has_a_batched_path():
    rs = normalize_spec(SPEC)
    assert all(has_batch(method) for method in rs.methods.values())
    competitors = normalize_spec(
        {"model": "mean", "d": 1, "n": 1000, "methods": {"fang": {}, "nprr": {}}}
    )
    assert not any(has_batch(method) for method in competitors.methods.values())


def test_the_batched_chunk_equals_its_replicates_alone(chunk):
    # Before: no chunk function; run_chunk looped over run_replicate. Each replicate
    # alone (replicate_from_state, each method's interval) must give the chunk's values
    # bit for bit, its failures in the same cells with the same reasons.
    setup, reps, raw = chunk
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batched = compute_chunk(setup, reps, raw=raw)
    labels = batched["methods"]
    assert labels == list(SPEC["methods"])
    failed_cells = {label: 0 for label in labels}
    for i, rep in enumerate(reps):
        row = tuple(output[i] for output in raw)
        try:
            alone = replicate_from_state(
                setup, setup.data_state(rep), setup.method_streams(rep), raw=row
            )
        except NonFiniteRun as exc:
            assert i in DIVERGED and batched["failed"][i]
            record = batched["errors"][rep]
            assert record["kind"] == "replicate" and record["error"] == f"NonFiniteRun: {exc}"
            assert np.isnan(batched["lower"][:, i]).all() and np.isnan(batched["seconds"][i])
            assert np.isnan(batched["estimate"][i]).all() and np.isnan(batched["last"][i]).all()
            continue
        assert not batched["failed"][i]
        for name in ("estimate", "last", "projected"):
            np.testing.assert_array_equal(batched[name][i], getattr(alone, name), strict=True)
        for m, label in enumerate(labels):
            for name in ("lower", "upper", "method_estimate", "method_failed"):
                want = getattr(alone, name)[label]
                np.testing.assert_array_equal(
                    batched[name][m, i], want, err_msg=f"{name} {label} rep {rep}", strict=True
                )
            assert np.isfinite(batched["method_seconds"][m, i]).all()
            failed_cells[label] += int(batched["method_failed"][m, i].sum())
        record = batched["errors"].get(rep)
        assert (record is not None) == bool(alone.failures), rep
        if record is not None:
            assert record["kind"] == "method" and record["methods"] == alone.failures
            for label in alone.failures:
                assert "Traceback" in record["tracebacks"][label]
    # The planted failures, cell by cell (at n; the checkpoint's statistics are clean).
    assert failed_cells["sn"] == len(NORMALIZER_NAN)
    spoilt = len(BLOCK_NAN) + len(COORDINATE_NAN)
    for label in ("bb", "bb_pct", "bb_gauss"):
        assert failed_cells[label] == spoilt
    for label in ("bb_t", "band", "band_sidak"):  # the constant chains too, at both points
        assert failed_cells[label] == spoilt + 2 * len(CONSTANT)
    assert failed_cells["oracle"] == 0
    constant = batched["errors"][reps[CONSTANT[0]]]["methods"]
    assert (
        constant["band"]
        == "FloatingPointError at n = 600: a coordinate's bootstrap sd is 0: no band"
    )
    assert constant["bb_t"].endswith("sd is 0: no interval")
    assert batched["errors"][reps[BLOCK_NAN[0]]]["methods"]["bb"] == (
        "FloatingPointError at n = 2000: non-finite interval bound"
    )


def test_an_underflow_fails_no_cell_batched_or_alone():
    # Found by an independent hunt (2026-12-01): at c = 1e-160 bm's and sn's numpy
    # arithmetic underflows to finite bounds. The batched path kept them; the same
    # replicate alone (numpy raising) failed both methods. A method with a batched
    # path now fails a cell alone as batched: by a bound that is not finite.
    methods = {"bb": {"B": 50}, "bm": {}, "sn": {}, "oracle": {}}
    spec = {"model": "mean", "n": 200, "c": 1e-160, "seed": 0, "methods": methods}
    reps = [0, 1, 2]
    batched = compute_chunk(GridPointSetup.of(spec), reps)
    assert not batched["method_failed"].any() and not batched["errors"]
    for i, rep in enumerate(reps):
        alone = run_replicate(GridPointSetup.of(spec), rep)
        assert not alone.failures, alone.failures
        for m, label in enumerate(batched["methods"]):
            for name in ("lower", "upper"):
                want = getattr(alone, name)[label]
                np.testing.assert_array_equal(batched[name][m, i], want, strict=True)


def spoil(lower, upper, draw):
    """Bounds that first underflow (harmless) and then overflow where ``draw`` < 0.5."""
    tiny = np.float64(1e-200) * np.float64(1e-200)
    huge = np.where(draw < 0.5, 1e200, 1.0) * 1e200
    return lower + tiny - huge, upper


@dataclasses.dataclass(frozen=True, kw_only=True)
class DrawingOracle(Oracle):
    """The oracle, spoilt by a draw from the method's stream (:func:`spoil`)."""

    uses_rng: ClassVar[bool] = True

    def interval(self, stats, level, rng):
        return spoil(*oracle_bounds(stats, level), rng.random())

    def intervals_batch(self, stats, level, rngs):
        draws = np.array([rng.random() for rng in rngs])
        return spoil(*oracle_bounds(stats, level), draws[:, None])


def test_a_methods_first_call_that_fails_warns_nothing(monkeypatch):
    # The warm-up call (tasks/warm_up.py) runs with numpy raising, as the timed pass
    # does, and drops what it raised: the failure is the timed pass's to record. With
    # numpy's default instead (a mutation hunt, 2026-12-02, passed the task tests) a
    # process's first replicate that fails printed "RuntimeWarning: overflow
    # encountered in multiply" besides its recorded failure. Replicate 3 fails.
    monkeypatch.setattr(warm_up, "WARMED_UP", set())
    rs = normalize_spec({"model": "mean", "n": 200, "seed": 4, "methods": {"oracle": {}}})
    setup = GridPointSetup.of(dataclasses.replace(rs, methods={"oracle": DrawingOracle()}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_replicate(setup, 3)
    assert result.warm_up_seconds > 0
    assert result.failures == {"oracle": "FloatingPointError: overflow encountered in multiply"}
    assert [str(w.message) for w in caught] == []


def test_a_cell_run_again_for_its_reason_names_the_overflow_not_an_underflow():
    # A second read (2026-12-01): the cell run again for its reason raised at the
    # first, harmless underflow; and a replicate alone (run_replicate) ran it again on
    # a stream the first run had advanced, where the draw could spare it. Batched and
    # alone must name the overflow, alike.
    rs = normalize_spec({"model": "mean", "n": 200, "seed": 4, "methods": {"oracle": {}}})
    setup = GridPointSetup.of(dataclasses.replace(rs, methods={"oracle": DrawingOracle()}))
    reps = list(range(16))
    batched = compute_chunk(setup, reps)
    want = {"oracle": "FloatingPointError: overflow encountered in multiply"}
    failed = [rep for i, rep in enumerate(reps) if batched["method_failed"][0, i]]
    assert 0 < len(failed) < len(reps)
    for rep in reps:
        expected = want if rep in failed else {}
        assert batched["errors"].get(rep, {}).get("methods", {}) == expected, rep
        assert run_replicate(setup, rep).failures == expected, rep


@dataclasses.dataclass(frozen=True, kw_only=True)
class TwoDraws(Oracle):
    """The oracle widened by two uniforms of the method's stream, the batched path drawing
    every replicate's first, then every replicate's second (docs/extending.md: ``rngs``
    is a sequence of R Generators, ``rngs[i]`` replicate i's stream)."""

    uses_rng: ClassVar[bool] = True

    def interval(self, stats, level, rng):
        lower, upper = oracle_bounds(stats, level)
        half = rng.random() + rng.random()
        return lower - half, upper + half

    def intervals_batch(self, stats, level, rngs):
        lower, upper = oracle_bounds(stats, level)
        first = np.array([rng.random() for rng in rngs])
        second = np.array([rngs[i].random() for i in range(len(rngs))])
        half = (first + second)[:, None]
        return lower - half, upper + half


def test_a_batched_method_draws_on_from_a_stream_it_reads_again():
    # A hunt (2026-12-02): each access to rngs[i] made replicate i's stream afresh, at its
    # start, so a second pass over rngs drew the first numbers again: a plugin written as
    # the docs describe was refused by the check before a run (its two ways disagreed), and
    # a loop drawing from rngs[i] until a condition held never ended.
    rs = normalize_spec({"model": "mean", "n": 200, "seed": 4, "methods": {"oracle": {}}})
    rs = dataclasses.replace(rs, methods={"two": TwoDraws()}, checkpoints=(50, 200))
    setup = GridPointSetup.of(rs)
    reps = list(range(12))
    batched = compute_chunk(setup, reps)
    assert not batched["method_failed"].any()
    for i, rep in enumerate(reps):
        alone = run_replicate(setup, rep)
        for name in ("lower", "upper"):
            np.testing.assert_array_equal(batched[name][0, i], getattr(alone, name)["two"])
    assert check_batch_api(rs, range(20)) == 1


def test_a_failed_gpu_launch_fails_each_replicate_with_its_error(monkeypatch):
    # A GPU set-up has no CPU kernel to run the chains one by one: each replicate
    # records the launch's own error (it was "'NoneType' object is not callable").
    setup = GridPointSetup.of(
        {"model": "quantile", "n": 100, "backend": "gpu", "methods": {"oracle": {}}}
    )

    def failed_launch(self, reps):
        raise RuntimeError("the launch failed")

    monkeypatch.setattr(GridPointSetup, "run_chains", failed_launch)
    out = compute_chunk(setup, [0, 1])
    assert out["failed"].all()
    assert [out["errors"][rep]["error"] for rep in (0, 1)] == [
        "RuntimeError: the launch failed"
    ] * 2


def test_a_negative_replicate_index_is_refused():
    setup = GridPointSetup.of({"model": "quantile", "n": 100, "methods": {"oracle": {}}})
    with pytest.raises(ValueError, match=r"Replicate indices must be >= 0\. Got -1"):
        compute_chunk(setup, [3, -1])


def test_a_chunk_split_in_two_gives_the_same_numbers(chunk):
    # The values of a replicate do not depend on its chunk (nor on bb's blocks of rows).
    setup, reps, _ = chunk
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = compute_chunk(setup, reps[:60])
        parts = [compute_chunk(setup, reps[:25]), compute_chunk(setup, reps[25:60])]
    for name in ("estimate", "lower", "upper", "method_failed", "failed"):
        axis = 0 if whole[name].ndim <= 1 or name in ("estimate", "failed") else 1
        joined = np.concatenate([part[name] for part in parts], axis=axis)
        np.testing.assert_array_equal(whole[name], joined, err_msg=name, strict=True)


def old_bounds(rs, label, stats, rng, level, radius):
    """The bounds of ldpsim before the batched paths (commit 35c5de7), in numpy: BLAS
    products (``e @ centred``, bm's ``sizes @ dev`` and SigmaHat), np.quantile, np.std."""
    method = rs.methods[label]
    theta_bar, n = stats.theta_bar, stats.n
    if label == "sn":
        half = critical_value(level) * np.sqrt(stats.self_normalizer_diagonal() / n)
        return theta_bar - half, theta_bar + half
    if label == "oracle":
        half = normal_quantile(0.5 + level / 2) * np.sqrt(np.diag(stats.asymptotic_cov) / n)
        return np.clip(theta_bar - half, -radius, radius), np.clip(
            theta_bar + half, -radius, radius
        )
    if label == "bm":
        e = method.bounds(n, stats.gamma)
        sizes = np.diff(e).astype(np.float64)
        dev = stats.deviation_sums(e, theta_bar) / sizes[:, None]
        centred = dev - (sizes @ dev) / (n - e[0])
        sigma = (centred * sizes[:, None]).T @ centred / len(sizes)
        half = normal_quantile(0.5 + level / 2) * np.sqrt(np.diag(sigma) / n)
        return theta_bar - half, theta_bar + half
    block_len, n_blocks = method.block_len(n), method.n_blocks(n)
    centred = stats.deviation_sums(block_bounds(block_len, n_blocks), theta_bar)
    if method.form == "t" or method.band == "sidak":
        sd = np.sqrt(np.sum(centred**2, axis=0)) / (n_blocks * block_len)
        q = (1 + level ** (1 / stats.dim if method.simultaneous else 1)) / 2
        critical = t_critical(n_blocks, q)
        lower, upper = theta_bar - critical * sd, theta_bar + critical * sd
        if method.intersect_constraint:
            lower, upper = np.clip(lower, -radius, radius), np.clip(upper, -radius, radius)
        return lower, upper
    e = draw_multipliers(method.multiplier, (method.B, n_blocks), rng)
    boot = e @ centred / (n_blocks * block_len)
    if method.simultaneous:
        sd = boot.std(axis=0, ddof=1)
        critical = np.quantile(np.max(np.abs(boot) / sd, axis=1), level)
        return theta_bar - critical * sd, theta_bar + critical * sd
    alpha = 1 - level
    q_lo, q_hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2], axis=0)
    if method.form == "basic":
        return theta_bar - q_hi, theta_bar - q_lo
    return theta_bar + q_lo, theta_bar + q_hi


def test_the_batched_bounds_are_the_old_formulas(chunk):
    # The arithmetic itself, against numpy's of the code before: exact where no BLAS
    # product was involved (bb's t form and Sidak's band, sn, the oracle), within the
    # order of a sum (1e-12 of the largest bound) where one was.
    setup, reps, _ = chunk
    rs = setup.spec
    reps = reps[:60]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batched = compute_chunk(setup, reps)
    assert not batched["method_failed"].any()
    raw = run_chains(setup, reps)[0]
    stats = [setup.stats(tuple(output[i] for output in raw)) for i in range(len(reps))]
    for m, label in enumerate(batched["methods"]):
        for k, point in enumerate(rs.checkpoints):
            lower, upper = batched["lower"][m, :, k], batched["upper"][m, :, k]
            want = np.empty((2, *lower.shape))
            for i, rep in enumerate(reps):
                rng = setup.method_streams(rep).get(label)
                if rng is not None and point != rs.n:
                    rng = checkpoint_stream(rng, point)
                sub = stats[i] if point == rs.n else stats[i].prefix(point)
                want[:, i] = old_bounds(rs, label, sub, rng, rs.level, setup.radius)
            if label in ("bb_t", "band_sidak", "sn", "oracle"):
                np.testing.assert_array_equal(lower, want[0], err_msg=label)
                np.testing.assert_array_equal(upper, want[1], err_msg=label)
            else:
                scale = np.abs(want).max()
                np.testing.assert_allclose(lower, want[0], rtol=0, atol=1e-12 * scale)
                np.testing.assert_allclose(upper, want[1], rtol=0, atol=1e-12 * scale)


BLAS_CHILD = """
import json, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
from ldpsim.pipeline.compute.worker import run_chunk
spec = json.loads(sys.argv[1])
out = run_chunk(spec, list(range(40)), list(spec["methods"]), 1, "blas")
np.save(sys.argv[2], np.stack([out["lower"], out["upper"]]))
"""


def test_the_bounds_do_not_depend_on_the_blas_kernel(tmp_path):
    # Before, bb's `e @ centred` and bm's products went through OpenBLAS, whose kernel
    # depends on the processor: with OPENBLAS_CORETYPE=Prescott 15 of bb's 80 bounds
    # and 13 of bm's moved by an ulp. Now every sum is compiled, in a fixed order.
    spec = {
        "model": "quantile",
        "mechanism": "randomized_response",
        "n": 1000,
        "seed": 11,
        "methods": {"bb": {"form": "basic", "B": 500}, "bm": {}},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        here = run_chunk(spec, list(range(40)), list(spec["methods"]), 1, "blas")
    path = tmp_path / "prescott.npy"
    env = {**os.environ, "OPENBLAS_CORETYPE": "Prescott"}
    done = subprocess.run(
        [sys.executable, "-c", BLAS_CHILD, json.dumps(spec), str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    there = np.load(path)
    np.testing.assert_array_equal(there[0], here["lower"])
    np.testing.assert_array_equal(there[1], here["upper"])


def test_a_thread_streams_row_asked_for_again_starts_again_not_in_another_rows_state():
    # The second read (2026-12-01): where ldpsim's own methods draw and no checkpoint is
    # asked for, method_streams hands out one Generator per thread, set to each row's
    # start in turn; kept per row, row 0 asked for again after row 1 drew on from row 1's
    # state. It is set to its start again.
    rs = normalize_spec({"model": "mean", "n": 200, "seed": 4, "methods": {"bb": {"B": 20}}})
    setup = GridPointSetup.of(rs)
    assert not setup.numpy_streams
    rngs = ChunkStreams(lambda row: setup.method_streams(row)["bb"], np.arange(3), None)
    first = rngs[0].random()
    assert rngs[0].random() != first  # drawn on while no other row was asked for
    row_one = rngs[1].random()
    assert rngs[0].random() == first != row_one  # its start again
    fresh = np.random.Generator(np.random.PCG64())
    fresh.bit_generator.state = setup.method_streams(2)["bb"].bit_generator.state
    assert rngs[2].random() == fresh.random()


def test_a_slice_of_the_streams_hands_out_the_same_generators_as_an_index():
    # ChunkStreams' promise: a row's stream is the same Generator by index, iteration or
    # a slice, so a method that reads rngs[a:b] and then rngs[i] draws on. A slice with
    # rows of its own (a mutation hunt, 2026-12-03, passed the task tests) made each row
    # afresh at its start again: the same numbers drawn twice.
    rngs = ChunkStreams(lambda row: np.random.default_rng(row), np.arange(4), None)
    part = rngs[1:3]
    assert len(part) == 2 and list(part.rows) == [1, 2]
    first = part[0].random()
    assert rngs[1] is part[0] and list(rngs)[2] is part[1]
    want = np.random.default_rng(1).random(2)
    assert (first, rngs[1].random()) == (want[0], want[1])
    assert rngs[2:][0] is part[1]  # a slice of a slice: the same again


def test_a_chunks_methods_come_in_the_specs_order_and_unknown_labels_are_refused():
    # compute_chunk's ``methods``: labels of the spec's methods, computed in the spec's
    # order whatever the order asked; a label the spec lacks is refused, not passed over
    # (each went unnoticed by the task tests in a mutation hunt, 2026-12-03).
    spec = {"model": "quantile", "n": 100, "methods": {"oracle": {}, "sn": {}, "bm": {}}}
    setup = GridPointSetup.of(spec)
    out = compute_chunk(setup, [0, 1], methods=["bm", "oracle"])
    assert out["methods"] == ["oracle", "bm"] and out["lower"].shape == (2, 2, 1)
    alone = compute_chunk(setup, [0, 1], methods=["oracle"])
    np.testing.assert_array_equal(out["lower"][0], alone["lower"][0], strict=True)
    with pytest.raises(ValueError, match=r"names labels the spec does not have: 'nope'"):
        compute_chunk(setup, [0], methods=["nope", "sn"])


def test_the_nan_outputs_of_failed_chains_have_the_kernels_shapes():
    # The rows of chains that raised are NaN outputs of the kernel's own shapes: A's
    # diagonal alone, (K, d, 1), where no method needs the whole matrix. As (K, d, d)
    # (a mutation hunt, 2026-12-03) the other rows' diagonals were broadcast into
    # d x d matrices, d times the memory, unnoticed by the task tests.
    setup = GridPointSetup.of({"model": "mean", "d": 3, "n": 100, "methods": {"sn": {}}})
    outputs = run_chains(setup, [0, 1])[0]
    empty = empty_outputs(setup, 2)
    assert [a.shape for a in empty] == [a.shape for a in outputs]
    assert empty[5].shape[-1] == 1 and all(np.isnan(a).all() for a in empty)


def test_where_the_chunks_call_raises_each_chain_runs_alone_and_only_its_row_fails(
    monkeypatch,
):
    # run_chains' fallback: the chunk's one compiled call raised (a callback can), so
    # each chain runs alone from its own data stream's start; the chains that raise fail
    # their rows alone and the others keep the numbers of the one call, bit for bit.
    setup = GridPointSetup.of({"model": "mean", "d": 2, "n": 100, "methods": {"sn": {}}})
    reps = [4, 7, 9]
    whole, errors = run_chains(setup, reps)
    assert not errors
    run_kernel = GridPointSetup.run_kernel

    def second_raises(self, cuts, state):
        if state.tobytes() == self.data_state(7).tobytes():
            raise RuntimeError("a callback raised")
        return run_kernel(self, cuts, state)

    def chunk_raises(self, reps):
        raise RuntimeError("a callback raised")

    monkeypatch.setattr(GridPointSetup, "run_chains", chunk_raises)
    monkeypatch.setattr(GridPointSetup, "run_kernel", second_raises)
    alone, errors = run_chains(setup, reps)
    assert list(errors) == [1] and str(errors[1][0]) == "a callback raised"
    assert "Traceback" in errors[1][1]
    for got, want in zip(alone, whole, strict=True):
        np.testing.assert_array_equal(got[[0, 2]], want[[0, 2]], strict=True)
        assert np.isnan(got[1]).all()


def test_a_theta_bar_not_finite_in_one_coordinate_or_at_a_checkpoint_alone_fails_its_replicate():
    # A replicate fails where theta_bar is not finite in any coordinate at any point,
    # and its reason names the first such point. A mutation hunt (h16h) found no test
    # that noticed a check of "some coordinate finite" (one NaN coordinate stored as a
    # success), of the point n alone (a checkpoint's NaN stored), or a reason naming
    # n where the checkpoint went wrong. Planted: row 0 infinite in coordinate 1 at n
    # only, row 1 NaN in coordinate 0 at the checkpoint 100 only; row 2 clean.
    rs = normalize_spec(
        {
            "model": "mean",
            "d": 2,
            "n": 400,
            "checkpoints": [100, 400],
            "seed": 2,
            "methods": {"oracle": {}},
        }
    )
    setup = GridPointSetup.of(rs)
    reps = [0, 1, 2]
    raw, errors = run_chains(setup, reps)
    assert not errors
    seg_shift = raw[2]
    seg_shift[0, -1, 1] = np.inf
    seg_shift[1, int(np.searchsorted(setup.cuts, 100)), 0] = np.nan
    out = compute_chunk(setup, reps, raw=raw)
    assert out["failed"].tolist() == [True, True, False]
    assert np.isnan(out["estimate"][:2]).all() and np.isnan(out["lower"][:, :2]).all()
    assert np.isfinite(out["estimate"][2]).all() and not out["method_failed"][:, 2].any()
    for rep, point in ((0, 400), (1, 100)):
        record = out["errors"][rep]
        assert record["kind"] == "replicate", record
        assert record["error"].startswith(
            f"NonFiniteRun: non-finite theta_bar at n = {point}: "
        ), record["error"]
        # The replicate alone fails alike.
        row = tuple(output[rep] for output in raw)
        with pytest.raises(NonFiniteRun) as alone:
            replicate_from_state(setup, setup.data_state(rep), setup.method_streams(rep), raw=row)
        assert record["error"] == f"NonFiniteRun: {alone.value}"


def test_a_chain_that_raised_is_raised_where_a_replicates_failure_is_asked_for():
    # compute_rows' raise_replicate_failures raises a replicate's failure, its chain's
    # exception included, instead of recording it (its docstring). No caller passes a
    # chain's error with it today (replicate_from_state runs the kernel itself), so a
    # mutation hunt (h16h) that dropped the raise went unnoticed.
    setup = GridPointSetup.of({"model": "mean", "n": 100, "methods": {"oracle": {}}})
    reps = [0, 1]
    raw, errors = run_chains(setup, reps)
    assert not errors
    error = RuntimeError("a callback raised")

    def rows(**more):
        return compute_rows(
            setup,
            raw,
            dict(setup.spec.methods),
            start=0.0,
            start_state=lambda i: setup.data_state(reps[i]),
            stream_of=lambda label, i: None,
            stream_labels=(),
            chain_errors={1: (error, "Traceback: the chain's")},
            **more,
        )

    with pytest.raises(RuntimeError) as raised:
        rows(raise_replicate_failures=True)
    assert raised.value is error
    out = rows()
    assert out["failed"].tolist() == [False, True]
    assert out["errors"] == {
        1: {
            "kind": "replicate",
            "error": "RuntimeError: a callback raised",
            "traceback": "Traceback: the chain's",
        }
    }


def test_the_projection_is_of_theta_bar_and_a_replicate_alone_intersects_with_the_ball():
    # sparse_mean's l1 ball of radius 1: replicate 0's theta_bar (1.18, 0.41) lies
    # outside it, and the oracle's upper bound (1.85, 1.07) too. ``projected`` is
    # theta_bar's projection (the last iterate's passed the tests, a mutation hunt,
    # h16h), and a replicate alone intersects a method's interval with the ball as the
    # chunk does (skipping it there passed the tests too: both paths were compared
    # only where no interval reached the ball).
    spec = {
        "model": "sparse_mean",
        "d": 2,
        "sparsity": 1,
        "magnitude": 1.0,
        "eps": 0.5,
        "n": 200,
        "seed": 1,
        "methods": {"oracle": {"intersect_constraint": True}, "wide": {"method": "oracle"}},
    }
    setup = GridPointSetup.of(spec)
    out = compute_chunk(setup, range(4))
    assert setup.radius == 1.0 and np.abs(out["estimate"][0]).sum() > 1.0
    np.testing.assert_array_equal(
        out["projected"], project_l1_ball(out["estimate"], setup.radius), strict=True
    )
    assert not np.array_equal(out["projected"][0], project_l1_ball(out["last"][:1], 1.0)[0])
    assert (out["upper"][1, 0] > 1.0).any()  # without the ball
    np.testing.assert_array_equal(out["upper"][0], np.minimum(out["upper"][1], 1.0))
    for rep in range(4):
        alone = run_replicate(setup, rep)
        np.testing.assert_array_equal(alone.upper["oracle"], out["upper"][0, rep], strict=True)
        np.testing.assert_array_equal(alone.projected, out["projected"][rep], strict=True)


def test_a_non_finite_theta_bar_on_the_gpu_backend_and_a_replay_that_fails_say_so(monkeypatch):
    # A replicate's diagnosis replays its run on the CPU: on the GPU backend it cannot
    # (no start state), and says so; a replay that raises any exception keeps the
    # failure with the replay's error. Each went unnoticed in a mutation hunt (h16h):
    # the GPU's message dropped (the replay of None failed instead), and only a
    # ValueError of the replay caught (any other escaped compute_chunk).
    spec = {"model": "mean", "d": 2, "n": 100, "seed": 3, "methods": {"oracle": {}}}
    raw, _ = run_chains(GridPointSetup.of(spec), [0, 1])
    raw[2][1, -1] = np.inf
    gpu = compute_chunk(GridPointSetup.of({**spec, "backend": "gpu"}), [0, 1], raw=raw)
    assert gpu["failed"].tolist() == [False, True]
    assert gpu["errors"][1]["error"].startswith(
        "NonFiniteRun: non-finite theta_bar on the GPU backend (the step where it appeared "
        "is found on the CPU"
    ), gpu["errors"][1]["error"]

    def replay_fails(setup, start_state):
        raise RuntimeError("the replay broke")

    monkeypatch.setattr(chunk_module, "diagnose_nonfinite", replay_fails)
    cpu = compute_chunk(GridPointSetup.of(spec), [0, 1], raw=raw)
    assert cpu["failed"].tolist() == [False, True]
    assert cpu["errors"][1]["error"] == (
        "NonFiniteRun: non-finite theta_bar: the replay that finds the step failed "
        "(RuntimeError: the replay broke)"
    )


SLEEP = 0.1


@dataclasses.dataclass(frozen=True, kw_only=True)
class Slow(Oracle):
    """The oracle, each call at least SLEEP seconds long; where theta_bar_0 > 0 the
    batched path gives NaN and ``interval`` raises (no second call for a reason)."""

    name = "slow"

    def interval(self, stats, level, rng):
        time.sleep(SLEEP)
        if stats.theta_bar[0] > 0:
            raise ZeroDivisionError("theta_bar_0 > 0")
        return oracle_bounds(stats, level)

    def intervals_batch(self, stats, level, rngs):
        time.sleep(SLEEP)
        lower, upper = oracle_bounds(stats, level)
        return np.where(stats.theta_bar[:, :1] > 0, np.nan, lower), upper


def test_the_seconds_share_out_the_chunks_time_without_its_warm_up(monkeypatch):
    # What the chunk reports of its time, by sums that hold whatever the machine's
    # speed: each replicate's share of the chunk (its chains and methods) leaves out the
    # warm-up (the methods' first calls) and goes to the replicates that did not fail;
    # a batched call's time is shared among those alone; a row run again alone for its
    # reason adds its own time to its share. A mutation hunt (h16h) found each of these
    # unchecked, and the warm-up of ldpsim's own methods dropped where a plugin's
    # followed it, and the set-up's cold methods never marked warm.
    monkeypatch.setattr(warm_up, "WARMED_UP", set())
    monkeypatch.setattr(chunk_module, "IN_TURN_WARM", set())
    calls = []

    def timed(*args):
        calls.append(warm_up.warm_up_methods(*args))
        return calls[-1]

    monkeypatch.setattr(chunk_module, "warm_up_methods", timed)
    rs = normalize_spec({"model": "mean", "n": 200, "seed": 4, "methods": {"oracle": {}}})
    rs = dataclasses.replace(rs, methods={"oracle": Oracle(), "slow": Slow()})
    setup = GridPointSetup.of(rs)
    reps = [0, 1, 2, 3]
    raw, _ = run_chains(setup, reps)
    raw[2][3, -1] = np.inf  # replicate 3 fails
    positive = raw[2][:3, -1, 0] + raw[3][:3, -1, 0] / 200 > 0
    assert positive.any() and not positive.all()
    before = time.perf_counter()
    out = compute_chunk(setup, reps, raw=raw)
    spent = time.perf_counter() - before
    assert out["failed"].tolist() == [False, False, False, True]
    assert len(calls) == 2 and min(calls) > 0 and calls[1] >= SLEEP
    assert out["warm_up_seconds"] >= sum(calls)
    assert not setup.cold_methods  # warm: a later chunk makes no first calls
    seconds, slow = out["seconds"], out["method_seconds"][1]
    assert np.isnan(seconds[3]) and np.isnan(slow[3])
    seconds, slow = seconds[:3], slow[:3]  # the replicates that did not fail
    assert seconds.sum() + out["warm_up_seconds"] <= spent
    # At least SLEEP for the batched call, plus SLEEP for each row run again alone;
    # the chunk's time beyond them is short (its chains were given).
    assert seconds.sum() >= slow.sum() >= SLEEP * (1 + positive.sum())
    assert out["errors"][int(np.argmax(positive))]["methods"]["slow"] == (
        "ZeroDivisionError: theta_bar_0 > 0"
    )
    share = slow[~positive].min()
    assert share >= SLEEP / 3
    np.testing.assert_array_equal(slow[~positive], share)
    assert (slow[positive] >= share + SLEEP).all()


def test_the_last_iterate_is_the_kernels_at_each_point():
    # ``last`` is theta at n (the kernel's final iterate) and at each checkpoint the
    # iterate there. The first snapshot's (a mutation hunt, h16h) passed the tests,
    # which compared a chunk with its replicates alone, both computed so.
    setup = GridPointSetup.of(
        {"model": "mean", "d": 2, "n": 400, "checkpoints": [100, 400], "methods": {"bm": {}}}
    )
    raw, _ = run_chains(setup, [0, 1, 2])
    out = compute_chunk(setup, [0, 1, 2], raw=raw)
    np.testing.assert_array_equal(out["last"][:, 1], raw[0], strict=True)
    at_100 = raw[6][:, int(np.searchsorted(setup.cuts, 100))]
    np.testing.assert_array_equal(out["last"][:, 0], at_100, strict=True)
    assert not np.array_equal(out["last"][:, 0], out["last"][:, 1])
