"""The HTML report: what it holds, that it needs nothing outside the file, its size."""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pytest
import synthetic as syn
import xarray as xr
from conftest import edit_root_attrs

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.report.report import (
    MAX_FAILURES_SHOWN,
    breakable,
    build_context,
    default_report_path,
    render_report,
    sweep_toml,
)
from ldpsim.pipeline.store.provenance import read_runs, record_run
from ldpsim.pipeline.summary.nominal_claims import false_flag_rate

#: Anything that would make a browser fetch from outside the file.
EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["'](?!data:|#)|url\(|@import|<script""", re.I)


def page_text(page: str) -> str:
    """The page's text: tags removed, entities decoded, spaces collapsed."""
    text = re.sub(r"<style.*?</style>|<[^>]+>", " ", page, flags=re.S)
    return " ".join(html.unescape(text).split())


def test_report_of_a_store(failing_report):
    # `ldpsim report` of syn.failing_store, once a run is recorded (conftest's failing_report:
    # test_report_browser.py shows the same page in chromium).
    store, out, printed = failing_report
    assert printed.strip() == str(out)
    page = out.read_text()
    text = page_text(page)
    # A run that wrote to the store is listed with its dates, wall time and cluster.
    (run,) = read_runs(store)
    assert f"{run['started']} to {run['finished']} 2 min 5 s n/a 36 0 local" in text
    # Results with standard errors and the replicates a 0.005 se needs.
    assert "tau coord method statistic n = 1e2 n = 1e4" in text
    assert "cover 0.829 (0.064)*" in text and "R for se 0.005" in text
    # bb failed in one replicate and 4 are not computed: its cells are marked, and said so.
    assert "* computed on fewer than all 40 replicates of its grid point" in text
    assert "pred cover" in text and "mse average" in text
    # Every figure plot draws, inline: the desktop's and a phone's (a panel per row).
    assert page.count('class="wide" src="data:image/png;base64,') == 3
    assert page.count('class="narrow" src="data:image/png;base64,') == 3
    # Failures per method, with seeds, the records beyond the first 20 summed up; the
    # error text is escaped (autoescape), not markup.
    assert "method bb: 3 replicates" in text  # the flags: one per non-empty grid point
    assert "tau=0.5,n=100 0 1000 LinAlgError: singular <matrix>" in text
    assert "singular &lt;matrix&gt;" in page and "<matrix>" not in page
    assert f"and 3 more (the first {MAX_FAILURES_SHOWN} are listed)" in text
    # Timings per replicate and per method.
    assert "median 0.5 s per replicate, 54 s in all" in text
    assert "bb 0.25 27" in text  # median and total seconds of bb over 36 x 3 done
    # The specification as a sweep file, and the provenance.
    assert "[spec]" in text and 'model = "quantile"' in text
    for name in ("python", "numpy", "numba", "dask", "xarray", "zarr", "CPU", "host"):
        assert name in text
    assert "streams version" in text
    # Nothing the browser would fetch.
    assert not EXTERNAL.search(page.replace('src="data:', ""))


def test_a_store_without_run_records_says_so(tmp_path, without_figures):
    store = tmp_path / "s.zarr"
    syn.point_store().to_zarr(store, zarr_format=3, consolidated=False)
    text = page_text(render_report(build_context(store)))
    assert "Not recorded: no run of this store left a record" in text
    assert "No replicate and no interval method failed" not in text  # bb failed once


def test_sweep_toml_round_trips():
    import tomllib

    sweep = json.loads(syn.sweep_attr({"eps": [1.0, float("inf")]}, {"n": 100}, ["bb"]))
    text = sweep_toml(sweep, note="as stored")
    assert text.startswith("# sweep 'synthetic', as stored\n")
    back = tomllib.loads(text)
    assert back["grid"]["eps"] == [1.0, float("inf")]
    assert "rep_chunk" not in back  # None: not set


def test_report_of_a_damaged_path_is_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing.zarr")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not an ldpsim store" in err
    assert not list(tmp_path.iterdir())


def big_store(reps: int, d: int, failures: int) -> xr.Dataset:
    """One grid point of d coordinates, bb and oracle (float32 bounds, as cheap as can be)."""
    rng = np.random.default_rng(0)
    estimate = (0.01 * rng.standard_normal((reps, d))).astype(np.float32)
    half = np.array([0.02, 0.016], dtype=np.float32)[:, None, None]
    lower = estimate[None] - half
    upper = estimate[None] + half
    done = np.ones(reps, dtype=bool)
    method_failed = np.zeros((2, reps), dtype=bool)
    method_failed[0, :failures] = True
    ds = xr.Dataset(
        {
            "estimate": (("rep", "coord"), estimate),
            "lower": (("method", "rep", "coord"), lower),
            "upper": (("method", "rep", "coord"), upper),
            "truth": (("coord",), np.zeros(d)),
            "done": (("rep",), done),
            "failed": (("rep",), ~done),
            "method_failed": (("method", "rep"), method_failed),
            "seconds": (("rep",), np.full(reps, 4.0)),
            "method_seconds": (("method", "rep"), np.full((2, reps), 0.5)),
            "job_id": (("rep",), np.zeros(reps, dtype=np.int64)),
        },
        coords={
            "method": np.array(["bb", "oracle"], dtype=object),
            "rep": np.arange(reps),
            "coord": np.arange(d),
        },
    )
    sweep = syn.sweep_attr({}, {"n": 10**6, "d": d}, ["bb", "oracle"], reps)
    ds.attrs.update(level=syn.LEVEL, sweep=sweep, rep_chunk=reps, versions="{}")
    return ds


def test_a_store_of_a_thousand_coordinates_gives_a_small_page(tmp_path):
    # The page's size grows with the table rows, the figures and the listed failures,
    # not with the replicates: d = 1000 is summarized by coordinate means (and its
    # diagnostics by coordinate 0), failures are listed up to 20 per method. big_store
    # with 1e5 replicates, d = 1000 and 500 failure records gave a page of 54 KB (131 s,
    # 9.4 GB peak memory, summarized lazily; 2 loaded cores), too slow for a test.
    store = tmp_path / "big.zarr"
    syn.save_store(big_store(reps=200, d=1000, failures=150), store)
    folder = store / "ldpsim" / "errors"
    folder.mkdir()
    for rep in range(150):
        record = {"key": "0", "rep": rep, "seed": rep, "spec": {"d": 1000}, "kind": "method"}
        record["methods"] = {"bb": "x" * 2000}
        (folder / f"0__{rep}.json").write_text(json.dumps(record))
    out = tmp_path / "big.html"
    assert main(["report", str(store), "--out", str(out)]) == 0
    size = out.stat().st_size
    assert size < 5e6, size
    text = page_text(out.read_text())
    assert "each the mean over the d coordinates" in text and "coord 999" not in text
    assert "and 130 more" in text


@pytest.mark.parametrize("target", ["0", "1", "x"])
def test_report_target_se_is_checked(target, tmp_path, capsys):
    assert main(["report", str(tmp_path), "--target-se", target]) == 2
    assert "--target-se" in capsys.readouterr().err


def test_a_large_store_is_summarized_lazily_with_the_same_page(
    tmp_path, monkeypatch, without_figures
):
    import ldpsim.pipeline.report.report as report

    store = syn.failing_store(tmp_path)
    in_memory = report.build_context(store)
    monkeypatch.setattr(report, "IN_MEMORY_BYTES", 0)  # every store counts as large
    lazy = report.build_context(store)
    for key in ("tables", "failures", "timings", "sweep_toml"):
        assert lazy[key] == in_memory[key], key


# -- issue 33: tables a reader (and a screen reader) can use, numbers explained ----------
def test_wilson_interval_at_the_boundary_and_inside():
    from ldpsim.pipeline.summary.tables import coverage_cell, wilson_interval

    # All of R = 10 covered: Wilson's lower bound is R / (R + z^2) at z = 2.
    assert wilson_interval(1.0, 10) == pytest.approx((10 / 14, 1.0))
    assert wilson_interval(0.0, 10) == pytest.approx((0.0, 4 / 14))
    # Within [0, 1] exactly: unclamped, R = 29 gave a lower bound of -7e-18 ("-0.000")
    # and R = 21 an upper bound of 1 + 2e-16.
    assert wilson_interval(0.0, 29)[0] == 0.0 and wilson_interval(1.0, 21)[1] == 1.0
    assert coverage_cell(0.0, 0.0, 29, 0.9)[0] == "0.000 [0.000, 0.121]"
    # Inside (0, 1) and for many replicates it approaches Wald's p +- 2 se.
    p, r = 0.9, 100_000
    wald = 2 * np.sqrt(p * (1 - p) / r)
    low, high = wilson_interval(p, r)
    assert low == pytest.approx(p - wald, rel=1e-4) and high == pytest.approx(p + wald, rel=1e-4)
    assert np.isnan(wilson_interval(float("nan"), 10)[0])


def test_coverage_cells_flag_departures_and_use_wilson_at_0_and_1():
    from ldpsim.pipeline.summary.tables import DEPARTURE_MARK, coverage_cell

    assert coverage_cell(0.9, 0.013, 500, 0.9) == ("0.900 (0.013)", False)
    assert coverage_cell(0.86, 0.015, 500, 0.9) == ("0.860 (0.015)", True)  # 2.7 se off
    assert coverage_cell(0.88, 0.015, 500, 0.9) == ("0.880 (0.015)", False)  # 1.3 se
    # 10 of 10 covered: not "1.000 (0.000)"; 0.9 is inside [0.714, 1] and not flagged.
    assert coverage_cell(1.0, 0.0, 10, 0.9) == ("1.000 [0.714, 1.000]", False)
    # 400 of 400: Wilson's [0.990, 1] excludes 0.9, a real departure.
    assert coverage_cell(1.0, 0.0, 400, 0.9) == ("1.000 [0.990, 1.000]", True)
    assert coverage_cell(0.0, 0.0, 10, 0.9)[1]
    assert DEPARTURE_MARK not in coverage_cell(float("nan"), float("nan"), 0, 0.9)[0]


def test_report_tables_have_captions_scopes_groups_and_marks(tmp_path, without_figures):
    from ldpsim.pipeline.report.report import write_report
    from ldpsim.pipeline.summary.tables import DEPARTURE_MARK

    store = syn.failing_store(tmp_path)
    # At a nominal 99%, bb's 0.829 (0.064) and 0.857 (0.059) are more than 2 se short.
    edit_root_attrs(store, level=0.99)
    page = write_report(store, tmp_path / "r.html").read_text()
    results = page[page.index('<section id="results">') : page.index('<section id="figures">')]
    # Every table is in a scroll box, named by its <caption>; no caption in a <p>.
    assert page.count("<table>") == page.count('<div class="scroll"') > 0
    assert page.count("<table>") == page.count("<caption")
    assert 'class="caption"' not in page
    # Every header cell has a scope; none is empty.
    assert re.findall(r"<th(?=[\s>])(?![^>]*scope=)[^>]*>", page) == []
    assert '<th scope="col"></th>' not in page
    # A row group per method's rows, a rule above each value of the first row label
    # (tau: 0.5, 0.9), per table.
    assert results.count('<tbody class="major">') == 3 * 2
    # Departures are marked and shaded, and the mark explained under the tables.
    summary = build_context(store)["tables"][0]
    flagged = [
        cell
        for group in summary["groups"]
        for row in group
        for cell in row["cells"]
        if cell["departs"]
    ]
    assert flagged and all(cell["text"].endswith(DEPARTURE_MARK) for cell in flagged)
    assert results.count('class="num departs"') >= len(flagged)
    assert (
        f"{DEPARTURE_MARK}: the method's claimed coverage (per coordinate for intervals"
        in page_text(results)
    )
    # Advice a reader of the page can follow; the CSV is in the page.
    assert "--format csv" not in page
    assert re.search(
        r'<a href="data:text/csv;base64,[^"]+" download="synthetic-summary.csv"', page
    )
    # A print style sheet: figures at full width, rows and figures kept whole (Chromium's
    # PDF is test_report_browser.py's).
    printed = page[page.index("@media print") :]
    assert "figure img.wide { display: block; width: auto; height: auto; max-width: 100%;" in (
        printed
    )
    assert re.search(r"figure, tr, caption[^{]*\{ break-inside: avoid", printed)


def test_the_csv_download_holds_the_summary(tmp_path):
    import base64
    import csv
    import io

    from ldpsim.pipeline.report.report import summary_csv
    from ldpsim.pipeline.summary.summary import summarize

    store = syn.failing_store(tmp_path)
    summary = summarize(xr.open_zarr(store, consolidated=False).load())
    link = summary_csv(summary)
    text = base64.b64decode(link["uri"].removeprefix("data:text/csv;base64,")).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    # One row per grid point, method and coordinate: 2 tau x 2 n x 2 methods x d = 2.
    assert len(rows) == summary["coverage"].size == 16
    assert {"coverage", "coverage_se", "n_done", "n_failed"} <= set(rows[0])


def test_the_header_and_banner_come_from_the_store(tmp_path):
    from ldpsim.pipeline.report.report import banner, shown_run, store_facts

    ds = syn.grid_store()
    facts = store_facts(ds)
    assert facts["n"] == "1e2, 1e4 (grid axis)"
    assert facts["d"] == str(ds.sizes["coord"])
    assert facts["replicates"] == str(ds.sizes["rep"])
    # A run's command line is what the banner of a partial store tells to run again.
    done, total = int(ds["done"].sum()), int(ds["done"].size)
    run = shown_run({"command": ["ldpsim", "run", "x.toml"], "unknown": []})
    lines = banner(ds, done, total, [run])
    assert done < total and f"{done:,} of {total:,} replicates are done" in lines[0]
    assert "(ldpsim run x.toml): it resumes" in lines[0]
    complete = ds.assign(done=xr.ones_like(ds["done"]), method_failed=ds["method_failed"] & False)
    assert banner(complete, total, total, []) == []


def test_a_nearly_complete_store_never_reads_100_per_cent():
    from ldpsim.pipeline.report.report import done_percent

    assert [done_percent(done, 2000) for done in (0, 1, 19, 20, 1999, 2000)] == [
        "0%",
        "under 1%",
        "under 1%",
        "1%",
        "99%",
        "100%",
    ]


def test_methods_added_and_not_computed_yet_are_in_the_banner_and_header(
    tmp_path, without_figures
):
    # Every replicate done, and oracle, added to the store, not computed for 5 of them at
    # tau = 0.5, n = 100 (no seconds, no bounds, no failure), nor for 1 at n = 1e4.
    ds = syn.grid_store().isel(rep=slice(0, syn.DONE)).sel(tau=[0.5])
    seconds = np.full(ds["method_failed"].shape, 0.25)
    oracle = list(ds["method"].values).index("oracle")
    for n, reps in ((0, range(5)), (1, range(1))):
        seconds[0, n, oracle, list(reps)] = np.nan
        for bound in ("lower", "upper"):
            ds[bound][0, n, oracle, list(reps)] = np.nan
    ds["method_seconds"] = (("tau", "n", "method", "rep"), seconds)
    store = tmp_path / "pending.zarr"
    syn.save_store(ds, store)
    record_run(
        store,
        wall_seconds=1.0,
        computed=0,
        failed=0,
        cluster="local",
        command=["ldpsim", "run", "a b.toml", "--set", "grid.n=[100, 10000]"],
    )
    context = build_context(store)
    assert context["done"] == context["total"]
    (line,) = [line for line in context["banner"] if line.startswith("Methods added")]
    assert "not computed yet: oracle for 6 done replicates." in line
    # The command line to run again, as a shell reads it back.
    assert "(ldpsim run 'a b.toml' --set 'grid.n=[100, 10000]'): it resumes" in line
    text = page_text(render_report(context))
    assert "added methods not computed yet: oracle for 6 done replicates" in text
    assert "command: ldpsim run 'a b.toml' --set 'grid.n=[100, 10000]'" in text


def test_a_store_named_from_inside_it_gets_its_report_beside_it(tmp_path, monkeypatch):
    from ldpsim.pipeline.report.plots import default_out_dir

    store = tmp_path / "s.zarr"
    (store / "sub").mkdir(parents=True)
    monkeypatch.chdir(store)
    assert default_report_path(".") == tmp_path.resolve() / "s-report.html"
    assert default_out_dir(".") == tmp_path.resolve() / "s-figures"
    monkeypatch.chdir(store / "sub")
    assert default_report_path("..") == tmp_path.resolve() / "s-report.html"
    assert default_report_path("../") == tmp_path.resolve() / "s-report.html"


def test_the_report_shows_the_runs_command_lines(tmp_path, without_figures):
    store = syn.failing_store(tmp_path)
    record_run(
        store,
        wall_seconds=1.0,
        computed=1,
        failed=0,
        cluster="local",
        command=["ldpsim", "run", "demo", "--set", "n=100000"],
        warm_up_seconds=2.5,
    )
    text = page_text(render_report(build_context(store)))
    assert "command: ldpsim run demo --set n=100000" in text
    # The run's warm-up (compiling or loading kernels) is its own column, not compute time.
    (run,) = read_runs(store)
    assert f"{run['started']} to {run['finished']} 1.0 s 2.5 1 0 local" in text
    assert "It leaves out the workers' warm-up, 2.5 s in the 1 run that recorded it" in text


def band_store(d: int, reps: int = 40) -> xr.Dataset:
    """One grid point of d coordinates, a marginal bb and a simultaneous band_sidak:
    bb misses one coordinate in 4 replicates (joint 0.9), the band in 12 (joint 0.7)."""
    lower = np.full((2, reps, d), -1.0)
    for m, misses in enumerate((4, 12)):
        for r in range(misses):
            lower[m, r, r % d] = 0.5  # above theta* = 0: coordinate r % d not covered
    ds = xr.Dataset(
        {
            "estimate": (("rep", "coord"), np.zeros((reps, d))),
            "lower": (("method", "rep", "coord"), lower),
            "upper": (("method", "rep", "coord"), np.ones((2, reps, d))),
            "truth": (("coord",), np.zeros(d)),
            "done": (("rep",), np.ones(reps, dtype=bool)),
        },
        coords={
            "method": np.array(["bb", "band_sidak"], dtype=object),
            "rep": np.arange(reps),
            "coord": np.arange(d),
        },
    )
    sweep = json.loads(syn.sweep_attr({}, {"n": 1000, "d": d}, ["bb"], reps))
    sweep["methods"]["band_sidak"] = {"method": "bb", "simultaneous": True, "band": "sidak"}
    ds.attrs.update(level=syn.LEVEL, sweep=json.dumps(sweep))
    return ds


@pytest.mark.parametrize("d", [3, 12])  # one row per coordinate; coordinate means
def test_r_for_se_plans_a_band_with_its_joint_coverage(d):
    from ldpsim.pipeline.formatting import count_text
    from ldpsim.pipeline.report.report import result_tables
    from ldpsim.pipeline.summary.summary import summarize

    summary = summarize(band_store(d))
    assert float(summary["joint_coverage"].sel({"method": "band_sidak"})) == pytest.approx(0.7)
    table = result_tables(summary)[0]
    planned: dict[tuple[str, str], list[str]] = {}
    previous: list[str] = []
    # One grid point, one n: the statistics are the columns (issue 43), a method's
    # planning in the column of its own label ("-" in the other).
    for group in table["groups"]:
        for row in group:
            # Fill in the labels left blank where they repeat the row above.
            above = previous or row["labels"]
            labels = [shown or old for shown, old in zip(row["labels"], above, strict=True)]
            previous = labels
            for header, cell in zip(table["headers"], row["cells"], strict=True):
                if header.startswith("R for se") and cell["text"] != "-":
                    planned.setdefault((labels[-1], header), []).append(cell["text"])
    # The band: 0.7 x 0.3 / 0.005^2 = 8400 from its joint coverage, in a column that says
    # so, where its coverage per coordinate (0.9 at d = 3) would give 3600.
    assert set(planned) == {("bb", "R for se 0.005"), ("band_sidak", "R for se 0.005, joint")}
    assert set(planned["band_sidak", "R for se 0.005, joint"]) == {"8,400"}
    assert (
        "joint coverage (all coordinates at once), what a simultaneous band (band_sidak)"
        in (table["caption"])
    )
    # The marginal bb keeps the coverage shown: per coordinate, or their mean.
    var = "replicates_needed" if d <= 10 else "coord_mean_replicates_needed"
    want = [count_text(float(v)) for v in np.ravel(summary[var].sel({"method": "bb"}).values)]
    assert planned["bb", "R for se 0.005"] == want
    assert "8,400" not in want
    # `ldpsim summarize --target-se` plans the same way in its text table.
    from ldpsim.pipeline.summary.tables import format_table

    text = format_table(summary, replicates_needed=True)
    caption, rule, header, _, *lines = text.splitlines()
    lines = lines[: lines.index(rule)]  # the rows, not the notes under them
    assert "what a simultaneous band (band_sidak) is for" in caption
    assert header.endswith("R for se 0.005  R for se 0.005, joint")
    joint = [line.split()[-1] for line in lines if "band_sidak" in line]
    marginal = [line.split()[-2] for line in lines if "bb" in line]
    assert joint == ["8,400"] * (d if d <= 10 else 1)
    assert marginal == want  # bb's only


#: A value of the wrong type for each field of a run record that the report reads, and
#: what the runs table then shows for it (None: left out, as a run that had none).
WRONG_RUN_FIELDS = [
    ("wall_seconds", None, "wall", "unknown"),
    ("wall_seconds", "125.0", "wall", "unknown"),
    ("wall_seconds", -1.0, "wall", "unknown"),
    ("wall_seconds", 10**400, "wall", "unknown"),
    ("warm_up_seconds", "2.5", "warm_up", "unknown"),
    ("started", 5, "started", "unknown"),
    ("finished", None, "finished", "unknown"),
    ("computed", "36", "computed", "unknown"),
    ("failed", True, "failed", "unknown"),
    ("cluster", ["local"], "cluster", "unknown"),
    ("host", None, "host", "unknown"),
    ("cpu", {}, "cpu", "unknown"),
    ("cores", 2.5, "cores", "unknown"),
    ("command", "ldpsim run demo", "command", None),
    ("command", ["ldpsim", 3], "command", None),
    ("commit", 7, "commit", None),
]


def test_run_records_with_fields_of_the_wrong_type_show_them_as_unknown(
    tmp_path, without_figures, capsys
):
    store = syn.failing_store(tmp_path)
    record_run(store, wall_seconds=2.0, computed=36, failed=0, cluster="local", command=["x"])
    folder = store / "ldpsim" / "runs"
    (written,) = folder.glob("*.json")
    good = json.loads(written.read_text())
    written.unlink()
    for i, (field, value, _, _) in enumerate(WRONG_RUN_FIELDS):
        (folder / f"{i:02d}.json").write_text(json.dumps({**good, field: value}))
    (folder / "90.json").write_text(json.dumps({**good, "versions": "numpy 2"}))
    (folder / "91.json").write_text(json.dumps({**good, "versions": {"numpy": 2}}))
    (folder / "92.json").write_text("{}")  # a JSON object without any field
    (folder / "93.json").write_text("[1, 2]")  # JSON, but not a record
    context = build_context(store)
    runs = context["provenance"]["runs"]
    for run, (field, _, shown, value) in zip(runs, WRONG_RUN_FIELDS, strict=False):
        assert run["unknown"] == [field] and run[shown] == value, (field, run)
    for run in runs[len(WRONG_RUN_FIELDS) : len(WRONG_RUN_FIELDS) + 2]:
        assert run["unknown"] == ["versions"] and set(run["versions"].values()) == {"unknown"}
    empty = runs[-2]
    assert [empty[k] for k in ("started", "wall", "warm_up", "computed", "host")] == [
        "unknown",
        "unknown",
        "n/a",  # no warm-up: a run of an older ldpsim
        "unknown",
        "unknown",
    ]
    assert runs[-1] == {"unreadable": "93.json"}
    text = page_text(render_report(context))
    assert "unknown to unknown unknown" in text and "record 93.json cannot be read" in text
    # The warm-up of no run is known; the unknown one is not counted as a run too old
    # to record it, as the other readable ones are.
    timings = context["timings"]
    assert (timings["warm_up_runs"], timings["runs_without_warm_up"]) == (0, len(runs) - 2)
    assert main(["report", str(store)]) == 0
    assert capsys.readouterr().out.strip() == str(default_report_path(store))


def test_the_header_counts_replicates_as_the_banner_does(tmp_path, without_figures):
    # Before: "1234567 of 2000000 done" under a banner's "1,234,567 of 2,000,000", and
    # "With 1 replicates a method ..." for a store of one replicate.
    ds = syn.grid_store().isel(rep=[0])
    sweep = json.loads(ds.attrs["sweep"])
    sweep["replicates"] = 1
    ds.attrs["sweep"] = json.dumps(sweep)
    store = tmp_path / "one.zarr"
    ds.to_zarr(store, zarr_format=3, consolidated=False)
    context = build_context(store)
    assert context["departure"]["replicates"] == "1"
    text = page_text(render_report(context))
    assert "With 1 replicate a method whose coverage" in text
    # The coordinates' count alone: "d = 7" beside a grid axis d = 5 (a regression's
    # covariates) read as the sweep's d.
    assert "(grid axis) coordinates 2 methods" in text
    context.update(done=1_234_567, total=2_000_000)
    context["timings"]["replicates"] = 1_234_567
    text = page_text(render_report(context))
    assert "replicates 1,234,567 of 2,000,000 done (1 per grid point)" in text
    assert "Compute time of the done replicates (1,234,567): median" in text
    # None done: no "median n/a s per replicate".
    context["timings"]["replicates"] = 0
    text = page_text(render_report(context))
    assert "No replicate is done yet: no compute time to show." in text
    assert "median n/a" not in text


def test_a_phone_heading_row_names_each_outer_label_once():
    # Before: "coord = coord 1" above a coordinate's rows of a store of d > 1.
    from ldpsim.pipeline.report.report import sticky_labels

    names = ["tau", "coord", "method", "statistic"]
    rows = [
        {"labels": ["0.5", "coord 0", "bb", "cover"]},
        {"labels": ["", "", "", "length"]},
        {"labels": ["", "coord 1", "bb", "cover"]},
    ]
    sticky_labels(names, rows)
    assert [row["heading"] for row in rows] == ["tau = 0.5, coord 0", "", "tau = 0.5, coord 1"]
    # A label that only begins with its column's name is still named (before: the name
    # without its space passed, h23d).
    rows = [{"labels": ["model_b", "bb", "cover"]}]
    sticky_labels(["model", "method", "statistic"], rows)
    assert rows[0]["heading"] == "model = model_b"


def test_a_tables_labels_scroll_only_where_a_bold_number_cannot_show_beside_them():
    # The box's width below which the labels scroll with the numbers (the template's
    # @container rule, in the box's em) leaves room, beside the label columns, for the
    # table's widest cell (a number column's, not only its header), bold as a
    # departure's, with a cell's padding; the table's em is TABLE_FONT_EM of the box's,
    # as the template's table font-size says. Before: a threshold of the labels and the
    # headers alone, of an unbolded number, without the padding, or of a font size of
    # 1 em passed every test (a mutation hunt, h23d).
    from importlib import resources

    from ldpsim.pipeline.report.report import (
        LABEL_PADDING_EM,
        TABLE_FONT_EM,
        TEMPLATE,
        _html_table,
        text_em,
    )

    template = resources.files("ldpsim.pipeline.report").joinpath("templates", TEMPLATE)
    font = re.search(r"\ntable \{[^}]*font-size: ([0-9.]+)em", template.read_text())
    assert font and float(font[1]) == TABLE_FONT_EM
    wide = "0.912 [0.871, 0.944]\N{DAGGER}"
    rows = [(["0.5", "bb", "cover"], ["0.950 (0.007)", wide]), (["", "", "length"], ["1", "2"])]
    table = _html_table("c", ["tau", "method", ""], ["n = 100", "n = 1000"], rows)
    widths = re.findall(r"--w\d+: ([0-9.]+)em", table["columns"])
    labels = sum(float(w) for w in widths)
    room = float(table["sticky_below"]) / TABLE_FONT_EM - labels
    assert room >= text_em(wide, bold=True) + LABEL_PADDING_EM - 0.02
    assert room < text_em(wide, bold=True) + LABEL_PADDING_EM + 1.0


def test_a_phones_labels_scroll_only_where_a_bold_number_cannot_show_beside_them():
    # The same on a phone (the template's @container rule in its max-width: 600px
    # block), of its narrower label columns (--nwI), cells and font. Before: a phone's
    # labels always stuck, and at 320 px (WCAG's reflow width) a Wilson interval's column,
    # wider than the room they leave, lay partly under them at every scroll position.
    from importlib import resources

    from ldpsim.pipeline.report.report import (
        NARROW_PADDING_EM,
        NARROW_TABLE_FONT_EM,
        TEMPLATE,
        _html_table,
        text_em,
    )

    template = resources.files("ldpsim.pipeline.report").joinpath("templates", TEMPLATE)
    phone = template.read_text().split("@media (max-width: 600px)")[1].split("\n}\n")[0]
    font = re.search(r"\.scroll table \{ font-size: ([0-9.]+)em", phone)
    assert font and float(font[1]) == NARROW_TABLE_FONT_EM
    assert "@container (max-width: {{ table.narrow_sticky_below }}em)" in phone
    wide = "0.912 [0.871, 0.944]\N{DAGGER}"
    rows = [(["0.5", "bb", "cover"], ["0.950 (0.007)", wide]), (["", "", "length"], ["1", "2"])]
    table = _html_table("c", ["tau", "method", ""], ["n = 100", "n = 1000"], rows)
    widths = re.findall(r"--nw\d+: ([0-9.]+)em", table["columns"])
    assert len(widths) == 2  # the outer label is a heading row on a phone
    labels = sum(float(w) for w in widths)
    room = float(table["narrow_sticky_below"]) / NARROW_TABLE_FONT_EM - labels
    assert room >= text_em(wide, bold=True) + NARROW_PADDING_EM - 0.02
    assert room < text_em(wide, bold=True) + NARROW_PADDING_EM + 1.0


def test_a_label_breaks_after_its_underscores_not_inside_a_number():
    # The phone's label columns wrap at these <wbr> (test_report_browser measures it); the
    # second read (2026-12-01): not inside a number's exponent (1e-<wbr>05).
    assert str(breakable("randomized_response")) == "randomized_<wbr>response"
    label = "quantile-tau0.5 eps 1e-05"
    assert str(breakable(label)) == "quantile-<wbr>tau0.5 <wbr>eps <wbr>1e-05"
    assert str(breakable("-1.0")) == "-1.0"
    # Escaped once, each part: no markup of a label reaches the page.
    assert str(breakable("<b>_&")) == "&lt;b&gt;_<wbr>&amp;"


def test_a_level_axis_is_named_by_its_levels_in_how_to_read(tmp_path, without_figures):
    # Before: with `level` a grid axis the page put "each grid point's (a grid axis)"
    # where a percentage goes ("whose each grid point's (a grid axis) interval holds the
    # true value", "q = each grid point's (a grid axis)") and gave the rate of marks by
    # chance as "n/a".
    ds = syn.grid_store().rename(tau="level").assign_coords(level=[0.9, 0.8])
    sweep = json.loads(ds.attrs["sweep"])
    del sweep["spec"]["level"]
    sweep["grid"] = {"level": [0.9, 0.8], "n": sweep["grid"]["n"]}
    ds.attrs["sweep"] = json.dumps(sweep)
    store = tmp_path / "levels.zarr"
    ds.to_zarr(store, zarr_format=3, consolidated=False)
    text = page_text(render_report(build_context(store)))
    assert "a grid axis)" not in text.replace("level is a grid axis)", "")
    assert "intervals 80%, 90% (each grid point's: level is a grid axis)" in text
    assert (
        "whose nominal interval holds the true value; a method that works has coverage "
        "near its grid point's level (80% or 90%)."
    ) in text
    assert "from the nominal q = its grid point's level (80% or 90%)" in text
    # The exact rate of marks by chance, at each level (40 replicates).
    rates = [f"{100 * false_flag_rate(40, q):.1f}%" for q in (0.8, 0.9)]
    assert f"is marked in {rates[0]} (at 80%) or {rates[1]} (at 90%) of its cells" in text
    # One level: the page says it as before.
    one = tmp_path / "one.zarr"
    syn.grid_store().to_zarr(one, zarr_format=3, consolidated=False)
    text = page_text(render_report(build_context(one)))
    assert "whose 90% interval holds the true value" in text
    assert f"exactly 90% is marked in {100 * false_flag_rate(40, 0.9):.1f}% of its" in text


def test_a_hidden_file_beside_the_run_records_is_no_record(tmp_path):
    # A hunt (h16f): macOS's AppleDouble file `._NAME.json` beside a run record (binary,
    # left by a copy to a disk macOS does not format) was listed in the report as a run
    # whose "record ._NAME.json cannot be read".
    store = syn.failing_store(tmp_path)
    written = record_run(store, wall_seconds=2.0, computed=36, failed=0, cluster="local")
    (written.parent / f"._{written.name}").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac")
    (written.parent / f".{written.name}.swp").write_bytes(b"b0VIM 9.0")
    # Sync tools' copies of it (Dropbox, OneDrive, Syncthing) were listed as runs too.
    copy = written.read_bytes()
    for name in (
        f"{written.stem} (conflicted copy 2026-12-02).json",
        f"{written.stem}-LAPTOP.json",
        f"{written.stem}.sync-conflict-20261202-123456-ABCDEFG.json",
    ):
        (written.parent / name).write_bytes(copy)
    (run,) = read_runs(store)
    assert run["computed"] == 36 and "unreadable" not in run


def test_every_number_has_its_rows_labels_as_header_cells(failing_report):
    # A screen reader names a cell by the header cells of its own row (and column).
    # Before: a label that repeats the row above was an empty <td>, so the 0.279 of
    # "0.5, coord 0, bb, length" was read out as "length" alone, bb's and oracle's alike.
    _, out, _ = failing_report
    page = out.read_text()
    results = page[page.index('<section id="results">') : page.index('<section id="figures">')]
    read = {}
    for table in re.findall(r"<table>.*?</table>", results, re.S):
        names = re.findall(r'<th scope="col" class="lab[^"]*">', table)
        for row in re.findall(r"<tr>(.*?)</tr>", table, re.S):
            if '<td class="num' not in row:
                continue
            headers = re.findall(r'<th scope="row"[^>]*>(.*?)</th>', row, re.S)
            assert len(headers) == len(names) and "<td" not in row.split('<td class="num')[0], row
            cells = re.findall(r'<td class="num[^"]*">(.*?)</td>', row)
            read.setdefault(tuple(page_text(h) for h in headers), cells)
    assert all(all(labels) for labels in read)
    assert read[("0.5", "coord 0", "bb", "length")][0] == "0.279 (0.018)*"
    assert read[("0.5", "coord 0", "oracle", "length")][0] == "0.658 (0.000)*"
    # The repeated labels are hidden from sight only: the page shows them once.
    assert re.search(r"\.repeat \{ position: absolute; width: 1px; height: 1px;", page)


def test_each_failures_spec_toggle_names_its_replicate(failing_report):
    # Tabbing through the failures table read "spec" at every toggle; each names its
    # grid point and replicate too, hidden from sight (the page shows "spec").
    _, out, _ = failing_report
    page = out.read_text()
    start = page.index('<section id="failures">')
    failures = page[start : page.index("</section>", start)]
    rows = re.findall(
        r'<tr><th scope="row">(.*?)</th><td class="num">(\d+)</td>(.*?)</tr>', failures
    )
    assert rows
    for key, rep, rest in rows:
        summary = re.search(r"<summary>(.*?)</summary>", rest).group(1)
        assert summary == f'spec<span class="repeat"> of {key}, replicate {rep}</span>'


def test_the_page_opts_out_of_a_browsers_automatic_dark_theme(failing_report):
    # Chromium's forced dark mode (--blink-settings=forceDarkModeEnabled=true) inverted
    # the zip plots' inline SVG but not the PNG figures: their white dashed theta* and
    # dotted nominal lines lay on the band's light grey (1.6:1). The page is drawn light.
    _, out, _ = failing_report
    head = out.read_text().split("</head>")[0]
    assert '<meta name="color-scheme" content="only light">' in head
    assert "prefers-color-scheme" not in head  # no dark style sheet that would need it


def test_a_zip_plots_legend_entries_wrap_in_a_narrow_page():
    # With the browser's text at 200% (a 32 px default font) on a 320 px page, the entry
    # "coverage ± 2 MC se" (white-space: nowrap) was 371 px wide: the page scrolled
    # sideways. An entry stays on one line where it fits (an inline block) and wraps
    # where it does not.
    from importlib import resources

    from ldpsim.pipeline.report.report import TEMPLATE

    template = resources.files("ldpsim.pipeline.report").joinpath("templates", TEMPLATE)
    rule = re.search(r"\n\.legend span \{([^}]*)\}", template.read_text())
    assert rule and "display: inline-block" in rule[1]
    assert "nowrap" not in rule[1]


def test_a_table_boxs_focus_ring_is_drawn_outside_it():
    # The boxes are in the tab order (tabindex 0) so that a keyboard scrolls them. Before:
    # Chromium's 2 px ring lay on the box's edge, and the sticky label cells (z-index 1,
    # a white background) painted over its inner pixel down the left side (measured in a
    # screenshot, 2026-12-04: 1 px left beside them, 2 px beside the caption).
    from importlib import resources

    from ldpsim.pipeline.report.report import TEMPLATE

    template = resources.files("ldpsim.pipeline.report").joinpath("templates", TEMPLATE)
    rule = re.search(
        r"\n\.scroll:focus-visible \{ outline-offset: (\d+)px; \}", template.read_text()
    )
    assert rule and int(rule[1]) >= 2


def test_a_figure_of_more_panels_than_a_phone_s_layout_holds_is_shown_whole_and_says_so(
    monkeypatch,
):
    # The phone's figure puts each panel in a row of its own, and matplotlib's
    # constrained layout sets every row again for each panel: 200 panels took 70 s
    # (a scaling hunt, h24b). Above MAX_NARROW_PANELS none is laid out, and the caption
    # says why, instead of the report taking minutes without a word.
    import matplotlib.pyplot as plt

    import ldpsim.pipeline.report.narrow_layout as narrow_module
    import ldpsim.pipeline.report.report as report
    from ldpsim.pipeline.report.plots import store_figures

    fig = store_figures(syn.grid_store(), ["coverage"])["coverage"]
    panels = sum(ax.get_visible() for ax in fig.axes)
    assert panels > 1
    laid_out = []
    monkeypatch.setattr(narrow_module, "narrow_layout", lambda f: laid_out.append(f) or f)
    monkeypatch.setattr(report, "png_uri", lambda f: {"width": 600, "min_text_px": 10.0})
    monkeypatch.setattr(report, "MAX_NARROW_PANELS", panels, raising=False)
    assert report.figure_image("coverage", fig, "Coverage.")["narrow"] is not None
    assert laid_out == [fig]
    monkeypatch.setattr(report, "MAX_NARROW_PANELS", panels - 1, raising=False)
    image = report.figure_image("coverage", fig, "Coverage.")
    assert image["narrow"] is None and laid_out == [fig]
    assert image["caption"] == (
        f"Coverage. On a phone too it is shown whole: its {panels} panels are more than "
        f"the {panels - 1} that the report lays out one per row."
    )
    plt.close(fig)


def test_a_phone_s_layout_counts_the_visible_panels_up_to_60(monkeypatch):
    """A grid's hidden axes (its unused places) are no panels; 60 panels took 7 to 10 s
    to lay out one per row, 61 are shown whole. Before: counting hidden axes, or any cap
    above 60 (the report of 2,000 grid points then took minutes), passed every test (a
    mutation hunt, h24d)."""
    import matplotlib.pyplot as plt

    import ldpsim.pipeline.report.narrow_layout as narrow_module
    import ldpsim.pipeline.report.report as report

    laid_out = []
    monkeypatch.setattr(narrow_module, "narrow_layout", lambda f: laid_out.append(f) or f)
    monkeypatch.setattr(report, "png_uri", lambda f: {"width": 600, "min_text_px": 10.0})
    fig = plt.figure()
    axes = fig.subplots(8, 8).ravel()
    for ax in axes[61:]:
        ax.set_visible(False)
    assert report.figure_image("coverage", fig, "Coverage.")["narrow"] is None
    axes[60].set_visible(False)
    assert report.figure_image("coverage", fig, "Coverage.")["narrow"] is not None
    assert laid_out == [fig]
    plt.close(fig)
