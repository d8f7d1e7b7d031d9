"""Issue 23: a damaged store is refused in exactly one line, with no asyncio noise at exit."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import zarr

from ldpsim.pipeline.store import Store
from ldpsim.pipeline.sweep import load_sweep

#: Tries of the damaged store; before the fix 8 of 10 printed "Task was destroyed but it
#: is pending!" after the error (so 6 clean tries by chance: 0.2 ** 6, 6e-5).
TRIES = 6


def test_damaged_done_chunk_exits_in_one_line(tmp_path):
    # The scale sweep's 1e6 replicates: `done` in 16 shards, read concurrently by zarr.
    store = tmp_path / "big.zarr"
    Store.open_or_create(store, load_sweep("scale"))
    done = zarr.open_group(str(store), mode="r+")["done"]
    done[...] = np.ones(done.shape, dtype=bool)
    shards = sorted(p for p in (store / "done" / "c").rglob("*") if p.is_file())
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
        assert result.returncode == 2, result.stderr
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("ldpsim: error: The store") and "is damaged" in lines[0]
