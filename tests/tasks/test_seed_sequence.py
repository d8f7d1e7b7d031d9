"""The compiled SeedSequence -> PCG64 seeding gives numpy's states bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsim.tasks.grid_point import GridPointSetup
from ldpsim.tasks.streams.rng import state_of
from ldpsim.tasks.streams.seed_sequence import (
    assembled_entropy,
    entropy_words,
    generator_at,
    pcg64_state,
    replicate_states,
    uint32_words,
)
from ldpsim.tasks.streams.seeding import data_stream_from_words, method_stream_from_words


def numpy_state(entropy: list[int], spawn_key: list[int]) -> np.ndarray:
    seq = np.random.SeedSequence(entropy, spawn_key=spawn_key)
    return np.array(state_of(np.random.Generator(np.random.PCG64(seq))), dtype=np.uint64)


def test_uint32_words_as_seed_sequence_reads_them():
    assert uint32_words(0) == [0]
    assert uint32_words(2**32 + 5) == [5, 1]
    with pytest.raises(ValueError, match=">= 0"):
        uint32_words(-1)


def test_states_equal_numpy_for_random_entropy_and_spawn_keys():
    rng = np.random.default_rng(1)
    for trial in range(600):
        # 1-8 values: short (padded) and long entropy, zeros, words above 2**32.
        entropy = [int(v) for v in rng.integers(0, 2**63, size=rng.integers(1, 9))]
        if trial % 3 == 0:
            entropy = [v % 1000 for v in entropy]
        if trial % 7 == 0:
            entropy = [0, *entropy]
        spawn_key = [] if trial % 2 else [int(v) for v in rng.integers(0, 2**40, size=3)]
        got = pcg64_state(assembled_entropy(entropy_words(entropy), entropy_words(spawn_key)))
        np.testing.assert_array_equal(got, numpy_state(entropy, spawn_key), err_msg=str(trial))


@pytest.mark.parametrize("rep", [0, 7, 2**32 + 3])
def test_a_grid_points_streams_are_the_seeding_modules(rep):
    spec = {"model": "quantile", "n": 100, "seed": 2**40 + 1, "methods": {"bb": {}, "bm": {}}}
    setup = GridPointSetup.of(spec)
    stream = data_stream_from_words(setup.spec.seed, setup.path_words, rep)
    np.testing.assert_array_equal(setup.data_state(rep), np.array(state_of(stream), np.uint64))
    for label, generator in setup.method_streams(rep).items():
        words = setup.method_words[label]
        expected = method_stream_from_words(setup.spec.seed, setup.path_words, rep, words)
        np.testing.assert_array_equal(generator.random(5), expected.random(5))


def test_a_chunks_states_in_one_call_equal_numpy():
    # Entropy of 0 to 6 values (short ones padded when there is a spawn key), with and
    # without a spawn key, replicates of one and of two 32-bit words, repeated and out
    # of order: row i is numpy's PCG64(SeedSequence([*values, reps[i]], spawn_key)).
    rng = np.random.default_rng(2)
    reps = np.array([5, 0, 1, 2**32 - 1, 2**32, 2**40 + 7, 5, 2**62 + 9], dtype=np.int64)
    for trial in range(200):
        values = [int(v) for v in rng.integers(0, 2**63, size=rng.integers(0, 7))]
        if trial % 3 == 0:
            values = [v % 1000 for v in values]
        spawn_key = [] if trial % 2 else [int(v) for v in rng.integers(0, 2**40, size=3)]
        got = replicate_states(
            np.array(entropy_words(values), dtype=np.uint32),
            reps,
            np.array(entropy_words(spawn_key), dtype=np.uint32),
        )
        assert got.shape == (reps.size, 4) and got.dtype == np.uint64
        for i, rep in enumerate(reps):
            want = numpy_state([*values, int(rep)], spawn_key)
            np.testing.assert_array_equal(got[i], want, err_msg=f"{trial} {rep}")


def test_a_grid_points_data_states_in_one_call():
    spec = {"model": "quantile", "n": 100, "seed": 2**40 + 1, "methods": {"bb": {}}}
    setup = GridPointSetup.of(spec)
    reps = [3, 0, 2**32 + 3, 3]
    states = setup.data_states(reps)
    for i, rep in enumerate(reps):
        stream = data_stream_from_words(setup.spec.seed, setup.path_words, rep)
        np.testing.assert_array_equal(states[i], np.array(state_of(stream), np.uint64))
    assert setup.data_states([]).shape == (0, 4)


def test_generator_at_makes_a_fresh_pcg64_of_that_seed():
    # A hunt (h21f): a grid point's thread-local Generators are reset by generator_at,
    # which must leave exactly numpy's fresh PCG64(SeedSequence) state, with no 32-bit
    # half buffered from earlier draws (rademacher's integers(0, 2) draw 32-bit halves).
    entropy, spawn_key = [5, 2**40 + 3, 7], [11, 2**33]
    bit_generator = np.random.PCG64(9)
    np.random.Generator(bit_generator).integers(0, 2**32, dtype=np.uint32)
    assert bit_generator.state["has_uint32"] == 1  # the other half is buffered
    state = pcg64_state(assembled_entropy(entropy_words(entropy), entropy_words(spawn_key)))
    generator_at(bit_generator, state)
    fresh = np.random.PCG64(np.random.SeedSequence(entropy, spawn_key=spawn_key))
    assert bit_generator.state == fresh.state
    got = np.random.Generator(bit_generator).integers(0, 2**32, 5, dtype=np.uint32)
    np.testing.assert_array_equal(got, np.random.Generator(fresh).integers(0, 2**32, 5, np.uint32))
