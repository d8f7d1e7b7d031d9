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
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
import pytest
import synthetic as syn
import xarray as xr
from matplotlib.image import imread
from test_plot_text import mixed_store
from test_report import page_text

from ldpsim.pipeline.report.plots import NO_DATA_TEXT, store_figures
from ldpsim.pipeline.report.report import PIXEL_RATIO, write_report
from ldpsim.pipeline.summary.summary import summarize

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


def test_report_in_a_browser_without_network(failing_report, tmp_path):
    # The report of test_report_of_a_store (conftest's failing_report): figures, tables,
    # failures and a recorded run.
    _, page, _ = failing_report

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
        "2 min 5 s n/a 36 0 local",
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
#: A page that loads the report in iframes of given widths, side by side ({frames}: one
#: MEASURE_FRAME each), and writes what it measures in each, by width, into
#: ``<pre id="measure">`` once all are measured (the report itself runs no script: its
#: policy forbids it). Chromium lets a file page read a file iframe's DOM with
#: --allow-file-access-from-files. It measures, in this order: the page; every figure
#: shown (an image, or a zip plot's SVG panel) with its size; each results table's label
#: cells and numbers, before and after its box is scrolled to its right end; then it taps
#: the first figure and measures what opens.
MEASURE_HARNESS = """<!DOCTYPE html><html><body style="margin:0">
<div style="display:flex;align-items:flex-start">{frames}</div>
<pre id="measure"></pre>
<script>
const frames = [...document.querySelectorAll("iframe")];
const measuredByWidth = {};
frames.forEach((frame) => frame.addEventListener("load", () => {
  const doc = frame.contentDocument;
  const root = doc.documentElement;
  const shown = (e) => e.getClientRects().length > 0;
  const drawn = [...doc.querySelectorAll("img, svg[data-min-text-px]")].filter(shown);
  // An image's width without its border; an SVG's as drawn.
  const figures = drawn.map((e) => ({
    tag: e.localName,
    alt: e.getAttribute("alt") || (e.querySelector("title") || {}).textContent || "",
    shown: e.localName === "img" ? e.clientWidth : e.getBoundingClientRect().width,
    css: e.localName === "img" ? Number(e.getAttribute("width")) : e.viewBox.baseVal.width,
    natural: e.naturalWidth || 0,
    minText: Number(e.dataset.minTextPx),
  }));
  // A body row's label cells: every cell but the numbers (blank ones too), as shown.
  const labels = (box) => [...box.querySelectorAll("tbody tr")].filter(shown)
    .flatMap((tr) => [...tr.children].filter((c) => !c.classList.contains("num") && shown(c)))
    .filter((c) => !c.closest("tr.heading")).map((c) => c.getBoundingClientRect());
  const tables = [...doc.querySelectorAll("#results .scroll")].map((box) => {
    const left = box.getBoundingClientRect().left;
    const before = labels(box);
    // How far past the box's right edge the text of its caption and of its heading
    // rows (a phone's outer labels) reaches before it is scrolled: cut off there.
    const right = box.getBoundingClientRect().right;
    const textRight = (e) => {
      const range = doc.createRange();
      range.selectNodeContents(e);
      return Math.max(-Infinity, ...[...range.getClientRects()].map((r) => r.right));
    };
    const cut = [...box.querySelectorAll("caption, tr.heading span")].filter(shown)
      .map((e) => [e.textContent, textRight(e) - right]).filter(([, past]) => past > 1);
    const rows = [...box.querySelectorAll("tbody tr")]
      .filter((tr) => !tr.classList.contains("heading") && tr.querySelector("td.num"));
    const first = rows[0].querySelector("td.num").getBoundingClientRect();
    box.scrollLeft = box.scrollWidth;
    const after = labels(box);
    const last = rows[0].querySelector("td.num:last-child").getBoundingClientRect();
    // Label cells (a name or a label) whose text wraps inside a word: a line that
    // ends on a character other than an underscore, a space, a hyphen or a slash.
    const midWord = [...box.querySelectorAll("th.lab")].filter(shown).filter((cell) => {
      const walker = doc.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
      let lastTop = null, lastChar = "";
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        for (let i = 0; i < node.length; i++) {
          const range = doc.createRange();
          range.setStart(node, i);
          range.setEnd(node, i + 1);
          const rect = range.getClientRects()[0];
          if (rect && rect.width > 0) {
            if (lastTop !== null && rect.top > lastTop + 1 && !"_ -/".includes(lastChar)) {
              return true;
            }
            lastTop = rect.top;
          }
          lastChar = node.data[i];
        }
      }
      return false;
    }).map((cell) => cell.textContent);
    const result = {
      cut: cut,
      midWord: midWord,
      width: box.clientWidth,
      scrolls: box.scrollWidth > box.clientWidth,
      labelsRight: Math.max(...before.map((r) => r.right)) - left,
      labelsRightAfter: Math.max(...after.map((r) => r.right)) - left,
      firstNumberLeft: first.left - left,
      moved: Math.max(...before.map((r, i) => Math.abs(r.left - after[i].left))),
      lastNumber: [last.left - left, last.right - left],
    };
    box.scrollLeft = 0;
    return result;
  });
  // The rule above each group of rows where the first label changes: the top border of
  // the group's first row shown (on a phone, its heading row), in px.
  const rules = [...doc.querySelectorAll("#results tbody.major")]
    .filter((group) => (group.previousElementSibling || {}).localName === "tbody")
    .map((group) => [...group.rows].find(shown))
    .map((row) => parseFloat(getComputedStyle(row.cells[0]).borderTopWidth));
  const banner = doc.getElementById("banner");
  const heading = doc.querySelector("h1");
  // Elements that reach past the page's right edge outside a table's scroll box.
  const wide = [...doc.body.querySelectorAll("*")]
    .filter((e) => e.getBoundingClientRect().right > root.clientWidth + 0.5)
    .filter((e) => !e.closest(".scroll"))
    .map((e) => e.tagName + "." + e.className);
  const measured = {
    scrollWidth: root.scrollWidth,
    clientWidth: root.clientWidth,
    height: root.scrollHeight,
    images: figures,
    tables: doc.querySelectorAll("table").length,
    boxed: doc.querySelectorAll(".scroll > table").length,
    results: tables,
    rules: rules,
    banner: banner ? banner.getBoundingClientRect().top : null,
    heading: heading.getBoundingClientRect().top,
    wide: wide.slice(0, 10),
  };
  // A tap on the first figure: what covers the page then, and the figure's width in it.
  const figure = doc.querySelector("#figures figure");
  const open = figure.querySelector("a.open") || figure.querySelector("img");
  open.click();
  setTimeout(() => {
    const image = figure.querySelector("img.wide") || figure.querySelector("img");
    const box = figure.getBoundingClientRect();
    measured.tapped = {
      css: Number(image.getAttribute("width")),
      shown: shown(image) ? image.clientWidth : 0,
      cover: [box.left, box.top, box.width, box.height],
      viewport: [root.clientWidth, frame.contentWindow.innerHeight],
      close: Boolean(figure.querySelector("a.close")) && shown(figure.querySelector("a.close")),
    };
    measuredByWidth[frame.dataset.width] = measured;
    if (Object.keys(measuredByWidth).length === frames.length) {
      document.getElementById("measure").textContent = JSON.stringify(measuredByWidth);
    }
  }, 500);
}));
</script></body></html>
"""
#: An iframe of MEASURE_HARNESS: the page ``{src}`` shown ``{width}`` CSS px wide.
MEASURE_FRAME = (
    '<iframe src="{src}" data-width="{width}" '
    'style="width:{width}px;height:900px;border:0;flex:none"></iframe>'
)
#: The page widths the layout is measured at: a phone, and the desktop the figures are
#: sized for.
PHONE_PX, DESKTOP_PX = 400, 1280
#: A page just wider than a phone's layout (a tablet, a narrow window).
NARROW_DESKTOP_PX = 650
#: WCAG 2.1's reflow width (1.4.10): a 1280 px window at 400% zoom.
REFLOW_PX = 320
#: The smallest figure text a reader gets at 100% zoom on the desktop page, in CSS px.
MIN_TEXT_PX = 10.0
#: The smallest figure text on a 400 px phone, in CSS px (issue 43).
PHONE_MIN_TEXT_PX = 9.0
#: The most of a results table's box its label columns may take on a phone: the rest is
#: the numbers'.
PHONE_LABEL_SHARE = 0.6


def measure(
    page: Path, tmp_path: Path, widths: tuple[int, ...] = (PHONE_PX, DESKTOP_PX)
) -> dict[int, dict]:
    """What MEASURE_HARNESS measures of ``page`` shown at each of ``widths`` CSS px, by
    width: in one chromium, the page side by side at each width. A chromium per width
    measured the same, at 0.6 CPU-seconds and 0.6 to 2.4 s more per width (the three
    reports here, measured 2026-11-30)."""
    frames = "".join(MEASURE_FRAME.format(src=page.name, width=width) for width in widths)
    harness = page.with_name(f"measure-{page.stem}-{'-'.join(map(str, widths))}.html")
    harness.write_text(MEASURE_HARNESS.replace("{frames}", frames))
    command = [
        *offline_prefix(),
        find_chromium(),
        *CHROMIUM_FLAGS,
        f"--user-data-dir={tmp_path / 'profile'}",
        "--allow-file-access-from-files",
        f"--window-size={sum(widths) + 100},1000",
        "--virtual-time-budget=10000",  # the load event fires before the DOM is dumped
        "--dump-dom",
        harness.as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    found = re.search(r'<pre id="measure">(.*?)</pre>', result.stdout, re.S)
    assert found and found.group(1), result.stdout[-2000:]
    measured = json.loads(html.unescape(found.group(1)))
    return {width: measured[str(width)] for width in widths}


def check_layout(
    page: Path, tmp_path: Path, partial: bool, layouts: dict[int, dict] | None = None
) -> None:
    """Issue 33's browser checks of a report page, and issue 43's on a phone
    (:func:`check_phone`); ``layouts``: the page measured at PHONE_PX and DESKTOP_PX
    (:func:`measure`), if it is."""
    layouts = layouts or measure(page, tmp_path)
    phone, desktop = layouts[PHONE_PX], layouts[DESKTOP_PX]
    # No sideways scrolling of the page on a phone: wide tables scroll in their boxes.
    assert phone["scrollWidth"] <= phone["clientWidth"], phone
    assert phone["wide"] == [], phone["wide"]
    assert phone["tables"] == phone["boxed"] > 0
    check_phone(phone)
    assert desktop["scrollWidth"] <= desktop["clientWidth"], desktop["wide"]
    assert desktop["images"], "no figure"
    for image in desktop["images"]:
        # Descriptive alt text: the figure's title, axes and lines, not "figure coverage".
        assert len(image["alt"]) > 60 and " against " in image["alt"], image["alt"]
        # A PNG of twice its CSS size, shown at (nearly) that size: its smallest text,
        # measured in the figure, stays readable at 100% zoom.
        if image["tag"] == "img":
            assert image["natural"] == pytest.approx(PIXEL_RATIO * image["css"], abs=2)
        assert image["minText"] * image["shown"] / image["css"] >= MIN_TEXT_PX, image
    # A rule above every group of rows where the first label changes, on both pages.
    for layout in (phone, desktop):
        assert layout["rules"] and min(layout["rules"]) >= 1, layout["rules"]
    # The banner of a partial store (or one with failures) comes first, before the title.
    for layout in (phone, desktop):
        if partial:
            assert layout["banner"] is not None and layout["banner"] < layout["heading"]
        else:
            assert layout["banner"] is None


def check_phone(phone: dict) -> None:
    """Issue 43 on a 400 px phone: results tables keep their labels in view while their
    numbers scroll beside them (:func:`check_sticky_tables`), every figure shown has text
    of 9 px or more, and a tap opens the first figure at its full size."""
    check_sticky_tables(phone)
    assert phone["images"], "no figure"
    for image in phone["images"]:
        assert image["minText"] * image["shown"] / image["css"] >= PHONE_MIN_TEXT_PX, image
    check_opens_full_size(phone)


def check_sticky_tables(phone: dict) -> None:
    """Each results table shows its first number column beside its labels; one that
    scrolls sideways keeps its labels where they are when its box is scrolled to the end,
    where its last column shows beside them, not under them."""
    assert phone["results"], "no results table"
    for table in phone["results"]:
        assert table["midWord"] == [], table  # a label wraps after an underscore, ...
        assert table["cut"] == [], table  # its caption and heading rows wrap in its box
        assert table["labelsRight"] <= PHONE_LABEL_SHARE * table["width"], table
        assert table["firstNumberLeft"] < table["width"], table
        if table["scrolls"]:
            assert table["moved"] < 1, table
            left, right = table["lastNumber"]
            assert left >= table["labelsRight"] - 1 and right <= table["width"] + 1, table


def check_numbers_beside_labels(layout: dict) -> None:
    """Each results table, its box scrolled to its right end, shows its last column of
    numbers whole beside its label columns (sticky) or past them (scrolled away), not
    under them."""
    assert layout["results"], "no results table"
    for table in layout["results"]:
        left, right = table["lastNumber"]
        assert left >= table["labelsRightAfter"] - 1 and right <= table["width"] + 1, table


def check_opens_full_size(layout: dict) -> None:
    """After a tap on the first figure: it covers the page, at its full CSS width, with a
    way to close it."""
    tapped = layout["tapped"]
    assert tapped["shown"] == pytest.approx(tapped["css"], abs=1), tapped
    assert tapped["cover"] == pytest.approx([0, 0, *tapped["viewport"]], abs=1), tapped
    assert tapped["close"], tapped


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
    # With its zip plots (--zip, SVG panels): they pass the same checks.
    page = write_report(demo_store, tmp_path / "demo.html", zip_plots=True)
    check_layout(page, tmp_path, partial=False)
    assert page.read_text().count('<figure class="zip"') == 2  # 2 grid points


@pytest.fixture(scope="module")
def remedies_like(tmp_path_factory) -> tuple[Path, dict[int, dict]]:
    """The report of :func:`many_panel_store` and what it measures at PHONE_PX and
    DESKTOP_PX (:func:`measure`)."""
    folder = tmp_path_factory.mktemp("remedies-like")
    store = syn.save_store(many_panel_store(), folder / "remedies-like.zarr")
    page = write_report(store, folder / "remedies-like.html")
    return page, measure(page, folder)


@pytest.fixture(scope="module")
def sparse_like(tmp_path_factory) -> tuple[Path, dict[int, dict]]:
    """The report of :func:`many_coordinate_store` and what it measures at PHONE_PX and
    DESKTOP_PX (:func:`measure`)."""
    folder = tmp_path_factory.mktemp("sparse-like")
    store = syn.save_store(many_coordinate_store(), folder / "sparse-like.zarr")
    page = write_report(store, folder / "sparse-like.html")
    return page, measure(page, folder)


def test_a_many_panel_partial_report_lays_out_with_its_banner(remedies_like, tmp_path):
    page, layouts = remedies_like
    check_layout(page, tmp_path, partial=True, layouts=layouts)
    ds = many_panel_store()
    text = page_text(page.read_text())
    done, total = int(ds["done"].sum()), ds["done"].size
    assert 0 < done < total
    assert f"Partial store: {done} of {total} replicates are done" in text
    # The empty panel says so, and the alt text of its figures too.
    assert f"Some panels have {NO_DATA_TEXT}" in html.unescape(page.read_text())


def test_a_many_coordinate_report_lays_out(sparse_like, tmp_path):
    page, layouts = sparse_like
    check_layout(page, tmp_path, partial=False, layouts=layouts)
    text = page_text(page.read_text())
    assert "coordinates 4, 12 (by grid point)" in text
    # The dot figures' panels (named in their alt text): never coordinate 0 alone.
    page_html = html.unescape(page.read_text())
    # Cases of d = 4 and 12: each row's own d, not the store's 12 (issue 43).
    assert "mean over each row's d coords" in page_html and "coord 0" not in page_html


# -- issue 43: a phone, print -------------------------------------------------------------
def test_results_tables_keep_their_labels_in_view_on_a_phone(remedies_like):
    # Its tables are wider than a phone (a column per n): their numbers scroll.
    _, layouts = remedies_like
    phone = layouts[PHONE_PX]
    assert [table for table in phone["results"] if table["scrolls"]]
    check_sticky_tables(phone)


def test_a_long_label_wraps_after_its_underscores_on_a_phone(tmp_path):
    # Before: a phone's label column (6.5 em) broke such a label anywhere ("bb_rademac" /
    # "her_multipl..."), as it did "randomized_response" in the errors table. A heading
    # row (the outer labels) longer than the phone: it wraps in the table's box, as the
    # caption does (before: cut off at the box's edge, "eps = 1" out of sight).
    label = "bb_rademacher_multipliers"
    model = "randomized_response_with_a_long_label_and_eps_one"
    ds = mixed_store({"quantile": 1}, reps=12, models=(model, "laplace"))
    ds = ds.assign_coords(method=np.array([label, "bm", "sn", "oracle"], dtype=object))
    sweep = json.loads(ds.attrs["sweep"])
    sweep["methods"] = {label: {"method": "bb"}, "bm": {}, "sn": {}, "oracle": {}}
    ds["job_id"] = (ds["done"].dims, np.zeros(ds["done"].shape, dtype=np.int64))
    ds.attrs.update(sweep=json.dumps(sweep), rep_chunk=12, versions="{}")
    store = syn.save_store(ds, tmp_path / "long-label.zarr")
    page = write_report(store, tmp_path / "long-label.html")
    assert "bb_<wbr>rademacher_<wbr>multipliers" in page.read_text()
    assert f"<span>model = {model}</span>" in page.read_text()
    layouts = measure(page, tmp_path, widths=(REFLOW_PX, PHONE_PX, NARROW_DESKTOP_PX))
    check_sticky_tables(layouts[PHONE_PX])
    # Just wider than a phone: the labels' desktop columns (about 530 px) leave no room
    # for a number beside them in a 587 px box. Before: sticky, they covered every
    # number, the box scrolled to its end too; now they scroll with the numbers there.
    check_numbers_beside_labels(layouts[NARROW_DESKTOP_PX])
    # The same at WCAG's reflow width: the phone's label columns (188 px of a 281 px box)
    # covered part of every last number (133 px wide), the box scrolled to its end too.
    check_numbers_beside_labels(layouts[REFLOW_PX])
    assert layouts[REFLOW_PX]["scrollWidth"] <= layouts[REFLOW_PX]["clientWidth"]


def test_figures_are_readable_on_a_phone_and_open_full_size(remedies_like):
    _, layouts = remedies_like
    phone = layouts[PHONE_PX]
    assert phone["images"], "no figure"
    for image in phone["images"]:
        assert image["minText"] * image["shown"] / image["css"] >= PHONE_MIN_TEXT_PX, image
    check_opens_full_size(phone)
    # The full size is the desktop's figure, wider than the phone: it scrolls there.
    assert phone["tapped"]["css"] > PHONE_PX


#: The least of a printed page (but the last) that its content fills: how far down the
#: page its lowest ink reaches.
MIN_PAGE_FILL = 0.3


def print_pdf(page: Path, tmp_path: Path) -> Path:
    """Chromium's PDF of ``page`` (no header or footer: the page's own content only)."""
    pdf = tmp_path / f"{page.stem}.pdf"
    command = [
        *offline_prefix(),
        find_chromium(),
        *CHROMIUM_FLAGS,
        f"--user-data-dir={tmp_path / 'profile'}",
        "--no-pdf-header-footer",
        f"--print-to-pdf={pdf}",
        page.as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and pdf.exists(), result.stderr[-2000:]
    return pdf


def printed_pages(pdf: Path) -> list[dict]:
    """Each page of ``pdf``, rendered by PDFium (pypdfium2): how far down its ink reaches
    (a fraction of its height), its height in points, the vertical extents of its images
    (a figure split over two pages is drawn whole on each, reaching past their edges) and
    its lowest line of text, without spaces."""
    pages = []
    for page in pdfium.PdfDocument(pdf):
        gray = page.render(scale=50 / 72, grayscale=True).to_numpy()
        gray = gray.reshape(gray.shape[0], gray.shape[1], -1)[..., 0]
        ink = np.flatnonzero((gray < 245).any(axis=1))
        images = page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE])
        text = page.get_textpage()
        chars = [
            (text.get_charbox(i, loose=True), text.get_text_range(i, 1))
            for i in range(text.count_chars())
        ]
        chars = [(box, char) for box, char in chars if char.strip()]
        lowest = min((box[1] for box, _ in chars), default=0.0)
        line = [(box[0], char) for box, char in chars if box[1] - lowest < 1]
        pages.append(
            {
                "reach": (ink[-1] + 1) / gray.shape[0] if ink.size else 0.0,
                "height": page.get_height(),
                "images": [image.get_bounds()[1::2] for image in images],
                "last_line": "".join(char for _, char in sorted(line)),
            }
        )
    return pages


@pytest.mark.parametrize("shape", ["remedies_like", "sparse_like"])
def test_printed_pages_keep_figures_and_table_headers_whole(shape, request, tmp_path):
    page, _ = request.getfixturevalue(shape)
    pages = printed_pages(print_pdf(page, tmp_path))
    assert len(pages) > 2
    source = page.read_text()
    # A table's header row and its caption: none may end a page (its rows on the next).
    headers = [
        re.sub(r"\s", "", page_text(row)) for row in re.findall(r"<thead>(.*?)</thead>", source)
    ]
    captions = [
        re.sub(r"\s", "", page_text(c)) for c in re.findall(r"<caption.*?</caption>", source)
    ]
    for number, printed in enumerate(pages, start=1):
        for bottom, top in printed["images"]:  # no figure split over two pages
            assert -1 <= bottom and top <= printed["height"] + 1, (number, printed)
        if number == len(pages):
            continue
        assert printed["reach"] >= MIN_PAGE_FILL, (number, printed)
        last = printed["last_line"]
        assert last not in headers, (number, last)
        assert not any(last in caption for caption in captions), (number, last)


def test_sparsity_panels_without_a_done_replicate_say_so():
    # sparse's d = 1000 panels were blank, with no note, in a partial store whose banner
    # says that "panels without a done replicate say so" (issue 43, item 9).
    ds = many_coordinate_store()
    ds["done"] = ds["done"] & ~ds["case"].str.startswith("d12")  # not started at d = 12
    figures = store_figures(ds, summary=summarize(ds))
    empty = {}
    for stem, fig in figures.items():
        for ax in fig.axes:
            drawn = [
                line
                for line in ax.get_lines()
                if line.get_transform() == ax.transData
                and np.isfinite(line.get_xydata()).all(1).any()
            ]
            if ax.get_visible() and ax.has_data() and not drawn:
                says = [t.get_text() for t in ax.texts if t.get_text() == NO_DATA_TEXT]
                assert says, (stem, ax.get_title())
                empty.setdefault(stem, []).append(ax.get_title())
    assert empty == {"sparsity": ["d = 12"] * 3}
