"""Damaged data of finished replicates: reported (exit 4), refused, and recomputed by run."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import DEMO_ARGS, computed, scheduler, tree_hash, without_digests
from conftest import assert_same_values as assert_same_as_old

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.store.damage import find_damage, repair
from ldpsim.pipeline.store.reading import load_dataset

OLD_LAYOUT = Path(__file__).resolve().parents[1] / "reference" / "old-layout.tar.gz"
VALUES = ("estimate", "last", "lower", "upper", "method_estimate", "method_failed", "done")
EXIT_DAMAGED = 4


def data_file(store: Path, name: str) -> Path:
    """The one data file of ``name`` in a store of one shard per variable."""
    (file,) = (f for f in (store / name / "c").rglob("*") if f.is_file())
    return file


def flip_byte(file: Path, at: int = 20) -> None:
    data = bytearray(file.read_bytes())
    data[at] ^= 0x01
    file.write_bytes(bytes(data))


def assert_damage_reported(store: Path, words: list[str], capsys) -> None:
    """status exits 4 naming the damage; summarize refuses with one line; nothing changes."""
    before = tree_hash(store)
    capsys.readouterr()
    assert main(["status", str(store)]) == EXIT_DAMAGED
    status = capsys.readouterr()
    assert "Traceback" not in status.err
    first = status.out.splitlines()[0]
    for word in ["damaged", "`ldpsim run` recomputes", *words]:
        assert word in first, (word, first)
    assert main(["summarize", str(store)]) == EXIT_DAMAGED
    summary = capsys.readouterr()
    assert summary.out == ""  # no table with the damaged cells shown as n/a
    lines = summary.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ldpsim: error: "), lines
    assert "damaged" in lines[0] and "`ldpsim run` recomputes" in lines[0]
    assert tree_hash(store) == before


def assert_same_values(store: Path, reference: Path, old: bool = False) -> None:
    """Every value of ``store`` equals ``reference``'s bit for bit; ``old``: the
    reference is a store of ldpsim 0.2, whose bounds came from BLAS products (equal to
    the order of a sum, conftest.BLAS_RTOL)."""
    got, want = load_dataset(store), load_dataset(reference)
    for name in VALUES:
        if old:
            assert_same_as_old(got[name].values, want[name].values, name, err_msg=name)
        else:
            np.testing.assert_array_equal(got[name].values, want[name].values, err_msg=name)


@pytest.fixture
def copy_of_demo(demo_store, tmp_path) -> Path:
    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    return store


def run_demo(store: Path, cluster) -> int:
    return main(["run", *DEMO_ARGS, "--store", str(store), *scheduler(cluster)])


def test_a_missing_data_file_is_reported_and_recomputed(
    copy_of_demo, demo_store, local_cluster, cluster_files, capsys
):
    # Before: status exited 0, run had nothing to do, summarize printed n/a for the cells.
    file = data_file(copy_of_demo, "lower")
    file.unlink()
    key = file.relative_to(copy_of_demo).as_posix()
    words = [key, "missing", "they held 4 finished replicate(s)"]  # from the done flags
    assert_damage_reported(copy_of_demo, words, capsys)
    assert run_demo(copy_of_demo, local_cluster) == 0
    out = capsys.readouterr().out
    assert f"damaged: 1 data file(s) missing ({key})" in out
    assert "4 of 4 replicates to compute" in out
    # The store's one shard held all four replicates: all are recomputed, bit for bit.
    assert sorted(computed(cluster_files["compute_log"], copy_of_demo)) == [
        ((0, 0), 0),
        ((0, 0), 1),
        ((1, 0), 0),
        ((1, 0), 1),
    ]
    assert_same_values(copy_of_demo, demo_store)
    assert main(["status", str(copy_of_demo)]) == 0


def test_a_missing_done_file_counts_the_replicates_it_held(
    copy_of_demo, demo_store, local_cluster, capsys
):
    # The hunt: a missing done file was "damaged: 1 data file(s) missing (done/c/0/0/0);
    # they held 0 finished replicate(s)", its flags read as the fill value (not done),
    # while the run recomputed the 4 replicates it held.
    file = data_file(copy_of_demo, "done")
    file.unlink()
    key = file.relative_to(copy_of_demo).as_posix()
    words = [key, "missing", "they held up to 4 finished replicate(s)"]  # flags unknown
    assert_damage_reported(copy_of_demo, words, capsys)
    assert run_demo(copy_of_demo, local_cluster) == 0
    assert "4 of 4 replicates to compute" in capsys.readouterr().out
    assert_same_values(copy_of_demo, demo_store)


def test_a_flipped_byte_fails_its_checksum_and_is_recomputed(
    copy_of_demo, demo_store, local_cluster, capsys
):
    # Before: no checksum; the flipped byte went unnoticed by every verb.
    meta = json.loads((copy_of_demo / "lower" / "zarr.json").read_text())
    inner = meta["codecs"][0]["configuration"]["codecs"]
    assert [codec["name"] for codec in inner] == ["bytes", "zstd", "crc32c"]
    file = data_file(copy_of_demo, "lower")
    flip_byte(file)
    key = file.relative_to(copy_of_demo).as_posix()
    assert_damage_reported(copy_of_demo, [key, "corrupt or out of place"], capsys)
    assert run_demo(copy_of_demo, local_cluster) == 0
    assert f"corrupt or out of place ({key})" in capsys.readouterr().out
    assert_same_values(copy_of_demo, demo_store)
    assert main(["status", str(copy_of_demo)]) == 0


def test_a_garbled_done_file_in_every_verb(copy_of_demo, demo_store, local_cluster, capsys):
    # Before: every verb, run included, refused the store (exit 2: restore it from a copy).
    file = data_file(copy_of_demo, "done")
    file.write_bytes(b"garbage")
    key = file.relative_to(copy_of_demo).as_posix()
    before = tree_hash(copy_of_demo)
    for verb in ("errors", "summarize", "plot", "report"):
        code = main([verb, str(copy_of_demo)])
        lines = capsys.readouterr().err.splitlines()
        assert code == EXIT_DAMAGED, (verb, lines)
        assert len(lines) == 1 and "damaged" in lines[0] and key in lines[0], lines
        assert "`ldpsim run` recomputes" in lines[0]
    assert tree_hash(copy_of_demo) == before
    assert not (copy_of_demo.parent / "S-figures").exists()
    assert run_demo(copy_of_demo, local_cluster) == 0
    assert_same_values(copy_of_demo, demo_store)


def test_an_old_store_recomputes_exactly_the_replicates_of_a_lost_chunk(
    tmp_path, local_cluster, cluster_files, capsys
):
    # A store of ldpsim 0.2 has a file per chunk (a grid point x 2 replicates), no checksum.
    with tarfile.open(OLD_LAYOUT) as archive:
        archive.extractall(tmp_path, filter="data")
    store, sweep = tmp_path / "old.zarr", tmp_path / "old.toml"
    reference = tmp_path / "reference.zarr"
    shutil.copytree(store, reference)
    # tau index 1, replicates 2 (the half-full last chunk); its bounds only.
    (store / "lower" / "c" / "1" / "0" / "1" / "0").unlink()
    assert_damage_reported(store, ["lower/c/1/0/1/0", "1 finished replicate(s)"], capsys)
    address = scheduler(local_cluster)
    assert main(["run", str(sweep), "--store", str(store), *address]) == 0
    assert "1 of 6 replicates to compute" in capsys.readouterr().out
    assert computed(cluster_files["compute_log"], store) == [((1,), 2)]
    assert_same_values(store, reference, old=True)
    assert main(["status", str(store)]) == 0


def test_a_missing_bounds_file_of_a_method_failing_at_early_checkpoints_is_reported(
    local_cluster, tmp_path, capsys
):
    # bm with 20 batches fails at checkpoints 10 and 100 in every replicate and has its
    # bounds at 1000: the bounds file holds finished replicates. In a store without
    # digests (ldpsim of 2026-11-23 to 11-28: method_failed per checkpoint, no digests)
    # only that tells a missing file from one never written. A mutation hunt (2026-12,
    # G2: a method read as bounded only where it failed at no checkpoint) left such a
    # missing file unreported by every test: status exited 1 (bm's failures only).
    sweep = tmp_path / "bm.toml"
    sweep.write_text(
        'replicates = 2\nseed = 11\n[spec]\nmodel = "quantile"\neps = 1.0\nn = 1000\n'
        "checkpoints = [10, 100, 1000]\n[grid]\ntau = [0.5]\n[methods.bm]\nn_batches = 20\n"
    )
    store = tmp_path / "S.zarr"
    code = main(["run", str(sweep), "--store", str(store), *scheduler(local_cluster)])
    assert code == 1  # bm's failures
    failed = load_dataset(store)["method_failed"].values.reshape(2, 3)  # (rep, checkpoint)
    assert failed.tolist() == [[True, True, False]] * 2
    without_digests(store)
    file = data_file(store, "lower")
    file.unlink()
    key = file.relative_to(store).as_posix()
    assert_damage_reported(store, [key, "missing", "they held 2 finished replicate(s)"], capsys)


@pytest.mark.parametrize("name", ["done", "method_seconds"])
def test_a_corrupt_file_of_done_flags_counts_every_replicate_it_covers(copy_of_demo, name):
    # What a corrupt done file (or method_seconds, an added method's done flags) held is
    # unknown: every replicate of its region is counted, "up to" (a mutation hunt,
    # 2026-12-02, h17e: counting only the done flags read, or saying "4" where it means
    # at most 4, passed every test).
    file = data_file(copy_of_demo, name)
    flip_byte(file)
    key = file.relative_to(copy_of_demo).as_posix()
    damage = find_damage(copy_of_demo)
    assert damage.corrupt == (key,) and not damage.missing
    assert int(damage.replicates.sum()) == 4
    assert f"corrupt or out of place ({key}); they held up to 4 finished" in damage.describe()


def test_bounds_that_no_method_wrote_are_not_missing(copy_of_demo):
    # Every interval method failed in every replicate (method_failed all true, as a run
    # writes it): no bounds or estimate file is written, and none is missing. In a store
    # without digests only method_failed tells that from a lost file (a mutation hunt,
    # 2026-12-02, h17e: asking those files of every finished replicate, as the done and
    # seconds files are, passed every test).
    without_digests(copy_of_demo)
    zarr.open_array(str(copy_of_demo / "method_failed"), mode="r+")[...] = True
    for name in ("estimate", "lower", "upper"):
        data_file(copy_of_demo, name).unlink()
    assert not find_damage(copy_of_demo)
    data_file(copy_of_demo, "seconds").unlink()  # written for every finished replicate
    assert find_damage(copy_of_demo).missing == ("seconds/c/0/0/0",)


def test_a_long_list_of_damaged_files_shows_three_and_counts_the_rest(copy_of_demo):
    # (A mutation hunt, 2026-12-02, h17e: a list that ended without "and 1 more" passed.)
    for name in ("upper", "lower", "estimate", "seconds"):
        data_file(copy_of_demo, name).unlink()
    line = find_damage(copy_of_demo).describe()
    assert "4 data file(s) missing (estimate/c/" in line and " and 1 more)" in line, line
    assert "upper/c/" not in line  # the fourth, in order


def test_a_corrupt_done_file_is_found_in_a_store_without_digests(copy_of_demo):
    # Without digests only decoding finds it (a mutation hunt, 2026-12-02, h17e: a done
    # file that failed to decode, dropped from the damage, passed every test: the
    # digests found it in the stores they ran).
    without_digests(copy_of_demo)
    file = data_file(copy_of_demo, "done")
    flip_byte(file)
    key = file.relative_to(copy_of_demo).as_posix()
    for verify in (True, False):
        damage = find_damage(copy_of_demo, verify=verify, recompute=False)
        assert damage.corrupt == (key,) and int(damage.replicates.sum()) == 4, verify


def test_a_repair_of_a_corrupt_done_file_leaves_a_store_that_reads_whole(copy_of_demo):
    # The repair deletes the corrupt done file and records it as absent: until the run
    # computes the replicates again (or if it is stopped first), the store reads as one
    # with nothing done, not as damaged (a mutation hunt, 2026-12-02, h17e: a repair that
    # left the deleted file's digest recorded passed every test).
    file = data_file(copy_of_demo, "done")
    flip_byte(file)
    repair(copy_of_demo, find_damage(copy_of_demo))
    assert not file.exists()
    damage = find_damage(copy_of_demo)
    assert not damage, damage.describe()
    assert not load_dataset(copy_of_demo)["done"].values.any()
