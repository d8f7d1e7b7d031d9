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
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from numba import cuda
from scipy import stats
from sgd_reference import GRADIENTS, PRIVATIZERS, reference_path

from ldpsim.tasks import normalize_spec
from ldpsim.tasks.compile_lock import cache_folder
from ldpsim.tasks.gpu import kernel as gpu_kernel
from ldpsim.tasks.gpu import kernel_loop, units
from ldpsim.tasks.gpu.kernel import run_gpu_replicates
from ldpsim.tasks.gpu.units import GPU_MECHANISMS, GPU_MODELS
from ldpsim.tasks.grid_point import GridPointSetup, gpu_row, needs_full_matrix
from ldpsim.tasks.kernel.cache import KERNEL_SUBFOLDER, code_fingerprint
from ldpsim.tasks.mechanisms import RandomizedResponse
from ldpsim.tasks.models import Quantile
from ldpsim.tasks.streams import philox
from ldpsim.tasks.streams.philox import (
    philox4x32_10,
    philox_blocks,
    sin_cos_two_pi,
    unit_double,
)

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
    """A replicate's GPU stream in numpy (tasks/streams/philox.py, version 2): block m is
    Philox of the counter (m, rep) under the grid point's key; a block gives two
    uniforms, or a Box-Muller pair; the second is kept for the next draw of its kind."""

    def __init__(self, key: tuple[int, int], rep: int) -> None:
        self.key = key
        self.high = (rep & 0xFFFFFFFF, rep >> 32)
        self.blocks = 0
        self.normals: list[float] = []
        self.uniforms: list[float] = []

    def block(self) -> list[int]:
        counter = (self.blocks & 0xFFFFFFFF, self.blocks >> 32, *self.high)
        self.blocks += 1
        return [int(w) for w in philox_blocks(counter, self.key)]

    @staticmethod
    def unit(a: int, b: int) -> float:
        # (2k + 1) 2^-53 with k = (a >> 12) 2^32 + b, in exact integer arithmetic.
        return float(2 * (((a >> 12) << 32) + b) + 1) * 2.0**-53

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


def philox_quantile_gradient(theta, params, rng, g):
    # The kernel's form: 1{X <= theta}, X ~ N(loc, 1), is 1{U < Phi(theta - loc)}.
    tau, loc = params[0], params[1]
    p = 0.5 * math.erfc((loc - theta[0]) * math.sqrt(0.5))
    g[0] = (1.0 if rng.random() < p else 0.0) - tau


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
GPU_GRADIENTS = {**GRADIENTS, "quantile": philox_quantile_gradient}


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


def test_block_numbers_past_32_bits_carry_into_the_counters_second_word():
    # A hunt (h21f): block m of a stream is Philox of the counter (m mod 2^32, m >> 32,
    # c2, c3); no test drew 2^32 blocks, so the second word was never checked.
    @cuda.jit
    def blocks(draws, out):
        for i in range(draws.size):
            out[i, 0], out[i, 1], out[i, 2], out[i, 3] = philox.next_block(
                np.uint64(0x12345678), np.uint64(0x9ABCDEF0), np.uint64(7), np.uint64(3), draws[i]
            )

    draws = np.array([0, 5, 2**32 - 1, 2**32, 2**32 + 5, 2**40 + 3, 2**63 + 1], dtype=np.uint64)
    out = np.zeros((draws.size, 4), dtype=np.uint64)
    blocks[1, 1](draws, out)
    counters = [(int(m) & 0xFFFFFFFF, int(m) >> 32, 7, 3) for m in draws]
    np.testing.assert_array_equal(out, philox_blocks(counters, (0x12345678, 0x9ABCDEF0)))
    assert not np.array_equal(out[1], out[4])  # 5 and 2^32 + 5 are other blocks


def test_a_grid_points_key_is_numpys_hash_of_its_seed_and_path_key():
    # A hunt (h21f): the GPU streams' key is SeedSequence([seed, *path words])'s first two
    # 32-bit words of generate_state (docstring of philox.grid_point_key), in that order;
    # the kernel tests take the key from the set-up itself and leave it open.
    setup = GridPointSetup.of({**CASES["quantile-rr"], "backend": "gpu", "seed": 2**40 + 9})
    words = np.random.SeedSequence([2**40 + 9, *setup.path_words]).generate_state(2, np.uint32)
    assert setup.gpu_key == (int(words[0]), int(words[1]))


def check_statistics(raw: tuple, path: np.ndarray, cuts: np.ndarray, theta0, full: bool, points):
    """Every statistic of one replicate's kernel output ``raw``, from its whole path: T
    and the centre at every cut, b, A and the iterate at the ``points`` (NaN elsewhere),
    the segment sums where every cut is a point (NaN otherwise)."""
    theta, seg_dev, seg_shift, snap_t, snap_b, snap_a, snap_theta = raw
    np.testing.assert_allclose(theta, path[-1], rtol=1e-12)
    every_cut = len(points) == len(cuts)
    prefix = np.cumsum(path, axis=0)
    shift = np.array(theta0, dtype=float)
    start = 0
    for k, end in enumerate(cuts):
        steps = np.arange(1, end + 1, dtype=float)[:, None]
        big_t = prefix[:end] - steps * shift  # T_r, r = 1..end, centred at the shift
        scale = np.abs(path[:end]).sum() + end * np.abs(shift).sum() + 1.0
        tol = 1e-10 * scale
        np.testing.assert_allclose(seg_shift[k], shift, rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(snap_t[k], big_t[-1], atol=tol)
        if every_cut:
            np.testing.assert_allclose(seg_dev[k], (path[start:end] - shift).sum(0), atol=tol)
        else:
            assert np.isnan(seg_dev[k]).all()
        if k in points:
            np.testing.assert_allclose(snap_theta[k], path[end - 1], rtol=1e-12)
            np.testing.assert_allclose(snap_b[k], (steps * big_t).sum(0), atol=tol * end)
            a = big_t.T @ big_t
            np.testing.assert_allclose(
                snap_a[k] if full else snap_a[k][:, 0],
                a if full else np.diag(a),
                atol=tol * scale,
            )
        else:
            for field in (snap_theta, snap_b, snap_a):
                assert np.isnan(field[k]).all()
        if end & (end - 1) == 0:  # a power of two: the running mean is the new centre
            shift = prefix[end - 1] / end
        start = end


def reference_paths(setup: GridPointSetup, reps: list[int]) -> list[np.ndarray]:
    """The numpy reference's path of each replicate of ``reps``, on its GPU stream."""
    rs = setup.spec
    eta = [rs.c * math.pow(float(i), -rs.gamma) for i in range(1, rs.n + 1)]
    return [
        reference_path(rs, PhiloxStream(setup.gpu_key, rep), GPU_PRIVATIZERS, GPU_GRADIENTS, eta)
        for rep in reps
    ]


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
        "tau": 0.3,  # Phi^-1(tau) enters the noise (0 at the default tau = 0.5)
        "mechanism": "gaussian",
        "eps": 0.9,
        "n": 120,
        "c": 0.5,
        "checkpoints": [40, 77],
    },
    "mean-gdp": {"model": "mean", "d": 1, "mechanism": "gdp", "mu": 0.5, "n": 70},
    # Cuts 1, 2, 4, 8, 16 and points at all but 4: one point fewer than cuts, which a
    # launch must not take for every cut (a mutation hunt, 2026-12-02: P = K - 1 read
    # as every cut passed these tests, and a run's values at checkpoint 8 were then n's
    # b, A and last iterate: sn's bounds wrong or NaN).
    "mean-laplace-all-cuts-but-one": {
        "model": "mean",
        "d": 1,
        "mechanism": "laplace",
        "n": 16,
        "checkpoints": [1, 2, 8],
        "methods": {"oracle": {}, "sn": {}},
    },
    # eps = inf: Laplace adds nothing and draws nothing (as on the CPU).
    "mean-laplace-inf": {"model": "mean", "mechanism": "laplace", "eps": math.inf, "n": 40},
}


@pytest.mark.parametrize("name", CASES)
def test_the_kernel_follows_the_numpy_reference(name):
    spec = {**CASES[name], "backend": "gpu", "seed": 11}
    setup = GridPointSetup.of(normalize_spec(spec))
    rs = setup.spec
    reps = [0, 3, 2**32 + 1]  # a replicate number past 32 bits: the counter's 4th word
    outputs = setup.run_gpu(reps)
    points = set(setup.gpu_points.tolist())
    # Only the evaluation points (the last step and the checkpoints) are transferred.
    assert points == {int(np.searchsorted(setup.cuts, p)) for p in rs.checkpoints or [rs.n]}
    paths = reference_paths(setup, reps)
    full = needs_full_matrix(rs)
    for i, path in enumerate(paths):
        check_statistics(gpu_row(outputs, i), path, setup.cuts, rs.theta0, full, points)
    assert not np.array_equal(paths[0], paths[1])  # the replicates' streams differ
    # A launch that transfers every cut and all of A (a plugin method's): the same
    # numbers, all there.
    model, mechanism, every = rs.model.name, rs.mechanism.name, np.arange(setup.cuts.size)
    whole = run_gpu_replicates(
        model, mechanism, *setup.kernel_args, rs.batch, setup.cuts, every, setup.gpu_key,
        np.array(reps[:1]), True,
    )  # fmt: skip
    check_statistics(gpu_row(whole, 0), paths[0], setup.cuts, rs.theta0, True, set(every))
    got, trimmed = list(gpu_row(whole, 0)), gpu_row(outputs, 0)
    if not full:
        got[5] = np.diagonal(got[5], axis1=1, axis2=2)[..., None]
    for a, b in zip(got, trimmed, strict=True):
        same = ~np.isnan(b)
        np.testing.assert_array_equal(a[same], b[same], strict=True)


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


def test_each_kernel_is_a_generated_module_of_the_disk_cache_keyed_by_its_code():
    # The kernel's source is the template with one model's, mechanism's and size's
    # bindings, in a module of the cache folder that numba-cuda caches on disk (the
    # simulator ignores the flag: on a GPU, benchmarks/gpu_machine.py's runs show it).
    quantile = gpu_kernel.compile_gpu_kernel("quantile", "randomized_response", 1, 2, 1, True)
    mean = gpu_kernel.compile_gpu_kernel("mean", "gaussian", 2, 3, 1, False)
    folder = cache_folder() / KERNEL_SUBFOLDER
    modules = [sys.modules[kernel.__module__] for kernel in (quantile, mean)]
    assert modules[0] is not modules[1]
    for module in modules:
        assert Path(module.__file__).parent == folder
        assert Path(module.__file__).stem.startswith("kernel_loop_")
        assert module.cache_to_disk is True
    assert modules[0].sample_gradient is GPU_MODELS["quantile"]
    assert (modules[1].d, modules[1].a_entries, modules[1].full_matrix) == (2, 2, False)
    # The key covers the callbacks' modules and the Philox stream they draw from.
    fingerprint = code_fingerprint(
        [kernel_loop.kernel, GPU_MODELS["quantile"], GPU_MECHANISMS["randomized_response"]]
    )
    assert {"ldpsim.tasks.gpu.units", "ldpsim.tasks.streams.philox"} <= set(fingerprint["modules"])


def unit_doubles(w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """The reference of philox.unit_double: (2k + 1) 2^-53, k = (w0 >> 12) 2^32 + w1."""
    k = ((w0 >> np.uint64(12)) << np.uint64(32)) + w1
    return (2 * k + 1).astype(np.float64) * 2.0**-53  # exact: 2k + 1 < 2^53


def test_the_draws_have_their_laws():
    # 200,000 blocks of one key in the reference (which the kernel matches, above).
    m = 200_000
    counters = np.zeros((m, 4), dtype=np.uint64)
    counters[:, 0] = np.arange(m)
    w = philox_blocks(counters, (0x12345678, 0x9ABCDEF0))
    u1, u2 = unit_doubles(w[:, 0], w[:, 1]), unit_doubles(w[:, 2], w[:, 3])
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


def run_device(function, *columns: np.ndarray, outputs: int = 1) -> np.ndarray:
    """``function`` (a device function) on each row of ``columns``, in one simulated thread."""

    @cuda.jit
    def each(args, out):
        for i in range(args.shape[0]):
            if outputs == 1:
                out[i, 0] = function(*(args[i, j] for j in range(len(columns))))
            else:
                out[i, 0], out[i, 1] = function(*(args[i, j] for j in range(len(columns))))

    args = np.stack(columns, axis=1)
    out = np.zeros((args.shape[0], outputs))
    each[1, 1](args, out)
    return out


def test_words_become_uniforms_exactly_on_their_grid():
    # The device's conversion (two 32-bit words, each to a double directly) against the
    # exact integer formula, at the edges and at random words: equal bit for bit, and
    # strictly inside (0, 1) even for the largest k (v1's (k + 1/2) 2^-53 rounded to 1).
    edges = [0, 1, 0xFFF, 0x1000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]
    words = np.array([(a, b) for a in edges for b in edges], dtype=np.uint64)
    more = np.random.default_rng(3).integers(0, 2**32, size=(2_000, 2), dtype=np.uint64)
    words = np.concatenate([words, more])
    got = run_device(unit_double, words[:, 0], words[:, 1])[:, 0]
    want = unit_doubles(words[:, 0], words[:, 1])
    np.testing.assert_array_equal(got, want, strict=True)
    assert got.min() == 2.0**-53 and got.max() == 1.0 - 2.0**-53


def test_sine_and_cosine_of_a_turn_are_within_an_ulp_and_a_half():
    # Against long double (64-bit significand) at every quarter- and eighth-turn edge
    # and at random u: x = 2 pi r is rounded once (|x| <= pi/4: 2^-53 pi/4 absolute),
    # fdlibm's polynomials are within 2^-58 of sin and cos, and their evaluation rounds
    # to within an ulp of the result (< 1): so |error| < 1.5 2^-52 and far less on
    # average; a swapped quarter or a wrong sign would be off by order 1.
    rng = np.random.default_rng(4)
    grid = np.arange(1, 8) / 8.0
    edges = np.concatenate([grid, np.nextafter(grid, 0.0), np.nextafter(grid, 1.0)])
    u = np.concatenate([edges, [2.0**-53, 1.0 - 2.0**-53], rng.random(4_000)])
    got = run_device(sin_cos_two_pi, u, outputs=2)
    two_pi = 2 * np.longdouble("3.14159265358979323846264338327950288")
    angle = two_pi * u.astype(np.longdouble)
    want = np.stack([np.sin(angle), np.cos(angle)], axis=1)
    error = np.abs(got.astype(np.longdouble) - want).astype(np.float64)
    assert error.max() < 1.5 * 2.0**-52, error.max()


@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0, 10.0, 36.0, 37.0, 40.0, 100.0, 700.0, math.inf])
def test_randomized_responses_flip_probability_is_never_below_q(eps):
    # u = (2k + 1) 2^-53 for k = 0 .. 2^52 - 1, each with probability 2^-52, never 0. The
    # device function flips for k < m and keeps the bit from k = m on (shown with the
    # uniform planted in the stream), so P(flip) = m / 2^52; m = ceil(q 2^52) makes it q
    # rounded up: never below q, so never less private than eps claims (before, u < q
    # rounded down, and from eps ~ 36.7 on never flipped: no privacy), and less than
    # 2^-52 above it. In exact rational arithmetic.
    model = Quantile(tau=0.5)
    params = RandomizedResponse(eps=eps).params(model)
    hi = model.gradient_range()[1]
    q = Fraction(params[0])
    m = math.ceil(q * 2**52)
    assert q <= Fraction(m, 2**52) < q + Fraction(1, 2**52)

    def reported(k):
        g = np.array([hi])
        planted = (0, 0, 0, 0, 0, 0.0, (2 * k + 1) * 2.0**-53, philox._HAS_UNIFORM)
        GPU_MECHANISMS["randomized_response"](1, g, params, planted)
        return g[0]

    kept, flipped = params[5], params[4]  # the reports of bit 1 kept and flipped
    if m > 0:
        assert reported(m - 1) == flipped and reported(0) == flipped
    assert reported(m) == kept and reported(2**52 - 1) == kept
    if 0 < q < Fraction(1, 2**53):  # eps >= 37: u < q never flipped
        assert m == 1 and reported(0) == flipped


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


def test_a_wave_is_what_the_registers_let_a_gpu_hold_at_once():
    # An H100/H200 has 132 multiprocessors of 65,536 registers, allotted per warp in 256s:
    # at 64 registers 8 blocks of 128 threads fit on one (135,168 threads in all), at the
    # first kernel's 94 (3,072 a warp) only 5: 84,480, so 1e5 replicates ran as 1.18
    # waves, the second 18% full (issue 44).
    assert gpu_kernel.replicates_per_wave(64, 132) == 132 * 8 * 128 == 135_168
    assert gpu_kernel.replicates_per_wave(94, 132) == 84_480
    assert round(100_000 / gpu_kernel.replicates_per_wave(94, 132), 2) == 1.18
    assert gpu_kernel.replicates_per_wave(16, 1) == 2_048  # the threads' own limit
    # 33 registers are 1,056 a warp, allotted as 1,280: 12 blocks of 128, not 15.
    assert gpu_kernel.replicates_per_wave(33, 1) == 12 * 128
    # The budget binds for d = 1 only (above, the chain's state would spill).
    assert [gpu_kernel.register_budget(d) for d in (1, 2, 5)] == [64, None, None]


@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("every_cut", [False, True], ids=["trimmed", "every-cut"])
@pytest.mark.parametrize("first", [[3], [3, 5]], ids=["1-replicate", "2-replicates"])
def test_a_launchs_outputs_are_its_own_after_the_next_launch(d, every_cut, first):
    # A hunt (2026-12-01): a launch of one replicate returned T and the centres as views
    # of the thread's pinned host buffer, which its next launch fills: a store's theta_bar
    # and bounds of one grid point were silently another's wherever a task launched a
    # chunk of one replicate before it read the first. Two replicates were copies.
    spec = {"model": "mean", "d": d, "mechanism": "laplace", "n": 40, "backend": "gpu"}
    setup = GridPointSetup.of(normalize_spec({**spec, "methods": {"bm": {}, "oracle": {}}}))
    rs = setup.spec
    points = np.arange(setup.cuts.size) if every_cut else setup.gpu_points

    def launch(reps: list[int]) -> tuple[np.ndarray, ...]:
        return run_gpu_replicates(
            rs.model.name, rs.mechanism.name, *setup.kernel_args, rs.batch, setup.cuts,
            points, setup.gpu_key, np.array(reps), False,
        )  # fmt: skip

    outputs = launch(first)
    kept = [array.copy() for array in outputs]
    later = launch([4, 6, 7][: len(first)])
    assert not np.array_equal(later[0], kept[0])  # the next launch's numbers are others
    for array, before in zip(outputs, kept, strict=True):
        np.testing.assert_array_equal(array, before, strict=True)


def test_every_replicate_of_a_launch_is_computed_when_the_last_block_is_part_full(monkeypatch):
    # A hunt (2026-12-02, mutation): the launch's blocks rounded down left the replicates
    # of a part-full last block uncomputed, their columns what the buffers held; no test
    # compared those columns. 5 replicates in blocks of 2: the third block holds one.
    setup = GridPointSetup.of(normalize_spec({**CASES["quantile-rr"], "n": 40, "backend": "gpu"}))
    monkeypatch.setattr(gpu_kernel, "THREADS_PER_BLOCK", 2)
    others = setup.run_gpu([9, 8, 7, 6, 5])  # the buffers now hold other replicates
    together = setup.run_gpu([0, 1, 2, 3, 4])
    for i in range(5):
        alone = setup.run_gpu([i])
        for a, b, c in zip(
            gpu_row(together, i), gpu_row(alone, 0), gpu_row(others, i), strict=True
        ):
            np.testing.assert_array_equal(a, b, strict=True)
            assert not np.array_equal(a, c)


@pytest.mark.parametrize(("theta", "loc"), [(0.1234567891, 0.0), (-1.7, 0.3), (2.05, 1.0)])
def test_the_quantile_shortcut_decides_every_draw_as_the_doubles_phi(theta, loc):
    # docs/gpu.md: the single-precision Phi only saves cost; 1{U < p} is decided as the
    # double's p = erfc((loc - theta) / sqrt 2) / 2 decides it, also for a U between the
    # two Phis or within the margin of either (shown with the uniform planted).
    tau = 0.3
    params = np.array([tau, loc, -tau, 1.0 - tau])
    x = (loc - theta) * math.sqrt(0.5)
    p = 0.5 * math.erfc(x)
    rough = 0.5 * float(math.erfc(np.float32(x)))
    assert rough != p  # the single-precision input differs: a U can lie between them
    planted_u = [
        0.5 * (rough + p),
        p - 2.0**-20,
        p + 2.0**-20,
        np.nextafter(p, 0.0),
        np.nextafter(p, 1.0),
        rough - 0.5 * units.PHI_MARGIN,
        rough + 0.5 * units.PHI_MARGIN,
    ]
    for u in planted_u:
        g, state = np.zeros(1), (0, 0, 0, 0, 0, 0.0, float(u), philox._HAS_UNIFORM)
        GPU_MODELS["quantile"](1, np.array([theta]), params, state, g)
        assert g[0] == (1.0 - tau if u < p else -tau), (u, p, rough)
