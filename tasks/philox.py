"""The GPU backend's random numbers: Philox4x32-10 streams, one per replicate.

A counter-based generator (Salmon, Moraes, Dror & Shaw 2011): block ``m`` of a stream
is ``philox4x32_10(counter, key)``, four 32-bit words, computed from the block's
number alone. A replicate's stream is keyed by 128 bits drawn from its seed sequence
(:func:`replicate_keys`): the Philox key (2 words) and the upper half of the counter (2
words); the lower half counts the draws. So a replicate's numbers depend on its seed
and nothing else: not on the launch shape, the block size, the GPU or the other
replicates of a launch.

Each draw takes one whole block (:data:`STREAMS_VERSION` names this layout):

* :func:`random`: a uniform on [0, 1) from words 0 and 1 (53 bits);
* :func:`standard_normal`: Box-Muller, ``sqrt(-2 log u1) cos(2 pi u2)`` with
  u1 = 1 - (words 0, 1) in (0, 1] and u2 = (words 2, 3) in [0, 1) (the sine's normal is
  not used: a draw is one block, so the counter is the draw's number);
* :func:`laplace`: ``scale * (-log u1)`` with the sign from the top bit of word 2.

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
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

#: Names the streams' layout. A store records it; a change of this file's draws must
#: change it, and a store of another version is not extended.
STREAMS_VERSION = "philox4x32-10/one-block-per-draw/1"

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
_TWO_26 = 67108864.0
_TWO_M53 = 1.0 / 9007199254740992.0
_TWO_PI = 2.0 * math.pi


@cuda.jit(device=True, inline=True)
def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """One Philox4x32-10 block: 10 rounds on the counter (c0..c3) with the key (k0, k1).

    All arguments and results are uint64 holding 32-bit words.
    """
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


@cuda.jit(device=True, inline=True)
def next_block(s):
    """The next block of the stream ``s = (k0, k1, c2, c3, draws)``: ``(w0..w3, s)``."""
    k0, k1, c2, c3, draws = s
    w0, w1, w2, w3 = philox4x32_10(draws & _MASK, draws >> _U32, c2, c3, k0, k1)
    return w0, w1, w2, w3, (k0, k1, c2, c3, draws + _U1)


@cuda.jit(device=True, inline=True)
def unit_double(a, b):
    """A double in [0, 1) from the 53 top bits of two 32-bit words (27 of a, 26 of b)."""
    return ((a >> _U5) * _TWO_26 + (b >> _U6)) * _TWO_M53


@cuda.jit(device=True, inline=True)
def random(s):
    """A uniform draw on [0, 1): ``(u, s)``."""
    w0, w1, _, _, s = next_block(s)
    return unit_double(w0, w1), s


@cuda.jit(device=True, inline=True)
def standard_normal(s):
    """A N(0, 1) draw by Box-Muller: ``(z, s)``."""
    w0, w1, w2, w3, s = next_block(s)
    u1 = 1.0 - unit_double(w0, w1)
    u2 = unit_double(w2, w3)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(_TWO_PI * u2), s


@cuda.jit(device=True, inline=True)
def laplace(s, scale):
    """A Laplace(0, scale) draw: a random sign times ``scale`` times an Exp(1): ``(x, s)``."""
    w0, w1, w2, _, s = next_block(s)
    e = -math.log(1.0 - unit_double(w0, w1))
    return (-scale * e if (w2 >> _U31) & _U1 else scale * e), s


def replicate_keys(states: np.ndarray) -> np.ndarray:
    """The Philox key and counter words of each replicate, from its seed sequence.

    Parameters
    ----------
    states : ndarray of uint64, shape (R, 4)
        Each replicate's PCG64 state words as its seed sequence gives them
        (:meth:`ldpsim.tasks.grid_point.GridPointSetup.data_state`): 256 hashed bits.

    Returns
    -------
    ndarray of uint64, shape (R, 5)
        ``(k0, k1, c2, c3, 0)`` per replicate: the key and the upper counter words (the
        low and high 32 bits of the state's first two words), and the draw count 0, the
        start of :func:`next_block`'s stream.
    """
    states = np.asarray(states, dtype=np.uint64)
    out = np.zeros((states.shape[0], 5), dtype=np.uint64)
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
