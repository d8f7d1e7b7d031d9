"""The report in a real browser: Debian's chromium, headless, with the network off.

``make test`` installs chromium first (``tests/install-chromium.sh``). Without it the test
skips, saying why; under CI (``CI`` set) it fails instead, as the SLURM tests do.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import synthetic as syn
import xarray as xr
import zarr
from matplotlib.image import imread
from test_plot_text import mixed_store
from test_report import failing_store, page_text

from ldpsim.pipeline.plots import NO_DATA_TEXT
from ldpsim.pipeline.provenance import record_run
from ldpsim.pipeline.report import PIXEL_RATIO, write_report

#: Chromium's own background traffic (updates, time, spelling) is switched off where it
#: can be, and whatever is left cannot resolve a name or reach a proxy.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",  # root in CI containers
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--no-pings",
    "--proxy-server=http://127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND",
]


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    reason = "chromium is not installed (tests/install-chromium.sh installs it; make test runs it)"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def offline_prefix() -> list[str]:
    """``unshare -n`` (a network namespace with no interface) where this process may."""
    try:
        ok = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    return ["unshare", "-n"] if ok.returncode == 0 else []


def browse(page: Path, tmp_path: Path, *mode: str) -> tuple[str, list[str]]:
    """Load ``page`` from its file in chromium; its stdout and the URLs the page requested.

    The page's requests are those of chromium's net log whose network isolation key is
    the file's (the browser's own background requests carry none).
    """
    net_log = tmp_path / f"net-{page.stem}-{len(mode)}.json"
    command = [
        *offline_prefix(),
        find_chromium(),
        *CHROMIUM_FLAGS,
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--log-net-log={net_log}",
        *mode,
        page.as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    log = json.loads(net_log.read_text())
    kinds = {value: key for key, value in log["constants"]["logEventTypes"].items()}
    requested = [
        event["params"]["url"]
        for event in log["events"]
        if kinds.get(event["type"]) == "URL_REQUEST_START_JOB"
        and "file://" in str(event["params"].get("network_isolation_key", ""))
    ]
    return result.stdout, requested


def test_report_in_a_browser_without_network(tmp_path):
    store = failing_store(tmp_path)
    record_run(store, wall_seconds=3.5, computed=108, failed=0, cluster="local")
    page = write_report(store, tmp_path / "report.html")

    # The check sees a page's requests: a page with an external image and style sheet.
    canary = tmp_path / "canary.html"
    canary.write_text(
        '<p>canary</p><img src="http://192.0.2.1/x.png">'
        '<link rel="stylesheet" href="https://example.com/a.css">'
    )
    _, requested = browse(canary, tmp_path, "--dump-dom")
    assert {"http://192.0.2.1/x.png", "https://example.com/a.css"} <= set(requested)

    screenshot = tmp_path / "report.png"
    dom, requested = browse(
        page, tmp_path, "--dump-dom", f"--screenshot={screenshot}", "--window-size=1280,2000"
    )
    assert [url for url in requested if not url.startswith(("file:", "data:"))] == []
    text = page_text(dom)
    for words in (
        "ldpsim report: synthetic",
        "cover 0.829 (0.064)",
        "method bb: 3 replicates",
        "Runs that wrote to the store",
        "3.5 s n/a 108 0 local",
    ):
        assert words in text, words
    pixels = imread(screenshot)
    assert pixels.shape[:2] == (2000, 1280)
    # Not a blank page: text and figures give many distinct colours.
    rgb = (pixels[..., :3] * 255).astype(np.uint32)
    colours = np.unique(rgb[..., 0] << 16 | rgb[..., 1] << 8 | rgb[..., 2])
    assert len(colours) > 50, len(colours)
    keep = os.environ.get("LDPSIM_REPORT_SCREENSHOT")
    if keep:  # where to keep the screenshot for a person to look at
        shutil.copy(screenshot, keep)


# -- layout: phone width, figure text, alt text, banner ----------------------------------
#: A page that loads the report in an iframe of a given width and writes what it measures
#: into ``<pre id="measure">`` (the report itself runs no script: its policy forbids it).
#: Chromium lets a file page read a file iframe's DOM with --allow-file-access-from-files.
MEASURE_HARNESS = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="page" src="{src}" style="width:{width}px;height:900px;border:0"></iframe>
<pre id="measure"></pre>
<script>
const frame = document.getElementById("page");
frame.addEventListener("load", () => {
  const doc = frame.contentDocument;
  const root = doc.documentElement;
  const images = [...doc.querySelectorAll("img")].map((img) => ({
    alt: img.getAttribute("alt") || "",
    shown: img.getBoundingClientRect().width,
    css: Number(img.getAttribute("width")),
    natural: img.naturalWidth,
    minText: Number(img.dataset.minTextPx),
  }));
  const banner = doc.getElementById("banner");
  const heading = doc.querySelector("h1");
  // Elements that reach past the page's right edge outside a table's scroll box.
  const wide = [...doc.body.querySelectorAll("*")]
    .filter((e) => e.getBoundingClientRect().right > root.clientWidth + 0.5)
    .filter((e) => !e.closest(".scroll"))
    .map((e) => e.tagName + "." + e.className);
  document.getElementById("measure").textContent = JSON.stringify({
    scrollWidth: root.scrollWidth,
    clientWidth: root.clientWidth,
    images,
    tables: doc.querySelectorAll("table").length,
    boxed: doc.querySelectorAll(".scroll > table").length,
    banner: banner ? banner.getBoundingClientRect().top : null,
    heading: heading.getBoundingClientRect().top,
    wide: wide.slice(0, 10),
  });
});
</script></body></html>
"""
#: The page widths the layout is measured at: a phone, and the desktop the figures are
#: sized for.
PHONE_PX, DESKTOP_PX = 400, 1280
#: The smallest figure text a reader gets at 100% zoom on the desktop page, in CSS px.
MIN_TEXT_PX = 10.0


def measure(page: Path, tmp_path: Path, width: int) -> dict:
    """What MEASURE_HARNESS measures of ``page`` shown ``width`` CSS px wide."""
    harness = page.with_name(f"measure-{page.stem}-{width}.html")
    harness.write_text(MEASURE_HARNESS.replace("{src}", page.name).replace("{width}", str(width)))
    command = [
        *offline_prefix(),
        find_chromium(),
        *CHROMIUM_FLAGS,
        f"--user-data-dir={tmp_path / 'profile'}",
        "--allow-file-access-from-files",
        f"--window-size={width + 100},1000",
        "--virtual-time-budget=10000",  # the load event fires before the DOM is dumped
        "--dump-dom",
        harness.as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    found = re.search(r'<pre id="measure">(.*?)</pre>', result.stdout, re.S)
    assert found and found.group(1), result.stdout[-2000:]
    return json.loads(html.unescape(found.group(1)))


def check_layout(page: Path, tmp_path: Path, partial: bool) -> None:
    """Issue 33's browser checks of a report page."""
    phone = measure(page, tmp_path, PHONE_PX)
    # No sideways scrolling of the page on a phone: wide tables scroll in their boxes.
    assert phone["scrollWidth"] <= phone["clientWidth"], phone
    assert phone["wide"] == [], phone["wide"]
    assert phone["tables"] == phone["boxed"] > 0
    desktop = measure(page, tmp_path, DESKTOP_PX)
    assert desktop["scrollWidth"] <= desktop["clientWidth"], desktop["wide"]
    assert desktop["images"], "no figure"
    for image in desktop["images"]:
        # Descriptive alt text: the figure's title, axes and lines, not "figure coverage".
        assert len(image["alt"]) > 60 and " against " in image["alt"], image["alt"]
        # A PNG of twice its CSS size, shown at (nearly) that size: its smallest text,
        # measured in the figure, stays readable at 100% zoom.
        assert image["natural"] == pytest.approx(PIXEL_RATIO * image["css"], abs=2)
        assert image["minText"] * image["shown"] / image["css"] >= MIN_TEXT_PX, image
    # The banner of a partial store (or one with failures) comes first, before the title.
    for layout in (phone, desktop):
        if partial:
            assert layout["banner"] is not None and layout["banner"] < layout["heading"]
        else:
            assert layout["banner"] is None


def save_store(ds: xr.Dataset, store: Path) -> Path:
    """Write a hand-made store as ldpsim would lay it out (its metadata group)."""
    ds.to_zarr(store, zarr_format=3, consolidated=False)
    zarr.open_group(str(store / "ldpsim"), mode="w", zarr_format=3)
    return store


def many_panel_store() -> xr.Dataset:
    """remedies' shape at 12 replicates: case x eps x n, bb, bb_t, sn and oracle, six
    coverage panels, partial: one grid point half done, one not started (an empty
    panel)."""
    methods = ["bb", "bb_t", "sn", "oracle"]
    ds = mixed_store({"mean": 1, "quantile-tau0.5": 1}, reps=12, models=("a", "b", "c"))
    ds = ds.rename({"model": "eps"}).transpose("case", "eps", ...)
    ds = ds.assign_coords(eps=[0.5, 1.0, 2.0], method=np.array(methods, dtype=object))
    done = ds["done"].values.copy()
    done[0, 0, :, 6:] = False
    done[1, 2] = False
    ds["done"] = (ds["done"].dims, done)
    ds["job_id"] = (ds["done"].dims, np.zeros(done.shape, dtype=np.int64))
    grid = {"case": ["mean", "quantile-tau0.5"], "eps": [0.5, 1.0, 2.0]}
    grid["n"] = [int(n) for n in ds["n"].values]
    sweep = json.loads(syn.sweep_attr(grid, {}, methods, 12))
    sweep.update(name="remedies-like", cases={"mean": {}, "quantile-tau0.5": {"tau": 0.5}})
    sweep["methods"]["bb_t"] = {"method": "bb", "form": "t"}
    ds.attrs.update(sweep=json.dumps(sweep), rep_chunk=12, versions="{}")
    return ds


def many_coordinate_store(reps: int = 10) -> xr.Dataset:
    """sparse's shape, small: grid axis case only, cases of d = 4 and 12 (more than the
    tables list one by one) with sparsity and calibration; every interval covers but the
    band's at coordinate 0 in two replicates, so most coverages are 1 (Wilson cells)."""
    cases = {}
    for d, s in ((4, 1), (4, 4), (12, 1), (12, 4)):
        for calibration in ("sparse", "dense"):
            cases[f"d{d}-s{s}-{calibration}"] = {"d": d, "sparsity": s, "calibration": calibration}
    labels, methods, width = list(cases), ["bb", "band_sidak", "oracle"], 12
    truth = np.zeros((len(labels), width))
    half = np.full((len(labels), len(methods), reps, width), np.nan)
    for c, label in enumerate(labels):
        d, s = cases[label]["d"], cases[label]["sparsity"]
        truth[c, d:] = np.nan  # a smaller d is NaN-padded
        half[c, :, :, :d] = 0.05 * (s if cases[label]["calibration"] == "sparse" else d)
    lower, upper = -half, half.copy()
    lower[:, 1, :2, 0] = upper[:, 1, :2, 0] / 2  # the band misses coordinate 0 twice
    estimate = np.where(np.isnan(truth[:, None, :]), np.nan, 0.0) + np.zeros((1, reps, 1))
    shape = (len(labels), reps)
    sweep = json.loads(syn.sweep_attr({"case": labels}, {"model": "sparse_mean"}, methods, reps))
    sweep.update(name="sparse-like", cases=cases)
    ds = xr.Dataset(
        {
            "estimate": (("case", "rep", "coord"), estimate),
            "lower": (("case", "method", "rep", "coord"), lower),
            "upper": (("case", "method", "rep", "coord"), upper),
            "truth": (("case", "coord"), truth),
            "done": (("case", "rep"), np.ones(shape, dtype=bool)),
            "failed": (("case", "rep"), np.zeros(shape, dtype=bool)),
            "method_failed": (("case", "method", "rep"), np.zeros(lower.shape[:3], dtype=bool)),
            "seconds": (("case", "rep"), np.full(shape, 0.1)),
            "job_id": (("case", "rep"), np.zeros(shape, dtype=np.int64)),
        },
        coords={
            "case": np.array(labels, dtype=object),
            "method": np.array(methods, dtype=object),
            "rep": np.arange(reps),
            "coord": np.arange(width),
        },
    )
    ds.attrs.update(level=syn.LEVEL, sweep=json.dumps(sweep), rep_chunk=reps, versions="{}")
    return ds


def test_the_demo_report_lays_out_on_a_phone_and_a_desktop(demo_store, tmp_path):
    # With its zip plots (--zip, a second of drawing): they pass the same checks.
    page = write_report(demo_store, tmp_path / "demo.html", zip_plots=True)
    check_layout(page, tmp_path, partial=False)
    assert page.read_text().count("<figcaption>Zip plot (Morris, White") == 2  # 2 grid points


def test_a_many_panel_partial_report_lays_out_with_its_banner(tmp_path):
    ds = many_panel_store()
    store = save_store(ds, tmp_path / "remedies-like.zarr")
    page = write_report(store, tmp_path / "remedies-like.html")
    check_layout(page, tmp_path, partial=True)
    text = page_text(page.read_text())
    done, total = int(ds["done"].sum()), ds["done"].size
    assert 0 < done < total
    assert f"Partial store: {done} of {total} replicates are done" in text
    # The empty panel says so, and the alt text of its figures too.
    assert f"Some panels have {NO_DATA_TEXT}" in html.unescape(page.read_text())


def test_a_many_coordinate_report_lays_out(tmp_path):
    store = save_store(many_coordinate_store(), tmp_path / "sparse-like.zarr")
    page = write_report(store, tmp_path / "sparse-like.html")
    check_layout(page, tmp_path, partial=False)
    text = page_text(page.read_text())
    assert "d = 4, 12 (by grid point)" in text
    # The dot figures' panels (named in their alt text): never coordinate 0 alone.
    page_html = html.unescape(page.read_text())
    # Cases of d = 4 and 12: each row's own d, not the store's 12 (issue 43).
    assert "mean over each row's d coords" in page_html and "coord 0" not in page_html
