"""Raw data pointers to arrays inside compiled code, and the rule that keeps them valid."""

# The kernel hands its arrays to the inlined model and mechanism callbacks as raw
# pointers: an array argument of an inlined function costs a reference-count increment
# and decrement per call, and so per SGD step. A pointer holds no reference, and numba
# frees an array right after the last use of its variable, which may come before the
# last use of a pointer into it. The rule, in one place: a compiled function that takes
# ``address(a)`` of an array it allocated itself calls ``keep_alive(a)`` after the
# pointer's last use. (Arrays it received as arguments are held by its caller for the
# whole call.)

from __future__ import annotations

from numba import types
from numba.extending import intrinsic


@intrinsic
def address(typingctx, arr):
    """The data pointer of a contiguous array, as a ``CPointer`` (no reference count).

    The pointer does not keep ``arr`` alive: call :func:`keep_alive` on ``arr`` after the
    pointer's last use.

    Parameters
    ----------
    arr : numba array
        A C-contiguous array (only its data pointer is taken).

    Returns
    -------
    CPointer
        A pointer to ``arr[0]``, indexable like the array's flat data.
    """
    if not isinstance(arr, types.Array):
        return None
    sig = types.CPointer(arr.dtype)(arr)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        return ary.data

    return sig, codegen


@intrinsic
def keep_alive(typingctx, *arrays):
    """Keep ``arrays`` alive up to this point of a compiled function; emits no code.

    numba releases an array after the last use of its variable; this call is such a use,
    so an array whose :func:`address` a loop reads stays allocated until after the loop.

    Parameters
    ----------
    *arrays : numba arrays
        The arrays, allocated by the calling function, whose pointers were used before
        this call.
    """
    if not arrays or not all(isinstance(t, types.Array) for t in arrays):
        return None
    sig = types.none(types.StarArgTuple.from_types(arrays))

    def codegen(context, builder, signature, args):
        return context.get_dummy_value()

    return sig, codegen
