"""Each data file bound to its array and place (pipeline/store/digests.py, issue 40 item 1).

Before, a chunk's CRC-32C covered its own bytes only: ``lower`` and ``upper`` swapped in
a finished store gave bb coverage 0.000 and a negative length, with ``status`` at
"160/160 replicates done", exit 0, and ``run`` with nothing to do.
"""

from __future__ import annotations

import itertools
import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import DEMO_ARGS, scheduler, tree_hash

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.errors import StoreDamage
from ldpsim.pipeline.store import digests
from ldpsim.pipeline.store.damage import find_damage, repair
from ldpsim.pipeline.store.reading import load_dataset, open_arrays
from ldpsim.pipeline.store.store import Store
from ldpsim.pipeline.sweep import load_sweep

EXIT_DAMAGED = 4
#: What a recomputation gives again bit for bit (not the timings, nor the job id).
VALUES = ("estimate", "last", "lower", "upper", "method_estimate", "method_failed", "done")


def files_by_shape(store: Path) -> dict[tuple, list[tuple[str, str | None]]]:
    """Per file shape (and dimension count): each array's one file place, or None."""
    out: dict[tuple, list[tuple[str, str | None]]] = {}
    for name, array in open_arrays(store).items():
        places = sorted(digests.array_files(store, name, array.ndim))
        assert len(places) <= 1, (name, places)  # the demo store: one file per array
        key = (len(array.shape), digests.file_shape(array))
        out.setdefault(key, []).append((name, places[0] if places else None))
    return out


def swapped_pairs(store: Path) -> list[tuple[str, str]]:
    """Every pair of places of two arrays with equal file shapes, at least one holding a
    file (the other's place: its own file's key, or the key it would have)."""
    pairs = []
    for members in files_by_shape(store).values():
        for (a, file_a), (b, file_b) in itertools.combinations(members, 2):
            if file_a is None and file_b is None:
                continue
            key = (file_a or file_b).split("/", 1)[1]  # the same chunk key in both
            pairs.append((f"{a}/{key}", f"{b}/{key}"))
    return pairs


def exchange(store: Path, first: str, second: str) -> None:
    """Swap the files at two places (a file and an empty place: the file moves)."""
    a, b, spare = store / first, store / second, store / "swap.tmp"
    if a.exists():
        a.rename(spare)
    if b.exists():
        a.parent.mkdir(parents=True, exist_ok=True)
        b.rename(a)
    if spare.exists():
        b.parent.mkdir(parents=True, exist_ok=True)
        spare.rename(b)


def test_the_demo_store_has_equal_shaped_files_of_every_kind(demo_store):
    pairs = swapped_pairs(demo_store)
    arrays = {place.split("/", 1)[0] for pair in pairs for place in pair}
    # Every array of the store is in some pair but 'method' (no other array of 4 labels).
    assert arrays == set(open_arrays(demo_store)) - {"method"}, arrays
    assert ("lower/c/0/0/0/0/0", "upper/c/0/0/0/0/0") in pairs


def rounds(pairs: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The pairs in rounds of pairs with no array in common (greedily): the swaps of a
    round can be made in one store and repaired by one run."""
    out: list[list[tuple[str, str]]] = []
    for pair in pairs:
        arrays = {place.split("/", 1)[0] for place in pair}
        for members in out:
            if not arrays & {place.split("/", 1)[0] for p in members for place in p}:
                members.append(pair)
                break
        else:
            out.append([pair])
    return out


def test_every_swap_of_equal_shaped_files_is_damage_that_run_repairs(
    demo_store, local_cluster, tmp_path, capsys
):
    reference = load_dataset(demo_store)
    store = tmp_path / "S.zarr"
    pairs = swapped_pairs(demo_store)
    assert len(pairs) >= 15, pairs
    for pair in pairs:  # each swap alone: every reader refuses the store, unchanged
        shutil.rmtree(store, ignore_errors=True)
        shutil.copytree(demo_store, store)
        exchange(store, *pair)
        before = tree_hash(store)
        capsys.readouterr()
        assert main(["status", str(store)]) == EXIT_DAMAGED, pair
        line = capsys.readouterr().out.splitlines()[0]
        assert "damaged" in line, (pair, line)
        report = tmp_path / "report.html"
        readers = (
            ["summarize", str(store)],
            ["report", str(store), "--out", str(report)],
            ["errors", str(store)],  # a hunt (2026-12-01): it said "No failures recorded"
        )
        for args in readers:
            assert main(args) == EXIT_DAMAGED, (args, pair)
            err = capsys.readouterr().err.splitlines()
            assert len(err) == 1 and "damaged" in err[0], (args, pair, err)
        assert not report.exists()
        assert tree_hash(store) == before
    for swaps in rounds(pairs):  # the swaps of a round at once: one run repairs them all
        shutil.rmtree(store, ignore_errors=True)
        shutil.copytree(demo_store, store)
        for pair in swaps:
            exchange(store, *pair)
        code = main(["run", *DEMO_ARGS, "--store", str(store), *scheduler(local_cluster)])
        out = capsys.readouterr().out
        assert code == 0 and "damaged" in out, (swaps, out)
        assert not find_damage(store, verify=True), swaps
        repaired = load_dataset(store)
        for name in (*VALUES, "truth", "pseudo_truth", "tau", "n", "rep", "coord", "method"):
            np.testing.assert_array_equal(
                repaired[name].values, reference[name].values, err_msg=f"{name} {swaps}"
            )


def _killed_while_writing_lower(store: Path) -> None:
    """``lower`` rewritten whole with one value changed, the run killed after the file
    was written and before its digests were recorded (its manifest names it in flight)."""
    lower = zarr.open_array(str(store / "lower"), mode="r+")
    values = np.asarray(lower[...])
    values[0, 0, 0, 0, 0] += 1.0
    region = (slice(None),) * values.ndim
    with pytest.raises(KeyboardInterrupt):
        with digests.writing(store, [digests.Write("lower", lower, region, values)]):
            lower[...] = values
            raise KeyboardInterrupt


def test_an_interrupted_write_reads_whole_and_is_settled(demo_store, tmp_path):
    """A run killed between a file and its manifest: readers verify the regions it
    recorded, the next run settles them; another file in that place is damage."""
    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    _killed_while_writing_lower(store)
    manifest = json.loads((store / "ldpsim/digests/block-0-0-0.json").read_text())
    assert "lower/c/0/0/0/0/0" in manifest["writing"]
    assert not find_damage(store)  # the file holds what the write recorded
    assert digests.settle(store, open_arrays(store)) == 1
    manifest = json.loads((store / "ldpsim/digests/block-0-0-0.json").read_text())
    assert "writing" not in manifest
    assert not find_damage(store)

    # The same interruption, then the file swapped with upper's: damage.
    _killed_while_writing_lower(store)
    exchange(store, "lower/c/0/0/0/0/0", "upper/c/0/0/0/0/0")
    damage = find_damage(store)
    assert set(damage.corrupt) == {"lower/c/0/0/0/0/0", "upper/c/0/0/0/0/0"}
    assert digests.settle(store, open_arrays(store)) == 0  # left for the repair


def test_an_interrupted_write_whose_file_no_longer_decodes_is_damage(demo_store, tmp_path):
    # A file that a killed write recorded in flight is accepted only when its regions
    # decode to the recorded values: one whose checksum fails to decode is damage (a
    # mutant that took a decoding error for a match read it as whole).
    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    _killed_while_writing_lower(store)
    data = store / "lower/c/0/0/0/0/0"
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 3] ^= 0xFF  # inside a chunk: its checksum no longer matches
    data.write_bytes(bytes(raw))
    assert find_damage(store).corrupt == ("lower/c/0/0/0/0/0",)
    assert digests.settle(store, open_arrays(store)) == 0  # left for the repair


def test_a_repaired_store_reads_whole_before_the_run_rewrites_it(demo_store, tmp_path):
    # The repair records the files it deletes as absent: a run stopped right after it
    # leaves a store that reads as whole (its replicates not done), not damage again
    # (a mutant that left the manifests unwritten survived every other test).
    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    exchange(store, "lower/c/0/0/0/0/0", "upper/c/0/0/0/0/0")
    damage = find_damage(store)
    assert set(damage.corrupt) == {"lower/c/0/0/0/0/0", "upper/c/0/0/0/0/0"}
    repair(store, damage)
    assert not (store / "lower/c/0/0/0/0/0").exists()
    assert not find_damage(store)


def test_a_manifest_that_does_not_parse_is_damage(demo_store, tmp_path, capsys):
    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    (store / "ldpsim/digests/block-0-0-0.json").write_text("{not json")
    damage = find_damage(store)
    assert damage.manifests == ("block-0-0-0.json",)
    # Every file it vouched for counts as corrupt: what they hold is not vouched for.
    assert "lower/c/0/0/0/0/0" in damage.corrupt and damage.replicates.all()
    assert main(["summarize", str(store)]) == EXIT_DAMAGED
    assert "digest file(s) cannot be read" in capsys.readouterr().err


def test_errors_refuses_a_changed_byte_in_a_file_it_does_not_read(demo_store, tmp_path, capsys):
    # A hunt (2026-12-01): `ldpsim errors` reads only the outcome flags, and said "No
    # failures recorded" (exit 0) of a store whose estimate file had a changed byte.
    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    data = next(
        p for p in sorted((store / "estimate").rglob("*")) if p.name != "zarr.json" and p.is_file()
    )
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 3] ^= 0xFF  # inside the first chunk: its checksum no longer matches
    data.write_bytes(bytes(raw))
    before = tree_hash(store)
    capsys.readouterr()
    assert main(["errors", str(store)]) == EXIT_DAMAGED
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "damaged" in err[0] and "estimate" in err[0], err
    assert tree_hash(store) == before


def test_a_shard_index_listing_an_empty_chunk_at_offset_zero_is_damage(demo_store, tmp_path):
    # A shard index whose entry says a chunk of 0 bytes at offset 0 (a zeroed index, a
    # bad copy) lists no readable chunk: the file is corrupt, found without decoding it
    # (a mutation hunt, 2026-12: "nbytes < 4 and offset + nbytes > size" passed every
    # test, and `ldpsim status` died in a traceback seeking before the file's start).
    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    lower = zarr.open_array(str(store / "lower"), mode="r")
    assert lower.shards is not None and digests._index_at_end(lower)
    data = store / "lower/c/0/0/0/0/0"
    raw = bytearray(data.read_bytes())
    chunks = int(np.prod([s // c for s, c in zip(lower.shards, lower.chunks, strict=True)]))
    struct.pack_into("<QQ", raw, len(raw) - (16 * chunks + 4), 0, 0)  # the first entry
    data.write_bytes(bytes(raw))
    assert digests.fingerprint(data, lower).startswith(b"bad index:")
    assert find_damage(store, verify=False).corrupt == ("lower/c/0/0/0/0/0",)


def test_a_repair_records_missing_files_and_unreadable_manifests(demo_store, tmp_path):
    # As for the files it deletes: a run stopped right after its repair leaves a store
    # that reads as whole (its replicates not done), whether a data file was missing or
    # a manifest unreadable; not damage again (a mutation hunt, 2026-12: a repair that
    # left the missing files recorded, or the unreadable manifest in place, passed).
    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    (store / "lower/c/0/0/0/0/0").unlink()
    damage = find_damage(store)
    assert damage.missing == ("lower/c/0/0/0/0/0",) and damage.replicates.all()
    repair(store, damage)
    assert not find_damage(store)
    assert not load_dataset(store)["done"].values.any()

    shutil.rmtree(store)
    shutil.copytree(demo_store, store)
    (store / "ldpsim/digests/block-0-0-0.json").write_text("{not json")
    damage = find_damage(store)
    assert damage.manifests == ("block-0-0-0.json",)
    repair(store, damage)
    assert json.loads((store / "ldpsim/digests/block-0-0-0.json").read_text()) == {"files": {}}
    assert not find_damage(store)


def test_a_file_a_writer_is_still_writing_is_not_a_store_file(demo_store, tmp_path):
    # zarr's and ldpsim's temporary files beside a store's files (a run writing, or one
    # killed) are neither damage nor a file the digests record.
    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    for suffix in digests.TEMPORARY:
        shutil.copy(store / "lower/c/0/0/0/0/0", store / f"lower/c/0/0/0/0/1{suffix}")
    assert digests.array_files(store, "lower", 5) == {"lower/c/0/0/0/0/0"}
    assert not find_damage(store, verify=False)


@pytest.mark.parametrize("text", ["{}", '{"files": [1]}', '{"writing": {}}'])
def test_a_manifest_without_its_files_object_is_damage(demo_store, tmp_path, capsys, text):
    # JSON, but no manifest: named as damage in one line, not a KeyError's traceback (a
    # mutation hunt, 2026-12: a read that checked only for a JSON object passed).
    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    (store / "ldpsim/digests/block-0-0-0.json").write_text(text)
    assert find_damage(store, verify=False).manifests == ("block-0-0-0.json",)
    capsys.readouterr()
    assert main(["status", str(store)]) == EXIT_DAMAGED
    assert "digest file(s) cannot be read (ldpsim/digests/block-0-0-0.json)" in (
        capsys.readouterr().out
    )


def test_a_region_is_split_at_the_bounds_of_its_files():
    # A region written across files is recorded per file, each part within its file
    # (a mutation hunt, 2026-12: a part running to the region's end, past its file's,
    # passed every test: a run writes one file per region).
    parts = list(digests.split_by_file((slice(1, 7), slice(0, 2)), (4, 2)))
    assert parts == [
        ((0, 0), (slice(1, 4), slice(0, 2)), (slice(0, 3), slice(0, 2))),
        ((1, 0), (slice(4, 7), slice(0, 2)), (slice(3, 6), slice(0, 2))),
    ]
    assert list(digests.split_by_file((slice(4, 6),), (4,))) == [
        ((1,), (slice(4, 6),), (slice(0, 2),))
    ]


def test_a_folder_in_place_of_a_data_file_is_damage_not_a_traceback(demo_store, tmp_path, capsys):
    # A hunt (2026-12, h16b): `ldpsim status` of a store whose lower file had become a
    # folder (a sync tool, a hand edit) died in an IsADirectoryError traceback, exit 1.
    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    (store / "lower/c/0/0/0/0/0").unlink()
    (store / "lower/c/0/0/0/0/0").mkdir()
    assert find_damage(store, verify=False).missing == ("lower/c/0/0/0/0/0",)
    capsys.readouterr()
    assert main(["status", str(store)]) == EXIT_DAMAGED
    out = capsys.readouterr().out.splitlines()
    assert "damaged: 1 data file(s) missing (lower/c/0/0/0/0/0)" in out[0], out
    assert main(["summarize", str(store)]) == EXIT_DAMAGED
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "damaged" in err[0], err


def test_a_folder_where_a_missing_file_belongs_is_removed_when_empty_else_refused(
    demo_store, tmp_path
):
    # The same hunt: after `status` said "`ldpsim run` recomputes them", the run cleared
    # the replicates' done flags and then died writing the file (IsADirectoryError),
    # exit 1. An empty folder there is now removed by the repair; one with files in it
    # is refused before anything is changed.
    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    place = store / "lower/c/0/0/0/0/0"
    place.unlink()
    place.mkdir()
    (place / "keep").write_text("mine")
    done_before = zarr.open_array(str(store / "done"), mode="r")[...]
    damage = find_damage(store, verify=False)
    assert done_before.any() and damage.missing == ("lower/c/0/0/0/0/0",)
    with pytest.raises(StoreDamage, match="folder with files in it where the data file 'lower"):
        repair(store, damage)
    assert (place / "keep").read_text() == "mine"
    np.testing.assert_array_equal(zarr.open_array(str(store / "done"), mode="r")[...], done_before)
    (place / "keep").unlink()
    repair(store, find_damage(store, verify=False))
    assert not place.exists()
    assert not zarr.open_array(str(store / "done"), mode="r")[...].any()  # to compute again
    assert not find_damage(store, verify=False)


def test_a_folder_where_a_file_was_never_written_is_damage_and_the_run_repairs_it(
    demo_store, tmp_path, local_cluster, capsys
):
    # Session 17 (2026-12): a folder at the place of a data file that no replicate had
    # written yet (a run stopped before its first write) was no damage to `status`, and
    # `ldpsim run` died writing the file (IsADirectoryError), exit 1. Now it is damage
    # like a finished file's folder (exit 4); the run removes the empty folder and
    # computes what the untouched sweep computes.
    store = tmp_path / "S.zarr"
    Store.open_or_create(store, load_sweep("demo", ["grid.n=[1000]"], replicates=2))
    place = store / "lower/c/0/0/0/0/0"
    assert not place.parent.exists()
    place.mkdir(parents=True)
    (store / "lower/c/0/0/0/0/9").mkdir()  # beyond the array's files: nothing's place
    damage = find_damage(store, verify=False)
    assert damage.missing == ("lower/c/0/0/0/0/0",) and not damage.replicates.any()
    capsys.readouterr()
    assert main(["status", str(store)]) == EXIT_DAMAGED
    assert "1 data file(s) missing (lower/c/0/0/0/0/0)" in capsys.readouterr().out
    assert main(["run", *DEMO_ARGS, "--store", str(store), *scheduler(local_cluster)]) == 0
    assert place.is_file() and not find_damage(store)
    got, want = load_dataset(store), load_dataset(demo_store)
    for name in ("estimate", "lower", "upper", "done", "failed"):
        np.testing.assert_array_equal(got[name].values, want[name].values, name)


def test_files_at_no_chunk_key_are_neither_data_files_nor_damage(demo_store, tmp_path, capsys):
    # The same hunt: a `.DS_Store` (a file browser's), a backup copy or a note anywhere
    # under an array's `c/` folder made `status`, `summarize` and `run` die in a
    # traceback (ValueError: invalid literal for int()), exit 1. Zarr never reads them.
    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    before = digests.array_files(store, "lower", 5)
    for stray in ("lower/c/.DS_Store", "lower/c/0/0/0/0/0.bak", "lower/c/0/notes", "done/c/x"):
        (store / stray).write_text("not zarr's")
    (store / "lower/c/0/0/0/0/0.d/0").mkdir(parents=True)  # digits, one level too deep
    (store / "lower/c/0/0/0/0/0.d/0/0").write_text("")
    (store / "lower/c/0/0/0/0/7").mkdir()
    (store / "lower/c/0/0/0/0/7/0").write_text("")
    assert digests.array_files(store, "lower", 5) == before == {"lower/c/0/0/0/0/0"}
    assert not find_damage(store)
    capsys.readouterr()
    assert main(["status", "--verify", str(store)]) == 0
    assert main(["summarize", str(store)]) == 0


#: What sync tools name their copy of a file ``NAME.json`` they could not merge.
SYNC_COPIES = (
    "{} (conflicted copy 2026-12-02).json",  # Dropbox
    "{}-HOSTNAME.json",  # OneDrive
    "{}.sync-conflict-20261202-123456-ABCDEFG.json",  # Syncthing
    "{} (1).json",  # a browser's download, a file manager's copy
    "._{}.json",  # macOS's AppleDouble file
)


def test_a_sync_tools_copy_of_a_manifest_is_no_manifest(demo_store, tmp_path, capsys):
    # A hunt (h16f): a sync tool's copy of a manifest, older than it (another device's),
    # was merged into the digests, after the manifest itself where its name sorts later
    # (Syncthing's): `status` and every verb called the block's files damaged (exit 4),
    # and each `ldpsim run` recomputed the block's replicates, wrote its digests into
    # the copy too and left the store damaged again, for ever.
    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    manifests = digests.Manifests(store)
    (name,) = [n for n in manifests.names() if "done/c/0/0" in json.dumps(manifests.read(n))]
    stale = manifests.read(name)
    place = next(p for p in stale["files"] if p.startswith("done/"))
    stale["files"][place] = "0" * 32  # the digest of an older file at that place
    for copy in SYNC_COPIES:
        (manifests.folder / copy.format(name.removesuffix(".json"))).write_text(json.dumps(stale))
    assert not find_damage(store, verify=False)
    assert main(["status", str(store)]) == 0, capsys.readouterr()
    assert name in manifests.names() and len(manifests.names()) == 2  # and determined.json
