"""Figures of hand-made stores: the expected files, non-empty and well-formed."""

from __future__ import annotations

from pathlib import Path

import synthetic as syn
from ldpsim.pipeline.plots import plot_store

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def check_files(files: list[Path], out_dir: Path, stems: list[str]) -> None:
    expected = [out_dir / f"{stem}.{ext}" for stem in stems for ext in ("png", "pdf")]
    assert sorted(files) == sorted(expected)
    for path in files:
        data = path.read_bytes()
        assert len(data) > 5_000, path
        if path.suffix == ".png":
            assert data.startswith(PNG_SIGNATURE)
        else:
            assert data.startswith(b"%PDF")


def test_plots_of_a_store_path_with_n_axis(tmp_path):
    store = tmp_path / "s.zarr"
    syn.grid_store().to_zarr(store, zarr_format=3, consolidated=False)
    out = tmp_path / "figures"
    files = plot_store(store, out)
    check_files(files, out, ["coverage", "length"])


def test_plots_of_a_checkpoint_store(tmp_path):
    files = plot_store(syn.checkpoint_store(), tmp_path)
    check_files(files, tmp_path, ["coverage", "length", "running"])


def test_bar_plots_without_n_axis(tmp_path):
    files = plot_store(syn.point_store(), tmp_path / "new" / "dir")
    check_files(files, tmp_path / "new" / "dir", ["coverage", "length"])
