"""The `ldpsim` command line: run, status, errors, replay, summarize, plot, report, list."""

from __future__ import annotations

import argparse
import codecs
import contextlib
import gc
import math
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ldpsim.pipeline.api import check_adapt, check_seconds
from ldpsim.pipeline.api import check_run_length as check_run_length
from ldpsim.pipeline.errors import (
    EXIT_DAMAGED,
    EXIT_OK,
    InputError,
    RunStopped,
    StoreDamage,
    is_absent,
    outcome,
)
from ldpsim.pipeline.errors import EXIT_FAILED as EXIT_FAILED
from ldpsim.pipeline.errors import EXIT_INCOMPLETE as EXIT_INCOMPLETE

#: Exit codes: one policy for `run`, `status` and `errors` (see :func:`outcome`); the
#: first three are the `exit_code` of :func:`ldpsim.pipeline.api.run`'s report.
EXIT_BAD_INPUT = 2  # bad input or a cluster that did not start; nothing stored changed
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT); finished replicates are kept
EXIT_TERMINATED = 143  # SIGTERM (128 + SIGTERM: kill, scancel); the same as Ctrl-C
EXIT_CODES_HELP = """\
exit codes (the same policy for run, status and errors):
  0    every replicate done; no replicate and no interval method failed
  1    some replicate or interval method failed (recorded; see `ldpsim errors STORE`)
  2    bad input, or a cluster that could not start: one line on stderr, and
       nothing stored was changed
  3    some replicates are not computed yet and none failed (an interrupted run),
       or the run was stopped by a full disk, a lost scheduler or another run that
       took its lock over: run it again to resume
  4    damaged: some finished replicates' data is missing or corrupt, or a truth
       or coordinate differs from what the sweep determines (status; summarize,
       plot, report and errors refuse); `ldpsim run` recomputes them. Damaged
       metadata (a zarr.json) is 4 in every verb, run included: restore a copy
  130  interrupted (Ctrl-C); the finished replicates are kept
  141  the output pipe was closed (`ldpsim status S | head -1`)
  143  stopped by SIGTERM (kill, scancel, a batch job's time limit); the finished
       replicates are kept, as with Ctrl-C
"""
#: 128 + SIGPIPE, what a shell reports for a program stopped by a closed pipe.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
#: `summarize --format` choices: :data:`ldpsim.pipeline.summary.tables.TABLE_FORMATS`,
#: repeated here so that the parser is built without importing xarray (a test checks they agree).
FORMATS = ("text", "markdown", "latex", "csv", "json")
#: `summarize --coords` choices: :data:`ldpsim.pipeline.summary.tables.COORDS_MODES`, repeated
#: here for the same reason.
COORDS_MODES = ("auto", "all", "mean")
#: What `status` and `errors` read of a store (see :func:`store_outcome`).
OUTCOME_VARIABLES = ["done", "failed", "method_failed"]


def store_outcome(ds, pending: dict[str, int] | None = None) -> int:
    """:func:`outcome` of every replicate of a store's Dataset; ``pending``: the finished
    replicates that each method added to the store still lacks (they count as missing)."""
    done, failed = ds["done"].values, ds["failed"].values
    return outcome(
        replicates_failed=int(failed.sum()),
        methods_failed=int(ds["method_failed"].values.sum()),
        missing=int((~done & ~failed).sum()) + sum((pending or {}).values()),
    )


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line and exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        # main() prefixes "ldpsim: error:", so name the verb only (prog is "ldpsim VERB").
        verb = self.prog.partition(" ")[2]
        where = f"{verb}: " if verb else ""
        raise InputError(f"{where}{message} (see --help)")


def _path(text: str) -> str:
    """A path argument: not empty (an empty path would silently mean the current folder),
    with a leading ``~`` or ``~user`` expanded as the shell expands it, which it does not
    after ``=`` (``--store=~/s.zarr`` made a folder named ``~`` in the current one); one
    the shell could not expand either (no such user) stays as written."""
    if not text:
        raise argparse.ArgumentTypeError("expected a path, got an empty string")
    return os.path.expanduser(text) if text.startswith("~") else text


def _int_at_least(low: int, what: str) -> Callable[[str], int]:
    """An argparse type: an int >= ``low``, refused as ``expected WHAT, got 'TEXT'``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


_positive_int = _int_at_least(1, "a positive integer")
#: A coordinate: an int >= 0 (the store's d bounds it, checked once it is read).
_coordinate = _int_at_least(0, "a coordinate >= 0")


#: Help of ``--zip`` and ``--zip-coord`` (plot and report).
ZIP_HELP = (
    "also draw a zip plot per grid point (Morris, White & Crowther 2019): every "
    "replicate's interval as a line, ranked by the centile of its absolute z-score, "
    "coloured by whether it covers the truth, with the nominal level and the coverage's "
    "Monte-Carlo band; one panel per method"
)
ZIP_COORD_HELP = "the coordinate the zip plots draw (default 0), with --zip"


def _add_zip_options(parser: argparse.ArgumentParser, where: str) -> None:
    parser.add_argument("--zip", action="store_true", help=f"{ZIP_HELP}; {where}")
    parser.add_argument(
        "--zip-coord", type=_coordinate, default=None, metavar="J", help=ZIP_COORD_HELP
    )


def _zip_coord(args) -> int:
    """``--zip-coord``, default 0; refused without ``--zip`` (it would do nothing)."""
    if args.zip_coord is not None and not args.zip:
        raise InputError(f"{args.verb}: --zip-coord chooses the zip plots' coordinate; add --zip.")
    return 0 if args.zip_coord is None else args.zip_coord


def _number(text: str) -> float:
    """A float option's text as a float; NaN (refused by every check) if it is not one."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def _seconds(text: str) -> float:
    # The check of the API's start_timeout and task_timeout (one rule, one function).
    try:
        return check_seconds(_number(text), "seconds")
    except InputError:
        raise argparse.ArgumentTypeError(f"expected seconds in (0, inf], got {text!r}") from None


def _target_se(text: str) -> float:
    from ldpsim.pipeline.summary.summary import check_target_se  # summarize's and the API's check

    try:
        return check_target_se(_number(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a standard error in (0, 1), got {text!r}"
        ) from None


def _bounds(text: str) -> tuple[int, int]:
    try:
        low, high = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MIN:MAX jobs, got {text!r}") from None
    try:
        return check_adapt((low, high))  # the API's adapt check
    except InputError:
        raise argparse.ArgumentTypeError(
            f"expected 0 <= MIN <= MAX, MAX >= 1; got {text!r}"
        ) from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ldpsim",
        description="Simulation sweeps of LDP-SGD inference.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="run (or resume) a sweep: computes only what is not done")
    run.add_argument("sweep", help="built-in sweep name (see `ldpsim list`) or a TOML file")
    run.add_argument("--store", type=_path, help="Zarr store path (default outputs/<sweep>.zarr)")
    run.add_argument(
        "--workers",
        type=_positive_int,
        help="local workers (default: one per usable core, as memory allows)",
    )
    where = run.add_mutually_exclusive_group()
    where.add_argument("--scheduler", help="address of a running Dask scheduler to attach to")
    where.add_argument("--cluster", help="cluster name (cluster/NAME.yaml) or a YAML file")
    scale = run.add_mutually_exclusive_group()
    scale.add_argument("--jobs", type=_positive_int, help="batch clusters: fixed number of jobs")
    scale.add_argument("--adapt", type=_bounds, metavar="MIN:MAX", help="adaptive job bounds")
    run.add_argument(
        "--cluster-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one option of the cluster file, e.g. walltime=02:00:00 (YAML value)",
    )
    run.add_argument(
        "--start-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="give up (exit 2, nothing written) if no worker has connected after this long "
        "(default: the cluster file's start_timeout, else 120 local and --scheduler, "
        "600 slurm/pbs; inf: wait for ever)",
    )
    run.add_argument(
        "--task-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="restart a worker whose task has run this long and run the task again (a "
        "hung worker); default from the cost model: max(120, 20 times the task's "
        "estimate), at least 600 for a worker's first task (it compiles); inf: never. "
        "Tasks past 5 times their estimate show in the progress",
    )
    run.add_argument("--replicates", type=_positive_int, help="override the replicate count")
    run.add_argument(
        "--backend",
        choices=("cpu", "gpu"),
        help="where the SGD chains run (default: the sweep's backend, else cpu); gpu runs "
        "a grid point's replicates as one CUDA launch on a worker holding a GPU "
        "(--cluster local-gpu or slurm-gpu); a store keeps one backend",
    )
    run.add_argument(
        "--max-failures",
        type=_positive_int,
        metavar="K",
        help="stop once K replicates of one grid point have failed (the replicate or one of "
        "its interval methods); what finished is kept, exit 1 (default: never stop)",
    )
    run.add_argument(
        "--yes",
        action="store_true",
        help="start a sweep estimated at more than a day of one core's work",
    )
    run.add_argument(
        "--accept-code-change",
        action="store_true",
        help="compute into a store whose model, mechanism or interval method changed its "
        "source since it was written; the change is recorded and the cells that mix code "
        "versions are marked (default: refused, exit 2)",
    )
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a value: eps=2, grid.n=[1e4,1e5], methods.bb.B=100, seed=3",
    )

    status = sub.add_parser(
        "status",
        help="replicates done / failed per grid point; checks the finished replicates' "
        "data files (exit code 4 if missing or corrupt)",
    )
    status.add_argument("store", type=_path)
    status.add_argument(
        "--verify",
        action="store_true",
        help="also compute the coordinates and truths again from the sweep and compare "
        "(slower: imports the models); without it they are checked against their "
        "recorded digests",
    )
    errors = sub.add_parser(
        "errors",
        help="tracebacks of failed replicates and methods, each distinct one once with its "
        "count, grid points, replicates and seed",
    )
    errors.add_argument("store", type=_path)
    replay = sub.add_parser(
        "replay",
        help="rerun one replicate in this process with its recorded spec and seed: its "
        "failure is raised again with its traceback (exit 1), or its values are printed "
        "(exit 0)",
    )
    replay.add_argument("store", type=_path)
    replay.add_argument("--rep", type=int, required=True, help="the replicate (from 0)")
    replay.add_argument(
        "--point",
        action="append",
        default=[],
        metavar="AXIS=VALUE",
        help="the grid point, one option per axis (e.g. --point tau=0.5 --point n=1e4); "
        "not needed where one grid point (of those given) has a recorded failure",
    )
    replay.add_argument(
        "--pdb", action="store_true", help="enter pdb's post-mortem debugger at the failure"
    )
    summarize = sub.add_parser("summarize", help="coverage and length table")
    summarize.add_argument("store", type=_path)
    summarize.add_argument("--format", choices=FORMATS, default="text")
    summarize.add_argument(
        "--diagnostics",
        action="store_true",
        help="add rows pred cover, bias/sd and var ratio per method (csv and json always "
        "hold them)",
    )
    summarize.add_argument(
        "--errors",
        action="store_true",
        help="add a table of the mean squared error of the average and the last iterate "
        "(csv and json always hold them)",
    )
    summarize.add_argument(
        "--coords",
        choices=COORDS_MODES,
        default="auto",
        help="all: rows per coordinate; mean: per grid point and method, coverage and "
        "length averaged over the coordinates (csv/json: one record each); auto (default): "
        "all for at most 10 coordinates, else mean in the text, markdown and latex tables "
        "(csv and json keep every coordinate)",
    )
    summarize.add_argument(
        "--compare",
        metavar="A,B",
        help="instead of the table: coverage of method A minus B's and the ratio of their "
        "mean lengths, with paired standard errors (the same replicates)",
    )
    summarize.add_argument(
        "--target-se",
        type=_target_se,
        default=None,
        metavar="SE",
        help="add a row per method: the replicates that would give each coverage this "
        "Monte-Carlo standard error (the summary's replicates_needed, in csv and json "
        "always, for 0.005 unless given)",
    )
    summarize.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when any cell is partial (computed on fewer than all the replicates "
        "of its grid point: a failure, or replicates not computed yet; such cells are "
        "marked in the table)",
    )
    summarize.add_argument(
        "--statistic",
        action="append",
        default=[],
        metavar="NAME",
        help="add your own statistic, with its Monte-Carlo standard error, beside coverage "
        "(a row per method; csv and json: NAME, NAME_se, NAME_se_method); NAME is an "
        "entry point of the group ldpsim.statistics of an installed package (see "
        "docs/extending.md); repeatable",
    )
    plot = sub.add_parser("plot", help="coverage and length figures (PNG and PDF)")
    plot.add_argument("store", type=_path)
    plot.add_argument(
        "--out",
        type=_path,
        help="output folder (default: <store>-figures next to the store); its figures are "
        "replaced, and figure files of an earlier plot that this one did not draw are named "
        "in a warning, not removed",
    )
    _add_zip_options(plot, "files zip-<grid point>.png and .pdf")
    report = sub.add_parser(
        "report", help="one self-contained HTML page: tables, figures, failures, provenance"
    )
    report.add_argument("store", type=_path)
    report.add_argument(
        "--out", type=_path, help="the HTML file (default: <store>-report.html next to the store)"
    )
    report.add_argument(
        "--target-se",
        type=_target_se,
        default=None,
        metavar="SE",
        help="the coverage standard error the replicates-needed column plans for (default 0.005)",
    )
    _add_zip_options(report, "in a Zip plots part of the figures")
    sub.add_parser(
        "list",
        help="built-in sweeps, cluster configurations, models, mechanisms and interval methods",
    )
    return parser


def cmd_run(args) -> int:
    from ldpsim.pipeline import api
    from ldpsim.pipeline.compute.clusters import parse_cluster_options
    from ldpsim.pipeline.compute.worker_start import forks, start_server_early

    options = parse_cluster_options(args.cluster_option)
    if (
        args.store is not None
        and is_absent(args.store)
        and args.scheduler is None
        and args.cluster in (None, "local", "local-gpu")
    ):
        # A new store on a local cluster: its workers' forkserver imports on another
        # core while this process imports and checks the sweep.
        start_server_early(forks(options))
    sweep = api.load_sweep(args.sweep, set=args.set, replicates=args.replicates)
    # The report alone: opening the store for a Dataset would cost a second here.
    report = api.run_report(
        sweep,
        args.store,
        workers=args.workers,
        progress="auto",
        scheduler=args.scheduler,
        cluster=args.cluster,
        jobs=args.jobs,
        adapt=args.adapt,
        cluster_options=options,
        start_timeout=args.start_timeout,
        allow_long=args.yes,
        max_failures=args.max_failures,
        task_timeout=args.task_timeout,
        accept_code_change=args.accept_code_change,
        backend=args.backend,
    )
    return report["exit_code"]


def cmd_status(args) -> int:
    from ldpsim.pipeline.store.damage import find_damage
    from ldpsim.pipeline.store.pending import pending_methods
    from ldpsim.pipeline.store.reading import check_store, load_dataset
    from ldpsim.pipeline.summary.timings import (
        TIMING_VARIABLES,
        format_seconds,
        median_per_point,
        timing_line,
    )

    check_store(args.store, read_chunks=False)
    # Every data file decoded (its chunks' checksums) and checked against the digest of
    # its place; --verify computes the coordinates and truths again too.
    damage = find_damage(args.store, recompute=args.verify)
    if damage:
        print(f"{args.store}: {damage.describe()}")
    try:
        ds = load_dataset(args.store, OUTCOME_VARIABLES + TIMING_VARIABLES)
    except StoreDamage:
        if damage:  # reported above
            _quiet_reads()
            return EXIT_DAMAGED
        raise
    grid = [d for d in ds["done"].dims if d != "rep"]
    done = ds["done"].values
    failed = ds["failed"].values
    total = done.size
    print(f"{args.store}: {int(done.sum())}/{total} replicates done, {int(failed.sum())} failed")
    method_failed = ds["method_failed"].values  # (grid..., method, rep[, checkpoint])
    method_failed = method_failed.reshape(*method_failed.shape[: len(grid) + 2], -1).any(-1)
    for m, label in enumerate(ds["method"].values):
        count = int(method_failed[..., m, :].sum())
        if count:
            print(f"  interval method {label} failed in {count} replicate(s)")
    pending = pending_methods(args.store) if not damage else {}
    for label, count in pending.items():
        print(
            f"  interval method {label} (added to the store) not computed yet for {count} "
            "finished replicate(s): `ldpsim run` computes them"
        )
    print(f"  {timing_line(ds)}")
    if grid:
        from ldpsim.pipeline.compute.failures import GridNames

        medians = median_per_point(ds)
        names = GridNames.of_dataset(ds)  # as `errors` and the tables write the values
        for index in np.ndindex(*done.shape[:-1]):
            label = names.name(index)
            print(
                f"  {label}: {int(done[index].sum())}/{done.shape[-1]} done, "
                f"{int(failed[index].sum())} failed, median "
                f"{format_seconds(medians[index])} s per replicate"
            )
    return EXIT_DAMAGED if damage else store_outcome(ds, pending)


def cmd_errors(args) -> int:
    from ldpsim.pipeline.compute.failures import GridNames, format_group, group_failures
    from ldpsim.pipeline.compute.replay import replay_route
    from ldpsim.pipeline.store.damage import refuse_damage
    from ldpsim.pipeline.store.pending import pending_methods
    from ldpsim.pipeline.store.reading import check_store, iter_errors, load_dataset

    attrs = check_store(args.store, read_chunks=False)
    # Files swapped, gone, out of place or corrupt: refused in one line (exit 4) as
    # summarize refuses them, not read as "no failures" or "not computed yet". Every data
    # file is decoded, as status decodes them: errors itself reads only the outcome flags.
    refuse_damage(args.store, decode=True)
    ds = load_dataset(args.store, OUTCOME_VARIABLES)
    records = list(iter_errors(args.store))
    groups = group_failures(records)
    names = GridNames.of_dataset(ds)  # grid points by their axis values, not task keys
    for group in groups:
        print(format_group(group, names.name_of_key))
    if groups:
        print(replay_route(args.store, attrs))
    # A record deleted (the remedy for one that does not parse), or not written before
    # the run stopped: its failure still counts.
    recorded = sum(1 for record in records if record.get("kind") in ("replicate", "task"))
    failed = int(ds["failed"].values.sum())
    unrecorded = max(failed - recorded, 0)
    why = (
        "(deleted, or the run stopped before writing it): `ldpsim status` counts them, "
        "`ldpsim run` computes them again."
    )
    if not groups and not unrecorded:
        print(f"No failures recorded in {args.store}.")
    elif not groups:
        marked = f"{failed} replicate(s) are marked failed"
        print(f"No failure records in {args.store}, but {marked} {why}")
    elif unrecorded:
        has = "has" if unrecorded == 1 else "have"
        print(f"{unrecorded} of the {failed} failed replicates {has} no failure record {why}")
    return store_outcome(ds, pending_methods(args.store))


def cmd_replay(args) -> int:
    import traceback

    from ldpsim.pipeline.api import replay
    from ldpsim.pipeline.compute.replay import format_result, parse_point

    point = parse_point(args.point)
    try:
        result = replay(args.store, rep=args.rep, point=point, pdb=args.pdb)
    except InputError:
        raise
    except Exception:  # the replicate's failure, reproduced: the point of the command
        sys.stdout.flush()
        if not args.pdb:  # --pdb printed it before the debugger
            traceback.print_exc()
        return EXIT_FAILED
    print(format_result(args.rep, result))
    return EXIT_OK


def cmd_summarize(args) -> int:
    from ldpsim.pipeline.api import open_store
    from ldpsim.pipeline.summary.cell_statistics import load_statistics
    from ldpsim.pipeline.summary.partial_cells import any_partial
    from ldpsim.pipeline.summary.summary import TARGET_SE
    from ldpsim.pipeline.summary.summary import summarize as summary_of
    from ldpsim.pipeline.summary.tables import check_statistics_shown, format_table, table_coords
    from ldpsim.pipeline.summary.timings import timing_line

    if args.compare is not None:  # the options of the summary table, not of a comparison
        table_only = {
            "--statistic": bool(args.statistic),
            "--diagnostics": args.diagnostics,
            "--errors": args.errors,
            "--target-se": args.target_se is not None,
        }
        given = [option for option, present in table_only.items() if present]
        if given:
            raise InputError(
                f"{given[0]} is an option of the summary table, which --compare replaces; "
                f"leave out {' '.join(given)} or --compare (--compare takes --format, "
                "--coords and --strict)."
            )
    statistics = load_statistics(args.statistic)  # an unknown name before any reading
    ds = open_store(args.store, load=True)
    # Statistics that a table of coordinate means would leave out: refused before they
    # are computed (a bootstrap per cell).
    check_statistics_shown(statistics, table_coords(ds, args.format, args.coords), args.coords)
    if args.compare is not None:
        from ldpsim.pipeline.summary.compare import compare_methods, format_comparison, parse_pair

        try:
            a, b = parse_pair(args.compare, [str(m) for m in ds["method"].values])
        except ValueError as exc:
            raise InputError(str(exc)) from None
        comparison = compare_methods(ds, a, b)
        print(format_comparison(comparison, args.format, coords=args.coords))
        if args.strict and any_partial(comparison):  # the cells it printed
            return _strict_failure(args.store)
        return EXIT_OK
    target_se = TARGET_SE if args.target_se is None else args.target_se
    # The diagnostics only where they are shown (csv and json hold every statistic).
    diagnostics = args.diagnostics or args.format in ("csv", "json")
    summary = summary_of(ds, target_se, diagnostics=diagnostics, statistics=statistics)
    table = format_table(
        summary,
        args.format,
        diagnostics=args.diagnostics,
        errors=args.errors,
        coords=args.coords,
        replicates_needed=args.target_se is not None,
    )
    print(table)
    if args.format == "text":  # the other formats stay as they are, to be pasted or parsed
        print(timing_line(ds))
    if args.strict and any_partial(summary):
        return _strict_failure(args.store)
    return EXIT_OK


def _strict_failure(store: Path) -> int:
    """``summarize --strict`` on a store with partial cells: one line, exit 1."""
    print(
        f"--strict: some cells are computed on fewer than all the replicates of their "
        f"grid point (marked; see `ldpsim status {store}`)",
        file=sys.stderr,
    )
    return EXIT_FAILED


def cmd_plot(args) -> int:
    from ldpsim.pipeline.api import open_store, plot
    from ldpsim.pipeline.report.plots import (
        default_out_dir,
        prepare_out_dir,
        save_figure,
        stale_figures,
    )

    zip_coord = _zip_coord(args)
    ds = open_store(args.store, load=True)
    if args.zip:
        from ldpsim.pipeline.report.zip_plot import check_coord

        check_coord(ds, zip_coord)  # before any file is written
    out = Path(args.out) if args.out is not None else default_out_dir(args.store)
    prepare_out_dir(out)
    written: list[Path] = []
    for kind, figure in plot(ds, "all").items():
        for path in save_figure(figure, out, kind):
            print(path)
            written.append(path)
    if args.zip:
        from ldpsim.pipeline.report.zip_plot import store_zip_plots

        drawn = store_zip_plots(ds, coord=zip_coord)
        for zip_plot in drawn.plots:
            for path in save_figure(zip_plot.figure, out, zip_plot.stem):
                print(path)
                written.append(path)
        for note in drawn.notes:
            print(f"ldpsim: note: {note}", file=sys.stderr)
    stale = stale_figures(out, written)
    # Left as they are (they may be the user's), but said, so that none is taken for
    # this store's.
    if stale:
        shown = ", ".join(path.name for path in stale[:6]) + (", ..." if len(stale) > 6 else "")
        print(
            f"ldpsim: warning: {str(out)!r} also holds {len(stale)} figure file(s) this plot did "
            f"not draw ({shown}), from an earlier plot, perhaps of another store; remove "
            "them, or plot into an empty folder.",
            file=sys.stderr,
        )
    return EXIT_OK


def cmd_report(args) -> int:
    from ldpsim.pipeline.report.report import default_report_path, write_report
    from ldpsim.pipeline.summary.summary import TARGET_SE

    zip_coord = _zip_coord(args)
    out = Path(args.out) if args.out is not None else default_report_path(args.store)
    target_se = TARGET_SE if args.target_se is None else args.target_se
    path = write_report(
        args.store, out, target_se=target_se, zip_plots=args.zip, zip_coord=zip_coord
    )
    print(path)
    return EXIT_OK


def cmd_list(args) -> int:
    from ldpsim.pipeline.compute.clusters import available_clusters
    from ldpsim.pipeline.summary.cell_statistics import statistic_plugins, statistic_problems
    from ldpsim.pipeline.sweep import builtin_sweeps
    from ldpsim.pipeline.units import KIND_HEADINGS, unit_lines
    from ldpsim.tasks.plugins import plugin_problems, plugins

    print("Built-in sweeps:")
    sweeps = builtin_sweeps()
    name_width = max(map(len, sweeps))
    for name, description in sweeps.items():
        print(f"  {name:<{name_width}}  {description}")
    print("Clusters (--cluster NAME):")
    for name in available_clusters():
        print(f"  {name}")
    lines = unit_lines()
    width = max(len(line.name) for line in lines)
    for kind, heading in KIND_HEADINGS.items():
        print(f"{heading}:")
        for line in (line for line in lines if line.kind == kind):
            where = "" if line.package is None else f" [plugin: {line.package}]"
            print(f"  {line.name:<{width}}  {line.summary}{where}")
    statistics = statistic_plugins()
    loaded = [p for p in statistics if p.function is not None]
    if loaded:
        print("Statistics (summarize --statistic NAME):")
        names = max(len(p.name) for p in loaded)
        for p in loaded:
            print(f"  {p.name:<{names}}  {p.description} [plugin: {p.distribution}]")
    if not plugins() and not statistics:
        print("Plugins: none installed (see docs/extending.md)")
    for line in [*plugin_problems(), *statistic_problems()]:
        print(f"warning: {line}", file=sys.stderr)
    return EXIT_OK


COMMANDS = {
    "run": cmd_run,
    "status": cmd_status,
    "errors": cmd_errors,
    "replay": cmd_replay,
    "summarize": cmd_summarize,
    "plot": cmd_plot,
    "report": cmd_report,
    "list": cmd_list,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `ldpsim` and `python -m ldpsim.pipeline`; returns the exit code."""
    from ldpsim.pipeline.compute.signals import handle_signals

    if argv is None:  # the program itself: its own output streams
        _escape_unencodable()
    try:
        args = build_parser().parse_args(argv)
        # SIGTERM stops a run as Ctrl-C does (results written, lock released, one line).
        with handle_signals() if args.verb == "run" else contextlib.nullcontext():
            code = COMMANDS[args.verb](args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        if argv is None:  # the program itself, about to exit (not a caller's process)
            # The interpreter's exit collects garbage module by module, each time through
            # every object the command left (dask, xarray, zarr): a second after a run.
            # Frozen objects are not looked at.
            gc.freeze()
        return code
    except StoreDamage as exc:
        _quiet_reads()
        print(f"ldpsim: error: {exc}", file=sys.stderr)
        return EXIT_DAMAGED
    except InputError as exc:
        _quiet_reads()
        print(f"ldpsim: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RunStopped as exc:  # a full disk, a lost scheduler or lock: what finished kept
        print(f"ldpsim: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # The reader of our output left (`ldpsim status S | head -1`): stop quietly, as
        # a program killed by SIGPIPE does, with the shell's code for that.
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt as exc:
        _quiet_reads()  # zarr's writes of an interrupted extension: not printed at exit
        print(f"ldpsim: {_interrupted_line(exc)}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_INTERRUPTED)


def _escape_unencodable() -> None:
    """Print what stdout's encoding cannot hold as escapes (``\\u2020``), as Python's
    stderr does, instead of failing: the tables' marks and the labels and paths of a
    sweep may be any text, and stdout may be ASCII (``LC_ALL=C`` with ``PYTHONUTF8=0``,
    ``PYTHONIOENCODING=ascii``) or a Windows code page. Before, ``ldpsim summarize`` on
    such a terminal ended in a UnicodeEncodeError, and ``ldpsim run`` of a store named
    with an accent did so after its replicates were written (exit 1, a traceback). The
    undecodable bytes of a file name (``surrogateescape``) are still written as they were.
    """
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is None or getattr(sys.stdout, "errors", None) not in _FAILING_ERRORS:
        return
    codecs.register_error(ESCAPE_ERRORS, _escape)  # again: the same handler
    with contextlib.suppress(ValueError, OSError):  # a closed or detached stream
        reconfigure(errors=ESCAPE_ERRORS)


#: The codec error handler of stdout (:func:`_escape_unencodable`).
ESCAPE_ERRORS = "ldpsim.escape"
#: stdout's error handlers that fail on a character its encoding lacks.
_FAILING_ERRORS = ("strict", "surrogateescape")


def _escape(error: UnicodeError) -> tuple[str | bytes, int]:
    """``surrogateescape`` for the bytes it stands for, else ``backslashreplace``."""
    try:
        return codecs.lookup_error("surrogateescape")(error)
    except UnicodeError:
        return codecs.lookup_error("backslashreplace")(error)


def _quiet_reads() -> None:
    """A failed read may leave zarr's other reads in flight: nothing of theirs is printed
    after the one line of the error (:func:`ldpsim.pipeline.store.reading.quiet_pending_reads`)."""
    if "zarr" in sys.modules:
        from ldpsim.pipeline.store.reading import quiet_pending_reads

        quiet_pending_reads()


def _interrupted_line(exc: KeyboardInterrupt) -> str:
    """'interrupted (SIGTERM): 1234 replicates kept in STORE; run the same command ...'."""
    name = getattr(exc, "signal_name", "SIGINT")
    if getattr(exc, "kept", None) is None:
        return f"interrupted ({name}); run the same command again to resume."
    if getattr(exc, "methods_kept", None) is not None:  # adding methods to a finished store
        report = getattr(exc, "report", None)
        # Replicates this run computed too (more of them, or new grid points), failed or not.
        computed = getattr(report, "computed", 0) + getattr(report, "failed", 0)
        if computed:
            return (
                f"interrupted ({name}): {computed} replicates computed and the added methods "
                f"of {exc.methods_kept} finished replicates written to {exc.store}; run the "
                "same command again to resume."
            )
        return (
            f"interrupted ({name}): the added methods of {exc.methods_kept} finished "
            f"replicates written to {exc.store}, whose replicates are kept as they were; run "
            "the same command again to resume."
        )
    return (
        f"interrupted ({name}): {exc.kept} replicates kept in {exc.store}; run the same "
        "command again to resume."
    )


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's last flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor (captured output)
        pass


if __name__ == "__main__":
    sys.exit(main())
