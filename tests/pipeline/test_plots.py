"""Figures of hand-made stores: the expected files, non-empty and well-formed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import synthetic as syn
import xarray as xr

from ldpsim.pipeline.plots import (
    ERROR_SERIES,
    MAX_DIAGNOSTIC_COLUMNS,
    PANEL_SIZE,
    _errors_figure,
    plot_store,
)
from ldpsim.pipeline.summary import summarize

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
    check_files(files, out, ["coverage", "length", "diagnostics"])


def test_plots_of_a_checkpoint_store(tmp_path):
    # One replicate: no sd, so no diagnostics figure (it would be empty).
    files = plot_store(syn.checkpoint_store(), tmp_path)
    check_files(files, tmp_path, ["coverage", "length", "running", "errors"])
    files = plot_store(syn.checkpoint_store(reps=3), tmp_path / "three")
    stems = ["coverage", "length", "running", "diagnostics", "errors"]
    check_files(files, tmp_path / "three", stems)
    # A store of an older ldpsim, without last iterates: the average's errors alone.
    files = plot_store(syn.checkpoint_store(reps=3).drop_vars("last"), tmp_path / "old")
    check_files(files, tmp_path / "old", stems)


def test_errors_figure_draws_both_mean_squared_errors():
    summary = summarize(syn.checkpoint_store(reps=3))
    fig = _errors_figure(summary)
    (ax,) = fig.axes
    assert ax.get_xscale() == ax.get_yscale() == "log"
    # One error-bar container per series; its first line holds the plotted values.
    series = {bars.get_label(): bars.lines[0] for bars in ax.containers}
    assert set(series) == {label for _, label in ERROR_SERIES}
    for var, label in ERROR_SERIES:
        np.testing.assert_array_equal(series[label].get_ydata(), summary[var].values)
    without_last = _errors_figure(summarize(syn.checkpoint_store(reps=3).drop_vars("last")))
    labels = [bars.get_label() for bars in without_last.axes[0].containers]
    assert labels == ["average theta_bar_n"]


def test_errors_panels_per_grid_point(tmp_path):
    # Two grid values: a panel each.
    store = xr.concat([syn.checkpoint_store(reps=3)] * 2, dim=xr.DataArray([0.5, 1.0], dims="eps"))
    store["truth"] = store["truth"].isel(eps=0, drop=True).expand_dims(eps=[0.5, 1.0])
    fig = _errors_figure(summarize(store))
    assert [ax.get_title() for ax in fig.axes] == ["eps = 0.5", "eps = 1"]


def png_size(path: Path) -> tuple[int, int]:
    """Width and height in pixels, from the PNG header's IHDR chunk."""
    header = path.read_bytes()[16:24]
    return int.from_bytes(header[:4], "big"), int.from_bytes(header[4:], "big")


def test_diagnostics_panels_wrap(tmp_path):
    # d = 1, 2 tau x 4 eps = 8 grid points: 6 side by side, then a second row; each grid
    # point has a bias/sd panel above a variance-ratio panel, so 4 panel rows in all.
    store = syn.grid_store().isel(coord=[0]).expand_dims(eps=[0.5, 1.0, 2.0, 4.0])
    plot_store(store, tmp_path)
    width, height = png_size(tmp_path / "diagnostics.png")
    dpi, (panel_w, panel_h) = 150, PANEL_SIZE
    assert width == round(dpi * (panel_w * MAX_DIAGNOSTIC_COLUMNS + 2.0))
    assert height == round(dpi * (panel_h * 4 + 0.6))


def test_bar_plots_without_n_axis(tmp_path):
    files = plot_store(syn.point_store(), tmp_path / "new" / "dir")
    check_files(files, tmp_path / "new" / "dir", ["coverage", "length"])


def test_privacy_figures_for_a_store_with_eps_n_and_the_floor(tmp_path):
    # A store with eps and n axes and an np_boot method (price-of-privacy) also gets
    # the length relative to np_boot against eps, and coverage against n eps.
    ds = syn.grid_store().rename({"tau": "eps"})
    floor = ds.sel({"method": ["bb"]}).assign_coords(method=np.array(["np_boot"], dtype=object))
    ds = xr.concat([ds, floor], dim="method", data_vars="minimal", coords="minimal")
    files = plot_store(ds, tmp_path)
    stems = ["coverage", "length", "diagnostics", "privacy-length", "privacy-coverage"]
    check_files(files, tmp_path, stems)
    # Without the floor, no such figures.
    files = plot_store(syn.grid_store().rename({"tau": "eps"}), tmp_path / "plain")
    check_files(files, tmp_path / "plain", ["coverage", "length", "diagnostics"])
