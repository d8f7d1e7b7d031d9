"""The GPU backend's random numbers: Philox4x32-10 streams, one per replicate.

A counter-based generator (Salmon, Moraes, Dror & Shaw 2011): block ``m`` of a stream
is ``philox4x32_10(counter, key)``, four 32-bit words, computed from the block's
number alone. All replicates of a grid point share one key, two 32-bit words hashed
from the grid point's seed sequence (:func:`grid_point_key`: the seed and the spec's
path key); replicate ``rep`` owns the counters whose upper half is ``rep`` (words 2 and
3), and the lower half counts its blocks (words 0 and 1). So a replicate's numbers
depend on the seed, the spec and ``rep``, and on nothing else: not on the launch shape,
the block size, the GPU or the other replicates of a launch. Its key words are made on
the device from ``rep`` itself: a launch needs no per-replicate seeding.

A block gives two draws of a kind: :func:`standard_normal` keeps the second normal of a
Box-Muller pair, and :func:`random` the second uniform of a block, in the state until
the next draw of that kind (:data:`STREAMS_VERSION` names this layout):

* :func:`random`: a uniform on (0, 1), ``(2k + 1) 2^-53`` with k the 52 bits of the top
  20 bits of word 0 and all of word 1 (then words 2 and 3): every value of the grid
  exactly, none of them 0 or 1 (:func:`unit_double`);
* :func:`standard_normal`: Box-Muller, ``sqrt(-2 log u1) (cos, then sin)(2 pi u2)`` with
  u1 and u2 the block's two uniforms; the sine and cosine of ``2 pi u2`` come together
  from the nearest quarter turn and two polynomials on [-pi/4, pi/4]
  (:func:`sin_cos_two_pi`), with no range reduction (u2 is already a fraction of a turn);
* :func:`laplace`: ``scale * log(2u)`` for u < 1/2, ``-scale * log(2 - 2u)`` else, u
  from :func:`random` (the inverse of the Laplace CDF; |x| <= 36.1 scale, the bound that
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
#: change it, and a store of another version is not extended. Version 1
#: (``philox4x32-10/pairs/1``) keyed each replicate from its own seed sequence and drew
#: its sines and cosines with libdevice's ``sin`` and ``cos``.
STREAMS_VERSION = "philox4x32-10/rep-counter/2"

_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = np.uint64(0x9E3779B9)
_W1 = np.uint64(0xBB67AE85)
_MASK = np.uint64(0xFFFFFFFF)
_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U12 = np.uint64(12)
_U32 = np.uint64(32)
#: Flags of the state: a normal, a uniform kept for the next draw of its kind.
_HAS_NORMAL = np.uint64(1)
_HAS_UNIFORM = np.uint64(2)
_NO_NORMAL = np.uint64(2)
_NO_UNIFORM = np.uint64(1)
_TWO_M20 = 2.0**-20
_TWO_M52 = 2.0**-52
_TWO_PI = 2.0 * math.pi
# fdlibm's kernels of sin and cos on [-pi/4, pi/4] (k_sin.c, k_cos.c: |error| < 2^-58
# of the polynomial against the function there).
_S1 = -1.66666666666666324348e-01
_S2 = 8.33333333332248946124e-03
_S3 = -1.98412698298579493134e-04
_S4 = 2.75573137070700676789e-06
_S5 = -2.50507602534068634195e-08
_S6 = 1.58969099521155010221e-10
_C1 = 4.16666666666666019037e-02
_C2 = -1.38888888888741095749e-03
_C3 = 2.48015872894767294178e-05
_C4 = -2.75573143513906633035e-07
_C5 = 2.08757232129817482790e-09
_C6 = -1.13596475577881948265e-11


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
    """A double in (0, 1) from two 32-bit words: ``(2k + 1) 2^-53``, k = the top 20 bits
    of ``a`` then the 32 of ``b``.

    Each word is converted to a double directly (32-bit integers, exact) and the sum is
    exact too: ``(a >> 12) 2^-20 + (b + 1/2) 2^-52`` is an odd multiple of 2^-53 below
    1, which a double holds. So the 2^52 values are equally likely, symmetric about 1/2,
    and never 0 or 1 (log and the inverse CDFs stay finite).
    """
    high = float(np.uint32(a >> _U12))
    low = float(np.uint32(b))
    return high * _TWO_M20 + (low + 0.5) * _TWO_M52


@cuda.jit(device=True)
def sin_cos_two_pi(u):
    """``(sin 2 pi u, cos 2 pi u)`` for u in (0, 1), together.

    u is a fraction of a turn already: the nearest quarter turn q (0..4) leaves
    ``r = u - q/4``, |r| <= 1/8, exactly (a multiple of 2^-53 below 1/8), and x = 2 pi r
    lies in [-pi/4, pi/4], where fdlibm's two polynomials give sin x and cos x to about
    an ulp. The quarter turn then swaps and negates them. No division by pi, no
    Payne-Hanek reduction, no branch: a dozen fused multiply-adds each.
    """
    q = math.floor(4.0 * u + 0.5)
    x = _TWO_PI * (u - 0.25 * q)
    z = x * x
    sin_x = x + x * z * (_S1 + z * (_S2 + z * (_S3 + z * (_S4 + z * (_S5 + z * _S6)))))
    cos_x = 1.0 - (
        0.5 * z - z * z * (_C1 + z * (_C2 + z * (_C3 + z * (_C4 + z * (_C5 + z * _C6)))))
    )
    quarter = int(q) & 3
    if quarter & 1:
        sin_x, cos_x = cos_x, -sin_x
    if quarter & 2:
        sin_x, cos_x = -sin_x, -cos_x
    return sin_x, cos_x


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
    sin_a, cos_a = sin_cos_two_pi(unit_double(w2, w3))
    return radius * cos_a, (
        k0, k1, c2, c3, blocks + _U1, radius * sin_a, uniform, flags | _HAS_NORMAL
    )  # fmt: skip


@cuda.jit(device=True)
def laplace(s, scale):
    """A Laplace(0, scale) draw, by the inverse CDF of a :func:`random` uniform: ``(x, s)``."""
    u, s = random(s)
    if u < 0.5:
        return scale * math.log(2.0 * u), s
    return -scale * math.log(2.0 - 2.0 * u), s


@cuda.jit(device=True)
def start_state(k0, k1, rep):
    """The state at the start of replicate ``rep``'s stream under the key (k0, k1): the
    counter's upper words are the low and high 32 bits of ``rep``."""
    rep = np.uint64(rep)
    return (k0 & _MASK, k1 & _MASK, rep & _MASK, rep >> _U32, _U0, 0.0, 0.0, _U0)


def grid_point_key(entropy: list[int]) -> tuple[int, int]:
    """The Philox key of a grid point's replicates: two 32-bit words of its seed sequence.

    Parameters
    ----------
    entropy : list of int
        The grid point's entropy words, the seed's and the path key's
        (:attr:`ldpsim.tasks.grid_point.GridPointSetup.entropy`).

    Returns
    -------
    tuple of 2 int
        ``SeedSequence(entropy).generate_state(2, uint32)``: numpy's hash of the words.
    """
    words = np.random.SeedSequence(entropy).generate_state(2, dtype=np.uint32)
    return int(words[0]), int(words[1])


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
