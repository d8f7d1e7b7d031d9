"""Sweep files: loading, overrides, expansion (no cluster needed)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.sweep import apply_overrides, builtin_sweeps, grown_description, load_sweep
from ldpsim.tasks.models.quantile import Quantile

TEXT = """replicates = 3
seed = 5
[spec]
model = "quantile"
eps = 1.0
[grid]
tau = [0.5, 0.9]
n = [1e4, 2000]
[methods.bm]
"""


def test_load_and_expand(tmp_path):
    (tmp_path / "s.toml").write_text(TEXT)
    sweep = load_sweep(tmp_path / "s.toml")
    assert sweep.name == "s" and sweep.replicates == 3 and sweep.seed == 5
    assert sweep.grid["n"] == [10000, 2000] and all(type(v) is int for v in sweep.grid["n"])
    points = sweep.points()
    assert [p.index for p in points] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert points[3].values == {"tau": 0.9, "n": 2000}
    assert points[3].spec["seed"] == 5 and points[3].spec["methods"] == {"bm": {}}


def test_overrides(tmp_path):
    (tmp_path / "s.toml").write_text(TEXT)
    sweep = load_sweep(
        tmp_path / "s.toml", ["eps=2", "grid.n=[3000]", "methods.bm.n_batches=5", "seed=9"], 7
    )
    assert sweep.base["eps"] == 2 and sweep.grid["n"] == [3000] and sweep.seed == 9
    assert sweep.methods["bm"] == {"n_batches": 5} and sweep.replicates == 7
    # A spec key moved to the grid and back.
    data = apply_overrides({"spec": {"eps": 1}, "grid": {}}, ["grid.eps=[1, 2]"])
    assert data == {"spec": {}, "grid": {"eps": [1, 2]}}
    assert apply_overrides(data, ["eps=3"]) == {"spec": {"eps": 3}, "grid": {}}


@pytest.mark.parametrize("name", sorted(builtin_sweeps()))
def test_builtin_sweeps_validate(name):
    sweep = load_sweep(name)
    assert sweep.replicates >= 1 and sweep.points()


def test_invalid_point_named(tmp_path):
    (tmp_path / "s.toml").write_text(TEXT.replace("tau = [0.5, 0.9]", "tau = [0.5, 1.5]"))
    with pytest.raises(InputError, match="tau") as info:
        load_sweep(tmp_path / "s.toml")
    message = str(info.value)
    assert "at the grid point" in message and "tau = 1.5" in message, message
    assert message.endswith(".") and ". at" not in message and ".," not in message, message


def test_checkpoints_listed_twice_are_refused_as_grid_values_are(tmp_path):
    # Before: [100, 100] became (100, n) silently, while a grid value listed twice is refused.
    (tmp_path / "s.toml").write_text(TEXT.replace("n = [1e4, 2000]", "n = [2000]"))
    with pytest.raises(InputError) as grid:
        load_sweep(tmp_path / "s.toml", ["grid.tau=[0.5, 0.50]"])
    with pytest.raises(InputError) as checkpoints:
        load_sweep(tmp_path / "s.toml", ["checkpoints=[100, 500, 100.0]"])
    shape = "lists the same value twice: {} (numbers are compared by value). Each value may "
    assert str(grid.value).startswith(
        "The grid axis 'tau' " + shape.format("0.5 and 0.5") + "appear once."
    )
    assert str(checkpoints.value).startswith(
        "The 'checkpoints' parameter " + shape.format("100 and 100.0") + "appear once"
    )
    sweep = load_sweep(tmp_path / "s.toml", ["checkpoints=[100, 500, 2000]"])  # n once: fine
    assert sweep.points()[0].normalized.checkpoints == (100, 500, 2000)


@pytest.mark.parametrize(
    ("model", "mechanism", "budget"),
    [
        ("quantile", "randomized_response", "eps = 1e-20"),
        ("quantile_regression", "laplace", "eps = 1e-300"),
        ("quantile_regression", "gaussian", "eps = 5e-324"),
        ("quantile_regression", "gdp", "mu = 1e-300"),
    ],
)
def test_a_budget_whose_constants_overflow_is_bad_input(tmp_path, model, mechanism, budget):
    # Before: randomized response raised ZeroDivisionError (a traceback from ldpsim run).
    text = TEXT.replace('model = "quantile"\neps = 1.0', f'model = "{model}"\n{budget}')
    (tmp_path / "s.toml").write_text(text.replace("[grid]", f'mechanism = "{mechanism}"\n[grid]'))
    with pytest.raises(InputError) as info:
        load_sweep(tmp_path / "s.toml")
    name, _, value = budget.partition(" = ")
    message = str(info.value)
    assert message.startswith(f"The '{name}' parameter of {mechanism} must be a float in [")
    assert f"Got {float(value)!r}, at the grid point tau = 0.5, n = 10000." in message


def test_builtin_sweeps_keep_their_bm_batch_counts():
    # Before bm followed bb it used beta = 0.75 whatever bb's; the built-in sweeps use
    # bb's beta = 0.75, so their bm numbers (at n and at every checkpoint) are unchanged.
    for name in builtin_sweeps():
        for point in load_sweep(name).points():
            rs = point.normalized
            if "bm" not in rs.methods:  # the seed-004 figure sweeps run the oracle only
                continue
            for n in rs.checkpoints or (rs.n,):
                old = n // max(math.floor(n**0.75 * (1 + 1e-12)), 1)
                assert rs.methods["bm"].batches(n) == old, (name, n)
                assert rs.methods["bb"].n_blocks(n) == old, (name, n)


def test_bm_next_to_two_bb_betas_is_refused_in_one_line(tmp_path, capsys):
    # bm's default M is bb's block count; with two bb betas it is ambiguous (bad input).
    from ldpsim.pipeline.cli import main

    twin = ["--set", "methods.bb_short.method=bb", "--set", "methods.bb_short.beta=0.6"]
    assert main(["run", "demo", "--store", str(tmp_path / "s.zarr"), *twin]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ldpsim: error: ")
    assert "different block lengths (bb beta = 0.75, bb_short beta = 0.6)" in err
    assert "Set 'n_batches' or 'beta' of 'bm'" in err and not (tmp_path / "s.zarr").exists()
    sweep = load_sweep("demo", [*twin[1::2], "methods.bm.n_batches=30"])
    assert sweep.points()[0].normalized.methods["bm"].batches(10**4) == 30


def test_undercoverage_sweep_carries_the_issue_settings():
    sweep = load_sweep("undercoverage")
    assert sweep.base["tau"] == 0.9 and sweep.base["model"] == "quantile"
    assert sweep.grid["gamma"] == [0.51, 0.6, 0.7] and sweep.grid["c"] == [0.5, 1.0, 3.0]
    assert sweep.grid["n"] == [10**4, 10**5, 10**6, 10**7]
    # The second start is theta* itself, bit for bit: the model's own truth at tau = 0.9.
    truth = Quantile(tau=0.9).truth()[0]
    assert sweep.grid["theta0"] == [0.0, truth]
    point = sweep.points()[-1]
    assert point.normalized.theta0 == (truth,)
    methods = point.normalized.methods
    assert list(methods) == ["bb", "bb85", "bm", "sn", "oracle"]
    assert methods["bb"].name == methods["bb85"].name == "bb"
    assert (methods["bb"].beta, methods["bb85"].beta) == (0.75, 0.85)
    assert sweep.check_theory() == []  # gamma < beta and gamma in (1/2, 1) everywhere


def test_sparse_sweep_carries_the_issue_settings():
    # Issue 13: d in {10, 100, 1000}, s in {1, 4, 16} (s <= d), sparse and dense Laplace
    # and sparse Gaussian with delta = 1e-6, eps = 1, n = 1e6, 200 replicates, and a
    # simultaneous bb band beside the marginal methods (sup-t, and Sidak's).
    sweep = load_sweep("sparse")
    assert sweep.replicates == 200
    shapes, mechanisms = set(), set()
    for point in sweep.points():
        rs = point.normalized
        model, mech = rs.model, rs.mechanism
        assert (model.name, rs.n, mech.eps, rs.level) == ("sparse_mean", 10**6, 1.0, 0.9)
        shapes.add((model.d, model.sparsity))
        label = (mech.name, mech.calibration, getattr(mech, "delta", None))
        mechanisms.add(label)
        assert (
            point.values["case"] == f"d{model.d}-s{model.sparsity}-{mech.name}-{mech.calibration}"
        )
        assert list(rs.methods) == ["bb", "band", "band_sidak", "bm", "sn", "oracle"]
        assert rs.methods["band"].simultaneous and not rs.methods["bb"].simultaneous
        assert (rs.methods["band"].band, rs.methods["band_sidak"].band) == ("sup-t", "sidak")
    expected = {(d, s) for d in (10, 100, 1000) for s in (1, 4, 16) if s <= d}
    assert shapes == expected
    assert mechanisms == {
        ("laplace", "sparse", None),
        ("laplace", "dense", None),
        ("gaussian", "sparse", 1e-6),
    }
    assert len(sweep.points()) == 3 * len(expected)


GDP_TEXT = """replicates = 2
seed = 5
[spec]
model = "mean"
d = 2
mechanism = "gdp"
n = 2000
[grid]
mu = [0.5, 2.0]
[methods.oracle]
"""


def test_section_9_mechanisms_in_sweeps(tmp_path):
    # mu as a grid axis; delta and budget_range as [spec] keys (TOML lists).
    (tmp_path / "gdp.toml").write_text(GDP_TEXT)
    points = load_sweep(tmp_path / "gdp.toml").points()
    assert [p.normalized.mechanism.mu for p in points] == [0.5, 2.0]
    text = GDP_TEXT.replace("[grid]\nmu = [0.5, 2.0]", "budget_range = [1, 2]")
    (tmp_path / "budget.toml").write_text(text)
    [point] = load_sweep(tmp_path / "budget.toml").points()
    assert point.normalized.mechanism.budget_range == (1.0, 2.0)
    text = GDP_TEXT.replace('"gdp"', '"gaussian"').replace("mu = [0.5, 2.0]", "eps = [0.5]")
    (tmp_path / "gauss.toml").write_text(text.replace("n = 2000", "n = 2000\ndelta = 1e-3"))
    [point] = load_sweep(tmp_path / "gauss.toml").points()
    assert (point.normalized.mechanism.eps, point.normalized.mechanism.delta) == (0.5, 1e-3)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"mu = [0.5, 2.0]": "eps = [1.0]"}, ["'eps'", "does not apply to mechanism 'gdp'"]),
        (
            {"[grid]\nmu = [0.5, 2.0]": "mu = 1.0\nbudget_range = [1, 2]"},
            ["'mu' parameter of gdp cannot be given together with 'budget_range'"],
        ),
        (
            {"[grid]\nmu = [0.5, 2.0]": "budget_range = [2, 1]"},
            ["'budget_range'", "0 < low <= high", "Got [2, 1]."],
        ),
        ({"mu = [0.5, 2.0]": "budget_range = [[1, 2]]"}, ["grid axis 'budget_range'", "scalar"]),
    ],
)
def test_bad_mechanism_parameters_in_sweeps(tmp_path, change, words):
    text = GDP_TEXT
    for old, new in change.items():
        text = text.replace(old, new)
    (tmp_path / "s.toml").write_text(text)
    with pytest.raises(InputError) as info:
        load_sweep(tmp_path / "s.toml")
    for word in words:
        assert word in str(info.value), (word, str(info.value))


# -- cases: spec values that vary together -------------------------------------------------
CASES_TEXT = """replicates = 2
seed = 5
[spec]
model = "mean"
d = 2
eps = 1.0
[grid]
case = ["laplace", "gdp"]
n = [1000, 2000]
[cases.laplace]
mechanism = "laplace"
[cases.gdp]
mechanism = "gdp"
eps = {}
mu = 0.5
[methods.oracle]
"""


def test_cases_expand_with_the_other_axes(tmp_path):
    # A case overrides [spec]; the gdp case must drop the base eps, which gdp has not.
    (tmp_path / "s.toml").write_text(CASES_TEXT.replace("eps = {}\n", ""))
    with pytest.raises(InputError, match="'eps' parameter does not apply to mechanism 'gdp'"):
        load_sweep(tmp_path / "s.toml")
    text = CASES_TEXT.replace("eps = 1.0\n[grid]", "[grid]").replace("eps = {}\n", "")
    text = text.replace('mechanism = "laplace"', 'mechanism = "laplace"\neps = 2.0')
    (tmp_path / "s.toml").write_text(text)
    sweep = load_sweep(tmp_path / "s.toml")
    points = sweep.points()
    assert [p.values for p in points] == [
        {"case": "laplace", "n": 1000},
        {"case": "laplace", "n": 2000},
        {"case": "gdp", "n": 1000},
        {"case": "gdp", "n": 2000},
    ]
    assert "case" not in points[0].spec and points[0].spec["eps"] == 2.0
    gdp = points[2].normalized.mechanism
    assert gdp.name == "gdp" and gdp.mu == 0.5
    assert points[0].normalized.mechanism.name == "laplace"
    # --set reaches into a case; the identity carries the cases.
    changed = load_sweep(tmp_path / "s.toml", ["cases.gdp.mu=2"])
    assert changed.points()[2].normalized.mechanism.mu == 2.0
    assert changed.identity()["cases"]["gdp"] == {"mechanism": "gdp", "mu": 2}
    subset = load_sweep(tmp_path / "s.toml", ['grid.case=["gdp"]'])
    assert [p.values["case"] for p in subset.points()] == ["gdp", "gdp"]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (('case = ["laplace", "gdp"]', 'case = ["laplace", "other"]'), ["'other'", "no [cases"]),
        (("[cases.gdp]", "[cases.gdp]\nn = 5"), ["both in the case 'gdp' and a grid axis"]),
        (("[cases.gdp]", "[cases.gdp]\nseed = 5"), ["'seed'", "not a spec key a case may"]),
        (("[cases.gdp]", "[cases.gdp]\ncheckpoints = [10]"), ["'checkpoints'"]),
        (("[cases.gdp]", "[cases.gdp]\nfoo = 1"), ["'foo'", "allowed:"]),
        # Before: accepted, and every case's coverage was judged against the first's level.
        (("[cases.gdp]", "[cases.gdp]\nlevel = 0.5"), ["sets 'level'", "[grid] level = ["]),
        (('case = ["laplace", "gdp"]\n', ""), ["no 'case' axis"]),
        (("[cases.laplace]", "[cases.empty]\n[cases.laplace]"), ["'empty' sets nothing"]),
    ],
)
def test_bad_cases_are_refused_in_one_line(tmp_path, change, words):
    text = CASES_TEXT.replace("eps = 1.0\n[grid]", "[grid]").replace("eps = {}\n", "")
    (tmp_path / "s.toml").write_text(text.replace(*change))
    with pytest.raises(InputError) as caught:
        load_sweep(tmp_path / "s.toml")
    message = str(caught.value)
    assert "\n" not in message and all(w in message for w in words), message


def test_a_case_axis_without_cases_is_refused(tmp_path):
    (tmp_path / "s.toml").write_text(TEXT.replace("tau = [0.5, 0.9]", 'case = ["a"]'))
    with pytest.raises(InputError, match=r"\[cases.LABEL\] tables, and the sweep has none"):
        load_sweep(tmp_path / "s.toml")


@pytest.mark.parametrize("label", ['""', '" "'])
def test_a_blank_method_label_is_refused_in_one_line(tmp_path, capsys, label):
    from ldpsim.pipeline.cli import main

    # Its method given: the label alone names nothing else (a blank row in the tables).
    (tmp_path / "s.toml").write_text(TEXT + f'[methods.{label}]\nmethod = "oracle"\n')
    store = tmp_path / "s.zarr"
    assert main(["run", str(tmp_path / "s.toml"), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ldpsim: error: The method label ")
    assert "is blank" in err and "e.g. [methods.bb] or [methods.bb_long]" in err
    assert not store.exists()


def test_a_method_override_keeps_the_default_methods_of_a_sweep_without_methods(tmp_path):
    # Before: --set methods.bb.B=100 on a sweep without [methods] ran bb alone, dropping
    # bm, sn and oracle silently (the description noted only methods.bb.B = 100).
    text = TEXT.replace("[methods.bm]\n", "").replace("[spec]", 'description = "d"\n[spec]')
    (tmp_path / "s.toml").write_text(text)
    assert list(load_sweep(tmp_path / "s.toml").methods) == ["bb", "bm", "sn", "oracle"]
    for override in ("methods.bb.B=100", "methods.bb={B=100}"):
        sweep = load_sweep(tmp_path / "s.toml", [override])
        assert list(sweep.methods) == ["bb", "bm", "sn", "oracle"], override
        assert sweep.methods["bb"]["B"] == 100 and sweep.methods["bm"] == {}
        assert sweep.description == "d (as run: methods.bb.B = 100)", override
    # A whole [methods] table still replaces them, and the note says which are gone.
    sweep = load_sweep(tmp_path / "s.toml", ["methods={bb={B=100}}"])
    assert list(sweep.methods) == ["bb"]
    assert sweep.description == (
        "d (as run: methods.bb.B = 100, without methods.bm, without methods.sn, "
        "without methods.oracle)"
    )


CASES = """description = "d"
replicates = 3
[spec]
model = "quantile"
mechanism = "laplace"
eps = 1.0
n = 1000
[grid]
case = ["a", "b"]
[cases.a]
eps = 2.0
[cases.b]
eps = 3.0
tau = 0.9
[methods.oracle]
"""


def test_an_override_of_a_spec_value_that_every_case_sets_is_said_not_run(tmp_path):
    # Before: --set eps=5 was accepted, no grid point ran eps = 5 (each case sets its
    # own), and the description said "(as run: eps = 5)". It is not refused: a store
    # made so records eps = 5 in its spec, and the same command must resume it.
    (tmp_path / "s.toml").write_text(CASES)
    sweep = load_sweep(tmp_path / "s.toml")  # the file's own spec eps: kept, as stored
    assert sweep.base["eps"] == 1.0 and sweep.unused == () and sweep.description == "d"
    for overrides in (["eps=5"], ["spec.eps=5"], ['grid.case=["b"]', "tau=0.5"]):
        sweep = load_sweep(tmp_path / "s.toml", overrides)
        key = overrides[-1].split("=")[0].removeprefix("spec.")
        value = "5" if key == "eps" else "0.5"
        (message,) = sweep.unused
        assert message.startswith(
            f"the override {key} = {value} reaches no grid point: every case run ("
        ), message
        assert f"set it with --set cases.LABEL.{key}=... instead" in message
        # Not among what was run, but named apart.
        assert f"(as run: {key}" not in sweep.description
        assert sweep.description.endswith(
            f"({key} = {value}: overridden by every case, no effect)"
        ), sweep.description
        assert sweep.base[key] == float(value)  # recorded as given: the store's identity
        assert load_sweep(tmp_path / "s.toml", overrides).identity() == sweep.identity()
    # A value that some case run leaves to [spec] is used, so it is taken.
    sweep = load_sweep(tmp_path / "s.toml", ["tau=0.5", "cases.a.eps=5"])
    assert [p.normalized.model.tau for p in sweep.points()] == [0.5, 0.9]
    assert [p.normalized.mechanism.eps for p in sweep.points()] == [5.0, 3.0]


def test_a_grown_store_says_what_it_holds():
    # A store grown by a run kept the description of the run that made it: "(as run:
    # replicates = 40, ...)" beside 60 replicates and a grid value it did not name (a
    # hunt, 2026-12-02).
    def tables(description, replicates, tau):
        return {
            "description": description,
            "replicates": replicates,
            "spec": {"model": "quantile", "n": 1000},
            "grid": {"tau": tau},
            "methods": {"bm": {}, "oracle": {}},
        }

    made = load_sweep(tables("words", 4, [0.5, 0.9]), name="g")
    part = load_sweep(tables("other", 6, [0.7]), name="g")  # adds tau = 0.7 only
    grown = replace(made, replicates=6, grid={"tau": [0.5, 0.9, 0.7]})
    note = ' (as extended: replicates = 6, grid.tau = [0.5, 0.9, 0.7], methods = ["bm", "oracle"])'
    assert grown_description(made, part, grown) == "words" + note
    # Grown again: the note replaced, each size whole.
    again = replace(grown, description="words" + note)
    assert grown_description(again, part, replace(again, replicates=8)) == "words" + note.replace(
        "= 6", "= 8"
    )
    # A run that holds all of the grown store (another order of its values): its own.
    whole = load_sweep(tables("all", 6, [0.7, 0.9, 0.5]), name="g")
    assert grown_description(made, whole, grown) == "all"
    # A store without a description gets no note (before: " (as extended: ...)", the
    # note alone after a space), as note_overrides notes nothing without one.
    bare = replace(made, description="")
    assert grown_description(bare, part, replace(grown, description="")) == ""


def test_a_misspelt_sweep_name_or_backend_is_named_with_the_closest_one():
    # The hint the other refusals of a misspelt name give (did_you_mean) was missing here.
    with pytest.raises(InputError, match=r"^Sweep 'dmeo' \(did you mean 'demo'\?\) is neither"):
        load_sweep("dmeo")
    tables = {"replicates": 2, "backend": "gpuu", "spec": {"model": "quantile", "n": 1000}}
    with pytest.raises(InputError, match=r"Got 'gpuu' \(did you mean 'gpu'\?\)\.$"):
        load_sweep({**tables, "methods": {"bm": {}}}, name="b")


def test_a_key_in_spec_and_in_grid_is_refused(tmp_path):
    # Which value would a grid point run, [spec]'s or the axis's? Neither is guessed.
    text = "replicates = 1\n[spec]\nmodel = 'quantile'\nn = 1000\ntau = 0.5\n"
    text += "[grid]\ntau = [0.3, 0.7]\n"
    path = tmp_path / "twice.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=r"The key 'tau' is both in \[spec\] and in \[grid\]"):
        load_sweep(path)


def test_backend_cpu_named_in_spec_is_the_sweep_without_a_backend(tmp_path):
    # 'cpu', the default, is left out of [spec], so that a CPU sweep's identity (what
    # a store compares to resume) is what it was before backends existed.
    plain = {"replicates": 1, "spec": {"model": "quantile", "n": 1000}, "grid": {"tau": [0.5]}}
    named = {**plain, "spec": {**plain["spec"], "backend": "cpu"}}
    top = {**plain, "backend": "cpu"}
    sweeps = [load_sweep(tables, name="b") for tables in (plain, named, top)]
    assert all(s.base == {"model": "quantile", "n": 1000} for s in sweeps)
    assert sweeps[0].identity() == sweeps[1].identity() == sweeps[2].identity()
