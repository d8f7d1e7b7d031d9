"""tasks.rng against numpy: the same PCG64 stream and distributions, bit for bit."""

from collections import Counter

import numpy as np
import pytest
import sgd_reference
from numba import njit
from scipy import stats

from ldpsim.tasks.streams import rng

SEED = 20261122
N = 1_000_000


@njit
def _draw(s, kinds, out):
    # kinds[k]: 0 standard_normal, 1 random, 2 standard_exponential, 3 raw uint64 (as
    # float), 4 laplace(0.3, 2.0)
    for k in range(kinds.shape[0]):
        kind = kinds[k]
        if kind == 0:
            out[k], s = rng.standard_normal(s)
        elif kind == 1:
            out[k], s = rng.random(s)
        elif kind == 2:
            out[k], s = rng.standard_exponential(s)
        elif kind == 3:
            r, s = rng.next_uint64(s)
            out[k] = float(r >> np.uint64(11))
        else:
            out[k], s = rng.laplace(s, 0.3, 2.0)
    return s


def numpy_draws(gen, kinds):
    out = np.empty(kinds.shape[0])
    for k, kind in enumerate(kinds):
        if kind == 0:
            out[k] = gen.standard_normal()
        elif kind == 1:
            out[k] = gen.random()
        elif kind == 2:
            out[k] = gen.standard_exponential()
        elif kind == 3:
            out[k] = float(int(gen.bit_generator.random_raw()) >> 11)
        else:
            g = np.zeros(1)
            sgd_reference.laplace(g, [2.0], gen)
            out[k] = 0.3 + g[0]
    return out


def compiled_draws(gen, kinds):
    out = np.empty(kinds.shape[0])
    rng.set_state(gen, _draw(rng.state_of(gen), kinds, out))
    return out


@pytest.mark.parametrize(
    "kind, vectorized",
    [
        (0, lambda g, n: g.standard_normal(n)),
        (1, lambda g, n: g.random(n)),
        (2, lambda g, n: g.standard_exponential(n)),
    ],
    ids=["standard_normal", "random", "standard_exponential"],
)
def test_each_distribution_equals_numpy(kind, vectorized):
    gen = np.random.Generator(np.random.PCG64(SEED + kind))
    ref = np.random.Generator(np.random.PCG64(SEED + kind))
    ours = compiled_draws(gen, np.full(N, kind, dtype=np.int64))
    assert np.array_equal(ours, vectorized(ref, N))
    # The state written back continues the stream exactly where numpy's is.
    assert gen.bit_generator.state == ref.bit_generator.state
    assert np.array_equal(gen.random(3), ref.random(3))


def test_slow_paths_are_exercised_and_equal():
    # The ziggurats' wedge and tail branches (about 1% of draws) consume extra numbers;
    # a mismatch there would shift the whole stream. Check that these samples hit them:
    # normal tail draws are beyond r = 3.654 (P = 2.6e-4, about 260 of 1e6), exponential
    # ones beyond r = 7.697 (P = 4.5e-4, about 450).
    for kind, r, draw in (
        (0, 3.6541528853610088, "standard_normal"),
        (2, 7.6971174701310497, "standard_exponential"),
    ):
        z = compiled_draws(np.random.Generator(np.random.PCG64(SEED)), np.full(N, kind))
        assert np.sum(np.abs(z) > r) > 150
        assert np.array_equal(z, getattr(np.random.Generator(np.random.PCG64(SEED)), draw)(N))


@pytest.mark.parametrize("draw", ["standard_normal", "standard_exponential"])
def test_shipped_tables_reproduce_numpy_without_numba(draw):
    # The shipped tables on their own, outside compiled code: numpy's ziggurats written
    # in plain Python on ldpsim.tasks.streams.ziggurat's tables (sgd_reference) give numpy's
    # Generator draws bit for bit, on every path. At 2e5 draws the tail is expected
    # 2e5 * 2.6e-4 = 52 times for the normal (|z| > r = 3.654) and 2e5 * 4.5e-4 = 90
    # times for the exponential (e > r = 7.697), the wedges about 1% of the time; the
    # bounds below are far under those counts (Poisson sds 7, 9.5), so a path that is
    # never taken fails the test.
    n_draws = 200_000
    ours = np.random.Generator(np.random.PCG64(SEED + 3))
    paths = Counter()
    if draw == "standard_normal":
        values = [sgd_reference.standard_normal(ours, paths) for _ in range(n_draws)]
    else:
        values = [
            sgd_reference.standard_exponential(ours, int(ours.bit_generator.random_raw()), paths)
            for _ in range(n_draws)
        ]
    numpy_gen = np.random.Generator(np.random.PCG64(SEED + 3))
    assert np.array_equal(values, getattr(numpy_gen, draw)(n_draws))
    assert ours.bit_generator.state == numpy_gen.bit_generator.state
    assert paths["tail"] >= {"standard_normal": 25, "standard_exponential": 45}[draw], paths
    assert paths["wedge"] >= 1000, paths
    assert paths.total() == n_draws


@njit
def _unit_laplace(s, n):
    out = np.empty(n)
    for k in range(n):
        out[k], s = rng.laplace(s, 0.0, 1.0)
    return out


def test_laplace_is_a_signed_numpy_exponential():
    # |x| is numpy's exponential bit for bit, and the sign is bit 0 of its first word,
    # which numpy's ziggurat leaves unused: sign and size are independent.
    x = _unit_laplace(rng.state_of(np.random.Generator(np.random.PCG64(SEED))), N)
    assert np.array_equal(
        np.abs(x), np.random.Generator(np.random.PCG64(SEED)).standard_exponential(N)
    )
    # The first word of each draw, peeked from a copy of numpy's generator before it
    # draws that exponential (a slow-path draw consumes more than one word).
    gen, peek = np.random.Generator(np.random.PCG64(SEED)), np.random.PCG64()
    first_bits = []
    for _ in range(2000):
        peek.state = gen.bit_generator.state
        first_bits.append(bool(peek.random_raw() & 1))
        gen.standard_exponential()
    assert np.array_equal(np.signbit(x[:2000]), first_bits)
    # The share of negative draws is within 4 binomial sds (4 * 0.5 / sqrt(N) = 0.002) of 1/2.
    assert abs(np.mean(x < 0) - 0.5) <= 4 * 0.5 / np.sqrt(N)


def test_laplace_distribution():
    # Kolmogorov-Smirnov against Laplace(0.3, 2): at 1e6 draws the 0.1% critical value of
    # the statistic is 1.95 / sqrt(n).
    x = compiled_draws(np.random.Generator(np.random.PCG64(SEED + 9)), np.full(N, 4))
    d_stat = stats.kstest(x, stats.laplace(loc=0.3, scale=2.0).cdf).statistic
    assert d_stat < 1.95 / np.sqrt(N)
    assert abs(np.var(x) / 8.0 - 1.0) < 4 * np.sqrt(5.0 / N)  # var 2 b^2; kurtosis 6


def test_laplace_equals_the_python_reference():
    kinds = np.full(50_000, 4)
    ours = compiled_draws(np.random.Generator(np.random.PCG64(SEED)), kinds)
    assert np.array_equal(ours, numpy_draws(np.random.Generator(np.random.PCG64(SEED)), kinds))


def test_interleaved_draws_equal_numpy():
    # The kernel interleaves the distributions (data, then privacy noise).
    kinds = np.random.default_rng(1).integers(0, 5, 200_000)
    ours = compiled_draws(np.random.Generator(np.random.PCG64(SEED)), kinds)
    theirs = numpy_draws(np.random.Generator(np.random.PCG64(SEED)), kinds)
    assert np.array_equal(ours, theirs)


def test_state_round_trip():
    gen = np.random.Generator(np.random.PCG64(SEED))
    gen.standard_normal(7)
    before = gen.bit_generator.state
    rng.set_state(gen, rng.state_of(gen))
    assert gen.bit_generator.state == before


def test_state_of_refuses_other_bit_generators():
    with pytest.raises(TypeError, match=r"PCG64.*'MT19937'"):
        rng.state_of(np.random.Generator(np.random.MT19937(0)))


def test_state_through_python_needs_as_state():
    # A state returned to Python comes back as ints; as_state types it uint64 again, so
    # a callback that draws in a loop (Laplace on d = 4) continues the stream exactly.
    from ldpsim.tasks.mechanisms.laplace import _laplace

    gen = np.random.Generator(np.random.PCG64(SEED))
    s = rng.state_of(gen)
    draws = []
    for _ in range(3):
        g = np.zeros(4)
        s = _laplace(4, g, np.array([1.5]), rng.as_state(s))
        draws.append(g)
    assert all(isinstance(w, int) for w in s)  # what numba hands back
    ref = np.random.Generator(np.random.PCG64(SEED))
    expected = np.zeros(12)
    sgd_reference.laplace(expected, [1.5], ref)
    assert np.array_equal(np.concatenate(draws), expected)


def test_kernel_refuses_a_state_that_is_not_uint64():
    from ldpsim.tasks.kernel.sgd import ldp_sgd
    from ldpsim.tasks.spec import normalize_spec

    rs = normalize_spec({"model": "quantile", "n": 10, "methods": {"oracle": {}}})
    model, mech = rs.model, rs.mechanism
    args = (model.params(), mech.params(model), np.zeros(1), 1.0, 0.51, 1, np.array([10]))
    bad = np.array(rng.state_of(np.random.Generator(np.random.PCG64(0))), dtype=np.int64)
    with pytest.raises(TypeError, match="uint64 array of shape"):
        ldp_sgd(type(model).sample_gradient, type(mech).privatize, *args, bad)
