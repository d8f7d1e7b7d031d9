"""numpy's ziggurat tables for its normal and exponential samplers, shipped with ldpsim."""

# Provenance. The values are those of numpy's
# numpy/random/src/distributions/ziggurat_constants.h (the 256-layer tables of
# Marsaglia & Tsang (2000) as numpy computed them; the header last changed in numpy
# commit caccd283941b0bade7b71056138ded5379b1625f, 2019, and was unchanged at numpy
# 1f90bbb55e65e7de68921bc3f1a2d94492fdf689, 2026-08-21). numba transcribes that header
# into its private module numba/np/random/_constants.py; on 2026-11-23 the arrays and
# radii of numba 0.68.1's copy were compared with the header itself (all equal, bit for
# bit) and written to ziggurat.npz by ``python -m ldpsim.tasks.streams.ziggurat``. ldpsim ships
# that file so that nothing it runs imports a private numba module; the generator below
# is the only reader of numba's copy. tests/tasks/test_rng.py checks that the shipped
# tables reproduce numpy's Generator draws bit for bit, the tail and wedge paths included.
# numba freezes the arrays into the compiled, disk-cached functions of tasks/streams/rng.py:
# after rewriting the file, touch rng.py so that the cache is rebuilt.
#
# Names follow numpy's distributions.c: ki, wi, fi are the normal's tables and ke, we,
# fe the exponential's; k* are the acceptance thresholds (uint64), w* the layer widths
# per unit of the 52-bit (normal) or 53-bit (exponential) integer abscissa, f* the
# unnormalised density at each layer's edge; r is the base layer's edge (where the
# tail begins) and inv_r its reciprocal.

from __future__ import annotations

import datetime
from pathlib import Path

import numpy as np

#: The shipped tables, package data of ``ldpsim.tasks``.
TABLE_PATH = Path(__file__).with_name("ziggurat.npz")
#: Array names and their dtypes.
ARRAYS = {
    "ki_double": np.uint64,
    "wi_double": np.float64,
    "fi_double": np.float64,
    "ke_double": np.uint64,
    "we_double": np.float64,
    "fe_double": np.float64,
}
RADII = ("ziggurat_nor_r", "ziggurat_nor_inv_r", "ziggurat_exp_r")
N_LAYERS = 256


def load_tables(path: Path = TABLE_PATH) -> dict[str, np.ndarray | float]:
    """Read and check the shipped tables.

    Parameters
    ----------
    path : pathlib.Path
        An ``.npz`` file written by :func:`write_tables`.

    Returns
    -------
    dict
        The six arrays (contiguous, shape (256,), dtypes of :data:`ARRAYS`) and the three
        radii (Python floats), by numpy's names.

    Raises
    ------
    ValueError
        If an array is missing or has another shape or dtype.
    """
    with np.load(path) as stored:
        tables: dict[str, np.ndarray | float] = {}
        for name, dtype in ARRAYS.items():
            values = stored[name]
            if values.shape != (N_LAYERS,) or values.dtype != dtype:
                raise ValueError(
                    f"{path}: {name} must be a {np.dtype(dtype).name} array of shape "
                    f"({N_LAYERS},). Got {values.dtype.name} {values.shape}."
                )
            tables[name] = np.ascontiguousarray(values)
        for name in RADII:
            tables[name] = float(stored[name])
    return tables


def write_tables(path: Path = TABLE_PATH) -> None:
    """Write numba's transcription of numpy's tables to ``path``, with their provenance.

    Run once, by a maintainer (``python -m ldpsim.tasks.streams.ziggurat``); ldpsim itself only
    reads the file.
    """
    # The one place that reads numba's private copy: a one-time source, never a
    # run-time dependency.
    import numba
    from numba.np.random import _constants as numba_copy

    arrays = {name: np.asarray(getattr(numba_copy, name), dtype=ARRAYS[name]) for name in ARRAYS}
    radii = {name: np.float64(getattr(numba_copy, name)) for name in RADII}
    provenance = (
        "numpy/random/src/distributions/ziggurat_constants.h (numpy commit caccd283), "
        f"as transcribed by numba {numba.__version__} in numba/np/random/_constants.py; "
        f"written {datetime.date.today().isoformat()} by python -m ldpsim.tasks.streams.ziggurat"
    )
    np.savez(path, **arrays, **radii, provenance=np.array(provenance))


if __name__ == "__main__":
    # Written before the load below, which then checks what was written. Run as
    # ``python tasks/streams/ziggurat.py`` if the file is missing (the package cannot be imported
    # without it).
    write_tables()
    print(f"wrote {TABLE_PATH}")

_TABLES = load_tables()
ki_double = _TABLES["ki_double"]
wi_double = _TABLES["wi_double"]
fi_double = _TABLES["fi_double"]
ke_double = _TABLES["ke_double"]
we_double = _TABLES["we_double"]
fe_double = _TABLES["fe_double"]
ziggurat_nor_r = _TABLES["ziggurat_nor_r"]
ziggurat_nor_inv_r = _TABLES["ziggurat_nor_inv_r"]
ziggurat_exp_r = _TABLES["ziggurat_exp_r"]
