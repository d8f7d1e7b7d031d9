"""Issue 23: a damaged store is refused in exactly one line, with no asyncio noise at exit."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import zarr

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.store.digests import Write, writing
from ldpsim.pipeline.store.store import Store
from ldpsim.pipeline.sweep import load_sweep

#: Tries of the damaged store; before the fix 8 of 10 printed "Task was destroyed but it
#: is pending!" after the error (so 4 clean tries by chance: 0.2 ** 4, 0.2%).
TRIES = 4


@pytest.fixture
def big_store(tmp_path) -> Path:
    """The scale sweep's store (1e6 replicates), done, in tasks of 3,263 replicates (as
    the cost model sized them before 2026-11-29): `done` in 16 shards of 20 chunks."""
    store = tmp_path / "big.zarr"
    Store.open_or_create(store, load_sweep("scale", ["rep_chunk=3263"]))
    done = zarr.open_group(str(store), mode="r+")["done"]
    flags = np.ones(done.shape, dtype=bool)
    # As a run writes: the files' digests recorded (ldpsim.pipeline.store.digests).
    with writing(store, [Write("done", done, (), flags)]):
        done[...] = flags
    return store


def one_damage_line(captured, code: int) -> str:
    """The single stderr line of a command refusing a damaged store (exit 4)."""
    lines = captured.err.strip().splitlines()
    assert code == 4, captured
    assert len(lines) == 1, lines
    assert lines[0].startswith("ldpsim: error: ") and "damaged" in lines[0]
    return lines[0]


def shard_files(store: Path) -> list[Path]:
    return sorted(p for p in (store / "done" / "c").rglob("*") if p.is_file())


def test_damaged_shard_is_named(big_store, capsys):
    # Chunks were counted inside the shards: "chunk done/c/0/0/4 cannot be read (index
    # out of bounds ...)" for a damaged done/c/0/1/2.
    shard = shard_files(big_store)[6]
    shard.write_bytes(np.random.default_rng(1).bytes(300))
    name = shard.relative_to(big_store).as_posix()
    assert name == "done/c/0/1/2"
    code = main(["summarize", str(big_store)])
    line = one_damage_line(capsys.readouterr(), code)
    assert f"corrupt or out of place ({name})" in line, line
    assert main(["status", str(big_store)]) == 4  # status reports damage on stdout
    assert f"corrupt or out of place ({name})" in capsys.readouterr().out


def test_damaged_done_chunk_exits_in_one_line(big_store):
    # `done` is read concurrently by zarr, a task per shard.
    store = big_store
    shards = shard_files(store)
    assert len(shards) > 8
    # The first shard: the other reads are still in flight when its read fails.
    shards[0].write_bytes(np.random.default_rng(0).bytes(300))
    command = [sys.executable, "-m", "ldpsim.pipeline", "summarize", str(store)]

    def summarize(_: int) -> subprocess.CompletedProcess:
        return subprocess.run(command, capture_output=True, text=True, timeout=120)

    with ThreadPoolExecutor(2) as pool:  # two at a time: a busy machine, as reported
        results = list(pool.map(summarize, range(TRIES)))
    for result in results:
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 4, result.stderr
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("ldpsim: error: The store") and "damaged" in lines[0]


READ_AND_EXIT = """
import sys, zarr
from ldpsim.pipeline.store.reading import quiet_pending_reads
array = zarr.open_array(sys.argv[1], mode="r")
try:
    array[...]
except Exception:
    if sys.argv[2] == "quiet":
        quiet_pending_reads()
    print("error: one line", file=sys.stderr)
    sys.exit(2)
"""


def test_pending_reads_of_a_failed_read_print_nothing_at_exit(tmp_path):
    # 64 chunks read concurrently, the first one garbage: the read fails at once and the
    # others are still pending on zarr's event loop when the process exits.
    path = tmp_path / "a.zarr"
    array = zarr.create_array(str(path), shape=(64, 100_000), chunks=(1, 100_000), dtype="f8")
    array[...] = np.random.default_rng(0).random((64, 100_000))
    (path / "c" / "0" / "0").write_bytes(b"garbage" * 10)

    def stderr_lines(mode: str) -> int:
        command = [sys.executable, "-c", READ_AND_EXIT, str(path), mode]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2
        return len(result.stderr.strip().splitlines())

    # Left alone, the pending reads print tracebacks (7 of 8 and 10 of 10 tries here).
    # 4 quiet tries by chance: about 0.15 ** 4, 5e-4.
    assert max(stderr_lines("loud") for _ in range(4)) > 1
    assert [stderr_lines("quiet") for _ in range(3)] == [1] * 3
