"""The report in a real browser: Debian's chromium, headless, with the network off.

``make test`` installs chromium first (``tests/install-chromium.sh``). Without it the test
skips, saying why; under CI (``CI`` set) it fails instead, as the SLURM tests do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread
from test_report import failing_store, page_text

from ldpsim.pipeline.provenance import record_run
from ldpsim.pipeline.report import write_report

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
        "3.5 s 108 0 local",
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
