"""The CLI's exceptions, exit codes and words for paths and values (ldpsim.pipeline.errors).

A hunt (h21d) found these pinned only through whole CLI runs, or not at all: the exit
code table, the kinds of a path in words, the reasons of an OSError and the 80-character
limit on a quoted value.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
from pathlib import Path

import numpy as np
import pytest

from ldpsim.pipeline.errors import (
    EXIT_DAMAGED,
    EXIT_FAILED,
    EXIT_INCOMPLETE,
    EXIT_OK,
    STATUS,
    InputError,
    InputTypeError,
    RunStopped,
    StoreDamage,
    is_absent,
    os_error_text,
    outcome,
    path_kind,
    shown_value,
    unwritable_reason,
)


def test_the_exceptions_are_what_callers_catch():
    # `except ValueError` and `except TypeError` of a caller see the CLI's input errors;
    # a damaged store is an input error of its own exit code.
    assert issubclass(InputError, ValueError) and not issubclass(InputError, TypeError)
    assert issubclass(InputTypeError, InputError) and issubclass(InputTypeError, TypeError)
    assert issubclass(StoreDamage, InputError) and not issubclass(StoreDamage, TypeError)
    assert not issubclass(RunStopped, ValueError)
    stopped = RunStopped("the disk is full", 1)  # a run with failed replicates
    assert (str(stopped), stopped.exit_code, stopped.report, stopped.ended) == (
        "the disk is full",
        1,
        None,
        None,
    )


def test_exit_codes_and_the_outcome_of_a_stores_replicates():
    # The numbers the docs and scripts rely on (the module's docstring: 2 is an input
    # error, 4 a damaged store); every combination of failed and missing replicates.
    assert (EXIT_OK, EXIT_FAILED, EXIT_INCOMPLETE, EXIT_DAMAGED) == (0, 1, 3, 4)
    assert STATUS == {0: "complete", 1: "failed", 3: "incomplete"}
    for replicates_failed in (0, 1, 5):
        for methods_failed in (0, 1, 5):
            for missing in (0, 1, 5):
                failed = replicates_failed > 0 or methods_failed > 0
                expected = 1 if failed else 3 if missing > 0 else 0
                got = outcome(
                    replicates_failed=replicates_failed,
                    methods_failed=methods_failed,
                    missing=missing,
                )
                assert got == expected, (replicates_failed, methods_failed, missing)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's /dev")
def test_a_path_is_named_by_its_kind(tmp_path):
    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "p")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "s"))
        kinds = {name: path_kind(tmp_path / name) for name in ("f", "d", "p", "s")}
    assert kinds == {"f": "file", "d": "folder", "p": "named pipe", "s": "socket"}
    assert path_kind("/dev/null") == "character device"
    block = next((p for p in Path("/dev").iterdir() if p.is_block_device()), None)
    if block is not None:
        assert path_kind(block) == "block device"
    # Absent: nothing there, a link to nothing, or a "folder" that is a file.
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    (tmp_path / "to_d").symlink_to(tmp_path / "d")
    assert path_kind(tmp_path / "to_d") == "folder"  # a link followed
    for absent in ("gone", "dangling", "f/x"):
        assert path_kind(tmp_path / absent) is None, absent
        assert is_absent(tmp_path / absent), absent
    assert not is_absent(tmp_path / "f") and not is_absent(tmp_path / "to_d")


def test_a_path_that_cannot_be_looked_at_is_not_absent(tmp_path):
    # A name too long raises (the checks then word it), and is not taken for a new path.
    long = tmp_path / ("a" * 300)
    with pytest.raises(OSError) as raised:
        path_kind(long)
    assert raised.value.errno == errno.ENAMETOOLONG
    assert is_absent(long) is False


def test_a_name_too_long_is_told_with_the_limits_of_its_folder(tmp_path):
    # The limits of the nearest folder that exists, above the missing ones.
    name_max = os.pathconf(tmp_path, "PC_NAME_MAX")
    path_max = os.pathconf(tmp_path, "PC_PATH_MAX")
    long = OSError(errno.ENAMETOOLONG, "File name too long")
    text = os_error_text(long, tmp_path / "missing" / "deeper" / ("a" * 300))
    assert text == (
        f"File name too long (at most {name_max} bytes per name and {path_max} per path here)"
    )
    assert os_error_text(long).startswith("File name too long (at most ")
    # Another error: its reason alone; one without a reason: its text.
    assert os_error_text(OSError(errno.EACCES, "Permission denied"), tmp_path) == (
        "Permission denied"
    )
    assert os_error_text(OSError("no reason given")) == "no reason given"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's /proc")
def test_why_a_folder_cannot_hold_new_files(tmp_path):
    assert unwritable_reason(tmp_path) is None
    # procfs refuses new files even to root, on a file system mounted read-write here.
    if os.access("/proc/sys", os.W_OK) or os.statvfs("/proc/sys").f_flag & os.ST_RDONLY:
        pytest.skip("/proc/sys is writable or mounted read-only here")
    assert unwritable_reason("/proc/sys") == "no write permission"


def test_a_value_is_quoted_on_one_short_line():
    assert shown_value(np.float64(0.5)) == "0.5" and shown_value(np.int64(3)) == "3"
    assert shown_value(np.bool_(True)) == "True"
    # At most 80 characters: "'" + 78 x + "'" is shown, one more is not.
    assert shown_value("x" * 78) == repr("x" * 78)
    assert shown_value("x" * 79) == "a str"
    assert shown_value(np.eye(2)) == "a ndarray"  # a repr of two lines
    assert shown_value({"a": [1, 2]}) == "{'a': [1, 2]}"
