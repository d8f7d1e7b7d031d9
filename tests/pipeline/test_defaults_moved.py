"""Defaults that never move silently (issue 34, item 2): one documented default for bb's
form, a line when a new store gets a default an earlier release set otherwise, and two
labels of one method refused before any store exists."""

from __future__ import annotations

import dataclasses
import inspect
import re
import tomllib
from pathlib import Path

import pytest
from conftest import one_error_line, scheduler

from ldpsim.pipeline import api
from ldpsim.pipeline.cli import main
from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.store.identity import (
    CHOICES_RECORDED_SINCE,
    check_distinct_methods,
    moved_default_lines,
    new_store_notes,
)
from ldpsim.pipeline.store.reading import read_sweep
from ldpsim.pipeline.store.store import Store
from ldpsim.pipeline.sweep import RECOMMENDED_BAND, RECOMMENDED_FORM, validate_sweep
from ldpsim.tasks.intervals import BlockBootstrap

REPO = Path(__file__).resolve().parents[2]
#: The line a new store's bb without form gets (the issue's wording).
BB_LINE = (
    "bb: no form given, so the t form (ldpsim >= 0.2; before: basic). Set methods.bb.form = "
    '"basic" for the old intervals.'
)


def tiny_text(methods: str) -> str:
    """A quantile sweep of one grid point and one replicate, with these method tables."""
    return f'replicates = 1\nseed = 3\n[spec]\nmodel = "quantile"\neps = 1.0\nn = 2000\n{methods}'


def tiny_sweep(path: Path, methods: str) -> Path:
    path.write_text(tiny_text(methods))
    return path


def sweep_of(methods: str):
    return validate_sweep(tomllib.loads(tiny_text(methods)), "x")


# -- one documented default -----------------------------------------------------------------
def class_default(name: str) -> object:
    return {f.name: f.default for f in dataclasses.fields(BlockBootstrap)}[name]


def test_every_text_names_the_form_the_code_applies():
    # The code: a sweep fills in the t form, the class keeps basic (a store that
    # recorded no form means basic).
    assert sweep_of("[methods.bb]\n").methods["bb"] == {"form": "t"}
    assert (RECOMMENDED_FORM, class_default("form")) == ("t", "basic")
    assert (RECOMMENDED_BAND, class_default("band")) == ("sidak", "sup-t")
    doc = inspect.getdoc(BlockBootstrap)
    assert "Default: 't' in a sweep, 'basic' for this class." in " ".join(doc.split())
    assert "Default: 'sidak' in a sweep, 'sup-t' for this class" in " ".join(doc.split())
    readme = " ".join((REPO / "README.md").read_text().split())
    assert 'A `bb` that names no `form` gets `form = "t"`' in readme
    methods = (REPO / "docs" / "methods.md").read_text()
    row = next(line for line in methods.splitlines() if line.startswith("| `form` |"))
    assert "`t` in a new sweep; `basic` in a store that recorded none" in row
    assert 'names no `form` for a marginal `bb`\ngets `form = "t"`' in methods
    # No text calls basic (or sup-t) "the default" without saying whose.
    texts = {"README.md": readme, "docs/methods.md": methods, "BlockBootstrap": doc}
    texts.update({p.name: p.read_text() for p in (REPO / "docs").glob("*.md")})
    stale = re.compile(r"(basic|sup-t)`?'?\)?,? \(?(pivotal, )?(the )?default\b", re.IGNORECASE)
    for name, text in texts.items():
        assert not stale.search(text), (name, stale.search(text))


# -- the line for a new store ---------------------------------------------------------------
def test_the_lines_name_the_label_and_how_to_get_the_old_behaviour():
    sweep = sweep_of(
        "[methods.bb]\n"
        '[methods.band]\nmethod = "bb"\nsimultaneous = true\n'
        '[methods.named]\nmethod = "bb"\nform = "percentile"\n'
        '[methods.t_named]\nmethod = "bb"\nform = "t"\nB = 20\n'
        "[methods.sn]\n"
    )
    assert moved_default_lines(sweep) == [
        BB_LINE,
        f"band: no band given, so the sidak band (ldpsim >= {CHOICES_RECORDED_SINCE}; "
        'before: sup-t). Set methods.band.band = "sup-t" for the old intervals.',
    ]
    # Naming the old form gets no line.
    named = sweep_of('[methods.bb]\nform = "basic"\n')
    assert moved_default_lines(named) == []


def test_a_resumed_store_keeps_its_methods_and_gets_no_line(tmp_path):
    sweep = sweep_of("[methods.bb]\n[methods.oracle]\n")
    path = tmp_path / "S.zarr"
    assert new_store_notes(sweep, path) == [BB_LINE]
    Store.open_or_create(path, sweep)  # the store of that first run
    assert read_sweep(path).methods["bb"] == {"form": "t"}
    assert new_store_notes(sweep, path) == []


@pytest.mark.usefixtures("local_cluster")
def test_run_prints_the_line_for_a_new_store_only(tmp_path, local_cluster, capsys):
    sweep = tiny_sweep(tmp_path / "s.toml", "[methods.bb]\n[methods.oracle]\n")
    store = tmp_path / "S.zarr"
    args = ["run", str(sweep), "--store", str(store), *scheduler(local_cluster)]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("note:")] == [f"note: {BB_LINE}"]
    assert read_sweep(store).methods["bb"] == {"form": "t"}
    # Extended by the same file (2 replicates): the store's methods, no line.
    assert main([*args, "--replicates", "2"]) == 0
    assert "note:" not in capsys.readouterr().err


# -- two labels of one method ---------------------------------------------------------------
BB_TWICE = '[methods.bb]\n[methods.bb_t]\nmethod = "bb"\nform = "t"\n[methods.sn]\n'


def test_two_labels_of_one_method_are_refused_before_any_store(tmp_path, capsys):
    sweep = tiny_sweep(tmp_path / "s.toml", BB_TWICE)
    store = tmp_path / "S.zarr"
    code = main(["run", str(sweep), "--store", str(store)])
    line = one_error_line(capsys.readouterr(), code, ["'bb' and 'bb_t'", 'form = "t"'])
    assert "Keep one label" in line
    assert not store.exists()
    with pytest.raises(InputError, match="'bb' and 'bb_t' resolve to the same method"):
        api.run(api.load_sweep(sweep), store)
    assert not store.exists()


def test_labels_that_differ_once_resolved_are_kept():
    different = (
        "[methods.bb]\n"  # the t form in a new sweep
        '[methods.bb_basic]\nmethod = "bb"\nform = "basic"\n'
        '[methods.bb_b]\nmethod = "bb"\nform = "t"\nB = 20\n'
        '[methods.o]\nmethod = "oracle"\n'
    )
    check_distinct_methods(sweep_of(different))
    same = different + '[methods.oracle]\n[methods.also_basic]\nmethod = "bb"\nform = "basic"\n'
    with pytest.raises(InputError) as info:
        check_distinct_methods(sweep_of(same))
    message = str(info.value)
    assert "'bb_basic' and 'also_basic'" in message and "'o' and 'oracle'" in message
    assert "oracle with its defaults" in message and "\n" not in message


def test_an_existing_store_with_two_labels_of_one_method_resumes(tmp_path):
    # A store made before the check: its methods are what they are; refusing would
    # only stop it from being completed.
    sweep = sweep_of('[methods.bb]\nform = "t"\n[methods.bb_t]\nmethod = "bb"\nform = "t"\n')
    Store.open_or_create(tmp_path / "S.zarr", sweep)
    assert new_store_notes(sweep, tmp_path / "S.zarr") == []
