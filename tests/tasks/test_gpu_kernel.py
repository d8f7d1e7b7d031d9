"""The GPU backend's kernel, run in numba's CUDA simulator, against a numpy reference.

tests/conftest.py sets NUMBA_ENABLE_CUDASIM=1 before numba is imported, so these tests
run the kernel's own device code, as Python, on any machine. The reference draws the
same Philox4x32-10 blocks in numpy (checked against Random123's known answers), runs
the plain-Python LDP-SGD of sgd_reference.py on them, and computes every statistic the
kernel streams (segment sums, T, b, A at each cut, with the recentring at powers of two)
directly from the whole path.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda
from scipy import stats
from sgd_reference import GRADIENTS, PRIVATIZERS, reference_path

from ldpsim.tasks import normalize_spec
from ldpsim.tasks.gpu import kernel as gpu_kernel
from ldpsim.tasks.grid_point import GridPointSetup, gpu_row, needs_full_matrix
from ldpsim.tasks.streams.philox import philox4x32_10, philox_blocks, replicate_keys

#: Random123's tests/kat_vectors, the three philox4x32 10 lines: counter, key, result.
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


class PhiloxStream:
    """A replicate's GPU stream in numpy (tasks/streams/philox.py): a block gives two uniforms,
    or a Box-Muller pair; the second is kept for the next draw of its kind."""

    def __init__(self, row: np.ndarray) -> None:
        self.key = (int(row[0]), int(row[1]))
        self.high = (int(row[2]), int(row[3]))
        self.blocks = 0
        self.normals: list[float] = []
        self.uniforms: list[float] = []

    def block(self) -> list[int]:
        counter = (self.blocks & 0xFFFFFFFF, self.blocks >> 32, *self.high)
        self.blocks += 1
        return [int(w) for w in philox_blocks(counter, self.key)]

    @staticmethod
    def unit(a: int, b: int) -> float:
        return ((a >> 5) * 2.0**26 + (b >> 6) + 0.5) * 2.0**-53

    def random(self) -> float:
        if not self.uniforms:
            w = self.block()
            self.uniforms = [self.unit(w[2], w[3]), self.unit(w[0], w[1])]
        return self.uniforms.pop()

    def standard_normal(self) -> float:
        if not self.normals:
            w = self.block()
            radius = math.sqrt(-2.0 * math.log(self.unit(w[0], w[1])))
            angle = 2.0 * math.pi * self.unit(w[2], w[3])
            self.normals = [radius * math.sin(angle), radius * math.cos(angle)]
        return self.normals.pop()

    def laplace(self, scale: float) -> float:
        u = self.random()
        return scale * math.log(2.0 * u) if u < 0.5 else -scale * math.log(2.0 - 2.0 * u)


def philox_laplace(g, params, rng):
    scale = params[0]
    if scale > 0.0:
        for j in range(len(g)):
            g[j] += rng.laplace(scale)


def philox_randomized_response(g, params, rng):
    # The kernel's form: a select between the two precomputed reports.
    q, lo, hi = params[:3]
    flip = rng.random() < q
    bit = g[0] > 0.5 * (lo + hi)
    g[0] = params[5] if bit != flip else params[4]


GPU_PRIVATIZERS = {
    **PRIVATIZERS,
    "laplace": philox_laplace,
    "randomized_response": philox_randomized_response,
}


def test_philox_gives_random123s_known_answers():
    for counter, key, want in KNOWN_ANSWERS:
        assert philox_blocks(counter, key).tolist() == list(want)

    @cuda.jit
    def blocks(counters, keys, out):
        i = cuda.grid(1)
        if i < out.shape[0]:
            c = counters[i]
            out[i, 0], out[i, 1], out[i, 2], out[i, 3] = philox4x32_10(
                c[0], c[1], c[2], c[3], keys[i, 0], keys[i, 1]
            )

    counters = np.array([c for c, _, _ in KNOWN_ANSWERS], dtype=np.uint64)
    keys = np.array([k for _, k, _ in KNOWN_ANSWERS], dtype=np.uint64)
    out = np.zeros((3, 4), dtype=np.uint64)
    blocks[1, 3](counters, keys, out)
    assert out.tolist() == [list(w) for _, _, w in KNOWN_ANSWERS]


def check_statistics(raw: tuple, path: np.ndarray, cuts: np.ndarray, theta0, full: bool):
    """Every statistic of one replicate's kernel output ``raw``, from its whole path."""
    theta, seg_dev, seg_shift, snap_t, snap_b, snap_a, snap_theta = raw
    np.testing.assert_allclose(theta, path[-1], rtol=1e-12)
    prefix = np.cumsum(path, axis=0)
    shift = np.array(theta0, dtype=float)
    start = 0
    for k, end in enumerate(cuts):
        steps = np.arange(1, end + 1, dtype=float)[:, None]
        big_t = prefix[:end] - steps * shift  # T_r, r = 1..end, centred at the shift
        scale = np.abs(path[:end]).sum() + end * np.abs(shift).sum() + 1.0
        tol = 1e-10 * scale
        np.testing.assert_allclose(seg_shift[k], shift, rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(snap_theta[k], path[end - 1], rtol=1e-12)
        np.testing.assert_allclose(seg_dev[k], (path[start:end] - shift).sum(0), atol=tol)
        np.testing.assert_allclose(snap_t[k], big_t[-1], atol=tol)
        np.testing.assert_allclose(snap_b[k], (steps * big_t).sum(0), atol=tol * end)
        a = big_t.T @ big_t
        np.testing.assert_allclose(
            snap_a[k] if full else snap_a[k][:, 0], a if full else np.diag(a), atol=tol * scale
        )
        if end & (end - 1) == 0:  # a power of two: the running mean is the new centre
            shift = prefix[end - 1] / end
        start = end


CASES = {
    "quantile-rr": {"model": "quantile", "tau": 0.3, "eps": 1.5, "n": 300},
    "mean-laplace-batch": {
        "model": "mean",
        "d": 2,
        "mechanism": "laplace",
        "eps": 2.0,
        "n": 150,
        "batch": 2,
        "theta0": [0.5, -0.5],
    },
    "qr-gaussian-sn": {
        "model": "quantile_regression",
        "coef": [0.0, 1.0, -1.0],
        "mechanism": "gaussian",
        "eps": 0.9,
        "n": 120,
        "c": 0.5,
        "checkpoints": [40, 77],
    },
    "mean-gdp": {"model": "mean", "d": 1, "mechanism": "gdp", "mu": 0.5, "n": 70},
}


@pytest.mark.parametrize("name", CASES)
def test_the_kernel_follows_the_numpy_reference(name):
    spec = {**CASES[name], "backend": "gpu", "seed": 11}
    setup = GridPointSetup.of(normalize_spec(spec))
    rs = setup.spec
    reps = [0, 3, 1]
    outputs = setup.run_gpu(reps)
    raws = [gpu_row(outputs, i) for i in range(len(reps))]
    rows = replicate_keys(np.array([setup.data_state(rep) for rep in reps]))
    eta = [rs.c * math.pow(float(i), -rs.gamma) for i in range(1, rs.n + 1)]
    paths = []
    for raw, row in zip(raws, rows, strict=True):
        path = reference_path(rs, PhiloxStream(row), GPU_PRIVATIZERS, GRADIENTS, eta)
        check_statistics(raw, path, setup.cuts, rs.theta0, needs_full_matrix(rs))
        paths.append(path)
    assert not np.array_equal(paths[0], paths[1])  # the replicates' streams differ


def test_a_replicates_numbers_do_not_depend_on_the_launch(monkeypatch):
    setup = GridPointSetup.of(normalize_spec({**CASES["quantile-rr"], "backend": "gpu"}))
    together = setup.run_gpu([0, 1, 2, 3, 4])
    monkeypatch.setattr(gpu_kernel, "THREADS_PER_BLOCK", 2)  # 3 blocks of 2 threads
    reordered = setup.run_gpu([4, 2, 0, 3, 1])
    alone = setup.run_gpu([2])
    rows = zip(gpu_row(together, 2), gpu_row(reordered, 1), gpu_row(alone, 0), strict=True)
    for a, b, c in rows:
        np.testing.assert_array_equal(a, b, strict=True)
        np.testing.assert_array_equal(a, c, strict=True)


def test_the_draws_have_their_laws():
    # 200,000 blocks of one key in the reference (which the kernel matches, above).
    m = 200_000
    counters = np.zeros((m, 4), dtype=np.uint64)
    counters[:, 0] = np.arange(m)
    w = philox_blocks(counters, (0x12345678, 0x9ABCDEF0))
    u1 = ((w[:, 0] >> 5) * 2.0**26 + (w[:, 1] >> 6) + 0.5) * 2.0**-53
    u2 = ((w[:, 2] >> 5) * 2.0**26 + (w[:, 3] >> 6) + 0.5) * 2.0**-53
    radius, angle = np.sqrt(-2.0 * np.log(u1)), 2.0 * np.pi * u2
    normals = np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])
    uniforms = np.concatenate([u1, u2])
    laplace = np.where(uniforms < 0.5, np.log(2.0 * uniforms), -np.log(2.0 - 2.0 * uniforms))
    # Kolmogorov-Smirnov at level 1e-4 (one fixed key: the outcome is fixed too).
    assert stats.kstest(uniforms, "uniform").pvalue > 1e-4
    assert stats.kstest(normals, "norm").pvalue > 1e-4
    assert stats.kstest(laplace, "laplace").pvalue > 1e-4
    # The two normals of a pair are independent: their correlation is within 4 se.
    assert abs(np.corrcoef(radius * np.cos(angle), radius * np.sin(angle))[0, 1]) < 4 / m**0.5
    # The words' bits are fair: each of the 128 bits of a block is set half the time
    # (se 0.0011 per bit; 5 se).
    bits = ((w[:, :, None] >> np.arange(32, dtype=np.uint64)) & np.uint64(1)).mean(axis=0)
    assert np.abs(bits - 0.5).max() < 5 * 0.5 / math.sqrt(m)


def test_randomized_responses_flip_probability_is_exact_to_the_uniforms_grid():
    # u = (k + 1/2) 2^-53 for k = 0 .. 2^53 - 1, each with probability 2^-53: the flip
    # probability P(u < q) is the count of such k times 2^-53, within 2^-53 of q, so the
    # likelihood ratio (1 - P) / P of the reports is e^eps to 2^-53 / (q (1 - q)).
    for eps in (0.1, 1.0, 4.0, 10.0):
        q = math.exp(-eps) / (1.0 + math.exp(-eps))
        flip = math.ceil(q * 2.0**53 - 0.5) * 2.0**-53  # k with k + 1/2 < q 2^53
        assert abs(flip - q) <= 2.0**-53
        ratio = (1.0 - flip) / flip
        assert abs(ratio / math.exp(eps) - 1.0) <= 1.01 * 2.0**-53 / (q * (1.0 - q))


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"model": "huber_regression", "n": 100}, "model huber_regression has no GPU kernel"),
        (
            {"model": "quantile", "n": 100, "budget_range": [1.0, 2.0]},
            "budget_range (per-user budgets) has no GPU kernel",
        ),
        (
            {"model": "mean", "n": 100, "mechanism": "none"},
            "mechanism none has no GPU kernel",
        ),
        (
            {"model": "mean", "n": 100, "methods": {"np_boot": {}}},
            "method np_boot (np_boot) replays the users",
        ),
    ],
)
def test_what_has_no_gpu_kernel_is_refused(extra, words):
    with pytest.raises(ValueError, match="run it with backend = cpu") as info:
        normalize_spec({**extra, "backend": "gpu"})
    assert words in str(info.value)
    normalize_spec(extra)  # the same spec runs on the CPU


def test_the_backend_is_cpu_or_gpu_and_keys_only_the_gpus_streams():
    with pytest.raises(ValueError, match="'backend' parameter must be one of 'cpu', 'gpu'"):
        normalize_spec({"model": "quantile", "n": 100, "backend": "tpu"})
    cpu = normalize_spec({"model": "quantile", "n": 100})
    assert "backend" not in cpu.path_key()  # the CPU's streams as before the backend
    assert normalize_spec({"model": "quantile", "n": 100, "backend": "cpu"}) == cpu
    gpu = normalize_spec({"model": "quantile", "n": 100, "backend": "gpu"})
    assert gpu.path_key()["backend"] == "gpu" and "streams" in gpu.path_key()
