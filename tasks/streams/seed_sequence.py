"""numpy's SeedSequence -> PCG64 seeding, compiled: a replicate's streams in microseconds.

Every replicate seeds its streams with ``PCG64(SeedSequence(entropy, spawn_key))``
(SPEC section 6; :mod:`ldpsim.tasks.streams.seeding`). Built as numpy objects that costs about
18 us a stream, a tenth of a whole replicate at n = 1e3. :func:`pcg64_state` computes
the same PCG64 state with numpy's algorithms (the entropy pool of
``SeedSequence.mix_entropy``, ``generate_state(4, uint64)`` and PCG64's
``pcg64_set_seed``) compiled, in about 1 us; tests/tasks/test_seed_sequence.py checks
it against numpy bit for bit.

References: numpy/random/bit_generator.pyx (SeedSequence, after M. E. O'Neill's
``seed_seq_fe``, https://www.pcg-random.org/posts/developing-a-seed_seq-alternative.html)
and numpy/random/src/pcg64/pcg64.c (``pcg64_set_seed``).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numba import njit

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


@njit(cache=True, inline="always")
def _hashmix(value, hash_const):
    value = (value ^ hash_const) & _M32
    hash_const = (hash_const * _MULT_A) & _M32
    value = (value * hash_const) & _M32
    return value ^ (value >> _XSHIFT), hash_const


@njit(cache=True, inline="always")
def _mix(x, y):
    result = (_MIX_MULT_L * x - _MIX_MULT_R * y) & _M32
    return result ^ (result >> _XSHIFT)


@njit(cache=True)
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
    n = entropy.size
    mixer = np.zeros(4, dtype=np.uint64)
    hash_const = _INIT_A
    for i in range(4):
        value = np.uint64(entropy[i]) if i < n else _ZERO
        mixer[i], hash_const = _hashmix(value, hash_const)
    for i_src in range(4):
        for i_dst in range(4):
            if i_src != i_dst:
                hashed, hash_const = _hashmix(mixer[i_src], hash_const)
                mixer[i_dst] = _mix(mixer[i_dst], hashed)
    for i_src in range(4, n):
        for i_dst in range(4):
            hashed, hash_const = _hashmix(np.uint64(entropy[i_src]), hash_const)
            mixer[i_dst] = _mix(mixer[i_dst], hashed)
    # generate_state(4, uint64): 8 words from the pool in turn, paired little-endian.
    hash_const = _INIT_B
    words = np.zeros(8, dtype=np.uint64)
    for i in range(8):
        value = (mixer[i % 4] ^ hash_const) & _M32
        hash_const = (hash_const * _MULT_B) & _M32
        value = (value * hash_const) & _M32
        words[i] = value ^ (value >> _XSHIFT)
    seed_hi = words[0] | (words[1] << _U32)
    seed_lo = words[2] | (words[3] << _U32)
    initseq_hi = words[4] | (words[5] << _U32)
    initseq_lo = words[6] | (words[7] << _U32)
    # pcg64_set_seed: inc = initseq << 1 | 1; state = 0, step, add the seed, step.
    inc_hi = (initseq_hi << _U1) | (initseq_lo >> _U63)
    inc_lo = (initseq_lo << _U1) | _U1
    _, s = next_uint64((_ZERO, _ZERO, inc_hi, inc_lo))
    lo = s[1] + seed_lo
    carry = _U1 if lo < seed_lo else _ZERO
    hi = s[0] + seed_hi + carry
    _, s = next_uint64((hi, lo, inc_hi, inc_lo))
    out = np.empty(4, dtype=np.uint64)
    out[0], out[1], out[2], out[3] = s[0], s[1], inc_hi, inc_lo
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
