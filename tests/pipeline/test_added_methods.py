"""Interval methods added to a finished store (issue 34 item 6): only their intervals are
computed, the stored methods' files stay as they were, and the values equal a fresh
sweep's that had every method from the start (SPEC 6)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from conftest import (
    assert_same_values,
    edit_root_attrs,
    one_error_line,
    scheduler,
    tree_hash,
    write_as_a_run,
)

from ldpsim.pipeline import api
from ldpsim.pipeline.cli import main
from ldpsim.pipeline.store.damage import find_damage
from ldpsim.pipeline.store.provenance import read_runs
from ldpsim.pipeline.store.reading import (
    iter_errors,
    open_dataset,
    read_attrs,
    read_sweep,
    stored_layout,
)

#: The stored methods: a random one (bb draws multipliers) and a deterministic one.
STORED = "[methods.bb]\nB = 50\n[methods.oracle]\n"
#: Two added: a random one on its own stream, and sn.
ADDED = '[methods.bb_basic]\nmethod = "bb"\nform = "basic"\nB = 50\n[methods.sn]\n'
#: Per replicate and method, as a fresh store holds them (not the timings).
COMPARED = ("lower", "upper", "method_estimate", "method_failed", "estimate", "done", "failed")


def sweep_text(methods: str, replicates: int = 4) -> str:
    return (
        f'replicates = {replicates}\nseed = 11\nrep_chunk = 2\n[spec]\nmodel = "quantile"\n'
        f"eps = 1.0\n[grid]\ntau = [0.5, 0.8]\nn = [1000]\n{methods}"
    )


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def stores(tmp_path_factory, local_cluster):
    """A finished store of STORED, and a fresh store of STORED + ADDED (both 4 reps)."""
    folder = tmp_path_factory.mktemp("added")
    made = {}
    for name, methods in (("stored", STORED), ("fresh", STORED + ADDED)):
        sweep = write(folder / f"{name}.toml", sweep_text(methods))
        store = folder / f"{name}.zarr"
        start = time.perf_counter()
        assert main(["run", str(sweep), "--store", str(store), *scheduler(local_cluster)]) == 0
        made[name] = (store, time.perf_counter() - start)
    return folder, made


def data_files(store: Path) -> dict[str, str]:
    """The hashes of the replicates' data files (shards), not of any metadata."""
    return {
        k: v for k, v in tree_hash(store).items() if "/c/" in k and k.split("/")[0] != "method"
    }


def test_a_method_added_to_a_finished_store_equals_a_fresh_sweep(
    stores, local_cluster, tmp_path, capsys
):
    _, made = stores
    store = tmp_path / "S.zarr"
    shutil.copytree(made["stored"][0], store)
    before = data_files(store)
    sweep = write(tmp_path / "more.toml", sweep_text(STORED + ADDED))
    capsys.readouterr()
    start = time.perf_counter()
    code = main(["run", str(sweep), "--store", str(store), *scheduler(local_cluster)])
    seconds = time.perf_counter() - start
    out = capsys.readouterr().out
    assert code == 0, out
    assert "0 of 8 replicates to compute (8 already done)" in out
    assert "Added methods bb_basic, sn: computing them for 8 finished replicates" in out
    # The stored methods' files (and estimate, done, seconds, ...) were never rewritten.
    after = data_files(store)
    assert {k: after[k] for k in before} == before
    assert any(k.startswith("lower/") for k in set(after) - set(before))  # their own shards
    ds, fresh = open_dataset(store).load(), open_dataset(made["fresh"][0]).load()
    assert list(ds["method"].values) == ["bb", "oracle", "bb_basic", "sn"]
    for name in COMPARED:
        for label in ["bb", "oracle", "bb_basic", "sn"] if "method" in ds[name].dims else [0]:
            pick = {"method": label} if label != 0 else {}
            assert_same_values(
                ds[name].sel(pick).values, fresh[name].sel(pick).values, name, label
            )
    assert bool(np.isfinite(ds["method_seconds"]).all())
    assert read_sweep(store).methods == read_sweep(made["fresh"][0]).methods
    assert not find_damage(store)
    # Recorded: no replicate computed, the added methods for 8 (a hunt, 2026-12-01).
    added_run = read_runs(store)[-1]
    assert (added_run["computed"], added_run["methods_computed"]) == (0, 8), added_run
    assert added_run["ended"] == "finished"
    # Nothing left: a second run computes nothing.
    assert main(["run", str(sweep), "--store", str(store), *scheduler(local_cluster)]) == 0
    assert "Nothing to do" in capsys.readouterr().out
    print(
        f"\nadding 2 methods: {seconds:.2f} s; the fresh sweep with all 4: "
        f"{made['fresh'][1]:.2f} s; the stored 2: {made['stored'][1]:.2f} s"
    )


def test_added_methods_resume_and_go_with_new_replicates(stores, local_cluster, tmp_path):
    """Through the API: a store whose added method is half computed (a run stopped) and
    that gets new replicates too computes what is missing, and equals a fresh sweep."""
    _, made = stores
    store = tmp_path / "S.zarr"
    shutil.copytree(made["stored"][0], store)
    sweep = api.load_sweep({**_tables(STORED + ADDED), "replicates": 4}, name="more")
    with _client(local_cluster) as c:
        api.run(sweep, store, client=c, progress=False)
        # As a run stopped half-way leaves it: one replicate's added methods not written.
        for name in ("lower", "upper", "method_seconds"):
            write_as_a_run(store, name, (1, 0, slice(2, None), 3), np.nan)
        assert not find_damage(store)  # pending, not damage
        six = api.load_sweep({**_tables(STORED + ADDED), "replicates": 6}, name="more")
        ds = api.run(six, store, client=c, progress=False)
        assert ds.attrs["run_report"]["computed"] == 4 and ds.attrs["run_report"]["missing"] == 0
        fresh = tmp_path / "F.zarr"
        want = api.run(six, fresh, client=c, progress=False).load()
    got = ds.load()
    for name in COMPARED:
        assert_same_values(got[name].values, want[name].values, name)


def test_removing_or_changing_a_stored_method_is_refused(stores, tmp_path, capsys):
    _, made = stores
    store = made["stored"][0]
    before = tree_hash(store)
    cases = {
        "removed": ("[methods.bb]\nB = 50\n" + ADDED, "methods.oracle: {} -> '<absent>'"),
        "changed": ("[methods.bb]\nB = 60\n[methods.oracle]\n", "-> {'B': 60"),
    }
    for name, (methods, words) in cases.items():
        sweep = write(tmp_path / f"{name}.toml", sweep_text(methods))
        code = main(["run", str(sweep), "--store", str(store), "--workers", "1"])
        line = one_error_line(capsys.readouterr(), code, ["different specification", words])
        assert "interval methods" in line
    # The same through the API: no command-line wording in the message.
    with pytest.raises(api.InputError) as raised:
        api.run(str(tmp_path / "changed.toml"), store, workers=1, progress=False)
    assert "--store" not in str(raised.value) and "another store path" in str(raised.value)
    assert tree_hash(store) == before


def test_an_added_method_that_repeats_a_stored_one_is_refused(stores, tmp_path, capsys):
    _, made = stores
    store = made["stored"][0]
    before = tree_hash(store)
    again = '[methods.bb_again]\nmethod = "bb"\nB = 50\nform = "t"\n'
    stored = json.loads(xr.open_zarr(store).attrs["sweep"])["methods"]["bb"]
    assert stored.get("form") == "t"  # the recorded choice the copy repeats
    sweep = write(tmp_path / "again.toml", sweep_text(STORED + again))
    code = main(["run", str(sweep), "--store", str(store), "--workers", "1"])
    one_error_line(capsys.readouterr(), code, ["'bb_again'", "'bb'", "same method"])
    assert tree_hash(store) == before


def test_added_methods_are_refused_on_replicates_of_another_model_code(stores, tmp_path, capsys):
    """Replicates computed before a change of their model (accepted since) would get
    their chains run again with the new code: refused, the store unchanged."""
    from ldpsim.pipeline.compute.added_methods import check_chain_code
    from ldpsim.pipeline.store.code_identity import sweep_units
    from ldpsim.pipeline.sweep import load_sweep

    _, made = stores
    sweep = write(tmp_path / "more.toml", sweep_text(STORED + ADDED))
    units = sweep_units(load_sweep(str(sweep), [], None))
    (generation,) = json.loads(read_attrs(made["stored"][0])["units"])

    def as_if_changed(key: str) -> Path:
        """A copy whose replicates (code version 0) had another ``key``, and whose
        latest code version (1) is this run's: a change accepted, then nothing run."""
        store = tmp_path / f"{key.replace(':', '-')}.zarr"
        shutil.copytree(made["stored"][0], store)
        old = {**generation, key: {**generation[key], "source_sha256": "0" * 64}}
        edit_root_attrs(store, units=json.dumps([old, generation], sort_keys=True))
        return store

    store = as_if_changed("model:quantile")
    before = tree_hash(store)
    code = main(["run", str(sweep), "--store", str(store), "--workers", "1"])
    words = ["interval methods 'bb_basic', 'sn'", "model 'quantile' at tau = 0.5", "new store"]
    line = one_error_line(capsys.readouterr(), code, [*words, "source 00000000 ->"])
    assert "tau = 0.8" in line
    assert tree_hash(store) == before
    # Its first replicate alone of the old code is refused too, and so are replicates
    # computed before the store recorded its code (code_version -1), judged by its first
    # record (a mutation hunt, h16c: the replicates looked at from 1 on, or those of -1
    # judged by the latest record, passed every test).
    for first, version in ((1, 1), (0, -1)):
        write_as_a_run(store, "code_version", (slice(None), 0, slice(first, None)), version)
        with pytest.raises(api.InputError, match=r"'quantile' at tau = 0\.5, n = 1e3; tau = 0\.8"):
            check_chain_code(store, load_sweep(str(sweep), [], None), ["bb_basic", "sn"], units)
    # A code_version the store does not describe (2 of 2 versions): nothing to compare.
    write_as_a_run(store, "code_version", (slice(None), 0, slice(None)), 2)
    check_chain_code(store, load_sweep(str(sweep), [], None), ["bb_basic", "sn"], units)
    # The mechanism makes the chain as well as the model (a mutation hunt, h16c: the
    # mechanism left out of the check passed every test).
    store = as_if_changed("mechanism:randomized_response")
    with pytest.raises(api.InputError, match="mechanism 'randomized_response' at tau = 0\\.5"):
        check_chain_code(store, load_sweep(str(sweep), [], None), ["bb_basic", "sn"], units)
    # A sweep that adds a grid value too: its new grid point has no finished replicate
    # (a mutation hunt, h16c: a point with any of its values stored looked up, which
    # fails, passed every test).
    text = sweep_text(STORED + ADDED).replace("tau = [0.5, 0.8]", "tau = [0.5, 0.8, 0.9]")
    wider = load_sweep(str(write(tmp_path / "wider.toml", text)), [], None)
    with pytest.raises(api.InputError, match="mechanism 'randomized_response' at tau = 0\\.5"):
        check_chain_code(store, wider, ["bb_basic", "sn"], units)
    # A stored method's change does not touch the chains: the methods may be added.
    store = as_if_changed("method:bb")
    check_chain_code(store, load_sweep(str(sweep), [], None), ["bb_basic", "sn"], units)


def test_a_failed_recompute_keeps_the_added_methods_already_stored(
    stores, local_cluster, tmp_path
):
    """The chains run again for added methods fail (their tasks were lost): each
    replicate keeps the added methods it held; those it lacked are recorded as failed,
    and stay pending."""
    from ldpsim.pipeline.compute.added_methods import failed_methods_chunk, plan_methods
    from ldpsim.pipeline.compute.runner import _failed_chunk
    from ldpsim.pipeline.store.store import Store

    _, made = stores
    path = tmp_path / "S.zarr"
    shutil.copytree(made["stored"][0], path)
    sweep = api.load_sweep({**_tables(STORED + ADDED), "replicates": 4}, name="more")
    with _client(local_cluster) as c:
        api.run(sweep, path, client=c, progress=False)

    # As runs stopped half-way leave them: bb_basic of (tau 0.5, rep 0) and sn of
    # (tau 0.8, rep 3) not written; each replicate's chain is run again for both.
    pending = {(0, 2, 0), (1, 3, 3)}  # (tau, method, rep)
    for tau, method, rep in sorted(pending, reverse=True):
        for name in ("lower", "upper", "method_seconds"):
            write_as_a_run(path, name, (tau, 0, method, rep), np.nan)
        if method == 3:  # sn alone pending: bb_basic, finished everywhere, is not run again
            first, work = plan_methods(sweep, Store(path, stored_layout(path)))
            assert first == 3 and [(w.index, w.reps) for w in work] == [((1, 0), [3])]
    before = open_dataset(path).load()
    store = Store(path, stored_layout(path))
    first, work = plan_methods(sweep, store)
    assert first == 2 and [(w.index, w.reps) for w in work] == [((0, 0), [0]), ((1, 0), [3])]
    labels = list(store.layout.methods[first:])
    results = []
    for w in work:
        lost = _failed_chunk(w, labels, store.layout.d, store, RuntimeError("lost"))
        results.append((w.index, w.chunk, failed_methods_chunk(lost, labels)))
    store.write_methods(results, first)
    after = open_dataset(path).load()
    for tau, method, rep in np.ndindex(2, 4, 4):
        cell = {"tau": tau, "n": 0, "method": method, "rep": rep}
        for name in ("lower", "upper", "method_estimate", "method_failed", "method_seconds"):
            got, want = after[name].isel(cell).values, before[name].isel(cell).values
            if (tau, method, rep) not in pending:
                assert_same_values(got, want, name, str(cell))  # kept
        if (tau, method, rep) in pending:
            assert bool(after["method_failed"].isel(cell).all())
            assert bool(np.isnan(after["method_seconds"].isel(cell)).all())  # tried again
    records = {(r["spec"]["tau"], r["rep"]): r["methods"] for r in iter_errors(path)}
    assert {k: set(v) for k, v in records.items()} == {(0.5, 0): {"bb_basic"}, (0.8, 3): {"sn"}}
    # Method records, each naming its method, without the lost task's traceback key
    # (a mutation hunt, h16c: the task record's traceback kept passed every test).
    for record in iter_errors(path):
        (label,) = record["methods"]
        assert record["kind"] == "method" and record["error"] == f"{label}: RuntimeError: lost"
        assert "traceback" not in record and record["tracebacks"] == {}
    # The next run computes them, and their failure records go with their failure
    # flags (records that kept them listed methods that had not failed; a mutation hunt,
    # 2026-12-02).
    with _client(local_cluster) as c:
        api.run(sweep, path, client=c, progress=False)
    assert list(iter_errors(path)) == []
    assert not bool(open_dataset(path)["method_failed"].any())


def _tables(methods: str) -> dict:
    import tomllib

    return tomllib.loads(sweep_text(methods))


def _client(cluster):
    from distributed import Client

    return Client(cluster)


def test_a_chain_that_fails_when_run_again_is_recorded_in_one_line(monkeypatch):
    from ldpsim.pipeline.compute import added_methods

    def failing(setup, reps, labels):
        def compute(i, rep):
            raise FloatingPointError("overflow in the chain\nat step 12 of 1000")

        return compute

    monkeypatch.setattr(added_methods, "_replicates", failing)
    point = api.load_sweep(_tables(STORED + ADDED), name="more").points()[0]
    out = added_methods.run_methods_chunk(point.spec, [0, 1], ["bb_basic", "sn"], 1, "key")
    assert out["failed"].all() and out["method_failed"].all()
    assert np.isnan(out["method_seconds"]).all()  # pending: a later run tries again
    reason = out["errors"][1]["methods"]["sn"]
    assert reason == "FloatingPointError: overflow in the chain (in the chain run again)"
    # The record's error names each method, its traceback the chain's (a mutation hunt,
    # h16c: the labels dropped from the error, or no traceback, passed every test).
    assert out["errors"][1]["error"] == f"bb_basic: {reason}; sn: {reason}"
    tracebacks = out["errors"][1]["tracebacks"]
    assert list(tracebacks) == ["bb_basic", "sn"]
    assert all("FloatingPointError: overflow in the chain" in t for t in tracebacks.values())


def test_an_added_methods_task_refuses_a_worker_running_other_code():
    # A worker whose model is not the code the client read computes nothing (a mutation
    # hunt, h16c: the task's unit hashes not passed to its chunks passed every test).
    from ldpsim.pipeline.compute.added_methods import run_methods_task

    point = api.load_sweep(_tables(STORED + ADDED), name="more").points()[0]
    other = {"model:quantile": "0" * 64}
    (out,) = run_methods_task([(point.spec, [0, 1], "key")], ["sn"], 1, other)
    assert isinstance(out, RuntimeError), out
    assert "This worker runs another copy of the model 'quantile'" in str(out)


def test_a_chain_run_again_computes_the_added_methods_only():
    # The stored bb fails at the checkpoint n = 3 in every replicate: the added oracle's
    # chunk records no failure of it, and holds oracle's own values (a mutation hunt,
    # h16c: every method of the spec computed again, bb's failure recorded as the added
    # method's, passed every test).
    from ldpsim.pipeline.compute.added_methods import run_methods_chunk
    from ldpsim.tasks.grid_point import GridPointSetup
    from ldpsim.tasks.replicate import run_replicate

    tables = _tables(STORED)
    tables["spec"]["checkpoints"] = [3, 1000]
    spec = api.load_sweep(tables, name="early").points()[0].spec
    out = run_methods_chunk(spec, [1, 2], ["oracle"], 1, "key")
    assert out["errors"] == {} and not out["failed"].any() and not out["method_failed"].any()
    setup = GridPointSetup.of(spec)
    for i, rep in enumerate([1, 2]):
        whole = run_replicate(setup, rep)
        assert "bb" in whole.failures  # as stored
        assert_same_values(out["lower"][0, i], whole.lower["oracle"], "lower", str(rep))
        assert_same_values(out["upper"][0, i], whole.upper["oracle"], "upper", str(rep))


@pytest.fixture(scope="module")
def added_store(stores, local_cluster, tmp_path_factory) -> Path:
    """The stored store with ADDED computed for its finished replicates."""
    _, made = stores
    folder = tmp_path_factory.mktemp("added-done")
    store = folder / "S.zarr"
    shutil.copytree(made["stored"][0], store)
    sweep = write(folder / "more.toml", sweep_text(STORED + ADDED))
    assert main(["run", str(sweep), "--store", str(store), *scheduler(local_cluster)]) == 0
    return store


def added_seconds_file(store: Path) -> Path:
    """The shard of method_seconds that holds the added methods (past the first file)."""
    files = sorted(p for p in (store / "method_seconds" / "c").rglob("*") if p.is_file())
    (file,) = [p for p in files if p.relative_to(store / "method_seconds").parts[3] != "0"]
    return file


@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_a_damaged_shard_of_an_added_methods_seconds_is_damage_in_every_verb(
    damage, added_store, stores, local_cluster, tmp_path, capsys
):
    # Before: status, summarize, report, plot and run all exited 1 with a traceback
    # (added_methods.pending: "Stored and computed checksum do not match").
    store = tmp_path / "S.zarr"
    shutil.copytree(added_store, store)
    file = added_seconds_file(store)
    data = bytearray(file.read_bytes())
    if damage == "flipped":
        data[20] ^= 0x01
    else:
        data = data[: len(data) // 2]
    file.write_bytes(bytes(data))
    key = file.relative_to(store).as_posix()
    before = tree_hash(store)
    capsys.readouterr()
    assert main(["status", str(store)]) == 4
    status = capsys.readouterr()
    assert "Traceback" not in status.err and key in status.out.splitlines()[0]
    for args in (
        ["summarize", str(store)],
        ["report", str(store), "--out", str(tmp_path / "r.html")],
        ["plot", str(store), "--out", str(tmp_path / "figures")],
        ["errors", str(store)],
    ):
        code = main(args)
        err = capsys.readouterr().err.splitlines()
        assert code == 4 and len(err) == 1 and "damaged" in err[0], (args, err)
    assert tree_hash(store) == before
    sweep = write(tmp_path / "more.toml", sweep_text(STORED + ADDED))
    assert main(["run", str(sweep), "--store", str(store), *scheduler(local_cluster)]) == 0
    got, want = open_dataset(store).load(), open_dataset(stores[1]["fresh"][0]).load()
    for name in COMPARED:
        assert_same_values(got[name].values, want[name].values, name)
    assert main(["status", str(store)]) == 0


def interrupted_addition(added_store: Path, path: Path) -> Path:
    """A copy of ``added_store`` at ``path`` as a run killed while adding its methods
    leaves it: the added methods of replicates 1-3 of both tau pending (NaN)."""
    shutil.copytree(added_store, path)
    for name in ("lower", "upper", "method_seconds"):
        write_as_a_run(path, name, (slice(None), 0, slice(2, None), slice(1, None)), np.nan)
    return path


def test_an_interrupted_addition_is_incomplete_until_run(added_store, tmp_path, capsys):
    # Before: status "8/8 replicates done, 0 failed", exit 0; summarize --strict exit 0
    # with the added methods' cells n/a and unmarked; errors exit 0.
    store = interrupted_addition(added_store, tmp_path / "S.zarr")
    capsys.readouterr()
    assert main(["status", str(store)]) == 3
    out = capsys.readouterr().out
    for label in ("bb_basic", "sn"):
        assert f"interval method {label} (added to the store) not computed yet for 6" in out
    assert main(["summarize", str(store), "--strict"]) == 1
    captured = capsys.readouterr()
    assert "--strict" in captured.err
    assert "not computed yet (ldpsim run resumes them)" in captured.out
    assert main(["errors", str(store)]) == 3


def test_an_added_method_failed_when_run_again_is_lost_not_also_pending_in_a_summary(
    added_store, tmp_path, capsys
):
    # As a chain that fails when run again leaves it (as in test_a_failed_recompute_...):
    # sn of (tau 0.8, rep 2) failed, no bounds, no method_seconds. The summary counts it
    # lost to a failure, once: a mutation hunt (2026-12, Q3: ~failed dropped from
    # pending_cells) counted it "not computed yet" too, 3 + 1 + 1 of 4 replicates.
    store = tmp_path / "S.zarr"
    shutil.copytree(added_store, store)
    for name in ("lower", "upper", "method_seconds"):
        write_as_a_run(store, name, (1, 0, 3, 2), np.nan)
    write_as_a_run(store, "method_failed", (1, 0, 3, 2), True)
    capsys.readouterr()
    assert main(["summarize", str(store)]) == 0
    out = capsys.readouterr().out
    assert (
        "3 counted, 1 lost to a failure of the replicate or of the method (ldpsim errors "
        "STORE), 0 not computed yet" in out
    ), out


def test_a_deleted_shard_of_an_added_methods_seconds_is_damage(
    added_store, stores, local_cluster, tmp_path, capsys
):
    # Before: the added methods read as pending (status exit 0), their values kept.
    store = tmp_path / "S.zarr"
    shutil.copytree(added_store, store)
    file = added_seconds_file(store)
    file.unlink()
    capsys.readouterr()
    assert main(["status", str(store)]) == 4
    assert file.relative_to(store).as_posix() in capsys.readouterr().out.splitlines()[0]
    sweep = write(tmp_path / "more.toml", sweep_text(STORED + ADDED))
    assert main(["run", str(sweep), "--store", str(store), *scheduler(local_cluster)]) == 0
    got, want = open_dataset(store).load(), open_dataset(stores[1]["fresh"][0]).load()
    for name in COMPARED:
        assert_same_values(got[name].values, want[name].values, name)


#: A store's methods with a bm that names neither n_batches nor beta: its batch count is
#: the block count of the sweep's bb (follow_bootstrap), 0.75 while the sweep has no bb.
FOLLOWER = "[methods.bm]\n[methods.sn]\n"


def test_a_bb_that_changes_a_stored_default_bm_is_refused(local_cluster, tmp_path, capsys):
    """A bb of beta 0.85 added beside a stored bm {} made the new replicates' bm follow
    0.85 while the stored ones kept 0.75, one label for two methods (a hunt, 2026-12: 10
    of 60 bm replicates then equalled a fresh sweep's, the 50 stored did not)."""
    store = tmp_path / "S.zarr"
    sweep = write(tmp_path / "bm.toml", sweep_text(FOLLOWER))
    assert main(["run", str(sweep), "--store", str(store), *scheduler(local_cluster)]) == 0
    capsys.readouterr()
    before = tree_hash(store)
    added = FOLLOWER + '[methods.bb]\nform = "basic"\nB = 50\nbeta = 0.85\n'
    more = write(tmp_path / "more.toml", sweep_text(added, replicates=6))
    code = main(["run", str(more), "--store", str(store), *scheduler(local_cluster)])
    one_error_line(
        capsys.readouterr(),
        code,
        ["different specification", "methods.bm", "beta = 0.75 in the store -> beta = 0.85"],
    )
    assert tree_hash(store) == before


def test_a_bb_that_keeps_a_stored_default_bm_is_no_difference():
    from ldpsim.pipeline.store.identity import identity_diff

    stored = api.load_sweep(_tables(FOLLOWER), name="bm")
    same = '[methods.bb]\nform = "basic"\nB = 50\n'  # bb's default beta, 0.75
    other = '[methods.bb]\nform = "basic"\nB = 50\nbeta = 0.85\n'
    named = "[methods.bm]\nn_batches = 10\n[methods.sn]\n"
    assert identity_diff(stored, api.load_sweep(_tables(FOLLOWER + same), name="bm")) == []
    diff = identity_diff(stored, api.load_sweep(_tables(FOLLOWER + other), name="bm"))
    assert diff == [
        "methods.bm: its default n_batches is the block count of the sweep's bb, "
        "beta = 0.75 in the store -> beta = 0.85 with the requested methods"
    ]
    # A bm that names its batches follows no bb.
    fixed = api.load_sweep(_tables(named), name="bm")
    assert identity_diff(fixed, api.load_sweep(_tables(named + other), name="bm")) == []


def test_an_interrupted_addition_is_resumed_by_the_same_sweep(
    added_store, local_cluster, tmp_path, capsys
):
    # A mutation hunt (h13d): a run that found no replicate to compute said "Nothing to
    # do" without looking for added methods still pending; no test noticed.
    store = interrupted_addition(added_store, tmp_path / "S.zarr")
    sweep = write(tmp_path / "more.toml", sweep_text(STORED + ADDED))
    capsys.readouterr()
    assert main(["run", str(sweep), "--store", str(store), *scheduler(local_cluster)]) == 0
    assert "the added methods for 6 finished replicates" in capsys.readouterr().out
    assert main(["status", str(store)]) == 0


def test_pending_added_methods_are_counted_over_the_sweeps_replicates_only(added_store, tmp_path):
    # A mutation hunt (a02): pending_replicates counting past the sweep's replicates
    # (a run of 2 replicates on this store of 4) survived; no test noticed.
    import tomllib

    from ldpsim.pipeline.compute.added_methods import pending_replicates
    from ldpsim.pipeline.store.store import Store

    store = interrupted_addition(added_store, tmp_path / "S.zarr")
    opened = Store(store, stored_layout(store), mode="r")
    counts = {
        replicates: pending_replicates(
            opened,
            api.load_sweep(tomllib.loads(sweep_text(STORED + ADDED, replicates)), name="s"),
        )
        for replicates in (4, 2)
    }
    assert counts == {4: 6, 2: 2}  # rep 1 of each tau only, for the sweep of 2


def test_pending_added_methods_are_refused_on_replicates_of_another_model_code(
    added_store, tmp_path
):
    # A run that adds no method but resumes an interrupted addition runs the chains
    # again as well: refused where their model's code changed since (a mutation hunt,
    # h15b: the pending methods left out of check_chain_code passed every test).
    from ldpsim.pipeline.compute.added_methods import check_chain_code
    from ldpsim.pipeline.errors import InputError
    from ldpsim.pipeline.store.code_identity import sweep_units

    store = interrupted_addition(added_store, tmp_path / "S.zarr")
    sweep = api.load_sweep(_tables(STORED + ADDED), name="more")
    units = sweep_units(sweep)
    generations = json.loads(read_attrs(store)["units"])
    key = "model:quantile"
    old = {**generations[0], key: {**generations[0][key], "source_sha256": "0" * 64}}
    edit_root_attrs(store, units=json.dumps([old, *generations], sort_keys=True))
    before = tree_hash(store)
    with pytest.raises(InputError) as info:
        check_chain_code(store, sweep, [], units)
    message = str(info.value)
    assert "interval methods 'bb_basic', 'sn'" in message and "tau = 0.5" in message
    assert "source 00000000 ->" in message and tree_hash(store) == before
    # Only the pending replicates' chains are run again: rep 0, done for every method,
    # may come from the old code when the pending reps 1-3 come from this run's.
    write_as_a_run(store, "code_version", (slice(None), 0, slice(1, None)), 1)
    check_chain_code(store, sweep, [], units)
    # Nothing pending: nothing runs a chain again, nothing to refuse.
    done = tmp_path / "done.zarr"
    shutil.copytree(added_store, done)
    edit_root_attrs(done, units=json.dumps([old, *generations], sort_keys=True))
    check_chain_code(done, sweep, [], units)
    # A further method added to it runs every chain again: refused (a mutation hunt,
    # h16c: this run's methods left out beside those added before, none pending, passed).
    more = api.load_sweep(_tables(STORED + ADDED + "[methods.bm]\n"), name="more")
    with pytest.raises(InputError, match="interval method 'bm' to the finished replicates"):
        check_chain_code(done, more, ["bm"], sweep_units(more))


def test_lost_added_method_tasks_are_not_counted_as_computed(
    stores, local_cluster, tmp_path, monkeypatch
):
    # A task of added methods lost (its result an exception): its replicates' added
    # methods are recorded as failed and stay pending; they are not "computed".
    import ldpsim.pipeline.compute.collect as collect_module
    from ldpsim.pipeline.compute.collect import Collector
    from ldpsim.pipeline.compute.runner import run_sweep
    from ldpsim.pipeline.compute.task_keys import KEY_SUFFIX
    from ldpsim.pipeline.sweep import load_sweep

    def collect(futures, client, tick=None):
        real = Collector(futures, client, tick)

        class Lost:
            def __iter__(self):
                for item in real:
                    if item is not None and f"{KEY_SUFFIX}-x" in item[0].key:
                        item = (item[0], RuntimeError("lost"))
                    yield item

            drain, close = real.drain, real.close

        return Lost()

    monkeypatch.setattr(collect_module, "collect", collect)
    _, made = stores
    store = tmp_path / "S.zarr"
    shutil.copytree(made["stored"][0], store)
    sweep = load_sweep(write(tmp_path / "more.toml", sweep_text(STORED + ADDED)))
    report = run_sweep(
        sweep, store, scheduler=local_cluster.scheduler_address, log=lambda line: None
    )
    assert report.methods_computed == 0 and report.missing == 8


def test_a_run_adding_methods_whose_lock_was_taken_over_writes_none_of_them(
    stores, local_cluster, tmp_path, monkeypatch
):
    # As test_lock's test of a run computing replicates, for a run that only adds
    # methods: before its first write it finds the lock taken over, and writes nothing.
    import os
    import socket

    from ldpsim.pipeline.compute.runner import run_sweep
    from ldpsim.pipeline.errors import RunStopped
    from ldpsim.pipeline.store.lock import LOCK_NAME
    from ldpsim.pipeline.sweep import load_sweep

    monkeypatch.setenv("LDPSIM_WRITE_EVERY", "3600")  # the 4 chunks in one write
    _, made = stores
    store = tmp_path / "S.zarr"
    shutil.copytree(made["stored"][0], store)
    sweep = load_sweep(write(tmp_path / "more.toml", sweep_text(STORED + ADDED)))
    lock_file = store / "ldpsim" / LOCK_NAME
    foreign = {"pid": 99, "hostname": f"not-{socket.gethostname()}", "token": "theirs"}

    def log(line: str) -> None:
        if "replicates to compute" in line:  # the store is locked by the run
            lock_file.unlink()
            lock_file.write_text(json.dumps(foreign))
            os.utime(lock_file)

    with pytest.raises(RunStopped) as stopped:
        run_sweep(sweep, store, scheduler=local_cluster.scheduler_address, log=log)
    message = str(stopped.value)
    assert "without writing its last 4 finished chunks" in message, message
    assert "keeps 0 of the sweep's 8 replicates" in message, message
    assert stopped.value.exit_code == 3 and stopped.value.ended == "stopped (lock lost)"
    added = open_dataset(store)["method_seconds"].isel(method=slice(2, None))
    assert bool(np.isnan(added).all())  # none of the added methods written
    assert json.loads(lock_file.read_text())["token"] == "theirs"


def test_a_replicate_not_done_lacks_no_added_method(tmp_path):
    """A method added to a store whose replicates are not computed yet is pending for
    none of them: each gets it with its run. (Counted over every replicate, not done
    ones only, an addition was reported pending where nothing was finished; a mutation
    hunt, 2026-12-02.)"""
    from ldpsim.pipeline.store.pending import pending_methods
    from ldpsim.pipeline.store.store import Store

    path = tmp_path / "S.zarr"
    Store.open_or_create(path, api.load_sweep(_tables(STORED), name="made"))
    _, changes = Store.open_or_create(path, api.load_sweep(_tables(STORED + ADDED), name="more"))
    assert list(changes.methods_added) == ["bb_basic", "sn"]
    assert pending_methods(path) == {}


def test_a_store_grown_by_a_method_records_its_code_in_the_same_commit(tmp_path):
    """The units attribute of a store grown by sn names sn's code, as a store made with
    it does, and a run of the grown sweep has nothing more to record (a mutation hunt,
    h17c: an extension that left the attribute as it was passed every test)."""
    from ldpsim.pipeline.store.code_identity import UNITS_ATTR, plan_units
    from ldpsim.pipeline.store.reading import read_attrs
    from ldpsim.pipeline.store.store import Store

    path, fresh = tmp_path / "S.zarr", tmp_path / "fresh.zarr"
    grown = api.load_sweep(_tables(STORED + ADDED), name="more")
    Store.open_or_create(path, api.load_sweep(_tables(STORED), name="made"))
    assert "method:sn" not in json.loads(read_attrs(path)[UNITS_ATTR])[-1]
    Store.open_or_create(path, grown)
    Store.open_or_create(fresh, grown)
    (generation,) = json.loads(read_attrs(path)[UNITS_ATTR])
    assert generation == json.loads(read_attrs(fresh)[UNITS_ATTR])[-1]
    assert "method:sn" in generation
    assert not plan_units(path, read_attrs(path), grown, False).write


def test_replay_compares_only_what_the_store_holds_of_a_replicate(
    stores, local_cluster, tmp_path, capsys
):
    """Replay compares a replicate with the added methods it holds and leaves out each
    one still pending, the first added included; a replicate not done is not compared.
    (Compared with their NaN, or counted from the second added method on, they read as
    differences; a replicate not done read as one that differs; a mutation hunt,
    2026-12-02.)"""
    _, made = stores
    store = tmp_path / "S.zarr"
    shutil.copytree(made["stored"][0], store)
    with _client(local_cluster) as c:
        api.run(api.load_sweep(_tables(STORED + ADDED), name="more"), store, client=c)
    capsys.readouterr()
    # As runs stopped half-way leave them: tau 0.8, rep 3 lacks sn, rep 1 both added.
    for name in ("lower", "upper", "method_seconds"):
        write_as_a_run(store, name, (1, 0, 3, 3), np.nan)
        write_as_a_run(store, name, (1, 0, slice(2, None), 1), np.nan)
    assert not find_damage(store)
    api.replay(store, rep=3, point={"tau": "0.8"})
    line = capsys.readouterr().out.splitlines()[-1]
    assert line == (
        "Equal to the store, bit for bit: the estimate, the last iterate, the projected "
        "estimate, the bounds, estimate and failure flag of bb, oracle, bb_basic (sn: "
        "added to the store and not computed for this replicate yet, so not compared)."
    )
    api.replay(store, rep=1, point={"tau": "0.8"})
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("Equal to the store, bit for bit: ") and line.endswith(
        "of bb, oracle (bb_basic, sn: added to the store and not computed for this "
        "replicate yet, so not compared)."
    )
    write_as_a_run(store, "done", (1, 0, 2), False)  # as before its run wrote it
    api.replay(store, rep=2, point={"tau": "0.8"})
    line = capsys.readouterr().out.splitlines()[-1]
    assert line == (
        "Not compared: the store holds no values of this replicate yet (not computed)."
    )


def test_a_store_has_added_methods_once_methods_are_added(tmp_path):
    # The methods a store was made with are its own, those appended later added (a
    # mutation hunt, h16a: has_added true for every store passed every test).
    from ldpsim.pipeline.store.pending import first_added, has_added
    from ldpsim.pipeline.store.store import Store

    path = tmp_path / "S.zarr"
    store, _ = Store.open_or_create(path, api.load_sweep(_tables(STORED), name="made"))
    assert (first_added(store.arrays), has_added(store.arrays)) == (2, False)
    store, _ = Store.open_or_create(path, api.load_sweep(_tables(STORED + ADDED), name="more"))
    assert (first_added(store.arrays), has_added(store.arrays)) == (2, True)


def test_an_added_method_timed_at_one_checkpoint_is_not_pending():
    # Pending: no method_seconds at any checkpoint. A replicate whose added method has
    # a time at one checkpoint and none at another (computed, not timed there) is not
    # (a mutation hunt, h16a: "at every checkpoint" passed every test).
    import zarr

    from ldpsim.pipeline.store.pending import pending

    group = zarr.open_group(zarr.storage.MemoryStore(), mode="w", zarr_format=3)
    dims = ("n", "method", "rep", "checkpoint")
    lower = group.create_array(
        "lower",
        shape=(1, 3, 3, 2, 1),
        chunks=(1, 2, 3, 2, 1),
        dtype="f8",
        dimension_names=(*dims, "coord"),
    )
    seconds = group.create_array(
        "method_seconds",
        shape=(1, 3, 3, 2),
        chunks=(1, 2, 3, 2),
        dtype="f8",
        fill_value=np.nan,
        dimension_names=dims,
    )
    seconds[0, :, 0, :] = 1.0  # rep 0: every method timed at both checkpoints
    seconds[0, 2, 1, 0] = 1.0  # rep 1: the added method timed at the first only
    done = np.array([[True, True, True]])  # rep 2: the added method not computed
    first, mask = pending({"lower": lower, "method_seconds": seconds}, done)
    assert first == 2
    np.testing.assert_array_equal(mask, [[[False, False, True]]])


def test_pending_cells_are_done_replicates_without_time_bounds_or_failure():
    # pending_cells on a store of one method, two checkpoints, one coordinate: a
    # replicate per case (a mutation hunt, h16a: each term of the rule could be dropped
    # or turned from "at every checkpoint" to "at any" and pass every test).
    from ldpsim.pipeline.store.pending import pending_cells

    nan = np.nan
    # rep:          0    1    2    3    4    5    6
    seconds = [
        [nan, nan, 1.0, nan, nan, nan, nan],  # checkpoint 0
        [nan, nan, nan, nan, nan, nan, nan],  # checkpoint 1
    ]
    lower = [[nan, 0.1, nan, nan, nan, 0.1, nan], [nan, 0.1, nan, nan, nan, nan, nan]]
    upper = [[nan, 0.2, nan, nan, 0.2, 0.2, nan], [nan, 0.2, nan, nan, 0.2, nan, nan]]
    failed = [[False] * 7, [False, False, False, True, False, False, False]]
    done = [True, True, True, True, True, True, False]
    dims = ("method", "rep", "checkpoint")

    def per_method(values):  # (checkpoint, rep) -> (method, rep, checkpoint)
        return np.asarray(values).T[None]

    ds = xr.Dataset(
        {
            "done": (("rep",), np.array(done)),
            "method_seconds": (dims, per_method(seconds)),
            "lower": ((*dims, "coord"), per_method(lower)[..., None]),
            "upper": ((*dims, "coord"), per_method(upper)[..., None]),
            "method_failed": (dims, per_method(failed)),
        }
    )
    pending = pending_cells(ds)
    assert set(pending.dims) == {"method", "rep"}
    # 0: nothing written. 1: bounds without a time (a method of a store made before
    # method_seconds). 2: timed at one checkpoint. 3: failed at one. 4: an upper bound
    # only. 5: bounds at one checkpoint. 6: not done.
    np.testing.assert_array_equal(pending.transpose("method", "rep"), [[True] + [False] * 6])
    without_seconds = pending_cells(ds.drop_vars("method_seconds"))
    assert not without_seconds.values.any()


#: mean at d = 1 and d = 3 with two checkpoints: the store's d is 3, the grid point
#: d = 1 padded with NaN, and the checkpoint count (2) is neither d.
DIMENSIONS = (
    'replicates = 2\nseed = 5\nrep_chunk = 2\n[spec]\nmodel = "mean"\neps = 1.0\nn = 1000\n'
    "checkpoints = [500, 1000]\n[grid]\nd = [1, 3]\n[methods.oracle]\n"
)


def test_a_method_added_to_a_store_of_several_dimensions_equals_a_fresh_sweep(
    local_cluster, tmp_path, capsys
):
    # A mutation hunt (h16c): the added methods' chunks shaped for d = 1, or replay
    # slicing the values by the checkpoint count instead of d, passed every test (every
    # store of these tests had d = 1).
    stored, fresh = tmp_path / "S.zarr", tmp_path / "F.zarr"
    for path, added in ((stored, ""), (fresh, "[methods.sn]\n"), (stored, "[methods.sn]\n")):
        sweep = write(tmp_path / "d.toml", DIMENSIONS + added)
        assert main(["run", str(sweep), "--store", str(path), *scheduler(local_cluster)]) == 0
    got, want = open_dataset(stored).load(), open_dataset(fresh).load()
    assert got.sizes["coord"] == 3 and list(got["method"].values) == ["oracle", "sn"]
    for name in COMPARED:
        assert_same_values(got[name].values, want[name].values, name)
    capsys.readouterr()
    for d in ("1", "3"):
        api.replay(stored, rep=1, point={"d": d})
        line = capsys.readouterr().out.splitlines()[-1]
        assert line.startswith("Equal to the store, bit for bit: ") and "oracle, sn." in line


def test_added_methods_of_chunks_that_share_a_task_are_all_computed(local_cluster, tmp_path):
    # Chunks of little work share a task (plan.group_tasks): those of n = 200 here, two
    # to a task. A mutation hunt (h16c): a task given its first chunk only passed every
    # test, whose tasks each had one chunk.
    from ldpsim.pipeline.store.pending import pending_methods

    text = (
        'replicates = 4\nseed = 3\nrep_chunk = 1\n[spec]\nmodel = "quantile"\neps = 1.0\n'
        "[grid]\nn = [200, 20000]\n[methods.oracle]\n"
    )
    store = tmp_path / "S.zarr"
    for added in ("", "[methods.sn]\n"):
        sweep = write(tmp_path / "g.toml", text + added)
        assert main(["run", str(sweep), "--store", str(store), *scheduler(local_cluster)]) == 0
    assert read_runs(store)[-1]["methods_computed"] == 8 and pending_methods(store) == {}
    assert bool(np.isfinite(open_dataset(store)["method_seconds"]).all())


def _grown_store(folder: Path):
    """A store of STORED with replicates 0 and 1 of grid point (0, 0) done, grown by
    ADDED (two checkpoints); the added methods' real results for those replicates."""
    from ldpsim.pipeline.compute.added_methods import run_methods_chunk
    from ldpsim.pipeline.compute.worker import run_chunk
    from ldpsim.pipeline.store.store import Store

    def sweep(methods):
        tables = _tables(methods)
        tables["spec"]["checkpoints"] = [500, 1000]
        return api.load_sweep(tables, name="grown")

    path = folder / "S.zarr"
    store, _ = Store.open_or_create(path, sweep(STORED))
    point = sweep(STORED).points()[0]
    assert point.index == (0, 0)
    result = run_chunk(point.spec, [0, 1], store.layout.methods, store.layout.d, "in-process")
    store.write_chunk((0, 0), 0, result)
    store, changes = Store.open_or_create(path, sweep(STORED + ADDED))
    assert list(changes.methods_added) == ["bb_basic", "sn"]
    labels = ["bb_basic", "sn"]
    point = sweep(STORED + ADDED).points()[0]
    added = run_methods_chunk(point.spec, [0, 1], labels, store.layout.d, "key")
    assert not added["errors"] and np.isfinite(added["method_seconds"]).all()
    return store, added


def test_writing_added_methods_keeps_the_cells_already_held(tmp_path):
    # sn of replicate 0 is held already, timed at the first checkpoint only: its values
    # stay; every other added cell gets the result's, per checkpoint (a mutation hunt,
    # h17c: a cell held only where timed at every checkpoint, or the failure flags
    # collapsed over the checkpoints, passed every test).
    from ldpsim.pipeline.store.reading import open_dataset

    store, added = _grown_store(tmp_path)
    sn = (0, 0, 3, 0)  # (tau, n, method, rep)
    for name, value in (("lower", 7.0), ("upper", 8.0), ("method_estimate", 7.5)):
        write_as_a_run(store.path, name, sn, value)
    write_as_a_run(store.path, "method_seconds", (*sn, 0), 1.0)
    added["method_failed"][0, 1] = [True, False]  # bb_basic of rep 1 failed at n = 500 only
    before = open_dataset(store.path).load()
    store.write_methods([((0, 0), 0, added)], 2)
    after = open_dataset(store.path).load()
    for name in ("lower", "upper", "method_estimate", "method_failed", "method_seconds"):
        got = after[name].isel(tau=0, n=0)
        for method, rep in np.ndindex(4, 2):
            cell = got.isel(method=method, rep=rep).values
            if method < 2 or (method, rep) == (3, 0):  # a stored method, or held
                want = before[name].isel(tau=0, n=0, method=method, rep=rep).values
            else:
                want = added[name][method - 2, rep]
            assert_same_values(cell, want, name, f"{method, rep}")
    assert after["lower"].isel(tau=0, n=0, method=3, rep=0).values.tolist() == [[7.0], [7.0]]


def test_writing_added_methods_merges_their_failures_into_the_records(tmp_path):
    # Replicate 0 holds a record of the stored bb, and its sn is held already; replicate
    # 1 holds an unreadable record. The result's failures of bb_basic and sn: replicate
    # 0's record gets bb_basic's (not sn's: held) beside bb's, with the new failure's
    # time; replicate 1's is replaced by the new one. A failure of a held method is never
    # recorded, and the entry of a method written now without failing is removed (a
    # mutation hunt, h17c: the methods' join, the filter of held methods, the kept
    # entries of other methods, the fields of a failure of held methods only, or an
    # unreadable record raising passed every test).
    from ldpsim.pipeline.store.layout import META_GROUP

    store, added = _grown_store(tmp_path)
    write_as_a_run(store.path, "method_seconds", (0, 0, 3, 0), 1.0)  # sn of rep 0 held
    folder = store.path / META_GROUP / "errors"
    folder.mkdir(parents=True, exist_ok=True)
    stored = {"kind": "method", "rep": 0, "error": "bb: old", "methods": {"bb": "old"}}
    stored |= {"tracebacks": {"bb": "tb"}, "time": "t0"}
    (folder / "0_0__0.json").write_text(json.dumps(stored))
    (folder / "0_0__1.json").write_text("{not json")

    def failure(rep, methods, time):
        error = "; ".join(f"{k}: {v}" for k, v in methods.items())
        tracebacks = {k: f"tb of {k}" for k in methods}
        return {"kind": "method", "rep": rep, "error": error, "methods": methods} | {
            "tracebacks": tracebacks,
            "time": time,
        }

    both = {"bb_basic": "boom", "sn": "bang"}
    added["errors"] = {rep: failure(rep, both, "t1") for rep in (0, 1)}
    store.write_methods([((0, 0), 0, added)], 2)
    records = {r["rep"]: r for r in iter_errors(store.path)}
    assert set(records) == {0, 1}
    assert records[0] == {
        "kind": "method",
        "rep": 0,
        "error": "bb: old; bb_basic: boom",
        "methods": {"bb": "old", "bb_basic": "boom"},
        "tracebacks": {"bb": "tb", "bb_basic": "tb of bb_basic"},
        "time": "t1",
    }
    assert records[1] == failure(1, both, "t1")
    # sn of rep 1 pending again, and run without failing; bb_basic, held, failed this
    # time: the record keeps bb_basic's first failure, and loses sn's entry.
    write_as_a_run(store.path, "method_seconds", (0, 0, 3, 1), np.nan)
    added["errors"] = {1: failure(1, {"bb_basic": "late"}, "t2")}
    store.write_methods([((0, 0), 0, added)], 2)
    records = {r["rep"]: r for r in iter_errors(store.path)}
    assert records[1] == failure(1, {"bb_basic": "boom"}, "t1")
    # A record of sn alone, written now without failing: removed.
    (folder / "0_0__0.json").write_text(json.dumps({**stored, "methods": {"sn": "x"}}))
    write_as_a_run(store.path, "method_seconds", (0, 0, 3, 0), np.nan)
    added["errors"] = {}
    store.write_methods([((0, 0), 0, added)], 2)
    assert {r["rep"] for r in iter_errors(store.path)} == {1}
