"""Sweeps as Python objects: loaded from a dict, named, described as run, written as TOML."""

from __future__ import annotations

import tomllib
from importlib import resources

import numpy as np
import pytest

from ldpsim.pipeline import api, report
from ldpsim.pipeline import sweep as sweep_module
from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.sweep import Sweep, builtin_sweeps

#: A sweep with every section: cases, an inf, rep_chunk, a bb left to its default form.
TEXT = """description = "two mechanisms against n"
replicates = 3
seed = 11
rep_chunk = 2

[spec]
model = "quantile"
tau = 0.5

[grid]
case = ["laplace-inf", "gdp1"]
n = [1e3, 2000]

[cases.laplace-inf]
mechanism = "laplace"
eps = inf
[cases.gdp1]
mechanism = "gdp"
mu = 1.0

[methods.bb]
B = 50
[methods.sn]
"""


def builtin_text(name: str) -> str:
    return resources.files("ldpsim.pipeline").joinpath("sweeps", f"{name}.toml").read_text()


def test_a_dict_loads_as_its_file(tmp_path):
    (tmp_path / "two.toml").write_text(TEXT)
    data = tomllib.loads(TEXT)
    from_dict = api.load_sweep(data, name="two")
    from_file = api.load_sweep(tmp_path / "two.toml")
    assert from_dict == from_file and from_dict.to_json() == from_file.to_json()
    assert from_dict.defaulted == from_file.defaulted == {"bb": ("form",)}
    assert data == tomllib.loads(TEXT)  # not changed in place
    assert Sweep.from_dict(data, name="two") == from_file
    # With overrides, through the same path as a file's.
    options = {"set": ["cases.gdp1.mu=2"], "replicates": 5, "grid__n": [4000]}
    assert api.load_sweep(data, name="two", **options) == api.load_sweep(
        tmp_path / "two.toml", **options
    )


def test_a_builtin_as_a_dict_equals_the_builtin():
    data = tomllib.loads(builtin_text("shi-fig2-budgets"))
    assert api.load_sweep(data, name="shi-fig2-budgets") == api.load_sweep("shi-fig2-budgets")


def test_python_values_are_taken_as_toml_values():
    plain = tomllib.loads(TEXT)
    python = tomllib.loads(TEXT)
    python["grid"]["n"] = np.array([1000, 2000])
    python["grid"]["case"] = ("laplace-inf", "gdp1")
    python["cases"]["gdp1"]["mu"] = np.float64(1.0)
    python["seed"] = np.int64(11)
    sweep = api.load_sweep(python, name="two")
    assert sweep == api.load_sweep(plain, name="two")
    assert sweep.to_json() == api.load_sweep(plain, name="two").to_json()  # no numpy types
    # Keyword overrides too (a numpy float used to fail only when the store was written).
    assert '"eps": 2.0' in api.load_sweep("demo", eps=np.float64(2.0)).to_json()


BAD = [
    'replicates = 3\ncolour = "red"\n[spec]\nmodel = "quantile"\n',
    'replicates = 3\n[spec]\nmodel = "quantile"\ntua = 0.5\n',
    "replicates = 0\n[spec]\nmodel = 'quantile'\n",
    'replicates = 3\n[spec]\nmodel = "quantile"\n[grid]\ntau = 0.5\n',
    'replicates = 3\n[spec]\nmodel = "quantile"\n[grid]\ntau = [0.5, 1.5]\n',
    'replicates = 3\n[spec]\nmodel = "quantile"\n[grid]\ncase = ["a"]\n[cases.a]\nseed = 1\n',
    'replicates = 3\n[spec]\nmodel = "quantile"\n[methods]\nbb = 5\n',
]


@pytest.mark.parametrize("text", BAD)
def test_a_bad_dict_fails_as_its_file(tmp_path, text):
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(InputError) as from_file:
        api.load_sweep(tmp_path / "bad.toml")
    with pytest.raises(InputError) as from_dict:
        api.load_sweep(tomllib.loads(text), name="bad")
    assert str(from_dict.value) == str(from_file.value)


@pytest.mark.parametrize("source", ["demo", "file", "dict"])
def test_name_is_applied_to_any_load(tmp_path, source):
    (tmp_path / "two.toml").write_text(TEXT)
    given = {"demo": "demo", "file": tmp_path / "two.toml", "dict": tomllib.loads(TEXT)}
    sweep = api.load_sweep(given[source], name="my-run 2")
    assert sweep.name == "my-run 2"
    assert sweep.to_toml().startswith("# sweep 'my-run 2'\n")


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a/b", "a\\b", "a:b", " a", "a ", "a\nb", "a\x00b", "x" * 201, "é" * 101],
)
def test_a_bad_name_is_refused_in_one_line(name):
    for load in (lambda: api.load_sweep("demo", name=name), lambda: Sweep.from_dict({}, name)):
        with pytest.raises(InputError, match="must be a file name") as raised:
            load()
        assert not isinstance(raised.value, TypeError)
        assert "\n" not in str(raised.value)


def test_a_name_of_a_wrong_type_or_a_dict_without_name_is_a_type_error():
    with pytest.raises(api.InputTypeError, match="must be a file name"):
        api.load_sweep("demo", name=7)
    with pytest.raises(api.InputTypeError, match="needs a 'name' for a sweep given as a dict"):
        api.load_sweep(tomllib.loads(TEXT))
    with pytest.raises(InputError, match="needs a name"):
        sweep_module.load_sweep(tomllib.loads(TEXT))
    assert api.load_sweep("demo", name="x" * 200).name == "x" * 200  # the longest allowed


def test_the_description_of_an_overridden_builtin_says_what_is_run():
    original = tomllib.loads(builtin_text("demo"))["description"]
    assert "500 replicates" in original
    assert api.load_sweep("demo").description == original
    assert api.load_sweep("demo", replicates=500).description == original  # nothing changed
    sweep = api.load_sweep("demo", replicates=30, grid__n=[1000, 10000])
    assert sweep.description == f"{original} (as run: replicates = 30, grid.n = [1000, 10000])"
    # A spec value moved to the grid, as --set writes it; a method parameter.
    moved = api.load_sweep("demo", set=["grid.eps=[1.0, inf]", 'methods.bb.multiplier="gaussian"'])
    assert moved.description.endswith(
        '(as run: grid.eps = [1.0, inf], methods.bb.multiplier = "gaussian", without eps)'
    )
    assert api.load_sweep("demo", replicates=30, description="mine").description == "mine"


@pytest.mark.parametrize("name", sorted(builtin_sweeps()))
def test_to_toml_round_trips_every_builtin(tmp_path, name):
    sweep = api.load_sweep(name)
    (tmp_path / f"{name}.toml").write_text(sweep.to_toml())
    back = api.load_sweep(tmp_path / f"{name}.toml")
    assert back == sweep and back.to_json() == sweep.to_json()
    assert back.defaulted == sweep.defaulted  # a defaulted choice is left out, then again filled


def test_to_toml_round_trips_cases_and_overrides(tmp_path):
    sweep = api.load_sweep(
        tomllib.loads(TEXT), name="two", replicates=4, set=["cases.gdp1.mu=3", "seed=2"]
    )
    text = sweep.to_toml()
    assert "form" not in text and "rep_chunk = 2" in text and "eps = inf" in text
    (tmp_path / "two.toml").write_text(text)
    back = api.load_sweep(tmp_path / "two.toml")
    assert back == sweep and back.to_json() == sweep.to_json()
    assert back.cases["gdp1"] == {"mechanism": "gdp", "mu": 3} and back.replicates == 4
    assert "(as run: replicates = 4, seed = 2, cases.gdp1.mu = 3)" in back.description
    assert api.load_sweep(tomllib.loads(text), name="two") == sweep


def test_the_report_writes_the_stored_sweep_with_the_same_function():
    assert report.sweep_toml is sweep_module.sweep_toml


def test_to_dict_loads_back_through_from_dict():
    # to_dict holds the name (and rep_chunk None): from_dict takes it as it is.
    sweep = api.load_sweep("demo", replicates=20, grid__n=[1000, 10000])
    assert Sweep.from_dict(sweep.to_dict()) == sweep
    assert Sweep.from_dict(sweep.to_dict(), name="other").name == "other"
    with pytest.raises(InputError, match="needs the sweep's name"):
        Sweep.from_dict({k: v for k, v in sweep.to_dict().items() if k != "name"})


def test_a_parameter_set_on_a_method_without_parameters_is_noted_as_set():
    # [methods.bb] without parameters, then methods.bb.B = 100: bb is not "without".
    data = {"replicates": 2, "seed": 1, "description": "quantile"}
    data |= {"spec": {"model": "quantile", "n": 1000}}
    data |= {"grid": {"eps": [1.0]}, "methods": {"bb": {}}}
    sweep = api.load_sweep(data, name="plain", methods__bb__B=100)
    assert sweep.description == "quantile (as run: methods.bb.B = 100)"
