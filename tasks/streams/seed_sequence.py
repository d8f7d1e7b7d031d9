"""numpy's SeedSequence -> PCG64 seeding, compiled: a replicate's streams in microseconds.

Every replicate seeds its streams with ``PCG64(SeedSequence(entropy, spawn_key))``
(SPEC section 6; :mod:`ldpsim.tasks.streams.seeding`). Built as numpy objects that costs about
18 us a stream, a tenth of a whole replicate at n = 1e3. :func:`pcg64_state` computes
the same PCG64 state with numpy's algorithms (the entropy pool of
``SeedSequence.mix_entropy``, ``generate_state(4, uint64)`` and PCG64's
``pcg64_set_seed``) compiled, in about 1 us; tests/tasks/test_seed_sequence.py checks
it against numpy bit for bit. :func:`replicate_states` seeds a whole chunk of
replicates in one compiled call, and compiled code (the kernel's batched chains, bb's
multipliers) seeds a replicate with :func:`replicate_entropy` and
:func:`state_of_entropy`, without Python per replicate.

References: numpy/random/bit_generator.pyx (SeedSequence, after M. E. O'Neill's
``seed_seq_fe``, https://www.pcg-random.org/posts/developing-a-seed_seq-alternative.html)
and numpy/random/src/pcg64/pcg64.c (``pcg64_set_seed``).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ldpsim.tasks.compiled import cached_njit
from ldpsim.tasks.streams.rng import next_uint64

_M32 = np.uint64(0xFFFFFFFF)
_INIT_A = np.uint64(0x43B0D7E5)
_MULT_A = np.uint64(0x931E8875)
_INIT_B = np.uint64(0x8B51F9DD)
_MULT_B = np.uint64(0x58F38DED)
_MIX_MULT_L = np.uint64(0xCA01F9DD)
_MIX_MULT_R = np.uint64(0x4973F715)
_XSHIFT = np.uint64(16)
_U1 = np.uint64(1)
_U32 = np.uint64(32)
_U63 = np.uint64(63)
_ZERO = np.uint64(0)
#: SeedSequence's default pool size (32-bit words).
POOL_SIZE = 4


def uint32_words(value: int) -> list[int]:
    """A non-negative int as SeedSequence reads it: little-endian 32-bit words ([0] for 0)."""
    if value < 0:
        raise ValueError(f"SeedSequence entropy must be >= 0. Got {value}.")
    words = []
    while True:
        words.append(value & 0xFFFFFFFF)
        value >>= 32
        if not value:
            return words


def entropy_words(values: Iterable[int]) -> list[int]:
    """The 32-bit words of a sequence of ints, as SeedSequence concatenates them."""
    return [word for value in values for word in uint32_words(int(value))]


@cached_njit(inline="always")
def _hashmix(value, hash_const):
    value = (value ^ hash_const) & _M32
    hash_const = (hash_const * _MULT_A) & _M32
    value = (value * hash_const) & _M32
    return value ^ (value >> _XSHIFT), hash_const


@cached_njit(inline="always")
def _mix(x, y):
    result = (_MIX_MULT_L * x - _MIX_MULT_R * y) & _M32
    return result ^ (result >> _XSHIFT)


@cached_njit(inline="always")
def _pool_word(entropy, n, i):
    return np.uint64(entropy[i]) if i < n else _ZERO


@cached_njit(inline="always")
def _mix_in(m0, m1, m2, m3, value, hash_const):
    # One word hashed into each pool word in turn (mix_entropy's loop over i_dst).
    hashed, hash_const = _hashmix(value, hash_const)
    m0 = _mix(m0, hashed)
    hashed, hash_const = _hashmix(value, hash_const)
    m1 = _mix(m1, hashed)
    hashed, hash_const = _hashmix(value, hash_const)
    m2 = _mix(m2, hashed)
    hashed, hash_const = _hashmix(value, hash_const)
    m3 = _mix(m3, hashed)
    return m0, m1, m2, m3, hash_const


@cached_njit(nogil=True)
def state_of_entropy(entropy, n):
    """The PCG64 state of ``PCG64(SeedSequence(...))`` from the first ``n`` words of
    ``entropy``, the sequence's assembled entropy, as a tuple of 4 uint64 for compiled
    code (:mod:`ldpsim.tasks.streams.rng`).

    :func:`pcg64_state` for callers that are compiled themselves: no array is allocated
    (the pool lives in four registers), so a loop over replicates can seed each one in
    about a hundred nanoseconds.

    Parameters
    ----------
    entropy : ndarray of uint32
        The assembled entropy (:func:`assembled_entropy`) in its first ``n`` words.
    n : int
        The number of words, >= 0.

    Returns
    -------
    tuple of 4 uint64
        ``(state_hi, state_lo, inc_hi, inc_lo)``.
    """
    # SeedSequence.mix_entropy on its pool of 4 words (numpy's loops, unrolled): the
    # first 4 words each hashed into its pool word, every pool word into each other
    # one, then every further word into each pool word.
    hash_const = _INIT_A
    m0, hash_const = _hashmix(_pool_word(entropy, n, 0), hash_const)
    m1, hash_const = _hashmix(_pool_word(entropy, n, 1), hash_const)
    m2, hash_const = _hashmix(_pool_word(entropy, n, 2), hash_const)
    m3, hash_const = _hashmix(_pool_word(entropy, n, 3), hash_const)
    hashed, hash_const = _hashmix(m0, hash_const)
    m1 = _mix(m1, hashed)
    hashed, hash_const = _hashmix(m0, hash_const)
    m2 = _mix(m2, hashed)
    hashed, hash_const = _hashmix(m0, hash_const)
    m3 = _mix(m3, hashed)
    hashed, hash_const = _hashmix(m1, hash_const)
    m0 = _mix(m0, hashed)
    hashed, hash_const = _hashmix(m1, hash_const)
    m2 = _mix(m2, hashed)
    hashed, hash_const = _hashmix(m1, hash_const)
    m3 = _mix(m3, hashed)
    hashed, hash_const = _hashmix(m2, hash_const)
    m0 = _mix(m0, hashed)
    hashed, hash_const = _hashmix(m2, hash_const)
    m1 = _mix(m1, hashed)
    hashed, hash_const = _hashmix(m2, hash_const)
    m3 = _mix(m3, hashed)
    hashed, hash_const = _hashmix(m3, hash_const)
    m0 = _mix(m0, hashed)
    hashed, hash_const = _hashmix(m3, hash_const)
    m1 = _mix(m1, hashed)
    hashed, hash_const = _hashmix(m3, hash_const)
    m2 = _mix(m2, hashed)
    for i in range(POOL_SIZE, n):
        m0, m1, m2, m3, hash_const = _mix_in(m0, m1, m2, m3, np.uint64(entropy[i]), hash_const)
    # generate_state(4, uint64): 8 words from the pool in turn, paired little-endian.
    hash_const = _INIT_B
    w0, hash_const = _generate_word(m0, hash_const)
    w1, hash_const = _generate_word(m1, hash_const)
    w2, hash_const = _generate_word(m2, hash_const)
    w3, hash_const = _generate_word(m3, hash_const)
    w4, hash_const = _generate_word(m0, hash_const)
    w5, hash_const = _generate_word(m1, hash_const)
    w6, hash_const = _generate_word(m2, hash_const)
    w7, hash_const = _generate_word(m3, hash_const)
    seed_hi = w0 | (w1 << _U32)
    seed_lo = w2 | (w3 << _U32)
    initseq_hi = w4 | (w5 << _U32)
    initseq_lo = w6 | (w7 << _U32)
    # pcg64_set_seed: inc = initseq << 1 | 1; state = 0, step, add the seed, step.
    inc_hi = (initseq_hi << _U1) | (initseq_lo >> _U63)
    inc_lo = (initseq_lo << _U1) | _U1
    _, s = next_uint64((_ZERO, _ZERO, inc_hi, inc_lo))
    lo = s[1] + seed_lo
    carry = _U1 if lo < seed_lo else _ZERO
    hi = s[0] + seed_hi + carry
    _, s = next_uint64((hi, lo, inc_hi, inc_lo))
    return s[0], s[1], inc_hi, inc_lo


@cached_njit(inline="always")
def _generate_word(pool_word, hash_const):
    value = (pool_word ^ hash_const) & _M32
    hash_const = (hash_const * _MULT_B) & _M32
    value = (value * hash_const) & _M32
    return value ^ (value >> _XSHIFT), hash_const


@cached_njit()
def pcg64_state(entropy: np.ndarray) -> np.ndarray:
    """The state of ``PCG64(SeedSequence(...))`` from the sequence's assembled entropy.

    Parameters
    ----------
    entropy : ndarray of uint32
        The 32-bit words of the entropy, then (with a spawn key) zeros up to
        :data:`POOL_SIZE` words and the words of the spawn key: what numpy's
        ``SeedSequence.get_assembled_entropy`` returns (see :func:`assembled_entropy`).

    Returns
    -------
    ndarray of uint64, shape (4,)
        ``(state_hi, state_lo, inc_hi, inc_lo)``, as :func:`ldpsim.tasks.streams.rng.state_of`
        gives it for that generator.
    """
    s = state_of_entropy(entropy, entropy.size)
    out = np.empty(4, dtype=np.uint64)
    out[0], out[1], out[2], out[3] = s[0], s[1], s[2], s[3]
    return out


@cached_njit(inline="always")
def replicate_entropy(prefix, rep, spawn_key, words):
    """Write the assembled entropy of replicate ``rep``'s stream into ``words``.

    The sequence is ``SeedSequence([*prefix values, rep], spawn_key=spawn key values)``:
    ``prefix`` holds the words of the values before ``rep`` (the seed's and the path
    key's, :func:`entropy_words`), ``rep`` adds its one or two words, and a non-empty
    ``spawn_key`` pads the entropy with zeros to :data:`POOL_SIZE` words and follows it,
    as :func:`assembled_entropy` does.

    Parameters
    ----------
    prefix : ndarray of uint32
        The entropy's words before the replicate's.
    rep : int
        The replicate, 0 <= rep < 2**63.
    spawn_key : ndarray of uint32
        The spawn key's words; empty for a root sequence (a data stream).
    words : ndarray of uint32
        Room for ``prefix.size + 2 + POOL_SIZE + spawn_key.size`` words.

    Returns
    -------
    int
        The number of words written.
    """
    n = prefix.size
    for i in range(n):  # element by element: see ldpsim.tasks.kernel.sgd_loop.kernel
        words[i] = prefix[i]
    value = np.uint64(rep)
    words[n] = np.uint32(value & _M32)
    n += 1
    if value >> _U32:
        words[n] = np.uint32(value >> _U32)
        n += 1
    if spawn_key.size:
        while n < POOL_SIZE:
            words[n] = 0
            n += 1
        for i in range(spawn_key.size):
            words[n + i] = spawn_key[i]
        n += spawn_key.size
    return n


@cached_njit(nogil=True)
def replicate_states(prefix: np.ndarray, reps: np.ndarray, spawn_key: np.ndarray) -> np.ndarray:
    """The PCG64 states of many replicates' streams, in one compiled call.

    Row i is the state of ``PCG64(SeedSequence([*values, reps[i]], spawn_key=key))``
    where ``prefix`` and ``spawn_key`` are the words of ``values`` and ``key``
    (:func:`entropy_words`): the replicate's data stream with an empty ``spawn_key``, a
    method's stream with the method's key, a checkpoint's with the method's key and
    the checkpoint (:func:`ldpsim.tasks.streams.seeding.method_stream_from_words`,
    ``ldpsim.tasks.replicate.checkpoint_stream``).

    Parameters
    ----------
    prefix : ndarray of uint32
        The entropy's words before the replicate's (the seed's and the path key's).
    reps : ndarray of int64
        Replicates, >= 0.
    spawn_key : ndarray of uint32
        The spawn key's words, or empty.

    Returns
    -------
    ndarray of uint64, shape (len(reps), 4)
        ``(state_hi, state_lo, inc_hi, inc_lo)`` per replicate, as
        :func:`ldpsim.tasks.streams.rng.state_of` gives it for that generator, which
        starts with no buffered 32-bit half.
    """
    words = np.empty(prefix.size + 2 + POOL_SIZE + spawn_key.size, dtype=np.uint32)
    out = np.empty((reps.size, 4), dtype=np.uint64)
    for i in range(reps.size):
        n = replicate_entropy(prefix, reps[i], spawn_key, words)
        s = state_of_entropy(words, n)
        out[i, 0], out[i, 1], out[i, 2], out[i, 3] = s[0], s[1], s[2], s[3]
    return out


def assembled_entropy(entropy: list[int], spawn_key: list[int] | None = None) -> np.ndarray:
    """numpy's ``get_assembled_entropy`` from the words of the entropy and of the spawn key
    (:func:`entropy_words`): with a spawn key the entropy is padded with zeros to
    :data:`POOL_SIZE` words."""
    words = list(entropy)
    if spawn_key:
        words += [0] * (POOL_SIZE - len(words)) + list(spawn_key)
    return np.array(words, dtype=np.uint32)


def generator_at(bit_generator: np.random.PCG64, state: np.ndarray) -> None:
    """Set ``bit_generator`` to the kernel state ``state`` (:func:`pcg64_state`), as a
    fresh PCG64 of that seed: no buffered 32-bit half."""
    bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {
            "state": (int(state[0]) << 64) | int(state[1]),
            "inc": (int(state[2]) << 64) | int(state[3]),
        },
        "has_uint32": 0,
        "uinteger": 0,
    }
