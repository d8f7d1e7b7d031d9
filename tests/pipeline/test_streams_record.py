"""The streams fingerprint kept in the cache folder (ldpsim.pipeline.store.streams_record)."""

from __future__ import annotations

import json

from ldpsim.pipeline.store.streams_record import SUBFOLDER, fingerprint_key, running_fingerprint
from ldpsim.tasks.streams.seeding import FINGERPRINT_PARTS, streams_fingerprint


def kept_files(folder):
    return sorted((folder / SUBFOLDER).glob("*.json"))


def test_the_fingerprint_is_computed_once_and_read_after(tmp_path, monkeypatch):
    """The first call computes and keeps the value (one file, no temporary left); a later
    call reads that file: a valid file with other hashes is what it returns, which shows
    the value is read, not drawn. A file that is not JSON or lacks a part is computed
    again and replaced."""
    monkeypatch.setenv("LDPSIM_CACHE_DIR", str(tmp_path))
    computed = streams_fingerprint()
    assert running_fingerprint() == computed
    (kept,) = kept_files(tmp_path)
    assert json.loads(kept.read_text()) == computed
    assert [p.name for p in (tmp_path / SUBFOLDER).iterdir()] == [kept.name]

    planted = {part: "0" * 16 for part in FINGERPRINT_PARTS}
    kept.write_text(json.dumps(planted))
    assert running_fingerprint() == planted

    for broken in ("{not json", json.dumps({"data": "0" * 16}), json.dumps([1, 2])):
        kept.write_text(broken)
        assert running_fingerprint() == computed
        assert json.loads(kept.read_text()) == computed


def test_the_key_follows_the_code_and_the_libraries(monkeypatch):
    """Another numpy version, or another source of a module the fingerprint reaches,
    names another file."""
    import numpy as np

    from ldpsim.tasks.kernel import cache

    key = fingerprint_key()
    assert key is not None and fingerprint_key() == key
    monkeypatch.setattr(np, "__version__", np.__version__ + ".other")
    assert fingerprint_key() != key
    monkeypatch.undo()
    real = cache.code_fingerprint

    def edited(roots):
        record = real(roots)
        record["modules"]["ldpsim.tasks.streams.rng"] = "edited"
        return record

    monkeypatch.setattr("ldpsim.pipeline.store.streams_record.code_fingerprint", edited)
    assert fingerprint_key() != key


def test_a_cache_folder_that_is_a_file_still_gives_the_value(tmp_path, monkeypatch):
    """Where the folder cannot be made (its path is a file), each call computes."""
    blocker = tmp_path / "cache"
    blocker.write_text("a file")
    monkeypatch.setenv("LDPSIM_CACHE_DIR", str(blocker))
    assert running_fingerprint() == streams_fingerprint()
    assert blocker.read_text() == "a file"


def test_the_key_follows_the_streams_sources_and_parts(monkeypatch):
    """The key hashes the source of each module the fingerprint's code reaches (the
    samplers, the seeding, the multipliers) and FINGERPRINT_PARTS: a key of no module
    (the code walked from no root) or without the parts kept a stale fingerprint after
    a change to them (a mutation hunt, h16k)."""
    from ldpsim.pipeline.store import streams_record

    real, records = streams_record.code_fingerprint, []

    def recorded(roots):
        records.append(real(roots))
        return records[-1]

    monkeypatch.setattr(streams_record, "code_fingerprint", recorded)
    key = fingerprint_key()
    (record,) = records
    assert {
        "ldpsim.tasks.streams.rng",
        "ldpsim.tasks.streams.seeding",
        "ldpsim.tasks.streams.multipliers",
    } <= set(record["modules"])
    monkeypatch.setattr(streams_record, "FINGERPRINT_PARTS", (*FINGERPRINT_PARTS, "other"))
    assert fingerprint_key() != key


def test_a_kept_value_that_is_not_all_strings_is_computed_again(tmp_path, monkeypatch):
    """Every part of a kept file must be a string: one number among them is computed
    again (any string among them was taken as the value; a mutation hunt, h16k)."""
    monkeypatch.setenv("LDPSIM_CACHE_DIR", str(tmp_path))
    computed = running_fingerprint()
    (kept,) = kept_files(tmp_path)
    planted = {part: "0" * 16 for part in FINGERPRINT_PARTS}
    kept.write_text(json.dumps({**planted, FINGERPRINT_PARTS[0]: 1}))
    assert running_fingerprint() == computed
    assert json.loads(kept.read_text()) == computed


def test_a_kept_file_that_cannot_be_replaced_leaves_no_temporary(tmp_path, monkeypatch):
    """Where the kept file's name is taken by a folder, the value is computed and the
    temporary file it was written to is removed, not left behind on every call."""
    monkeypatch.setenv("LDPSIM_CACHE_DIR", str(tmp_path))
    target = tmp_path / SUBFOLDER / f"{fingerprint_key()[:32]}.json"
    (target / "inside").mkdir(parents=True)
    assert running_fingerprint() == streams_fingerprint()
    assert [p.name for p in (tmp_path / SUBFOLDER).iterdir()] == [target.name]
