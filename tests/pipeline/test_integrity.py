"""A store's own facts are checked: every array has a checksum, the metadata a recorded
digest, the layout attributes are validated, and the arrays the sweep determines
(coordinates, truths) are recomputed and compared (issue 31's hunt).

Before: one flipped bit in ``truth`` took bb's coverage from 0.750 to 0.000 with every
command at exit 0; a bit of ``"level": 0.9`` made every table read "80% intervals".
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
import sys
import tarfile
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import DEMO_ARGS, edit_root_attrs, one_error_line, tree_hash

from ldpsim.pipeline.cli import EXIT_DAMAGED, main
from ldpsim.pipeline.errors import StoreDamage
from ldpsim.pipeline.store.damage import _determined_by, find_damage, repair
from ldpsim.pipeline.store.integrity import (
    DIGEST_ATTR,
    TRUTH_RTOL,
    check_layout_attrs,
    determined_damage,
    read_root,
)
from ldpsim.pipeline.store.integrity import _same as same_as_determined
from ldpsim.pipeline.store.reading import during_commits, read_sweep
from ldpsim.pipeline.store.store import Store
from ldpsim.pipeline.sweep import load_sweep

#: The arrays a store's sweep determines, and a file of each in the demo store.
DETERMINED = ("truth", "pseudo_truth", "n", "tau", "rep", "method", "coord")
OLD_LAYOUT = Path(__file__).resolve().parents[1] / "reference" / "old-layout.tar.gz"


def _flip(file: Path, byte: int, bit: int = 0) -> None:
    data = bytearray(file.read_bytes())
    data[byte] ^= 1 << bit
    file.write_bytes(bytes(data))


def _codec_names(codecs: list[dict]) -> list[str]:
    """The names of a codec pipeline, those inside a sharding codec's included."""
    names = []
    for codec in codecs:
        names.append(codec["name"])
        names += _codec_names(codec.get("configuration", {}).get("codecs", []))
    return names


def _one_damage_line(capsys, code: int, words: list[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == EXIT_DAMAGED, captured
    assert len(lines) == 1 and "Traceback" not in captured.err, lines
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def test_every_array_of_a_new_store_has_a_checksum(demo_store):
    arrays = [m for m in demo_store.glob("*/zarr.json") if '"array"' in m.read_text()]
    assert {m.parent.name for m in arrays} >= set(DETERMINED) | {"done", "lower"}
    for meta in arrays:
        assert "crc32c" in _codec_names(json.loads(meta.read_text())["codecs"]), meta
    root = json.loads((demo_store / "zarr.json").read_text())
    assert len(root["attributes"][DIGEST_ATTR]) == 64


def _stored_values(store: Path, name: str) -> np.ndarray:
    """The array ``name`` of ``store`` as a reader decodes it."""
    return np.asarray(zarr.open_array(str(store / name), mode="r", zarr_format=3)[...])


def _determined_values(store: Path) -> dict[str, np.ndarray]:
    return {name: _stored_values(store, name) for name in DETERMINED if (store / name).is_dir()}


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal, or for truths within TRUTH_RTOL: a change no coverage can see."""
    if a.dtype.kind == "f":
        return a.shape == b.shape and bool(
            np.allclose(a, b, rtol=TRUTH_RTOL, atol=0.0, equal_nan=True)
        )
    return a.shape == b.shape and [str(v) for v in a.ravel()] == [str(v) for v in b.ravel()]


@pytest.mark.parametrize("kind", ["new", "old-layout"])
def test_no_flipped_bit_changes_a_determined_array_silently(kind, request, tmp_path):
    # Every byte of every file of the determined arrays, one bit flipped (bit byte % 8):
    # the damage check names the array, or the array reads as before (a bit no decoder
    # uses; a truth's low mantissa bits, within TRUTH_RTOL). A new store's CRC-32C
    # finds every flip; a store made before it (the old layout's archive, plain zstd)
    # is caught by the recomputation. The check judges each array by its own files
    # (their digests and checksums, its recomputation from the sweep's attribute), so
    # one check is made per round in which every array has one byte of its files
    # flipped, and nothing but the arrays flipped in the round may be named: the same
    # flips in 45 checks instead of 203 for the new store, 41 instead of 120 for the old
    # layout (measured 2026-11-30: 13 CPU-seconds to 2.5 for the new store, 13.5 to 10
    # for the old layout, where one flip takes 8: bit 4 of byte 12 of method's file
    # makes its count of strings 2**28 + 4, and the decoder fills a 2 GB array first).
    if kind == "new":
        demo_store = request.getfixturevalue("demo_store")
        store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    else:
        with tarfile.open(OLD_LAYOUT) as archive:
            archive.extractall(tmp_path, filter="data")
        store = tmp_path / "old.zarr"
    original = _determined_values(store)
    assert not find_damage(store, verify=False)
    # Per array, every (file, byte) of its files: round i flips the i-th of each array.
    places = {
        name: [
            (file, byte)
            for file in sorted(p for p in (store / name / "c").rglob("*") if p.is_file())
            for byte in range(file.stat().st_size)
        ]
        for name in original
    }
    pristine = {file: file.read_bytes() for name in places for file, _ in places[name]}
    flips = found = 0
    for places_of_round in itertools.zip_longest(*places.values()):
        flipped = {name: at for name, at in zip(places, places_of_round, strict=True) if at}
        for file, byte in flipped.values():
            _flip(file, byte, bit=byte % 8)
        damage = find_damage(store, verify=False)
        where = {name: (str(file), byte) for name, (file, byte) in flipped.items()}
        assert set(damage.determined) <= set(flipped), (where, damage.describe())
        assert not dataclasses.replace(damage, determined=()), where  # nothing else
        for name, (file, byte) in flipped.items():
            if name in damage.determined:
                found += 1
            else:  # then nothing a reader sees changed
                try:
                    now = _stored_values(store, name)
                except Exception as exc:  # a decoder's own error: found above
                    pytest.fail(f"{file} byte {byte}: {exc!r} but no damage found")
                assert _same(now, original[name]), (file, byte)
            flips += 1
        for file, _ in flipped.values():
            file.write_bytes(pristine[file])
    assert flips > 100
    if kind == "new":
        assert found == flips  # the checksum: every bit of every file
    else:
        assert found > flips // 2


def test_a_flipped_count_of_an_old_stores_strings_is_damage_read_before_decoding(tmp_path):
    # Bit 4 of byte 12 of the old layout's method file (no checksum) makes the count its
    # vlen-utf8 chunk declares 2**28 + 4 instead of 4: zarr's decoder allocated for that
    # many strings, 2.1 GB and 8 CPU-seconds, before it failed. The count is read first.
    with tarfile.open(OLD_LAYOUT) as archive:
        archive.extractall(tmp_path, filter="data")
    store = tmp_path / "old.zarr"
    _flip(store / "method" / "c" / "0", 12, bit=4)
    tracemalloc.start()
    try:
        damage = find_damage(store, verify=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert damage.determined == ("method",)
    assert peak < 50e6, f"{peak / 1e6:.0f} MB"


def test_a_flipped_truth_is_damage_that_a_run_repairs(demo_store, local_cluster, tmp_path, capsys):
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    reference = main(["summarize", str(demo_store)]), capsys.readouterr().out
    truth = next(p for p in (store / "truth" / "c").rglob("*") if p.is_file())
    _flip(truth, 19)
    before = tree_hash(store)
    assert main(["status", str(store)]) == EXIT_DAMAGED
    assert "the stored values of truth differ" in capsys.readouterr().out
    for verb in ("summarize", "plot", "report"):
        _one_damage_line(capsys, main([verb, str(store)]), ["truth", "`ldpsim run` writes it"])
    assert tree_hash(store) == before  # nothing stored is changed by a reader
    run = ["run", "demo", "--replicates", "2", "--set", "grid.n=[1000]", "--store", str(store)]
    assert main([*run, "--scheduler", local_cluster.scheduler_address]) == 0
    out = capsys.readouterr().out
    assert "the stored values of truth differ" in out and "0 of 4 replicates" in out
    assert truth.read_bytes() == (demo_store / truth.relative_to(store)).read_bytes()
    assert (main(["summarize", str(store)]), capsys.readouterr().out) == reference


def _level_bit(store: Path) -> None:
    text = (store / "zarr.json").read_bytes()
    at = text.index(b'"level": 0.9') + len(b'"level": 0.')
    _flip(store / "zarr.json", at)  # 0.9 -> 0.8


def _digest_name_bit(store: Path) -> None:
    _flip(store / "zarr.json", (store / "zarr.json").read_bytes().index(DIGEST_ATTR.encode()) + 3)


def _root_not_json(store: Path) -> None:
    (store / "zarr.json").write_bytes((store / "zarr.json").read_bytes()[:-40])


#: JSON nested deeper than Python's recursion limit: the json module raises
#: RecursionError, not ValueError (before: a traceback, exit 1, in every verb).
DEEP_JSON = "[" * 100_000 + "]" * 100_000


def _root_nested(store: Path) -> None:
    text = (store / "zarr.json").read_text()
    (store / "zarr.json").write_text(text.replace('"title":', f'"deep": {DEEP_JSON}, "title":', 1))


def _array_json_nested(store: Path) -> None:
    (store / "lower" / "zarr.json").write_text(DEEP_JSON)


def _sweep_nested(store: Path) -> None:
    edit_root_attrs(store, sweep=DEEP_JSON)  # digest recorded: its meaning is checked


def _array_json_changed(store: Path) -> None:
    meta = json.loads((store / "lower" / "zarr.json").read_text())
    meta["fill_value"] = 0.0  # still valid metadata: its copy in the root says NaN
    (store / "lower" / "zarr.json").write_text(json.dumps(meta))


def _consolidated_copy_changed(store: Path) -> None:
    # The root's copy of lower's metadata, not lower/zarr.json: the root is what changed,
    # and its digest covers that copy (a mutation hunt, 2026-12-02, h17e: a digest of the
    # attributes alone named lower/zarr.json as the damaged file).
    root = json.loads((store / "zarr.json").read_text())
    root["consolidated_metadata"]["metadata"]["lower"]["fill_value"] = 0.0
    (store / "zarr.json").write_text(json.dumps(root, indent=2))


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (_level_bit, ["zarr.json", f"does not match its recorded {DIGEST_ATTR}"]),
        (_digest_name_bit, ["zarr.json", "unknown attribute"]),
        (_root_not_json, ["zarr.json cannot be read (not JSON"]),
        (_array_json_changed, ["lower/zarr.json", "differs from its copy in the root"]),
        (
            _consolidated_copy_changed,
            ["damaged: zarr.json cannot", f"not match its recorded {DIGEST_ATTR}"],
        ),
        (_root_nested, ["zarr.json cannot be read (not JSON", "recursion"]),
        (_array_json_nested, ["lower/zarr.json cannot be read", "recursion"]),
        (_sweep_nested, ["attribute 'sweep' is not JSON", "recursion"]),
    ],
    ids=[
        "level-bit",
        "digest-name-bit",
        "root-not-json",
        "array-json-changed",
        "consolidated-copy-changed",
        "root-nested",
        "array-json-nested",
        "sweep-nested",
    ],
)
def test_damaged_metadata_is_exit_4_in_every_verb(demo_store, tmp_path, capsys, damage, words):
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    damage(store)
    before = tree_hash(store)
    run = ["run", "demo", "--replicates", "2", "--set", "grid.n=[1000]", "--store", str(store)]
    for argv in (["status", str(store)], ["summarize", str(store)], run):
        line = _one_damage_line(capsys, main(argv), words)
        assert "Restore it from a copy" in line
    assert tree_hash(store) == before


def test_records_nested_too_deep_are_one_line_not_a_traceback(
    demo_store, tmp_path, capsys, without_figures
):
    """An error record nested deeper than the recursion limit is damage (exit 4, one
    line naming it, as one that is no JSON); a run record so is shown as unreadable, and
    so are the 'versions' and 'units' attributes. Before: RecursionError, exit 1."""
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    edit_root_attrs(store, versions=DEEP_JSON, units=DEEP_JSON)
    runs = store / "ldpsim" / "runs"
    runs.mkdir(exist_ok=True)
    (runs / "20260101T000000-1.json").write_text(DEEP_JSON)
    assert main(["summarize", str(store)]) == 0
    assert main(["report", str(store), "--out", str(tmp_path / "r.html")]) == 0
    assert "record 20260101T000000-1.json cannot be read" in (tmp_path / "r.html").read_text()
    capsys.readouterr()
    errors = store / "ldpsim" / "errors"
    errors.mkdir(exist_ok=True)
    (errors / "0_0__0.json").write_text(DEEP_JSON)
    for verb in ("status", "summarize", "errors"):
        _one_damage_line(capsys, main([verb, str(store)]), ["errors/0_0__0.json", "recursion"])


@pytest.mark.parametrize("versions", ["[1, 2]", '"x"', "3"])
def test_a_versions_attribute_of_no_object_is_not_recorded_in_the_report(
    demo_store, tmp_path, without_figures, versions
):
    """The 'versions' attribute JSON but no object: the report says "not recorded" for
    it. Before: jinja2's UndefinedError ('list object' has no attribute 'items'), exit 1."""
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    edit_root_attrs(store, versions=versions)
    assert main(["report", str(store), "--out", str(tmp_path / "r.html")]) == 0
    assert "<dt>created with</dt><dd>not recorded</dd>" in (tmp_path / "r.html").read_text()


def test_an_array_stating_a_huge_axis_is_damage_before_any_allocation(
    demo_store, tmp_path, capsys
):
    """done/zarr.json (and its consolidated copy, the digest recorded again) stating
    10**10 replicates where the sweep has 2: one damage line in every reader. Before:
    status and report tried to allocate 37 GiB (numpy's MemoryError, a traceback)."""
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    meta = json.loads((store / "done" / "zarr.json").read_text())
    meta["shape"][-1] = 10**10
    (store / "done" / "zarr.json").write_text(json.dumps(meta))
    root = json.loads((store / "zarr.json").read_text())
    root["consolidated_metadata"]["metadata"]["done"]["shape"] = meta["shape"]
    (store / "zarr.json").write_text(json.dumps(root))
    edit_root_attrs(store)  # the digest of the changed metadata
    words = ["done/zarr.json", "axis 'rep' has 10000000000 entries where the sweep has 2"]
    for verb in ("status", "summarize", "errors", "report"):
        _one_damage_line(capsys, main([verb, str(store)]), words)


def test_a_method_axis_stated_huge_in_every_array_is_damage(demo_store, tmp_path, capsys):
    """The third read (2026-12-01): the axis check capped the grid axes and rep only; a
    method axis of 10**10 stated in every array alike (and their consolidated copies)
    made status allocate 112 GiB. The sweep's methods cap it."""
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    root = json.loads((store / "zarr.json").read_text())
    copies = root["consolidated_metadata"]["metadata"]
    for name, meta in copies.items():
        axes = meta.get("dimension_names") or []
        if "method" in axes:
            meta["shape"][axes.index("method")] = 10**10
            (store / name / "zarr.json").write_text(json.dumps(meta))
    (store / "zarr.json").write_text(json.dumps(root))
    edit_root_attrs(store)  # the digest of the changed metadata
    words = ["axis 'method' has 10000000000 entries where the sweep has 4"]
    for verb in ("status", "summarize"):
        _one_damage_line(capsys, main([verb, str(store)]), words)


def test_an_extension_journal_nested_too_deep_is_one_line(
    demo_store, local_cluster, tmp_path, capsys
):
    """The third read (2026-12-01): a journal nested too deep (or no list of pairs) made
    status and run end in a traceback. Readers read the store's consolidated copy, as
    while any extension is pending; a run refuses in one damage line, the store as it was."""
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    (store / "ldpsim" / "extension.json").write_text(DEEP_JSON)
    assert main(["status", str(store)]) == 0
    capsys.readouterr()
    run = ["run", "demo", "--replicates", "2", "--set", "grid.n=[1000]", "--store", str(store)]
    for journal, words in ((DEEP_JSON, "recursion"), ('{"a": 1}', "not a list of [new file")):
        (store / "ldpsim" / "extension.json").write_text(journal)
        before = tree_hash(store)
        code = main([*run, "--scheduler", local_cluster.scheduler_address])
        _one_damage_line(capsys, code, ["ldpsim/extension.json cannot be read", words])
        assert tree_hash(store) == before


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"shard_reps": 0}, ["'shard_reps' is 0", "a positive multiple of chunk_reps"]),
        ({"shard_reps": "x"}, ["'shard_reps' is 'x'"]),
        ({"shard_reps": -5}, ["'shard_reps' is -5"]),
        ({"rep_chunk": 0}, ["'rep_chunk' is 0", "a positive integer"]),
        ({"shard_grid": [1]}, ["'shard_grid' is [1]", "one per grid axis"]),
        ({"chunk_reps": None}, ["'chunk_reps' is None", "present beside"]),
        ({"shard_reps": 4}, ["disagree with done/zarr.json"]),  # a multiple, but not done's
        # done's shards, not its chunks (a mutation hunt, 2026-12-02, h17e: unchecked).
        ({"rep_chunk": 1, "chunk_reps": 1}, ["disagree with done/zarr.json (chunks [2, 1, 2]"]),
        # done sharded, the shard attributes gone: read as a store of chunks, a run would
        # write parts of shards (a mutation hunt, 2026-12-02, h17e: unchecked).
        (
            {"shard_reps": None, "shard_grid": None, "chunk_reps": None},
            ["(rep_chunk 2) disagree with done/zarr.json", "shards [2, 1, 2]"],
        ),
        # (A mutation hunt, 2026-12-02: "0 <= level" passed every test.)
        ({"level": 0}, ["attribute 'level' is 0, not in (0, 1)"]),
        ({"level": 1.0}, ["attribute 'level' is 1.0, not in (0, 1)"]),
    ],
)
def test_layout_attributes_are_checked_on_open(demo_store, tmp_path, capsys, changes, words):
    # Edited with the digest recomputed (as a tool that rewrote it would): the attributes'
    # meaning is checked. Before, shard_reps = -5 stored 52 replicates nowhere, exit 3.
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    edit_root_attrs(store, **changes)
    before = tree_hash(store)
    run = ["run", "demo", "--replicates", "2", "--set", "grid.n=[1000]", "--store", str(store)]
    for argv in (run, ["status", str(store)]):
        _one_damage_line(capsys, main(argv), words)
    assert tree_hash(store) == before


def test_a_store_without_digest_is_sealed_by_its_next_run(demo_store, local_cluster, tmp_path):
    # A store of an older ldpsim has no digest: it is read as before, and the next run
    # that writes to it records one.
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    root = json.loads((store / "zarr.json").read_text())
    del root["attributes"][DIGEST_ATTR]
    (store / "zarr.json").write_text(json.dumps(root, indent=2))
    assert main(["status", str(store)]) == 0
    run = ["run", "demo", "--replicates", "3", "--set", "grid.n=[1000]", "--store", str(store)]
    assert main([*run, "--scheduler", local_cluster.scheduler_address]) == 0
    assert DIGEST_ATTR in json.loads((store / "zarr.json").read_text())["attributes"]
    assert main(["status", str(store)]) == 0  # the digest matches the content


def test_a_deleted_truth_file_is_found_by_every_reader(demo_store, tmp_path, capsys):
    # Zarr reads a missing chunk file as the fill value (NaN truths), checksum or not:
    # every chunk of a determined array has its file, so a missing one is recomputed.
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    assert (store / "pseudo_truth" / "c").is_dir()  # all NaN, still written
    for file in (store / "truth" / "c").rglob("*"):
        if file.is_file():
            file.unlink()
    for verb in ("summarize", "plot", "report"):
        _one_damage_line(capsys, main([verb, str(store)]), ["the stored values of truth"])


def test_a_deleted_truth_file_is_found_without_recomputing(demo_store, tmp_path):
    # Without ``recompute`` the checksummed arrays are only decoded, which reads a
    # missing file as the fill value: a store missing a file is recomputed all the same
    # (a mutant that trusted the checksums alone found nothing).
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    for file in (store / "truth" / "c").rglob("*"):
        if file.is_file():
            file.unlink()
    attrs = zarr.open_group(str(store), mode="r").attrs.asdict()
    sweep, layout = _determined_by(store, attrs)
    assert determined_damage(store, sweep, lambda: (sweep, layout()), recompute=False) == (
        "truth",
    )


def test_status_checks_the_checksummed_truths_without_importing_the_units(demo_store, monkeypatch):
    # `ldpsim status` (every data file decoded, the truths' checksums checked) needs no
    # model, mechanism or method: importing them all (ldpsim.tasks.plugins) cost every
    # status a quarter of a second. Since the method registry was read to normalize the
    # sweep for a recomputation that a checksummed store never makes, it imported them.
    import ldpsim.tasks

    class NotImported:
        def __getattr__(self, name):
            raise AssertionError(f"ldpsim.tasks.plugins.{name} read by a check of checksums")

    monkeypatch.setitem(sys.modules, "ldpsim.tasks.plugins", NotImported())
    monkeypatch.setattr(ldpsim.tasks, "plugins", NotImported(), raising=False)
    assert not find_damage(demo_store, verify=True, recompute=False)


def test_a_deleted_coordinate_is_damaged_metadata(demo_store, tmp_path, capsys):
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    shutil.rmtree(store / "tau")
    before = tree_hash(store)
    run = ["run", "demo", "--replicates", "2", "--set", "grid.n=[1000]", "--store", str(store)]
    for argv in (["status", str(store)], run):
        _one_damage_line(capsys, main(argv), ["tau/zarr.json", "the array is missing"])
    assert tree_hash(store) == before


def test_another_zarr_node_is_not_an_ldpsim_store(tmp_path, capsys):
    path = tmp_path / "array.zarr"
    zarr.create_array(str(path), shape=(3,), dtype="float64")
    code = main(["status", str(path)])
    captured = capsys.readouterr()
    assert code == 2 and "not one made by ldpsim" in captured.err, captured


def test_an_old_store_upgraded_without_new_replicates_stays_readable(
    local_cluster, tmp_path, capsys
):
    # A store of ldpsim 0.2 lacks method_seconds; a run that adds it without resizing
    # anything (here: one recomputing a lost shard) wrote a zarr.json that zarr spells
    # otherwise than its consolidated copy. Compared as zarr reads them, they agree.
    with tarfile.open(OLD_LAYOUT) as archive:
        archive.extractall(tmp_path, filter="data")
    store, sweep = tmp_path / "old.zarr", tmp_path / "old.toml"
    shutil.rmtree(store / "method_seconds")  # as a store written before it had one
    root = json.loads((store / "zarr.json").read_text())
    del root["consolidated_metadata"]["metadata"]["method_seconds"]
    (store / "zarr.json").write_text(json.dumps(root))
    assert main(["status", str(store)]) == 0
    next(p for p in (store / "lower" / "c").rglob("*") if p.is_file()).unlink()
    assert main(["status", str(store)]) == EXIT_DAMAGED
    run = [
        "run",
        str(sweep),
        "--store",
        str(store),
        "--scheduler",
        local_cluster.scheduler_address,
    ]
    assert main(run) == 0
    assert (store / "method_seconds" / "zarr.json").is_file()
    assert DIGEST_ATTR in json.loads((store / "zarr.json").read_text())["attributes"]
    capsys.readouterr()
    assert main(["status", str(store)]) == 0, capsys.readouterr()


def test_a_fraction_on_an_integer_axis_is_refused(tmp_path, capsys):
    # eps = [1, 2] is stored as int64: 0.5 would be written as 0, and read back so.
    sweep_file = tmp_path / "int.toml"
    sweep_file.write_text(
        'replicates = 2\nseed = 1\n[spec]\nmodel = "quantile"\nn = 1000\n'
        "[grid]\neps = [1, 2]\n[methods.bm]\n"
    )
    store = tmp_path / "int.zarr"
    Store.open_or_create(store, load_sweep(sweep_file))
    before = tree_hash(store)
    code = main(["run", str(sweep_file), "--store", str(store), "--set", "grid.eps=[1, 2, 0.5]"])
    one_error_line(capsys.readouterr(), code, ["holds integers on its 'eps' axis", "0.5"])
    assert tree_hash(store) == before


def test_a_check_that_meets_a_commit_is_made_again(demo_store, tmp_path):
    # status (or a second run) reading while a run commits an extension sees old and
    # new files mixed: the check runs again once the root zarr.json has changed.
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    calls = []

    def check():
        calls.append(1)
        if len(calls) == 1:  # the commit's last rename, meanwhile
            (store / "zarr.json").write_bytes((store / "zarr.json").read_bytes() + b"\n")
            raise StoreDamage("mixed")
        return "whole"

    assert during_commits(store, check) == "whole" and len(calls) == 2

    def damaged_store():
        raise StoreDamage("really damaged")

    with pytest.raises(StoreDamage, match="really"):  # no commit: the damage stands
        during_commits(store, damaged_store)


def test_a_flipped_coordinate_bit_has_one_remedy_in_every_verb(demo_store, tmp_path, capsys):
    # Before (issue 40, item 8): summarize said "Restore it from a copy" where status
    # rightly said that `ldpsim run` writes it again.
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    _flip(store / "tau" / "c" / "0", 19)
    assert main(["status", str(store)]) == EXIT_DAMAGED
    assert "`ldpsim run` writes it again" in capsys.readouterr().out
    for verb in ("summarize", "errors", "plot", "report"):
        line = _one_damage_line(capsys, main([verb, str(store)]), ["tau"])
        assert "`ldpsim run` writes it again" in line and "Restore" not in line, (verb, line)


def test_a_store_without_digest_is_sealed_by_a_run_that_only_resumes(demo_store, tmp_path):
    # The same without an extension: a run of the store's own sweep, which only resumes,
    # records the digest too (a run that sealed only when it extended survived every
    # test; a mutation hunt, 2026-12-02).
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    root = json.loads((store / "zarr.json").read_text())
    del root["attributes"][DIGEST_ATTR]
    (store / "zarr.json").write_text(json.dumps(root, indent=2))
    _, changes = Store.open_or_create(store, read_sweep(store))
    assert not changes
    assert DIGEST_ATTR in json.loads((store / "zarr.json").read_text())["attributes"]
    assert main(["status", str(store)]) == 0  # the digest matches the content


@pytest.mark.parametrize("recorded", ["", 0])
def test_a_recorded_digest_of_no_value_is_damage(tmp_path, recorded):
    # A digest recorded as "" or 0 (a tool that blanked it) matches no content: the store
    # is damaged, not read as an old store without one (a mutation hunt, 2026-12: "if
    # not recorded" read such a store as unsealed, its content unchecked).
    store = tmp_path / "S.zarr"
    store.mkdir()
    attributes = {"sweep": {"replicates": 2}, "rep_chunk": 2, DIGEST_ATTR: recorded}
    root = {"zarr_format": 3, "node_type": "group", "attributes": attributes}
    (store / "zarr.json").write_text(json.dumps(root))
    with pytest.raises(StoreDamage, match=f"does not match its recorded {DIGEST_ATTR}"):
        read_root(store)


def test_a_determined_array_of_another_shape_differs_whatever_its_values():
    # One value broadcast to the expected shape is not the expected array: a truth of
    # one element where the grid has two is damage (a mutation hunt, 2026-12: without
    # the shape check, np.allclose broadcast it and found it equal).
    assert not same_as_determined(np.array([0.25]), np.array([0.25, 0.25]))
    assert not same_as_determined(np.array([0.25, 0.25]), np.array([0.25]), TRUTH_RTOL)
    assert not same_as_determined(np.array([1, 1]), np.array([1]))
    assert same_as_determined(np.array([0.25, np.nan]), np.array([0.25, np.nan]), TRUTH_RTOL)


@pytest.mark.parametrize("folder", ["lower copy", ".~tmp~"])
def test_a_folder_that_is_no_array_of_the_store_is_named_with_the_remedy(
    demo_store, tmp_path, capsys, folder
):
    # A file browser's "Duplicate" of an array's folder, or rsync's partial folder with
    # a half-written zarr.json, at a store's root: every verb said that folder's
    # zarr.json "cannot be read" and to restore the store from a copy (a hunt, 2026-12,
    # h16f); the store's own arrays are intact, and the remedy is to move it out.
    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    shutil.copytree(store / "lower", store / folder)
    if folder.startswith("."):
        (store / folder / "zarr.json").write_text('{"zarr_format": 3, "node_type": "arr')
    before = tree_hash(store)
    capsys.readouterr()
    for verb in (["status"], ["summarize"], ["run", *DEMO_ARGS, "--store"]):
        code = main([*verb, str(store)])
        one_error_line(
            capsys.readouterr(),
            code,
            [f"{folder}/zarr.json", f"Move the folder {folder!r} out of the store"],
            exit_code=EXIT_DAMAGED,
        )
    assert tree_hash(store) == before
    shutil.rmtree(store / folder)
    assert main(["status", str(store)]) == 0


def _root_file(store: Path, root: object) -> Path:
    store.mkdir()
    (store / "zarr.json").write_text(json.dumps(root))
    return store


@pytest.mark.parametrize(
    ("root", "words"),
    [
        ([{"attributes": {"sweep": {}}}], "not a JSON object with attributes"),
        ({"zarr_format": 3, "attributes": [["sweep", {}]]}, "not a JSON object with attributes"),
        # A changed bit in the key "attributes": the sweep is still in the file.
        (
            {"zarr_format": 3, "node_type": "group", "attributez": {"sweep": {}}},
            "unknown key(s) attributez",
        ),
        # A key no Zarr group has, which the digest (of the attributes) does not cover.
        (
            {"zarr_format": 3, "node_type": "group", "attributes": {"sweep": {}}, "x": 1},
            "unknown key(s) x",
        ),
    ],
    ids=["list", "attributes-list", "attributes-bit", "unknown-key"],
)
def test_a_root_of_no_zarr_group_of_ours_is_damage(tmp_path, root, words):
    # (A mutation hunt, 2026-12-02, h17e: each check dropped passed every test.)
    store = _root_file(tmp_path / "S.zarr", root)
    with pytest.raises(StoreDamage, match=r"zarr\.json cannot be read") as info:
        read_root(store)
    assert words in str(info.value)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"rep_chunk": True}, "'rep_chunk' is True, not a positive integer"),
        ({"chunk_reps": 3, "shard_reps": 6}, "'chunk_reps' is 3, not a positive multiple of rep"),
        ({"chunk_reps": 0}, "'chunk_reps' is 0, not a positive multiple of rep_chunk"),
        ({"shard_reps": 3}, "'shard_reps' is 3, not a positive multiple of chunk_reps"),
        ({"shard_grid": 5}, "'shard_grid' is 5, not a list of 2 positive integer(s)"),
        ({"shard_grid": [0, 1]}, "'shard_grid' is [0, 1], not a list of 2 positive integer(s)"),
    ],
)
def test_each_layout_attribute_is_checked_by_its_own_rule(tmp_path, changes, words):
    # Each attribute named with the rule it breaks, before any read or write follows
    # from it (a mutation hunt, 2026-12-02, h17e: without the multiple checks the layout
    # was refused only later, as disagreeing with done's chunks; a chunk_reps of 0 or a
    # shard_grid of 5 raised ZeroDivisionError or TypeError; rep_chunk true passed).
    attrs = {"rep_chunk": 2, "chunk_reps": 2, "shard_reps": 4, "shard_grid": [2, 1]}
    check_layout_attrs(tmp_path, attrs, 2)  # the demo store's, but shard_reps
    with pytest.raises(StoreDamage, match=r"zarr\.json cannot be read") as info:
        check_layout_attrs(tmp_path, {**attrs, **changes}, 2)
    assert words in str(info.value)


def test_a_truth_changed_past_its_last_bits_is_damage_in_a_store_without_checksums(
    tmp_path, capsys
):
    # A store of ldpsim 0.2 has no CRC-32C: only the recomputation finds a changed truth.
    # Its truth at tau = 0.5 is 0.0, where a flipped bit makes a tiny number: no absolute
    # tolerance hides it; TRUTH_RTOL allows a truth's last bits only (a mutation hunt,
    # 2026-12-02, h17e: an rtol of 1e-3, an atol of 1e-8 or none at all passed every test).
    with tarfile.open(OLD_LAYOUT) as archive:
        archive.extractall(tmp_path, filter="data")
    store = tmp_path / "old.zarr"
    truth = zarr.open_array(str(store / "truth"), mode="r+")
    original = truth[...]
    assert original[0, 0] == 0.0 and original[1, 0] > 1
    line = (
        "damaged: the stored values of truth differ from what the store's sweep "
        "determines (`ldpsim run` writes it again from the store's sweep)"
    )
    for changed in ([[1e-300], original[1]], [[0.0], original[1] * (1 + 1e-7)]):
        truth[...] = np.array(changed)
        damage = find_damage(store, verify=False)
        assert damage.determined == ("truth",) and damage.describe() == line
    truth[...] = original * (1 + 1e-12)  # as another machine's libm may compute it
    assert not find_damage(store, verify=False)


def test_a_repair_writes_every_damaged_determined_array_again_whole(demo_store, tmp_path):
    # Three arrays damaged at once, pseudo_truth all NaN (the fill value): each is
    # written again, every chunk with its file, byte for byte as the run wrote them (a
    # mutation hunt, 2026-12-02, h17e: rewriting only the first named, or leaving a chunk
    # of fill values without its file, passed every test).
    store = Path(shutil.copytree(demo_store, tmp_path / "S.zarr"))
    files = {
        name: next(p for p in (store / name / "c").rglob("*") if p.is_file())
        for name in ("pseudo_truth", "tau", "truth")
    }
    for file in files.values():
        _flip(file, 19)
    damage = find_damage(store)
    assert damage.determined == ("pseudo_truth", "tau", "truth")
    repair(store, damage)
    for name, file in files.items():
        assert file.read_bytes() == (demo_store / file.relative_to(store)).read_bytes(), name
    assert not find_damage(store)


def test_a_reader_of_a_store_without_checksums_recomputes_its_truths(tmp_path, capsys):
    # Without checksums, nothing but the recomputation finds a changed truth: summarize
    # refuses the store rather than show coverage against it (a mutation hunt,
    # 2026-12-02, h17e: readers that recomputed only with --verify passed every test).
    with tarfile.open(OLD_LAYOUT) as archive:
        archive.extractall(tmp_path, filter="data")
    store = tmp_path / "old.zarr"
    truth = zarr.open_array(str(store / "truth"), mode="r+")
    truth[...] = truth[...] + 0.5
    for verb in ("summarize", "errors"):
        line = _one_damage_line(capsys, main([verb, str(store)]), ["the stored values of truth"])
        assert "`ldpsim run` writes it again" in line
