"""Random streams of a replicate, derived from values, never from grid positions."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping

import numpy as np

from ldpsim.tasks.streams import rng as kernel_rng
from ldpsim.tasks.streams.multipliers import draw_multipliers

#: Version of the numbers a replicate draws from its streams. Bump it whenever the same
#: seed and specification would give different numbers, so that a store is never
#: extended with replicates that are not comparable with its own.
#: 1: Laplace noise by numpy's ``Generator.laplace``.
#: 2: Laplace noise as a random sign times numpy's exponential (``tasks.rng.laplace``).
#: 3: bm's default batch count is the block count of the replicate's bb (it was the
#:    count for beta = 0.75 whatever bb's beta; only a bm with neither n_batches nor beta
#:    next to a bb with beta != 0.75 changed).
#: 4: a value written as -0.0 keys the streams as 0.0 does (its key hashed the text
#:    "-0.0" before, so `theta0 = -0.0` drew other streams than `theta0 = 0.0`, although
#:    the two are one value and one specification); only keys holding -0.0 changed.
STREAMS_VERSION = 4
#: The mechanisms and interval methods whose numbers each version changed.
STREAMS_CHANGED: dict[int, frozenset[str]] = {2: frozenset({"laplace"}), 3: frozenset({"bm"})}


def streams_changed_since(version: int) -> frozenset[str]:
    """The mechanisms and methods whose numbers changed after streams ``version``."""
    changed: set[str] = set()
    for v in range(version + 1, STREAMS_VERSION + 1):
        changed |= STREAMS_CHANGED.get(v, frozenset())
    return frozenset(changed)


def has_negative_zero(obj: object) -> bool:
    """Whether ``obj`` (a key: mappings, lists and numbers) holds a float -0.0, whose
    streams changed with streams version 4."""
    if isinstance(obj, Mapping):
        return any(has_negative_zero(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return any(has_negative_zero(v) for v in obj)
    if isinstance(obj, float | np.floating):
        return float(obj) == 0 and math.copysign(1.0, float(obj)) < 0
    return False


def _canonical(obj: object) -> object:
    if isinstance(obj, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(obj.items())}
    if isinstance(obj, list | tuple):
        return [_canonical(v) for v in obj]
    if isinstance(obj, bool | str) or obj is None:
        return obj
    if isinstance(obj, int | np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        x = float(obj)
        if not math.isfinite(x):
            return repr(x)
        return 0.0 if x == 0 else x  # -0.0 is the value 0.0 (streams version 4)
    raise TypeError(f"Cannot hash a value of type {type(obj).__name__}: {obj!r}")


def stable_hash(obj: object) -> tuple[int, ...]:
    """Four 32-bit words of the SHA-256 of ``obj``'s canonical JSON (stable across runs)."""
    text = json.dumps(_canonical(obj), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).digest()
    return tuple(int.from_bytes(digest[4 * i : 4 * i + 4], "little") for i in range(4))


def data_stream(seed: int, path_key: Mapping, rep: int) -> np.random.Generator:
    """The data-and-privacy-noise stream of replicate ``rep`` (SPEC section 6).

    Parameters
    ----------
    seed : int
        The sweep seed, >= 0.
    path_key : mapping
        The values that shape the SGD path (model and its parameters, mechanism, eps,
        n, c, gamma, theta0, batch).
    rep : int
        Replicate index, >= 0.
    """
    return data_stream_from_words(seed, stable_hash(path_key), rep)


def method_stream(
    seed: int, path_key: Mapping, rep: int, method_key: Mapping
) -> np.random.Generator:
    """A child stream of the replicate's seed sequence for one interval method."""
    return method_stream_from_words(seed, stable_hash(path_key), rep, stable_hash(method_key))


def data_stream_from_words(
    seed: int, path_words: tuple[int, ...], rep: int
) -> np.random.Generator:
    """:func:`data_stream` with the path key already hashed (``stable_hash(path_key)``).

    The same stream, without hashing the key again for every replicate of a grid point.
    """
    entropy = [int(seed), *path_words, int(rep)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


def method_stream_from_words(
    seed: int, path_words: tuple[int, ...], rep: int, method_words: tuple[int, ...]
) -> np.random.Generator:
    """:func:`method_stream` with both keys already hashed (:func:`stable_hash`)."""
    entropy = [int(seed), *path_words, int(rep)]
    ss = np.random.SeedSequence(entropy, spawn_key=method_words)
    return np.random.Generator(np.random.PCG64(ss))


#: The parts of :func:`streams_fingerprint`: the data-and-noise stream, then one per
#: multiplier law. Never change what a part draws (stores compare them across
#: releases); a new law gets a new part, which older stores simply do not have.
FINGERPRINT_PARTS = ("data", "uniform", "rademacher", "gaussian", "mammen")


def streams_fingerprint() -> dict[str, str]:
    """Hashes of a few random numbers of every kind ldpsim draws, from a fixed seed.

    ldpsim's numbers are a function of the seed only while numpy's SeedSequence, PCG64
    and the Generator methods behind the bootstrap multipliers stay as they are, which
    numpy does not promise across releases. A store records these hashes when it is
    created; a run refuses to add replicates to a store whose hashes differ from the
    running ones (see ``check_streams`` in the pipeline).

    Returns
    -------
    dict
        Part name (:data:`FINGERPRINT_PARTS`) -> 16 hex digits of a SHA-256. ``data``:
        64 draws each of the uniform, standard normal, standard exponential and Laplace
        samplers of the kernel (:mod:`ldpsim.tasks.streams.rng`) on a data stream; one part per
        multiplier law: 64 multipliers from a method stream.
    """
    key = {"fingerprint": 1}

    def digest(values: list[float] | np.ndarray) -> str:
        # Rounded to float32: a last-bit difference between two platforms' log or exp
        # (the ziggurat's tails) must not count, a different stream changes every value.
        raw = np.asarray(values, dtype="<f4").tobytes()
        return hashlib.sha256(raw).hexdigest()[:16]

    state = kernel_rng.state_of(data_stream(0, key, 0))
    draws: list[float] = []
    for draw in (
        kernel_rng.random,
        kernel_rng.standard_normal,
        kernel_rng.standard_exponential,
        lambda s: kernel_rng.laplace(s, 0.0, 1.0),
    ):
        for _ in range(64):
            value, state = draw(state)
            state = kernel_rng.as_state(state)  # typed uint64 again (see tasks.rng)
            draws.append(value)
    out = {"data": digest(draws)}
    for law in FINGERPRINT_PARTS[1:]:
        rng = method_stream(0, key, 0, {"multiplier": law})
        out[law] = digest(draw_multipliers(law, (4, 16), rng))
    return out
