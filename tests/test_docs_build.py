"""`make docs`: the Sphinx site builds with warnings as errors; the API page is complete."""

from __future__ import annotations

import html
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx", reason="the test extra installs the docs extra (sphinx)")

from ldpsim.pipeline import api
from ldpsim.tasks import intervals, mechanisms, models

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-q", "-b", "html"]
    build = subprocess.run(
        [*command, str(DOCS), str(out)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr  # a warning fails the build (-W)
    assert build.stderr.strip() == ""
    return out


def text_of(page: Path) -> str:
    """The page's text without tags, as a reader sees it."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def test_run_page_shows_every_parameter_with_type_and_default(site):
    page = (site / "api.html").read_text()
    start = page.index('id="ldpsim.pipeline.api.run"')
    section = page[start : page.index('<dl class="py', start)]
    text = html.unescape(re.sub(r"<[^>]+>", "", section))
    signature = " ".join(text[: text.index("→")].split())
    # The Parameters section: name -> its type line (numpydoc's "classifier").
    described = dict(
        re.findall(r'<dt><strong>(\w+)</strong><span class="classifier">(.*?)</span>', section)
    )
    for name, parameter in inspect.signature(api.run).parameters.items():
        entry = f"{name}: {parameter.annotation}"
        if parameter.default is not parameter.empty:
            entry += f" = {parameter.default!r}"
        assert entry in signature, (entry, signature)
        assert name in described, (name, sorted(described))
        if parameter.default is not parameter.empty:
            kind = html.unescape(described[name])
            assert kind.endswith(f"default {parameter.default!r}".replace("'", '"')), kind


def test_every_builtin_unit_and_cli_verb_has_its_entry(site):
    units = text_of(site / "generated" / "units.html")
    for registry in (models.REGISTRY, mechanisms.REGISTRY, intervals.REGISTRY):
        for name, cls in registry.items():
            assert f"class {cls.__module__}.{cls.__qualname__}(" in units, name
    cli = text_of(site / "cli.html")
    for option in ("--scheduler", "--set", "--replicates", "--coords", "--start-timeout"):
        assert option in cli, option
    assert "130  interrupted (Ctrl-C)" in cli  # the exit codes, from the parser's epilog
