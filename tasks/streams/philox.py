"""The GPU backend's random numbers: Philox4x32-10 streams, one per replicate.

A counter-based generator (Salmon, Moraes, Dror & Shaw 2011): block ``m`` of a stream
is ``philox4x32_10(counter, key)``, four 32-bit words, computed from the block's
number alone. A replicate's stream is keyed by 128 bits drawn from its seed sequence
(:func:`replicate_keys`): the Philox key (2 words) and the upper half of the counter (2
words); the lower half counts the draws. So a replicate's numbers depend on its seed
and nothing else: not on the launch shape, the block size, the GPU or the other
replicates of a launch.

A block gives two draws of a kind: :func:`standard_normal` keeps the second normal of a
Box-Muller pair, and :func:`random` the second uniform of a block, in the state until
the next draw of that kind (:data:`STREAMS_VERSION` names this layout):

* :func:`random`: a uniform on (0, 1), ``(k + 1/2) 2^-53`` with k the top 53 bits of
  words 0 and 1 (then of words 2 and 3);
* :func:`standard_normal`: Box-Muller, ``sqrt(-2 log u1) (cos, then sin)(2 pi u2)``
  with u1 and u2 the block's two uniforms;
* :func:`laplace`: ``scale * log(2u)`` for u < 1/2, ``-scale * log(2 - 2u)`` else, u
  from :func:`random` (the inverse of the Laplace CDF; |x| <= 36.8 scale, the bound that
  53-bit uniforms put on any floating-point sampler, Mironov 2012).

The functions are numba CUDA device functions; words travel as uint64 holding 32 bits,
so that the same code runs in numba's CUDA simulator (where a uint32 overflow warns)
and compiles to 32-bit multiplies on the device. :func:`philox_blocks` is the numpy
reference of the generator (tests check both against Random123's known answers).

References
----------
Salmon, J. K., Moraes, M. A., Dror, R. O. & Shaw, D. E. (2011). Parallel random
numbers: as easy as 1, 2, 3. SC '11. Known-answer vectors: Random123's
``tests/kat_vectors``.
Box, G. E. P. & Muller, M. E. (1958). A note on the generation of random normal
deviates. Ann. Math. Statist. 29, 610-611.
Mironov, I. (2012). On significance of the least significant bits for differential
privacy. CCS '12.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

#: Names the streams' layout. A store records it; a change of this file's draws must
#: change it, and a store of another version is not extended.
STREAMS_VERSION = "philox4x32-10/pairs/1"

_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = np.uint64(0x9E3779B9)
_W1 = np.uint64(0xBB67AE85)
_MASK = np.uint64(0xFFFFFFFF)
_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U5 = np.uint64(5)
_U6 = np.uint64(6)
_U31 = np.uint64(31)
_U32 = np.uint64(32)
#: Flags of the state: a normal, a uniform kept for the next draw of its kind.
_HAS_NORMAL = np.uint64(1)
_HAS_UNIFORM = np.uint64(2)
_NO_NORMAL = np.uint64(2)
_NO_UNIFORM = np.uint64(1)
_TWO_26 = 67108864.0
_TWO_M53 = 1.0 / 9007199254740992.0
_TWO_PI = 2.0 * math.pi


@cuda.jit(device=True)
def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """One Philox4x32-10 block: 10 rounds on the counter (c0..c3) with the key (k0, k1).

    All arguments and results are uint64 holding 32-bit words. Masked here again, so
    that the compiler knows each multiply to be of two 32-bit words (32 x 32 -> 64 bits).
    """
    c0, c1, c2, c3, k0, k1 = c0 & _MASK, c1 & _MASK, c2 & _MASK, c3 & _MASK, k0 & _MASK, k1 & _MASK
    for _ in range(10):
        p0 = _M0 * c0
        p1 = _M1 * c2
        c0, c1, c2, c3 = (
            (p1 >> _U32) ^ c1 ^ k0,
            p1 & _MASK,
            (p0 >> _U32) ^ c3 ^ k1,
            p0 & _MASK,
        )
        k0 = (k0 + _W0) & _MASK
        k1 = (k1 + _W1) & _MASK
    return c0, c1, c2, c3


@cuda.jit(device=True)
def next_block(k0, k1, c2, c3, draws):
    """Block number ``draws`` of the stream keyed (k0, k1) with upper counter (c2, c3)."""
    return philox4x32_10(draws & _MASK, draws >> _U32, c2, c3, k0, k1)


@cuda.jit(device=True)
def unit_double(a, b):
    """A double in (0, 1), (k + 1/2) 2^-53, from the top bits of two 32-bit words (27 of
    a, 26 of b)."""
    return ((a >> _U5) * _TWO_26 + (b >> _U6) + 0.5) * _TWO_M53


@cuda.jit(device=True)
def random(s):
    """A uniform draw on (0, 1): ``(u, s)``.

    ``s = (k0, k1, c2, c3, blocks, normal kept, uniform kept, flags)``.
    """
    k0, k1, c2, c3, blocks, normal, uniform, flags = s
    if flags & _HAS_UNIFORM:
        return uniform, (k0, k1, c2, c3, blocks, normal, 0.0, flags & _NO_UNIFORM)
    w0, w1, w2, w3 = next_block(k0, k1, c2, c3, blocks)
    kept = unit_double(w2, w3)
    return unit_double(w0, w1), (
        k0, k1, c2, c3, blocks + _U1, normal, kept, flags | _HAS_UNIFORM
    )  # fmt: skip


@cuda.jit(device=True)
def standard_normal(s):
    """A N(0, 1) draw by Box-Muller, two from a block: ``(z, s)``."""
    k0, k1, c2, c3, blocks, normal, uniform, flags = s
    if flags & _HAS_NORMAL:
        return normal, (k0, k1, c2, c3, blocks, 0.0, uniform, flags & _NO_NORMAL)
    w0, w1, w2, w3 = next_block(k0, k1, c2, c3, blocks)
    radius = math.sqrt(-2.0 * math.log(unit_double(w0, w1)))
    angle = _TWO_PI * unit_double(w2, w3)
    return radius * math.cos(angle), (
        k0, k1, c2, c3, blocks + _U1, radius * math.sin(angle), uniform, flags | _HAS_NORMAL
    )  # fmt: skip


@cuda.jit(device=True)
def laplace(s, scale):
    """A Laplace(0, scale) draw, by the inverse CDF of a :func:`random` uniform: ``(x, s)``."""
    u, s = random(s)
    if u < 0.5:
        return scale * math.log(2.0 * u), s
    return -scale * math.log(2.0 - 2.0 * u), s


@cuda.jit(device=True)
def start_state(k0, k1, c2, c3):
    """The state at the start of the stream keyed (k0, k1) with upper counter (c2, c3).

    The words are masked to 32 bits here, so that the compiler knows it in every round:
    the multiplies of :func:`philox4x32_10` are then 32 x 32 -> 64 bits, not 64 x 64.
    """
    return (k0 & _MASK, k1 & _MASK, c2 & _MASK, c3 & _MASK, _U0, 0.0, 0.0, _U0)


def replicate_keys(states: np.ndarray) -> np.ndarray:
    """The Philox key and counter words of each replicate, from its seed sequence.

    Parameters
    ----------
    states : ndarray of uint64, shape (R, 4)
        Each replicate's PCG64 state words as its seed sequence gives them
        (:meth:`ldpsim.tasks.grid_point.GridPointSetup.data_state`): 256 hashed bits.

    Returns
    -------
    ndarray of uint64, shape (R, 4)
        ``(k0, k1, c2, c3)`` per replicate: the key and the upper counter words, the
        low and high 32 bits of the state's first two words (:func:`start_state`).
    """
    states = np.asarray(states, dtype=np.uint64)
    out = np.zeros((states.shape[0], 4), dtype=np.uint64)
    out[:, 0] = states[:, 0] & _MASK
    out[:, 1] = states[:, 0] >> _U32
    out[:, 2] = states[:, 1] & _MASK
    out[:, 3] = states[:, 1] >> _U32
    return out


def philox_blocks(counters: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Philox4x32-10 in numpy, vectorized: the reference of :func:`philox4x32_10`.

    Parameters
    ----------
    counters : array of uint32-valued integers, shape (..., 4)
    keys : array of uint32-valued integers, shape (..., 2), broadcast against counters

    Returns
    -------
    ndarray of uint64, shape (..., 4)
        The blocks' words.
    """
    c = np.array(counters, dtype=np.uint64)
    k = np.broadcast_to(np.array(keys, dtype=np.uint64), (*c.shape[:-1], 2)).copy()
    c0, c1, c2, c3 = (c[..., i].copy() for i in range(4))
    k0, k1 = k[..., 0], k[..., 1]
    for _ in range(10):
        p0, p1 = _M0 * c0, _M1 * c2
        c0, c1, c2, c3 = (p1 >> _U32) ^ c1 ^ k0, p1 & _MASK, (p0 >> _U32) ^ c3 ^ k1, p0 & _MASK
        k0, k1 = (k0 + _W0) & _MASK, (k1 + _W1) & _MASK
    return np.stack([c0, c1, c2, c3], axis=-1)
