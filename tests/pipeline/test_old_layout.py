"""A store written before shards (ldpsim 0.2, commit f101eff) is read, resumed and extended.

tests/reference/old-layout.tar.gz holds such a store (2 grid points x 3 replicates,
``rep_chunk = 2``: its last chunk is half full) and the sweep file it was run from, both
written by that code. Today's ldpsim reads it, adds replicates in its own layout (a file
per chunk; no shards), and the values equal those of a new, sharded store of the same
sweep, bit for bit (the interval bounds to a few ulps where this machine's OpenBLAS
kernel differs from the one that wrote the archive: conftest.BLAS_FIELDS).
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import zarr
from conftest import assert_same_values

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.store.reading import load_dataset, read_attrs

ARCHIVE = Path(__file__).resolve().parents[1] / "reference" / "old-layout.tar.gz"
VALUES = ("estimate", "last", "lower", "upper", "method_estimate", "method_failed", "done")


def test_an_old_store_is_read_extended_and_equal_to_a_new_one(tmp_path, local_cluster, capsys):
    with tarfile.open(ARCHIVE) as archive:
        archive.extractall(tmp_path, filter="data")
    old, sweep = tmp_path / "old.zarr", tmp_path / "old.toml"
    assert "shard_reps" not in read_attrs(old)
    assert main(["status", str(old)]) == 0
    assert main(["summarize", str(old)]) == 0
    assert "bb" in capsys.readouterr().out
    address = ["--scheduler", local_cluster.scheduler_address]
    assert main(["run", str(sweep), "--store", str(old), "--replicates", "5", *address]) == 0
    # The old store keeps the bb it was written with (basic: it names no form); a new
    # store of that file would get the t form, so it names the old one.
    new = tmp_path / "new.zarr"
    basic = ["--set", 'methods.bb.form="basic"']
    assert (
        main(["run", str(sweep), "--store", str(new), "--replicates", "5", *basic, *address]) == 0
    )
    # The old store keeps its layout: one chunk file per grid point and 2 replicates.
    assert "shard_reps" not in read_attrs(old)
    assert zarr.open_array(str(old / "lower"), mode="r").shards is None
    assert zarr.open_array(str(new / "lower"), mode="r").shards is not None
    before, after = load_dataset(old), load_dataset(new)
    assert int(after["done"].sum()) == 10
    for name in VALUES:
        assert_same_values(before[name].values, after[name].values, name, err_msg=name)
