"""numpy's PCG64 generator and distributions in numba, inlined into the SGD kernel."""

# Called through numba's numpy.random.Generator support, every draw is an indirect call
# into the bit generator, which the compiler can neither inline nor overlap with the SGD
# recursion: the draws then cost as much as the rest of the step. These functions are
# numpy's algorithms (PCG64 XSL-RR 128/64, next_double, the 256-step ziggurat normal and
# exponential, on numpy's tables as shipped in ldpsim.tasks.streams.ziggurat) written so that
# they inline. They give bit-identical numbers to
# numpy.random.Generator(PCG64), and the kernel writes the state back, so numpy can use
# a stream before and after the kernel without any difference (tests/tasks/test_rng.py).
# The one exception is laplace: a random sign times numpy's exponential, exact but
# cheaper than numpy's inverse-CDF sampler, whose log costs as much as the rest of a
# quantile-regression step.
#
# The state travels by value, as a tuple s = (state_hi, state_lo, inc_hi, inc_lo) of
# uint64, and every draw returns (value, s): by value, not in an array, so that the
# compiler keeps it in registers instead of storing and reloading it around each draw.
# It must be typed uint64: numba returns the words to Python as ints, and a tuple of
# ints below 2**63 is typed int64, which numba unifies with uint64 as float64 (53 bits)
# inside any loop, silently corrupting the stream. Python code therefore hands states
# to compiled code only through state_of or as_state.
#
# References: O'Neill, M. E. (2014), PCG: a family of simple fast space-efficient
# statistically good algorithms for random number generation, HMC-CS-2014-0905;
# Marsaglia, G. & Tsang, W. W. (2000), The ziggurat method for generating random
# variables, J. Stat. Softw. 5(8); numpy/random/src/pcg64/pcg64.h and
# numpy/random/src/distributions/distributions.c.

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ldpsim.tasks.compiled import cached_njit
from ldpsim.tasks.streams.ziggurat import (
    fe_double,
    fi_double,
    ke_double,
    ki_double,
    we_double,
    wi_double,
    ziggurat_exp_r,
    ziggurat_nor_inv_r,
    ziggurat_nor_r,
)

_MASK64 = (1 << 64) - 1
# PCG_DEFAULT_MULTIPLIER_128 of numpy's pcg64.h.
_MULT_HI = np.uint64(2549297995355413924)
_MULT_LO = np.uint64(4865540595714422341)
_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U3 = np.uint64(3)
_U8 = np.uint64(8)
_U11 = np.uint64(11)
_U58 = np.uint64(58)
_U63 = np.uint64(63)
_U64 = np.uint64(64)
_LOW8 = np.uint64(0xFF)
_MANTISSA = np.uint64(0x000FFFFFFFFFFFFF)
_TWO_M53 = 1.0 / 9007199254740992.0


@intrinsic
def _mulhi(typingctx, a, b):
    """High 64 bits of the 128-bit product a * b (one ``mul`` instruction on x86-64)."""
    if not (isinstance(a, types.Integer) and isinstance(b, types.Integer)):
        return None
    sig = types.uint64(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        i128 = ir.IntType(128)
        x = builder.zext(args[0], i128)
        y = builder.zext(args[1], i128)
        prod = builder.mul(x, y)
        return builder.trunc(builder.lshr(prod, ir.Constant(i128, 64)), ir.IntType(64))

    return sig, codegen


def _branch_hint(name: str, expected: int, doc: str):
    # An intrinsic returning its boolean argument wrapped in llvm.expect: LLVM turns it
    # into branch weights, which move the rare path (and the register spills a function
    # call on it needs) out of the hot loop.
    def hint(typingctx, cond):
        if not isinstance(cond, types.Boolean):
            return None

        def codegen(context, builder, signature, args):
            i1 = ir.IntType(1)
            fnty = ir.FunctionType(i1, [i1, i1])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.expect.i1")
            return builder.call(fn, [args[0], ir.Constant(i1, expected)])

        return types.boolean(cond), codegen

    hint.__name__ = hint.__qualname__ = name
    hint.__doc__ = doc
    return intrinsic(hint)


likely = _branch_hint("likely", 1, "``cond``, hinting the compiler that it is almost always true.")
unlikely = _branch_hint(
    "unlikely", 0, "``cond``, hinting the compiler that it is almost always false."
)


def state_of(rng: np.random.Generator) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:
    """The PCG64 state of ``rng`` as the kernel's tuple ``(state_hi, state_lo, inc_hi, inc_lo)``.

    Parameters
    ----------
    rng : numpy.random.Generator
        A generator on a ``numpy.random.PCG64`` bit generator.

    Raises
    ------
    TypeError
        If the bit generator is not PCG64.
    """
    state = rng.bit_generator.state
    if state.get("bit_generator") != "PCG64":
        raise TypeError(
            f"The kernel's random stream must be a numpy Generator on PCG64. "
            f"Got {state.get('bit_generator')!r}."
        )
    s, inc = state["state"]["state"], state["state"]["inc"]
    return as_state((s >> 64, s & _MASK64, inc >> 64, inc & _MASK64))


def as_state(words) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:
    """The four state words as the uint64 tuple compiled code needs.

    Use it on a state that compiled code returned to Python (numba returns the words
    as Python ints, which would be typed int64 on the way back in; see the module
    comment).
    """
    if len(words) != 4:
        raise ValueError(f"A PCG64 state has 4 words. Got {len(words)}.")
    return tuple(np.uint64(int(w) & _MASK64) for w in words)


def set_state(rng: np.random.Generator, s) -> None:
    """Write the kernel's state ``s`` back into ``rng`` (the inverse of :func:`state_of`)."""
    state = rng.bit_generator.state
    state["state"]["state"] = (int(s[0]) << 64) | int(s[1])
    rng.bit_generator.state = state


@cached_njit(inline="always")
def next_uint64(s):
    """numpy's ``pcg64_next64``: advance the LCG, output XSL-RR of the new state."""
    hi, lo, inc_hi, inc_lo = s
    new_lo = lo * _MULT_LO + inc_lo
    carry = _U1 if new_lo < inc_lo else np.uint64(0)
    new_hi = _mulhi(lo, _MULT_LO) + lo * _MULT_HI + hi * _MULT_LO + inc_hi + carry
    rot = new_hi >> _U58
    x = new_hi ^ new_lo
    return (x >> rot) | (x << ((_U64 - rot) & _U63)), (new_hi, new_lo, inc_hi, inc_lo)


@cached_njit(inline="always")
def next_double(s):
    """A uniform double in [0, 1): numpy's ``next_double`` (53 random bits)."""
    r, s = next_uint64(s)
    return np.float64(r >> _U11) * _TWO_M53, s


@cached_njit(inline="always")
def random(s):
    """``Generator.random()``: uniform on [0, 1). Returns ``(u, s)``."""
    return next_double(s)


@cached_njit(inline="always")
def _ziggurat_candidate(r):
    # numpy's split of one 64-bit word: 8 bits of layer, 1 of sign, 52 of abscissa.
    idx = np.intp(r & _LOW8)
    r >>= _U8
    rabs = (r >> _U1) & _MANTISSA
    x = np.float64(rabs) * wi_double[idx]
    if r & _U1:
        x = -x
    return idx, rabs, x


@cached_njit()
def _normal_slow(s, idx, rabs, x):
    # The 1% of ziggurat draws outside the rectangles (numpy's random_standard_normal),
    # kept out of line so that the inlined fast path stays small.
    while True:
        if idx == 0:
            while True:
                u, s = next_double(s)
                xx = -ziggurat_nor_inv_r * np.log1p(-u)
                u, s = next_double(s)
                yy = -np.log1p(-u)
                if yy + yy > xx * xx:
                    if (rabs >> _U8) & _U1:
                        return -(ziggurat_nor_r + xx), s
                    return ziggurat_nor_r + xx, s
        u, s = next_double(s)
        if (fi_double[idx - 1] - fi_double[idx]) * u + fi_double[idx] < np.exp(-0.5 * x * x):
            return x, s
        r, s = next_uint64(s)
        idx, rabs, x = _ziggurat_candidate(r)
        if rabs < ki_double[idx]:
            return x, s


@cached_njit(inline="always")
def standard_normal(s):
    """``Generator.standard_normal()``: numpy's 256-step ziggurat (Marsaglia & Tsang).

    Returns ``(z, s)``.
    """
    r, s = next_uint64(s)
    idx, rabs, x = _ziggurat_candidate(r)
    if likely(rabs < ki_double[idx]):  # 99% of draws
        return x, s
    return _normal_slow(s, idx, rabs, x)


@cached_njit(inline="always")
def _exponential_candidate(r):
    # numpy's split of one 64-bit word for the exponential ziggurat: bits 3-10 pick the
    # layer, bits 11-63 the abscissa; bits 0-2 are unused.
    ri = r >> _U3
    idx = np.intp(ri & _LOW8)
    ri >>= _U8
    return idx, ri, np.float64(ri) * we_double[idx]


@cached_njit()
def _exponential_slow(s, idx, x):
    # numpy's standard_exponential_unlikely, then its retry, out of line.
    while True:
        u, s = next_double(s)
        if idx == 0:
            return ziggurat_exp_r - np.log1p(-u), s
        if (fe_double[idx - 1] - fe_double[idx]) * u + fe_double[idx] < np.exp(-x):
            return x, s
        r, s = next_uint64(s)
        idx, ri, x = _exponential_candidate(r)
        if ri < ke_double[idx]:
            return x, s


@cached_njit(inline="always")
def _exponential_from(r, s):
    # The exponential whose first word r has been drawn already.
    idx, ri, x = _exponential_candidate(r)
    if likely(ri < ke_double[idx]):  # 99% of draws
        return x, s
    return _exponential_slow(s, idx, x)


@cached_njit(inline="always")
def standard_exponential(s):
    """``Generator.standard_exponential()``: numpy's 256-step ziggurat.

    Returns ``(e, s)``.
    """
    r, s = next_uint64(s)
    return _exponential_from(r, s)


@cached_njit(inline="always")
def laplace(s, loc, scale):
    """A Laplace(loc, scale) draw: ``loc + scale * sign * E`` (not numpy's sampler).

    E is numpy's ziggurat standard exponential and the sign is bit 0 of E's first
    64-bit word, which the ziggurat does not use: sign and E are independent, and a
    symmetric random sign times an Exp(1) variable is exactly Laplace(0, 1). This costs
    one word and a table lookup, against a ``log`` for numpy's inverse-CDF
    ``Generator.laplace`` (about 2.7 ns against 7.5 ns a draw here), and gives
    different numbers from it.

    Parameters
    ----------
    s : tuple of 4 uint64
        The generator state.
    loc : float
        Location, finite.
    scale : float
        Scale b > 0 (the variance is 2 b^2).

    Returns
    -------
    x : float
    s : tuple of 4 uint64
        The advanced state.
    """
    r, s = next_uint64(s)
    e, s = _exponential_from(r, s)
    signed_scale = -scale if (r & _U1) != _U0 else scale
    return loc + signed_scale * e, s
