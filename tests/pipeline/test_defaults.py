"""The choices a new sweep records where its file names none (issue 24): bb's t form and
Sidak's band; built-in sweeps name theirs, and a store made without them resumes as it was."""

import dataclasses
import tomllib

import numpy as np
import pytest

from ldpsim.pipeline.compute.runner import run_sweep
from ldpsim.pipeline.store.identity import identity_diff
from ldpsim.pipeline.store.reading import load_dataset, read_sweep
from ldpsim.pipeline.store.store import Store
from ldpsim.pipeline.sweep import (
    adopt_recorded_choices,
    builtin_sweeps,
    load_sweep,
    validate_sweep,
)
from ldpsim.tasks import run_replicate

SWEEP = """
replicates = {replicates}
seed = 3
rep_chunk = 1
[spec]
model = "sparse_mean"
d = 3
sparsity = 1
eps = 1.0
[grid]
n = [3000]
[methods.bb]
[methods.band]
method = "bb"
simultaneous = true
[methods.pct]
method = "bb"
form = "percentile"
"""


def sweep_of(replicates):
    return validate_sweep(tomllib.loads(SWEEP.format(replicates=replicates)), "defaults")


def as_made_today(sweep):
    """The sweep as ldpsim made it before the choices were recorded: methods as written."""
    raw = tomllib.loads(SWEEP.format(replicates=sweep.replicates))["methods"]
    return dataclasses.replace(sweep, methods={k: dict(v) for k, v in raw.items()}, defaulted={})


def test_a_new_sweep_records_the_recommended_choices():
    sweep = sweep_of(2)
    assert sweep.methods["bb"] == {"form": "t"}
    assert sweep.methods["band"] == {"method": "bb", "simultaneous": True, "band": "sidak"}
    assert sweep.methods["pct"] == {"method": "bb", "form": "percentile"}  # named: kept
    assert sweep.defaulted == {"bb": ("form",), "band": ("band",)}
    methods = sweep.points()[0].normalized.methods
    assert methods["bb"].form == "t" and methods["band"].band == "sidak"
    assert '"band": "sidak"' in sweep.to_json()  # what the store records


def test_builtin_sweeps_name_their_choices():
    # No built-in sweep depends on the recommendations: each names bb's form (or band),
    # so its methods, streams and stores are those of the releases before them.
    for name in builtin_sweeps():
        assert load_sweep(name).defaulted == {}, name


def test_a_named_default_is_the_same_method_as_none():
    # A store that recorded bb {} takes a file that names form = "basic" (the built-in
    # sweeps now do): the same method, the same stream.
    stored = dataclasses.replace(sweep_of(2), methods={"bb": {}}, defaulted={})
    named = dataclasses.replace(stored, methods={"bb": {"form": "basic"}})
    other = dataclasses.replace(stored, methods={"bb": {"form": "t"}})
    assert identity_diff(stored, named) == []
    assert identity_diff(stored, other) == ["methods.bb: {} -> {'form': 't'}"]


def by_method(ds, var, label):
    """``var`` of one method, (n, rep, coord) here."""
    return ds[var].isel(method=[str(m) for m in ds["method"].values].index(label)).values


@pytest.mark.usefixtures("local_cluster")
def test_new_store_gets_sidak_and_an_old_store_resumes_bit_identically(tmp_path, local_cluster):
    def run(sweep, store):
        run_sweep(sweep, store, scheduler=local_cluster.scheduler_address, log=lambda m: 0)

    # A store made today (no recorded choice) with 1 replicate, resumed to 2 by the same
    # file under the new recommendations: both replicates are what today's ldpsim
    # computes (its units' defaults: the basic form, the sup-t band), bit for bit.
    run(as_made_today(sweep_of(1)), tmp_path / "old.zarr")
    run(sweep_of(2), tmp_path / "old.zarr")
    old = load_dataset(tmp_path / "old.zarr", ["lower", "upper"])
    assert read_sweep(tmp_path / "old.zarr").methods["band"] == {
        "method": "bb",
        "simultaneous": True,
    }
    today = as_made_today(sweep_of(2)).points()[0].spec
    for rep in (0, 1):
        made_today = run_replicate(today, rep)
        for label in ("bb", "band", "pct"):
            for var in ("lower", "upper"):
                stored = by_method(old, var, label)[0, rep]
                np.testing.assert_array_equal(stored, getattr(made_today, var)[label])
    # A new store records Sidak's band and the t form (its workers compute the recorded
    # methods: run_replicate on its grid points' specs), which differ from today's.
    Store.open_or_create(tmp_path / "new.zarr", sweep_of(2))
    recorded = read_sweep(tmp_path / "new.zarr").methods
    assert recorded["band"]["band"] == "sidak" and recorded["bb"]["form"] == "t"
    point = read_sweep(tmp_path / "new.zarr").points()[0]
    assert point.normalized.methods["band"].band == "sidak"
    made_new = run_replicate(point.spec, 1)
    for label in ("bb", "band"):
        assert not np.array_equal(made_new.lower[label], by_method(old, "lower", label)[0, 1])
    np.testing.assert_array_equal(made_new.lower["pct"], by_method(old, "lower", "pct")[0, 1])


def test_remedies_nprr_repeats_the_mean_case_of_remedies():
    # docs/studies/remedies.md reads NPRR beside remedies' numbers: at every mean grid
    # point both sweeps key the same data stream and the same method streams (seed, path
    # values, labels and parameters), so bb, bb_t, sn and oracle are bit-identical there.
    def mean_points(name):
        return {
            (p.values["eps"], p.values["n"]): p.normalized
            for p in load_sweep(name).points()
            if p.values["case"] == "mean"
        }

    first, second = mean_points("remedies"), mean_points("remedies-nprr")
    assert first.keys() == second.keys() and len(first) == 15
    for key, rs in first.items():
        other = second[key]
        assert (rs.seed, rs.path_key()) == (other.seed, other.path_key())
        for label in ("bb", "bb_t", "sn", "oracle"):
            assert rs.method_key(label) == other.method_key(label)
            assert rs.methods[label] == other.methods[label]


def test_a_spec_default_written_out_is_the_same_specification():
    # The same streams and numbers (a hunt, 2026-12: stores of both spellings equal bit
    # for bit), so a store made without them resumes with them, and the other way round;
    # before, the run was refused as "a different specification".
    tables = {
        "replicates": 2,
        "spec": {"model": "quantile", "tau": 0.5, "n": 1000},
        "grid": {"eps": [0.5, 2.0]},
        "methods": {"sn": {}},
    }
    explicit = {
        "mechanism": "randomized_response",
        "c": 1,
        "gamma": 0.51,
        "batch": 1,
        "level": 0.9,
        "theta0": [0.0],
        "backend": "cpu",
    }
    bare = load_sweep(tables, name="bare")
    named = load_sweep({**tables, "spec": {**tables["spec"], **explicit}}, name="bare")
    assert identity_diff(bare, named) == []
    assert identity_diff(named, bare) == []
    for key, value in {"theta0": 0.5, "level": 0.8, "mechanism": "laplace", "c": 2}.items():
        other = load_sweep({**tables, "spec": {**tables["spec"], key: value}}, name="bare")
        assert identity_diff(bare, other) == [f"spec.{key}: '<absent>' -> {value!r}"], key
    # A case that writes a default out is the same case; one that changes a value is not.
    cases = {"low": {"eps": 0.5}, "high": {"eps": 2.0}}
    cased = {**tables, "grid": {"case": ["low", "high"]}, "cases": cases}
    written = {**cased, "cases": {"low": {"eps": 0.5, "c": 1.0}, "high": {"eps": 2}}}
    assert identity_diff(load_sweep(cased, name="c"), load_sweep(written, name="c")) == []
    changed = {**cased, "cases": {"low": {"eps": 0.5, "c": 2.0}, "high": {"eps": 2.0}}}
    assert identity_diff(load_sweep(cased, name="c"), load_sweep(changed, name="c")) == [
        "cases.low: {'eps': 0.5} -> {'c': 2.0, 'eps': 0.5}"
    ]
    # A case the request redefines but does not run is compared as written (a second
    # read: it was accepted silently), and of several keys only those that differ are
    # named (a default written out beside a changed value).
    unrun = {**cased, "grid": {"case": ["high"]}, "cases": {**cases, "low": {"eps": 3.0}}}
    assert identity_diff(load_sweep(cased, name="c"), load_sweep(unrun, name="c")) == [
        "cases.low: {'eps': 0.5} -> {'eps': 3.0}"
    ]
    both = load_sweep({**tables, "spec": {**tables["spec"], "c": 1.0, "gamma": 0.6}}, name="b")
    assert identity_diff(bare, both) == ["spec.gamma: '<absent>' -> 0.6"]


def test_a_unit_field_spelled_as_an_int_keys_other_streams_and_is_a_difference(monkeypatch):
    # A registered model whose float field keeps an int as written: loc = 0 equals
    # loc = 0.0 in the spec, but its data stream's key holds 0, not 0.0. The run would
    # have drawn other streams for the new replicates (a second read, 2026-12-01).
    from numba import njit

    from ldpsim.pipeline import api
    from ldpsim.tasks import plugins
    from ldpsim.tasks.models.base import Model

    @njit
    def no_gradient(d, theta, params, s, g):
        g[0] = 0.0
        return s

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Located(Model):
        name = "located"
        sample_gradient = no_gradient
        loc: float = 0.0

        @property
        def dim(self):
            return 1

        def params(self):
            return np.array([self.loc])

        def truth(self):
            return np.array([self.loc])

        def jacobian(self):
            return np.eye(1)

        def gradient_cov(self):
            return np.eye(1)

        def sensitivity(self):
            return 1.0

    monkeypatch.setattr(plugins, "_REGISTERED", {kind: {} for kind in plugins.GROUPS})
    api.register(Located)
    tables = {
        "replicates": 2,
        "spec": {"model": "located", "mechanism": "none"},
        "grid": {"n": [1000]},
        "methods": {"sn": {}},
    }
    bare = load_sweep(tables, name="p")
    for loc, differs in ((0, True), (0.0, False)):
        written = load_sweep({**tables, "spec": {**tables["spec"], "loc": loc}}, name="p")
        assert bare.points()[0].normalized == written.points()[0].normalized
        expected = [f"spec.loc: '<absent>' -> {loc!r}"] if differs else []
        assert identity_diff(bare, written) == expected, loc


def test_a_resumed_store_keeps_the_choice_it_recorded():
    # A filled-in choice takes the stored value (adopt_recorded_choices): a store that
    # recorded bb's basic form and a sup-t band resumes with them, not with today's t and
    # Sidak; a parameter the file names itself is kept.
    requested = sweep_of(2)
    stored = dataclasses.replace(
        requested,
        methods={
            "bb": {"form": "basic"},
            "band": {"method": "bb", "simultaneous": True, "band": "sup-t"},
            "pct": {"method": "bb", "form": "percentile"},
        },
        defaulted={},
    )
    adopted = adopt_recorded_choices(requested, stored)
    assert adopted.methods == stored.methods
    assert adopted.defaulted == {}
    # A store that recorded no choice: the filled-in one is dropped (the unit's default).
    bare = dataclasses.replace(
        stored,
        methods={
            "bb": {},
            "band": {"method": "bb", "simultaneous": True},
            "pct": stored.methods["pct"],
        },
    )
    assert adopt_recorded_choices(requested, bare).methods == bare.methods
