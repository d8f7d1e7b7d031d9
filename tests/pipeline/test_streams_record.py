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
