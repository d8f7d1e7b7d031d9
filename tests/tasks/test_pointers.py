"""Raw data pointers in compiled code and the keep-alive rule (tasks/kernel/pointers.py)."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

from ldpsim.tasks.kernel.pointers import address, keep_alive


def test_address_is_the_array_data():
    @njit
    def write_through(a):
        p = address(a)
        p[2] = 7.5
        return p[0]

    a = np.array([1.25, 0.0, 0.0])
    assert write_through(a) == 1.25
    assert a[2] == 7.5


def test_keep_alive_takes_arrays_only():
    @njit
    def keep_a_float(x):
        keep_alive(x)

    with pytest.raises(TypingError):
        keep_a_float(1.0)

    # Every argument an array, and at least one (a mutation hunt, 2026-12-02: "any"
    # for "all", and no check of an empty call, passed these tests).
    @njit
    def keep_an_array_and_a_float(a, x):
        keep_alive(a, x)

    @njit
    def keep_nothing():
        keep_alive()

    with pytest.raises(TypingError):
        keep_an_array_and_a_float(np.ones(2), 1.0)
    with pytest.raises(TypingError):
        keep_nothing()


def test_address_takes_arrays_only():
    @njit
    def address_of(x):
        return address(x)

    with pytest.raises(TypingError):
        address_of(1.0)


# An 80 MB array: glibc's malloc serves blocks above 32 MB by mmap and unmaps them on
# free, so a read through a pointer into a freed one faults instead of reading stale data.
POINTER_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    from numba import njit
    from ldpsim.tasks.kernel.pointers import address, keep_alive

    @njit
    def total_kept(n):
        a = np.ones(n)
        p = address(a)
        s = 0.0
        for i in range(n):
            s += p[i]
        keep_alive(a)
        return s

    @njit
    def total_freed(n):  # the same without keep_alive: a's last use is address(a)
        a = np.ones(n)
        p = address(a)
        s = 0.0
        for i in range(n):
            s += p[i]
        return s

    total = total_kept if sys.argv[1] == "keep" else total_freed
    print(total(10**7), flush=True)
    """
)


@pytest.mark.skipif(sys.platform != "linux", reason="relies on glibc's mmap for large blocks")
def test_keep_alive_is_what_keeps_the_pointed_array():
    # The rule the helper exists for: without keep_alive numba frees the array after
    # its last use, address(a), and the loop then reads unmapped memory (SIGSEGV); with
    # keep_alive after the loop it reads the array.
    def run(mode):
        return subprocess.run(
            [sys.executable, "-c", POINTER_SCRIPT, mode], capture_output=True, text=True
        )

    kept = run("keep")
    assert kept.returncode == 0, kept.stderr
    assert float(kept.stdout) == 1e7
    freed = run("free")
    assert freed.returncode == -11, (freed.returncode, freed.stdout)  # SIGSEGV
