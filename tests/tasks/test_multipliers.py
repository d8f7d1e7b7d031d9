"""bb's multipliers drawn in compiled code for a chunk equal numpy's Generator, bit for bit.

Each replicate's stream is built here by numpy itself (its SeedSequence, PCG64 and
Generator: :func:`method_stream_from_words`, ``checkpoint_stream``), so neither the
compiled seeding nor the compiled draws are checked against themselves.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldpsim.tasks.grid_point import GridPointSetup
from ldpsim.tasks.intervals.bootstrap_bounds import (
    BASIC,
    drawn_sums,
    fill_multipliers,
    multiplier_bounds,
    weighted_sums,
)
from ldpsim.tasks.quantiles import linear_positions
from ldpsim.tasks.replicate import checkpoint_stream
from ldpsim.tasks.streams.multipliers import (
    MULTIPLIERS,
    draw_multipliers,
    multiplier_code,
)
from ldpsim.tasks.streams.rng import state_of
from ldpsim.tasks.streams.seeding import method_stream_from_words

#: One replicate's shapes: single draws, an odd count (rademacher keeps a 32-bit half
#: of its last word), bb's (B, n_blocks) at the paper's B, more than two axes, none.
SIZES = [(1, 1), (1, 2), (3, 5), (500, 7), (2, 3, 3), (0, 4)]
#: Replicates: the first ones, and words above 2**32 (two entropy words).
REPS = [*range(120), 2**32 - 1, 2**32, 2**40 + 3]
SPEC = {
    "model": "quantile",
    "n": 3000,
    "seed": 2**33 + 5,
    "checkpoints": [100, 1000],
    "methods": {"bb": {"B": 50}, "bb_gauss": {"method": "bb", "multiplier": "gaussian"}},
}


@pytest.fixture(scope="module")
def setup() -> GridPointSetup:
    return GridPointSetup.of(SPEC)


def compiled_draws(kind: str, states: np.ndarray, size: tuple[int, ...]) -> np.ndarray:
    """Each stream's multipliers as bb's compiled path draws them at d > 1
    (:func:`ldpsim.tasks.intervals.bootstrap_bounds.fill_multipliers`, one
    ``next_multiplier`` after another, the sums of d = 1 taking the same draws), stacked:
    (R, *size)."""
    out = np.empty((len(states), int(np.prod(size))))
    for i, state in enumerate(np.ascontiguousarray(states, dtype=np.uint64)):
        fill_multipliers(multiplier_code(kind), tuple(state), out[i])
    return out.reshape(len(states), *size)


def numpy_stream(setup: GridPointSetup, label: str, rep: int, point: int | None):
    """Replicate ``rep``'s stream of ``label`` (at a checkpoint ``point``), numpy's own."""
    words = setup.method_words[label]
    rng = method_stream_from_words(setup.spec.seed, setup.path_words, rep, words)
    return rng if point is None else checkpoint_stream(rng, point)


@pytest.mark.parametrize("point", [None, 100, 1000, 3000])
def test_method_states_are_numpys_streams(setup, point):
    for label in setup.method_words:
        states = setup.method_states(label, REPS, point)
        assert states.shape == (len(REPS), 4) and states.dtype == np.uint64
        # The point n is the method's own stream (a replicate uses it at n).
        own = None if point == setup.spec.n else point
        for i, rep in enumerate(REPS):
            want = np.array(state_of(numpy_stream(setup, label, rep, own)), dtype=np.uint64)
            np.testing.assert_array_equal(states[i], want, err_msg=f"{label} {rep} {point}")


@pytest.mark.parametrize("kind", MULTIPLIERS)
def test_every_law_and_size_equals_numpy(setup, kind):
    for point in (None, 1000):
        states = setup.method_states("bb", REPS, point)
        for size in SIZES:
            got = compiled_draws(kind, states, size)
            assert got.shape == (len(REPS), *size) and got.dtype == np.float64
            for i, rep in enumerate(REPS):
                want = draw_multipliers(kind, size, numpy_stream(setup, "bb", rep, point))
                assert got[i].tobytes() == want.tobytes(), (kind, size, rep, point)


def test_the_draws_take_every_value_and_path():
    # The comparisons above mean something only if the draws reach every branch:
    # rademacher both signs from both 32-bit halves, mammen both points, gaussian the
    # ziggurat's slow path (about 1% of draws, the tail beyond r = 3.654 with P =
    # 2.6e-4: at 2e5 draws expected 52, sd 7; 20 is far below).
    states = np.array(
        [state_of(np.random.Generator(np.random.PCG64(seed))) for seed in range(4)],
        dtype=np.uint64,
    )
    rademacher = compiled_draws("rademacher", states, (50_000,))
    for half in (rademacher[:, 0::2], rademacher[:, 1::2]):
        assert set(np.unique(half)) == {-1.0, 1.0}
    assert len(np.unique(compiled_draws("mammen", states, (1000,)))) == 2
    gaussian = compiled_draws("gaussian", states, (50_000,))
    assert np.sum(np.abs(gaussian) > 3.6541528853610088) >= 20
    for i in range(4):
        numpy_draws = np.random.Generator(np.random.PCG64(i)).standard_normal(50_000)
        assert gaussian[i].tobytes() == numpy_draws.tobytes()


def test_bad_arguments_say_what_is_allowed(setup):
    with pytest.raises(ValueError, match="one of uniform, rademacher, gaussian, mammen"):
        multiplier_code("normal")
    with pytest.raises(KeyError):
        setup.method_states("no-such-method", [0])


@pytest.mark.parametrize("kind", MULTIPLIERS)
def test_sums_made_as_the_multipliers_come_equal_the_sums_of_the_drawn_ones(setup, kind):
    # bb at d = 1 adds each multiplier into its draw's sum as it is drawn (drawn_sums);
    # at d > 1, and from numpy's Generators, it draws them first (weighted_sums). B m
    # odd: rademacher's 32-bit halves cross the draws' rows.
    n_draws, n_blocks, scale = 37, 5, 185.0
    states = setup.method_states("bb", REPS)
    centred = np.random.default_rng(4).standard_normal((len(REPS), n_blocks, 1))
    multipliers = compiled_draws(kind, states, (n_draws, n_blocks))
    as_they_come, from_array = np.empty((n_draws, 1)), np.empty((n_draws, 1))
    for i, state in enumerate(states):
        drawn_sums(multiplier_code(kind), tuple(state), centred[i], scale, as_they_come)
        weighted_sums(multipliers[i], centred[i], scale, from_array)
        assert as_they_come.tobytes() == from_array.tobytes(), (kind, i)


def test_bb_bounds_from_the_streams_at_d_1_equal_those_from_numpys_multipliers(setup):
    # A hunt (h21a): at d = 1 multiplier_bounds sums the multipliers as they come from
    # each replicate's stream; its basic intervals must equal those from numpy's own
    # draws of the same streams (a mutant that sent d = 1 down the d > 1 path, with no
    # room for the multipliers, gave intervals of length 0 and passed every test).
    n_draws, n_blocks, scale, reps = 50, 5, 185.0, [0, 1, 2]
    states = np.ascontiguousarray(setup.method_states("bb", reps), dtype=np.uint64)
    centred = np.random.default_rng(4).standard_normal((len(reps), n_blocks, 1))
    given = np.stack(
        [
            draw_multipliers("uniform", (n_draws, n_blocks), numpy_stream(setup, "bb", rep, None))
            for rep in reps
        ]
    )
    positions = linear_positions(n_draws, (0.05, 0.95))
    centre = np.zeros((len(reps), 1))
    centre.flags.writeable = False  # as a chunk's theta_bar: the kernel compiled for runs
    out = []
    for drawn_states, multipliers in ((states, given[:0]), (states[:0], given)):
        lower, upper = np.empty((len(reps), 1)), np.empty((len(reps), 1))
        failed = np.zeros(len(reps), dtype=bool)
        multiplier_bounds(
            multiplier_code("uniform"), drawn_states, multipliers, centred, scale, BASIC,
            *positions, centre, lower, upper, failed,
        )  # fmt: skip
        out.append((lower, upper))
    (lo, hi), (lo_np, hi_np) = out
    assert np.all(hi - lo > 0)
    np.testing.assert_array_equal(lo, lo_np)
    np.testing.assert_array_equal(hi, hi_np)


def test_mammens_multipliers_have_mammens_two_point_law():
    # A hunt (h21f): the law itself, which the bit-for-bit comparisons with numpy leave
    # open (a wrong constant changes both alike): (1 - sqrt5)/2 with probability
    # (sqrt5 + 1)/(2 sqrt5), else (1 + sqrt5)/2; mean 0, variance 1 and third moment 1.
    # The share of the low value within 5 binomial sds (1.4e-3 at 1e5 draws).
    root5 = 5**0.5
    low, high, p_low = (1 - root5) / 2, (1 + root5) / 2, (root5 + 1) / (2 * root5)
    assert abs(p_low * low + (1 - p_low) * high) < 1e-15
    assert abs(p_low * low**2 + (1 - p_low) * high**2 - 1) < 1e-15
    assert abs(p_low * low**3 + (1 - p_low) * high**3 - 1) < 1e-14
    n_draws = 100_000
    draws = draw_multipliers("mammen", (n_draws, 1), np.random.Generator(np.random.PCG64(8)))
    assert set(np.unique(draws)) == {low, high}
    share = np.mean(draws == low)
    assert abs(share - p_low) < 5 * np.sqrt(p_low * (1 - p_low) / n_draws)
