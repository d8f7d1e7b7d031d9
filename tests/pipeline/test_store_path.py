"""Which paths :func:`check_store_path` takes for a run's store, and its messages; where a
path's enclosing Zarr store is; the files named beside a store.

A hunt (h21c): these were tested only through `ldpsim run` on a cluster, which left the
message words, the search for a path's existing parent and the markers of a Zarr store
unchecked. Each check here is a call on real files, no run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import zarr

from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.store.store_path import (
    MAX_METADATA_BYTES,
    beside_store,
    check_outside_stores,
    check_store_path,
    enclosing_store,
)


def refused(path, *words) -> str:
    with pytest.raises(InputError) as caught:
        check_store_path(path)
    message = str(caught.value)
    for word in words:
        assert word in message, (word, message)
    return message


def test_a_new_path_or_an_empty_folder_is_taken(tmp_path):
    check_store_path(tmp_path / "new.zarr")
    check_store_path(tmp_path / "a" / "b" / "new.zarr")  # folders made on creation
    assert list(tmp_path.iterdir()) == []
    empty = tmp_path / "empty.zarr"
    empty.mkdir()
    check_store_path(empty)
    assert not empty.exists()  # the store is renamed into its place


def test_paths_that_are_not_a_folder_or_lie_below_a_file(tmp_path):
    file = tmp_path / "file"
    file.write_text("x")
    refused(file, f"{str(file)!r} is a file;", "a store is a folder")
    for below in (file / "new.zarr", file / "a" / "b" / "new.zarr"):
        refused(below, f"lies below {str(file)!r}, which is a file, not a folder")
    assert file.read_text() == "x"
    # Not a file either: a character device, and a path below one.
    refused(Path("/dev/null"), "'/dev/null' is a character device;")
    refused(Path("/dev/null/new.zarr"), "which is a character device, not a folder")


def test_a_link_to_nothing_and_a_non_empty_folder(tmp_path):
    link = tmp_path / "link.zarr"
    link.symlink_to("gone.zarr")
    refused(link, "symbolic link to 'gone.zarr', which does not exist")
    assert link.is_symlink()
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine")
    refused(full, "non-empty folder that is not a Zarr store")
    assert (full / "notes.txt").read_text() == "mine"


def test_the_current_folder_is_refused_though_empty(tmp_path, monkeypatch):
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    for path in (Path("."), here, Path("../here")):
        refused(path, "is the current folder or one above it", "./NAME.zarr")
    assert here.is_dir()


def test_a_name_too_long_and_a_folder_not_writable(tmp_path):
    refused(tmp_path / ("a" * 300), "cannot be used", "File name too long")
    if os.access("/proc/sys", os.W_OK):
        pytest.skip("/proc/sys is writable here")
    refused(Path("/proc/sys/new.zarr"), "is not writable (no write permission: '/proc/sys')")


def test_a_zarr_group_that_is_no_ldpsim_store_and_paths_inside_it(tmp_path):
    group = tmp_path / "g.zarr"
    zarr.open_group(str(group), mode="w", zarr_format=3)
    refused(group, "not one made by ldpsim")
    refused(group / "inner.zarr", "lies inside the Zarr store", "a new store")
    (group / "empty").mkdir()  # an empty folder inside it, as well
    refused(group / "empty", "lies inside the Zarr store")
    assert (group / "empty").is_dir()


def test_the_enclosing_store_is_the_outermost_folder_with_zarr_metadata(tmp_path):
    outer = tmp_path / "outer"
    inner = outer / "group" / "array"
    inner.mkdir(parents=True)
    (inner / ".zarray").write_text(json.dumps({"zarr_format": 2}))
    assert enclosing_store(inner / "x") == inner.resolve()
    (outer / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
    assert enclosing_store(inner / "x") == outer.resolve()
    assert enclosing_store(outer) == outer.resolve()
    # Files of a marker's name that are not Zarr metadata.
    other = tmp_path / "other"
    other.mkdir()
    for content in (b"[]", b'"zarr_format"', b'{"format": 3}', b"\xff{", b"<html>"):
        (other / "zarr.json").write_bytes(content)
        assert enclosing_store(other / "x") is None, content
    with open(other / "zarr.json", "w") as file:  # too large to be read
        file.write('{"zarr_format": 3, "pad": "')
        file.truncate(MAX_METADATA_BYTES + 1)
    assert enclosing_store(other / "x") is None
    # Metadata of 100 kB (a root's with a large sweep) are read.
    (other / "zarr.json").write_text(json.dumps({"zarr_format": 3, "pad": "x" * 100_000}))
    assert enclosing_store(other / "x") == other.resolve()


def test_outside_stores_the_message_says_is_or_lies_inside(tmp_path):
    store = tmp_path / "s"
    store.mkdir()
    (store / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group"}))
    check_outside_stores(tmp_path / "page.html", "--out 'page.html'", "the report")
    for path, where in ((store, "is"), (store / "page.html", "lies inside")):
        with pytest.raises(InputError) as caught:
            check_outside_stores(path, "--out 'x'", "the report")
        assert str(caught.value) == (
            f"--out 'x' {where} the Zarr store {str(store.resolve())!r}, where the report "
            "would change the store; choose a path outside it."
        )


def test_files_beside_a_store(tmp_path, monkeypatch):
    assert beside_store("outputs/demo.zarr", "-report.html") == Path("outputs/demo-report.html")
    assert beside_store("outputs/demo", "-figures") == Path("outputs/demo-figures")
    assert beside_store("a.zarr.zarr", "-x") == Path("a.zarr-x")
    store = tmp_path / "s.zarr"
    (store / "inner").mkdir(parents=True)
    monkeypatch.chdir(store / "inner")
    assert beside_store("..", "-figures") == tmp_path / "s-figures"
    monkeypatch.chdir(store)
    assert beside_store(".", "-report.html") == tmp_path / "s-report.html"
    assert beside_store("/", "-report.html") == Path("/report.html")
