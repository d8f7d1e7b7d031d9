"""A chunk write's failure records, and the records of added methods, as
:class:`ldpsim.pipeline.store.store.Store` keeps them: written for the replicates written
and failed, removed for those done now, left alone everywhere else.

Real worker results of a cheap sweep (n = 100), computed in this process: no cluster.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import tree_hash, write_sweep

from ldpsim.pipeline.compute.worker import run_chunk
from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.store.layout import META_GROUP
from ldpsim.pipeline.store.store import Store
from ldpsim.pipeline.sweep import load_sweep


@pytest.fixture(scope="module")
def computed(tmp_path_factory):
    """A sweep of 2 x 2 grid points and 4 replicates (chunks of 2), and a real worker's
    result for replicates 2 and 3 of grid point (1, 0)."""
    folder = tmp_path_factory.mktemp("records")
    sweep = load_sweep(
        write_sweep(
            folder / "s.toml", replicates=4, rep_chunk=2, grid={"tau": [0.5, 0.9], "n": [100, 200]}
        )
    )
    (point,) = [p for p in sweep.points() if p.index == (1, 0)]
    store, _ = Store.open_or_create(folder / "probe.zarr", sweep)
    result = run_chunk(point.spec, [2, 3], store.layout.methods, store.layout.d, "in-process")
    return sweep, result


def failing(result: dict, reps: dict[int, str]) -> dict:
    """``result`` with the replicates ``reps`` (rep -> error) failed, each with its record."""
    out = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in result.items()}
    out["errors"] = {}
    for rep, error in reps.items():
        if rep in out["reps"]:
            out["failed"][out["reps"].index(rep)] = True
        out["errors"][rep] = {"rep": rep, "kind": "replicate", "error": error}
    return out


def records(store: Store) -> dict[str, str]:
    """The store's failure records: file name -> error."""
    folder = store.path / META_GROUP / "errors"
    return {p.name: json.loads(p.read_bytes())["error"] for p in sorted(folder.glob("*.json"))}


def test_a_failure_of_a_replicate_not_written_is_not_recorded(computed, tmp_path):
    # A result names a failure of replicate 0, which it does not hold (its reps are 2
    # and 3): that replicate keeps its stored state, and gets no record.
    sweep, result = computed
    store, _ = Store.open_or_create(tmp_path / "s.zarr", sweep)
    store.write_chunk((1, 0), 1, failing(result, {3: "three", 0: "elsewhere"}))
    assert records(store) == {"1_0__3.json": "three"}
    assert store.done_mask()[1, 0].tolist() == [False, False, True, False]


def test_files_in_the_errors_folder_that_are_no_records_are_left_alone(computed, tmp_path):
    # Names that are not GRID__REP.json: a write neither fails on them nor removes them.
    sweep, result = computed
    store, _ = Store.open_or_create(tmp_path / "s.zarr", sweep)
    folder = store.path / META_GROUP / "errors"
    folder.mkdir(parents=True)
    strays = ["1_0__x.json", "1_0__3.json.bak", "notes.json"]
    for name in strays:
        (folder / name).write_text("{}")
    store.write_chunk((1, 0), 1, failing(result, {2: "two"}))
    assert sorted(p.name for p in folder.iterdir()) == sorted([*strays, "1_0__2.json"])


def _sweep(folder, name: str, grid=None, spec=None):
    if grid is not None and "eps" in grid:  # eps on the grid, not in [spec]
        return load_sweep(
            {"replicates": 2, "spec": {"model": "quantile"}, "grid": grid, "methods": {"sn": {}}},
            name=name,
        )
    return load_sweep(write_sweep(folder / f"{name}.toml", replicates=2, grid=grid, spec=spec))


def test_a_fraction_added_to_an_axis_of_integers_is_refused(tmp_path):
    # The 'eps' coordinate of a store made from eps = [1, 2] is int64: 1.5 would be
    # stored as 1, so the store refuses it, naming the value, and is left as it was;
    # 3.0 is an integer and is added.
    store = tmp_path / "s.zarr"
    Store.open_or_create(store, _sweep(tmp_path, "a", grid={"n": [100], "eps": [1, 2]}))
    before = tree_hash(store)
    with pytest.raises(InputError, match=r"holds integers on its 'eps' axis .*1\.5 cannot"):
        Store.open_or_create(store, _sweep(tmp_path, "b", grid={"n": [100], "eps": [1, 2, 1.5]}))
    assert tree_hash(store) == before
    _, changes = Store.open_or_create(
        store, _sweep(tmp_path, "c", grid={"n": [100], "eps": [1, 2, 3.0]})
    )
    assert changes.added == {"eps": [3.0]}
