"""Reproducibility and stream separation (SPEC section 6)."""

import hashlib
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from ldpsim.tasks import compute_replicate, normalize_spec, run_replicate
from ldpsim.tasks.grid_point import GridPointSetup
from ldpsim.tasks.streams.seeding import (
    FINGERPRINT_PARTS,
    STREAMS_CHANGED,
    STREAMS_VERSION,
    data_stream,
    has_negative_zero,
    method_stream,
    stable_hash,
    streams_changed_since,
    streams_fingerprint,
)

QUANTILE = {"model": "quantile", "tau": 0.7, "n": 20_000, "seed": 5}
REGRESSION = {"model": "quantile_regression", "n": 20_000, "seed": 5}
ALL_METHODS = {
    "sn": {},
    "bm": {},
    "bb_gauss": {"method": "bb", "multiplier": "gaussian", "B": 300},
    "oracle": {},
    "bb": {},
    "bm_10": {"method": "bm", "n_batches": 10},
}


def same(a, b, labels=None):
    """Bit-identical estimates and (for ``labels``) bounds."""
    if not np.array_equal(a.estimate, b.estimate):
        return False
    labels = set(a.lower) & set(b.lower) if labels is None else labels
    return all(
        np.array_equal(a.lower[k], b.lower[k]) and np.array_equal(a.upper[k], b.upper[k])
        for k in labels
    )


@pytest.mark.parametrize("base", [QUANTILE, REGRESSION], ids=["quantile", "regression"])
def test_same_spec_and_rep_is_bit_identical(base):
    a = run_replicate(base, rep=3)
    b = run_replicate(dict(reversed(list(base.items()))), rep=3)  # key order is irrelevant
    c = run_replicate(normalize_spec(base), rep=3)
    assert same(a, b) and same(a, c)
    assert set(a.lower) == {"bb", "bm", "sn", "oracle"}


def test_equal_values_of_other_types_give_the_same_streams():
    a = run_replicate({**QUANTILE, "n": 2e4, "eps": 1}, rep=0)
    b = run_replicate({**QUANTILE, "n": 20_000, "eps": 1.0}, rep=0)
    assert same(a, b)


@pytest.mark.parametrize("change", [{"rep": 4}, {"seed": 6}, {"tau": 0.71}, {"eps": 2.0}])
def test_different_rep_seed_or_values_differ(change):
    a = run_replicate(QUANTILE, rep=3)
    spec = {**QUANTILE, **{k: v for k, v in change.items() if k != "rep"}}
    b = run_replicate(spec, rep=change.get("rep", 3))
    assert not np.array_equal(a.estimate, b.estimate)
    for label in a.lower:
        assert not np.array_equal(a.lower[label], b.lower[label]), label


@pytest.mark.parametrize("base", [QUANTILE, REGRESSION], ids=["quantile", "regression"])
def test_adding_methods_changes_nothing_else(base):
    # Each method alone and all of them together give bit-identical estimates and
    # bounds: one path per replicate, one stream per method label. Checkpoints add cuts
    # to the kernel but change neither the estimate nor any method's interval at n, the
    # bootstraps' included: a bootstrap draws a checkpoint's multipliers from a child
    # stream keyed by the checkpoint and those at n from its own stream.
    together = run_replicate({**base, "methods": ALL_METHODS}, rep=1)
    with_checkpoints = run_replicate(
        {**base, "methods": ALL_METHODS, "checkpoints": [777, 5000]}, rep=1
    )
    for label, params in ALL_METHODS.items():
        alone = run_replicate({**base, "methods": {label: params}}, rep=1)
        assert same(alone, together, [label]), label
        assert np.array_equal(with_checkpoints.estimate[-1], alone.estimate)
        assert np.array_equal(with_checkpoints.lower[label][-1], alone.lower[label]), label
        assert np.array_equal(with_checkpoints.upper[label][-1], alone.upper[label]), label


def test_all_methods_see_the_same_path():
    result = run_replicate({**REGRESSION, "methods": ALL_METHODS}, rep=2)
    # The symmetric methods are centred at the one estimate of the replicate.
    for label in ("sn", "bm", "bm_10", "oracle"):
        centre = (result.lower[label] + result.upper[label]) / 2
        np.testing.assert_allclose(centre, result.estimate, rtol=0, atol=1e-13)
    # The estimate does not depend on the level or the methods (only the path does).
    other = run_replicate({**REGRESSION, "methods": {"sn": {}}, "level": 0.5}, rep=2)
    assert np.array_equal(other.estimate, result.estimate)


def test_checkpoint_equals_a_run_stopped_there():
    # The kernel's statistics at a checkpoint do not depend on what comes after it: on
    # the same streams, a checkpoint at 5000 of an n = 20000 run equals an n = 5000 run
    # for the estimate and every method that draws no random numbers. The bootstrap
    # draws a checkpoint's multipliers from a child stream keyed by the checkpoint, and
    # uses its own stream at n: its interval at n is the same with or without
    # checkpoints, and adding a checkpoint leaves every other checkpoint's interval alone.
    long = normalize_spec({**QUANTILE, "checkpoints": [5000]})
    longer = normalize_spec({**QUANTILE, "checkpoints": [2000, 5000]})
    short = normalize_spec({**QUANTILE, "n": 5000})
    plain = normalize_spec(QUANTILE)

    def fresh_streams():
        data = np.random.Generator(np.random.PCG64(1))
        return data, {"bb": np.random.Generator(np.random.PCG64([1, 2]))}

    a = compute_replicate(long, *fresh_streams())
    b = compute_replicate(short, *fresh_streams())
    c = compute_replicate(plain, *fresh_streams())
    e = compute_replicate(longer, *fresh_streams())
    assert a.checkpoints == (5000, 20_000)
    assert np.array_equal(a.estimate[0], b.estimate)
    for label in b.lower:
        if label != "bb":
            assert np.array_equal(a.lower[label][0], b.lower[label]), label
            assert np.array_equal(a.upper[label][0], b.upper[label]), label
        assert np.array_equal(a.lower[label][1], c.lower[label]), label
        assert np.array_equal(a.upper[label][1], c.upper[label]), label
        assert np.array_equal(e.lower[label][1:], a.lower[label]), label
        assert np.array_equal(e.upper[label][1:], a.upper[label]), label
    assert not np.array_equal(a.lower["bb"][0], b.lower["bb"])  # a child stream, not bb's own


def test_method_streams_are_keyed_by_label_and_parameters():
    rs = normalize_spec({**QUANTILE, "methods": {"bb": {}, "bb_twin": {"method": "bb"}}})
    result = run_replicate(rs, rep=0)
    assert not np.array_equal(result.lower["bb"], result.lower["bb_twin"])
    key = rs.path_key()
    words = [method_stream(5, key, 0, rs.method_key(k)).integers(2**63) for k in rs.methods]
    data_word = data_stream(5, key, 0).integers(2**63)
    assert len({*words, data_word}) == 3
    # A method's stream does not change when it changes nothing but its neighbours.
    assert rs.method_key("bb") == normalize_spec({**QUANTILE, "methods": {"bb": {}}}).method_key(
        "bb"
    )


def test_data_stream_is_keyed_by_what_shapes_the_path():
    rs = normalize_spec(QUANTILE)
    key = rs.path_key()
    assert {
        "model",
        "tau",
        "loc",
        "mechanism",
        "eps",
        "n",
        "c",
        "gamma",
        "theta0",
        "batch",
    } <= set(key)
    # Not the level, the methods or the checkpoints.
    for extra in ({"level": 0.5}, {"methods": {"sn": {}}}, {"checkpoints": [100]}):
        assert normalize_spec({**QUANTILE, **extra}).path_key() == key


def test_hashes_are_stable_across_processes():
    # SHA-256 of canonical JSON, not Python's salted hash(): a worker with another
    # PYTHONHASHSEED derives the same streams.
    rs = normalize_spec(REGRESSION)
    key = rs.path_key()
    code = (
        "from ldpsim.tasks.streams.seeding import data_stream, stable_hash;"
        "from ldpsim.tasks.spec import normalize_spec;"
        f"key = normalize_spec({REGRESSION!r}).path_key();"
        "print(stable_hash(key), data_stream(5, key, 9).random())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    expected = f"{stable_hash(key)} {data_stream(5, key, 9).random()}"
    assert proc.stdout.strip() == expected


def test_streams_fingerprint_is_a_stable_function_of_numpy():
    # Stores compare it across runs and hosts: the same in a fresh process with another
    # PYTHONHASHSEED, one 16-hex-digit hash per part, and it leaves no state behind.
    fingerprint = streams_fingerprint()
    assert tuple(fingerprint) == FINGERPRINT_PARTS
    assert all(len(h) == 16 and int(h, 16) >= 0 for h in fingerprint.values())
    assert len(set(fingerprint.values())) == len(FINGERPRINT_PARTS)  # distinct draws
    assert streams_fingerprint() == fingerprint
    code = (
        "import json; from ldpsim.tasks.streams.seeding import streams_fingerprint;"
        "print(json.dumps(streams_fingerprint()))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "4321"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(proc.stdout) == fingerprint


#: One change of each value of the path key (docs/methods.md section 7: the model's name
#: and parameters, the mechanism and its parameters, n, c, gamma, theta0 and batch).
PATH_CHANGES = [
    {"tau": 0.71},
    {"loc": 0.5},
    {"mechanism": "laplace"},
    {"eps": 2.0},
    {"n": 20_001},
    {"c": 0.9},
    {"gamma": 0.6},
    {"theta0": 0.25},
    {"batch": 2},
    {"seed": 6},
]


@pytest.mark.parametrize("change", PATH_CHANGES, ids=lambda c: next(iter(c)))
def test_every_value_of_the_path_key_moves_the_data_stream(change):
    # The grid point's own states (what its chunks run from), not only the key's
    # fields: a value copied into the key under its name but not its own (batch = 1
    # at every batch) leaves the key's fields as they are and its streams shared.
    spec = {**QUANTILE, "methods": {"sn": {}, "bb": {}}}
    base, other = GridPointSetup.of(spec), GridPointSetup.of({**spec, **change})
    assert not np.array_equal(base.data_states([0, 1]), other.data_states([0, 1]))
    assert not np.array_equal(base.method_states("bb", [0]), other.method_states("bb", [0]))
    if "seed" not in change:
        assert base.path_words != other.path_words


@pytest.mark.parametrize(
    "change",
    [
        {"level": 0.5},
        {"methods": {"bb": {}, "bm": {}, "oracle": {}}},
        {"checkpoints": [100, 5000]},
        {"methods": {"sn": {}, "bb": {}}, "level": 0.95},  # the methods' order
    ],
    ids=["level", "methods", "checkpoints", "order"],
)
def test_level_methods_and_checkpoints_move_no_data_stream(change):
    # They are not part of the path key: every method of a replicate sees one path.
    spec = {**QUANTILE, "methods": {"bb": {}, "sn": {}}}
    base, other = GridPointSetup.of(spec), GridPointSetup.of({**spec, **change})
    assert base.path_words == other.path_words
    assert np.array_equal(base.data_states([0, 7]), other.data_states([0, 7]))
    assert np.array_equal(base.method_states("bb", [0, 7]), other.method_states("bb", [0, 7]))


def test_a_method_key_holds_its_label_kind_and_parameters():
    # docs/methods.md section 7: a random method's spawn key is the hash of its label,
    # kind and parameters; a label that is not its kind's name keeps both.
    rs = normalize_spec({**QUANTILE, "methods": ALL_METHODS})
    key = rs.method_key("bb_gauss")
    assert key["label"] == "bb_gauss" and key["method"] == "bb"
    assert key["multiplier"] == "gaussian" and key["B"] == 300


def test_stable_hash_is_the_sha256_of_canonical_json():
    # JSON keeps true apart from 1 (a method's bool parameter, e.g. simultaneous = true,
    # keys its stream as JSON's true), and keys are sorted.
    obj = {"b": True, "a": [1, 2.5, "x", None]}
    text = b'{"a":[1,2.5,"x",null],"b":true}'
    digest = hashlib.sha256(text).digest()
    words = tuple(int.from_bytes(digest[4 * i : 4 * i + 4], "little") for i in range(4))
    assert stable_hash(obj) == words
    assert stable_hash({"b": True}) != stable_hash({"b": 1})


def test_a_methods_states_at_n_are_its_own_stream():
    # method_states' point n, or None, is the method's own stream (a replicate uses it
    # at n); a checkpoint below n is a child keyed by the checkpoint.
    setup = GridPointSetup.of({**QUANTILE, "methods": {"bb": {}}, "checkpoints": [5000]})
    own = setup.method_states("bb", [0, 3])
    assert np.array_equal(setup.method_states("bb", [0, 3], point=setup.spec.n), own)
    assert not np.array_equal(setup.method_states("bb", [0, 3], point=5000), own)
    for row, rep in enumerate((0, 3)):
        expected = setup.method_streams(rep)["bb"].bit_generator.state["state"]
        assert (int(own[row, 0]) << 64 | int(own[row, 1])) == expected["state"]


def sha256_words(text: bytes) -> list[int]:
    """The four little-endian 32-bit words of the SHA-256 of ``text`` (stable_hash's)."""
    digest = hashlib.sha256(text).digest()
    return [int.from_bytes(digest[4 * i : 4 * i + 4], "little") for i in range(4)]


def test_negative_zero_keys_the_streams_of_zero():
    # Streams version 4: -0.0 is the value 0.0 (the specs and the store's identity call
    # them equal); its key hashed "-0.0" before and drew other streams.
    assert list(stable_hash({"theta0": [-0.0, 1.5]})) == sha256_words(b'{"theta0":[0.0,1.5]}')
    assert stable_hash({"c": np.float32(-0.0)}) == stable_hash({"c": 0.0}) != stable_hash({"c": 0})
    assert has_negative_zero({"model": "quantile", "theta0": [1.0, -0.0]})
    assert has_negative_zero((np.float64(-0.0),))
    assert not has_negative_zero({"theta0": [0.0, -1.0], "n": 0, "label": "-0.0"})


def test_non_finite_floats_hash_as_their_repr():
    # A hunt (h21f): eps = inf is a spec value; its key is the JSON string "inf" (JSON's
    # own Infinity would hash otherwise and move every stream of eps = inf).
    assert list(stable_hash({"eps": math.inf})) == sha256_words(b'{"eps":"inf"}')
    assert list(stable_hash([-math.inf, math.nan])) == sha256_words(b'["-inf","nan"]')


def test_streams_fingerprint_recomputed_from_numpy():
    # A hunt (h21f): the fingerprint as its docstring defines it, drawn here by numpy's
    # own SeedSequence, PCG64 and Generator: the key {"fingerprint": 1} hashed as canonical
    # JSON, seed 0, replicate 0; the data part's Laplace is the kernel's, a sign from bit
    # 0 of the exponential's first word. Nothing pinned the hashes before.
    path_words = sha256_words(b'{"fingerprint":1}')

    def digest(values):
        return hashlib.sha256(np.asarray(values, dtype="<f4").tobytes()).hexdigest()[:16]

    gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence([0, *path_words, 0])))
    draws = [*gen.random(64), *gen.standard_normal(64), *gen.standard_exponential(64)]
    peek = np.random.PCG64()
    for _ in range(64):
        peek.state = gen.bit_generator.state
        negative = int(peek.random_raw()) & 1
        size = gen.standard_exponential()
        draws.append(-size if negative else size)
    want = {"data": digest(draws)}
    sqrt3, sqrt5 = math.sqrt(3.0), math.sqrt(5.0)
    for law in ("uniform", "rademacher", "gaussian", "mammen"):
        spawn_key = sha256_words(b'{"multiplier":"%s"}' % law.encode())
        seq = np.random.SeedSequence([0, *path_words, 0], spawn_key=spawn_key)
        gen = np.random.Generator(np.random.PCG64(seq))
        if law == "uniform":
            values = gen.uniform(-sqrt3, sqrt3, (4, 16))
        elif law == "rademacher":
            values = 2.0 * gen.integers(0, 2, (4, 16)) - 1.0
        elif law == "gaussian":
            values = gen.standard_normal((4, 16))
        else:  # Mammen's: (1 - sqrt5)/2 with probability (sqrt5 + 1)/(2 sqrt5)
            low = gen.random((4, 16)) < (sqrt5 + 1) / (2 * sqrt5)
            values = np.where(low, (1 - sqrt5) / 2, (1 + sqrt5) / 2)
        want[law] = digest(values)
    assert streams_fingerprint() == want


def test_streams_changed_since_a_version_gathers_the_later_changes():
    # A hunt (h21f): what a store of an older streams version may not be extended with is
    # what changed after its version, not at it (version 2 changed laplace: a version-2
    # store's laplace replicates are comparable); the current version changed nothing since.
    assert streams_changed_since(STREAMS_VERSION) == frozenset()
    assert {"laplace", "bm"} <= streams_changed_since(1)
    assert "laplace" not in streams_changed_since(2)
    for version in range(1, STREAMS_VERSION):
        assert STREAMS_CHANGED.get(version + 1, frozenset()) <= streams_changed_since(version)
        assert streams_changed_since(version + 1) <= streams_changed_since(version)


def test_numpy_scalars_hash_as_the_python_numbers_they_hold():
    # A hunt (h21f): a key's numpy integers and floats (np.float32 is no Python float)
    # key the streams their values do; any other type is refused, never hashed by repr.
    assert stable_hash({"n": np.int64(5), "c": np.float32(0.5)}) == stable_hash({"n": 5, "c": 0.5})
    with pytest.raises(TypeError, match="Cannot hash a value of type object"):
        stable_hash({"x": object()})
