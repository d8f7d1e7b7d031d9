"""Errors a researcher can act on: grid points by their values, a failure replayed in
process, a plugin's bug in one line, and the hint for a script without a __main__ guard.

The failures are real: c = 1e308 makes every SGD run overflow (the replicate fails with
NonFiniteRun), and a checkpoint at n = 3 is too early for bb's two blocks (the method
fails there, the replicate is kept).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from conftest import one_error_line, scheduler, write_as_a_run, write_sweep

from ldpsim.pipeline import api
from ldpsim.pipeline.cli import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, main
from ldpsim.pipeline.compute.clusters import unguarded_main_script
from ldpsim.pipeline.compute.failures import GridNames
from ldpsim.tasks import plugins, replicate
from ldpsim.tasks.diagnose import NonFiniteRun
from ldpsim.tasks.grid_point import GridPointSetup
from ldpsim.tasks.intervals.base import IntervalMethod

#: A task's key, as a run names it (ldpsim.pipeline.runner.plan_layout).
TASK_KEY = re.compile(r"ldpsim-[0-9a-f]{8}-\d+(-\d+)*-c\d+")
#: Two grid points: c = 1 runs, c = 1e308 overflows at the first step.
DIVERGING = {"grid": {"c": [1.0, 1e308]}, "spec": {"n": "1000"}}
#: Two grid points whose bb fails at the checkpoint n = 3 (one block) in every replicate.
EARLY = {"grid": {"tau": [0.5, 0.9]}, "spec": {"n": "1000", "checkpoints": "[3]"}}


def _store(tmp_path_factory, cluster, name: str, layout: dict) -> Path:
    folder = tmp_path_factory.mktemp(name)
    # One replicate per chunk: a grid point's failures come from two task keys.
    sweep = write_sweep(folder / f"{name}.toml", replicates=2, rep_chunk=1, **layout)
    store = folder / f"{name}.zarr"
    code = main(["run", str(sweep), "--store", str(store), *scheduler(cluster)])
    assert code == EXIT_FAILED
    return store


@pytest.fixture(scope="module")
def diverging(tmp_path_factory, local_cluster) -> Path:
    return _store(tmp_path_factory, local_cluster, "diverging", DIVERGING)


@pytest.fixture(scope="module")
def early(tmp_path_factory, local_cluster) -> Path:
    return _store(tmp_path_factory, local_cluster, "early", EARLY)


def _record(store: Path, name: str) -> dict:
    return json.loads((store / "ldpsim" / "errors" / name).read_bytes())


def test_errors_names_grid_points_by_their_values(diverging, capsys):
    assert main(["errors", str(diverging)]) == EXIT_FAILED
    out = capsys.readouterr().out
    # Both replicates, recorded by two tasks, under the grid point's values.
    assert "where: c = 1e+308: rep 0-1\n" in out, out
    # No task key (ldpsim-<store token>-<point>-c<chunk>): not the two that recorded
    # the failures, nor any other. (The tracebacks name files, whose paths may hold
    # "ldpsim-" anywhere: a checkout in ~/ldpsim-main.)
    keys = {_record(diverging, f"1__{rep}.json")["key"] for rep in (0, 1)}
    assert len(keys) == 2 and all(TASK_KEY.fullmatch(key) for key in keys), keys
    assert not TASK_KEY.search(out), out
    assert f"ldpsim replay {diverging} --rep R" in out
    names = GridNames.of({"tau": [0.5, 0.9], "n": [10_000, 100_000]})
    assert names.name_of_key("ldpsim-d064dd1e-1-0-c0") == "tau = 0.9, n = 1e4"
    assert names.name_of_key("not a key") == "not a key"


def test_the_replay_line_quotes_the_store_path_for_a_shell():
    # Before: "ldpsim replay /data/my runs/s.zarr --rep R", which a shell splits (and a
    # path with & or < runs or redirects) when pasted from `ldpsim errors` or the report.
    from ldpsim.pipeline.compute.replay import replay_route

    line = replay_route(Path("/data/my runs/a&b.zarr"), {})
    assert "ldpsim replay '/data/my runs/a&b.zarr' --rep R " in line
    assert "ldpsim replay /data/s.zarr --rep R " in replay_route(Path("/data/s.zarr"), {})


def test_replay_raises_the_recorded_failure_again(diverging, capsys):
    # One grid point failed: no --point needed.
    assert main(["replay", str(diverging), "--rep", "1"]) == EXIT_FAILED
    captured = capsys.readouterr()
    record = _record(diverging, "1__1.json")
    assert record["error"].startswith("NonFiniteRun: non-finite theta_bar")
    first = captured.out.splitlines()[0]
    assert first.startswith(f"Replaying {diverging}/ldpsim/errors/1__1.json (replicate failure")
    assert "rep 1 at c = 1e+308, seed 7" in first
    assert "The replicate failed again, with the recorded error." in captured.out
    lines = captured.err.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == f"ldpsim.tasks.diagnose.{record['error']}"


def test_replay_of_a_good_replicate_gives_its_stored_values(diverging, capsys):
    result = api.replay(diverging, rep=1, point={"c": "1"})
    lines = capsys.readouterr().out.splitlines()
    assert "no failure is recorded for it" in lines[0]
    assert lines[1] == (
        "Equal to the store, bit for bit: the estimate, the last iterate, the projected "
        "estimate, the bounds, estimate and failure flag of bb, bm, oracle."
    )
    ds = xr.open_zarr(diverging, consolidated=False).sel(c=1.0, rep=1)
    np.testing.assert_array_equal(result.estimate, ds["estimate"].values, strict=True)
    oracle = ds.sel({"method": "oracle"})
    np.testing.assert_array_equal(result.lower["oracle"], oracle["lower"].values)
    assert main(["replay", str(diverging), "--rep", "0", "--point", "c=1.0"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "rep 0: done in" in out and "oracle" in out
    assert "\nEqual to the store, bit for bit: the estimate" in out


def test_replay_under_pdb_enters_the_debugger_where_it_failed(diverging, capsys, monkeypatch):
    import pdb

    seen = []
    monkeypatch.setattr(pdb, "post_mortem", seen.append)
    assert main(["replay", str(diverging), "--rep", "0", "--pdb"]) == EXIT_FAILED
    (tb,) = seen
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_frame.f_code.co_filename.endswith("chunk.py")  # raise NonFiniteRun
    assert capsys.readouterr().err.count("Traceback") == 1  # printed once, before pdb


def test_replay_refuses_bad_input_in_one_line(diverging, capsys):
    for argv, words in (
        (["--rep", "2"], ("'rep' parameter of replay", "[0, 1]")),
        (["--rep", "0", "--point", "tau=0.5"], ("no grid axis 'tau'", "axes are: c")),
        (["--rep", "0", "--point", "c=3"], ("has no value '3'", "values are: 1, 1e+308")),
        (["--rep", "0", "--point", "c"], ("--point expects AXIS=VALUE",)),
        (["--rep", "0", "--point", "c="], ("--point expects AXIS=VALUE",)),
        (["--rep", "0", "--point", "c=1", "--point", "c=1e308"], ("the axis 'c' twice",)),
    ):
        code = main(["replay", str(diverging), *argv])
        one_error_line(capsys.readouterr(), code, words, EXIT_BAD_INPUT)
    # In Python: a value or its text; a bool is no number, and no rep is below 0 (a
    # mutation hunt, h16c: True taken for c = 1, NaN for any c, and rep -1 passed every
    # test).
    from ldpsim.pipeline.compute.replay import find_target

    good = find_target(diverging, 1, {"c": 1})
    assert (good.index, good.record_path, good.record) == ((0,), None, None)
    assert find_target(diverging, 1, {"c": "1e308"}).index == (1,)
    for rep, point, words in (
        (0, {"c": True}, "has no value True"),
        (0, {"c": float("nan")}, "has no value nan"),
        (-1, {"c": 1}, "[0, 1]"),
    ):
        with pytest.raises(api.InputError, match=re.escape(words)):
            find_target(diverging, rep, point)


def test_replay_chooses_the_grid_point_where_that_replicate_failed(diverging_copy, capsys):
    # Both grid points with a failure record, of rep 0 both, of rep 1 c = 1e308 only:
    # rep 1 needs no --point (a mutation hunt, h16c: choosing among the grid points with
    # any failure, not those with this replicate's, passed every test).
    from ldpsim.pipeline.compute.replay import find_target

    record = _record(diverging_copy, "1__0.json")
    _write_record(diverging_copy, "0__0.json", {**record, "spec": {**record["spec"], "c": 1.0}})
    assert find_target(diverging_copy, 1).index == (1,)
    with pytest.raises(api.InputError, match="2 grid points with a recorded failure match"):
        find_target(diverging_copy, 0)


def test_replay_of_a_method_failure_raises_the_methods_own_error(early, capsys):
    # Both grid points failed: the choices, in one line.
    code = main(["replay", str(early), "--rep", "0"])
    line = one_error_line(capsys.readouterr(), code, ("2 grid points with a recorded failure",))
    assert "--point tau=0.5 | --point tau=0.9 (in Python: point={'tau': '0.5'}, and" in line
    assert main(["replay", str(early), "--rep", "1", "--point", "tau=0.9"]) == EXIT_FAILED
    captured = capsys.readouterr()
    recorded = _record(early, "1__1.json")["methods"]["bb"]
    assert recorded == "ValueError at n = 3: bb needs at least 2 blocks; n = 3 gives 1."
    assert "The method bb failed again, with the recorded error." in captured.out
    assert captured.err.strip().splitlines()[-1] == "ValueError: " + recorded.split(": ", 1)[1]


def test_replay_reruns_a_method_through_the_replicates_own_code(early, capsys, monkeypatch):
    calls, started = [], []
    own = replicate.replicate_from_state

    def spy(setup, state, streams, **kwargs):
        calls.append(kwargs)
        started.append((state.copy(), {k: g.bit_generator.state for k, g in streams.items()}))
        return own(setup, state, streams, **kwargs)

    monkeypatch.setattr(replicate, "replicate_from_state", spy)
    with pytest.raises(ValueError, match="bb needs at least 2 blocks") as raised:
        api.replay(early, rep=1, point={"tau": "0.9"})
    assert calls == [{"methods": ("bb",), "raise_failures": True, "raw": None}]  # CPU: no raw
    # From rep 1's own data and method streams (a mutation hunt, h16c: rep 0's, whose bb
    # fails alike, passed every test).
    setup = GridPointSetup.of(_record(early, "1__1.json")["spec"])
    ((state, streams),) = started
    np.testing.assert_array_equal(state, setup.data_state(1), strict=True)
    assert streams == {k: g.bit_generator.state for k, g in setup.method_streams(1).items()}
    assert streams != {k: g.bit_generator.state for k, g in setup.method_streams(0).items()}
    # The method's own exception, raised where bb raised it, not a wrapper of it.
    tb = raised.value.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_frame.f_code.co_filename.endswith("bootstrap.py"), tb.tb_frame.f_code
    assert "The method bb failed again, with the recorded error." in capsys.readouterr().out


def test_one_method_of_a_replicate_is_bit_identical_to_the_whole(early):
    record = _record(early, "1__1.json")
    setup = GridPointSetup.of(record["spec"])
    whole = replicate.run_replicate(setup, 1)
    assert whole.failures["bb"] == record["methods"]["bb"]
    for label in ("bb", "bm", "oracle"):
        one = replicate.replicate_from_state(
            setup, setup.data_state(1), setup.method_streams(1), methods=(label,)
        )
        assert list(one.lower) == [label]
        np.testing.assert_array_equal(one.estimate, whole.estimate, strict=True)
        for field in ("lower", "upper", "method_estimate", "method_failed"):
            np.testing.assert_array_equal(
                getattr(one, field)[label], getattr(whole, field)[label], strict=True
            )
    # Raised instead of recorded: the record's text, the method's exception as cause.
    with pytest.raises(replicate.MethodFailure) as raised:
        replicate.replicate_from_state(
            setup, setup.data_state(1), setup.method_streams(1), raise_failures=True
        )
    assert (raised.value.label, raised.value.reason) == ("bb", record["methods"]["bb"])
    assert isinstance(raised.value.__cause__, ValueError)
    with pytest.raises(ValueError, match="labels the spec does not have: 'nope'"):
        replicate.replicate_from_state(
            setup, setup.data_state(1), setup.method_streams(1), methods=("nope",)
        )


@pytest.fixture
def diverging_copy(diverging, tmp_path) -> Path:
    """A copy of the diverging store, whose records a test may change."""
    return Path(shutil.copytree(diverging, tmp_path / "diverging.zarr"))


def test_replay_of_a_damaged_store_does_not_compare_with_it(diverging_copy, capsys):
    # A hunt (2026-12-01): a changed byte in a data file gave zarr's traceback and exit 1
    # ("the failure reproduced"), and a missing file was blamed on a change of the code.
    files = [p for p in sorted((diverging_copy / "estimate").rglob("*")) if p.is_file()]
    data = next(p for p in files if p.name != "zarr.json")
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 3] ^= 0xFF
    data.write_bytes(bytes(raw))
    assert main(["replay", str(diverging_copy), "--rep", "1", "--point", "c=1.0"]) == EXIT_OK
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert "\nNot compared: the store is damaged: " in captured.out, captured.out
    data.unlink()
    assert main(["replay", str(diverging_copy), "--rep", "1", "--point", "c=1.0"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "\nNot compared: the store is damaged: " in out and "missing" in out, out


def test_replay_of_a_replicate_the_store_holds_as_failed_compares_nothing(diverging_copy, capsys):
    # As a run whose task was lost leaves it: c = 1, rep 0 failed, with no values. It
    # runs here, and nothing is compared (a mutation hunt, h16c: the line saying "not
    # computed" instead passed every test).
    for name, value in (("done", False), ("failed", True)):
        write_as_a_run(diverging_copy, name, (0, 0), value)
    api.replay(diverging_copy, rep=0, point={"c": "1"})
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == "Not compared: the store records this replicate as failed."


def test_replay_names_each_value_that_differs_from_the_store(diverging_copy, capsys):
    # Values changed as a run writes them (not damage): replay names each that differs
    # (a mutation hunt, h16c: the methods' estimates and failure flags left out of the
    # comparison, and a NaN against a number, passed every test). (c, method, rep):
    write_as_a_run(diverging_copy, "method_estimate", (0, 2, 1), 0.25)  # oracle
    write_as_a_run(diverging_copy, "method_failed", (0, 1, 1), True)  # bm
    write_as_a_run(diverging_copy, "upper", (0, 0, 1), np.nan)  # bb
    api.replay(diverging_copy, rep=1, point={"c": "1"})
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("Differs from the store (computed by code version 0; "), last
    differing = last.split("): ", 1)[1].rstrip(".").split("; ")
    assert differing[0] == "bb's upper bound (NaN in one, a number in the other)", last
    assert differing[1] == "bm's failure flag", last
    assert differing[2].startswith("oracle's estimate (largest difference "), last
    assert len(differing) == 3, last


def test_replay_of_a_method_record_whose_replicate_fails_says_so(diverging_copy, capsys):
    # A record of bb's failure, at a grid point whose chain fails when replayed: no
    # replicate failure was recorded (a mutation hunt, h16c: the method record's error
    # taken for the replicate's, "another error than the recorded one", passed).
    record = _record(diverging_copy, "1__1.json")
    bb = {"kind": "method", "error": "bb: ValueError: x", "methods": {"bb": "ValueError: x"}}
    _write_record(diverging_copy, "1__1.json", {**record, **bb, "tracebacks": {"bb": ""}})
    assert main(["replay", str(diverging_copy), "--rep", "1"]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert "\nThe replicate failed (no such failure was recorded): NonFiniteRun: " in out, out


def test_replay_compares_each_method_with_its_own_in_the_store(diverging_copy, capsys):
    # A record's spec lists the methods as its run's sweep did, maybe in another order
    # than the store's (a run that added methods): each is compared with its own values
    # (a mutation hunt, h16c: a method looked up by its place in the spec passed).
    record = _record(diverging_copy, "1__1.json")
    spec = {**record["spec"], "c": 1.0}
    spec["methods"] = dict(reversed(list(spec["methods"].items())))
    bm = {"kind": "method", "error": "bm: ValueError: x", "methods": {"bm": "ValueError: x"}}
    failed = {**record, **bm, "spec": spec, "tracebacks": {"bm": ""}}
    _write_record(diverging_copy, "0__1.json", failed)
    api.replay(diverging_copy, rep=1, point={"c": "1"})
    assert capsys.readouterr().out.splitlines()[-1] == (
        "Equal to the store, bit for bit: the estimate, the last iterate, the projected "
        "estimate, the bounds, estimate and failure flag of oracle, bm, bb."
    )


def test_replay_of_a_record_without_its_spec_takes_the_stored_sweeps(diverging_copy, capsys):
    # A record of an older ldpsim has no spec: the stored sweep's is replayed, and the
    # record is still the one named (a mutation hunt, h16c: the record dropped, "no
    # failure is recorded", passed every test).
    record = _record(diverging_copy, "1__1.json")
    _write_record(diverging_copy, "1__1.json", {k: v for k, v in record.items() if k != "spec"})
    assert main(["replay", str(diverging_copy), "--rep", "1"]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert out.startswith(f"Replaying {diverging_copy}/ldpsim/errors/1__1.json (replicate "), out
    assert "rep 1 at c = 1e+308, seed 7" in out.splitlines()[0]
    assert "The replicate failed again, with the recorded error." in out


def test_a_replicates_values_are_shown_at_n_with_a_failed_methods_reason():
    # A mutation hunt (h16c): the first checkpoint's values shown, a method's lower
    # bound shown for its upper, or a failure's reason left out, passed every test.
    from ldpsim.pipeline.compute.replay import format_result

    spec = {"model": "quantile", "eps": 1.0, "n": 1000, "checkpoints": [3, 1000]}
    methods = {"bb": {"B": 50}, "oracle": {}}
    tables = {"replicates": 1, "seed": 7, "spec": spec, "methods": methods}
    sweep = api.load_sweep(tables, name="at_n")
    result = replicate.run_replicate(GridPointSetup.of(sweep.points()[0].spec), 0)
    assert result.lower["oracle"][0] != result.lower["oracle"][-1]

    def at_n(values) -> str:
        return np.array2string(np.asarray(values)[-1], precision=6, threshold=8)

    reason = "ValueError at n = 3: bb needs at least 2 blocks; n = 3 gives 1."
    lower, upper = result.lower, result.upper
    assert format_result(0, result).splitlines()[1:] == [
        f"  estimate  {at_n(result.estimate)}",
        f"  bb        {at_n(lower['bb'])} to {at_n(upper['bb'])} (failed: {reason})",
        f"  oracle    {at_n(lower['oracle'])} to {at_n(upper['oracle'])}",
    ]


def test_errors_counts_the_failures_whose_record_was_deleted(diverging_copy, capsys):
    # A hunt (2026-12-01): with a record deleted (the remedy for one that does not
    # parse), errors showed one failure fewer than status, without a word.
    records = sorted((diverging_copy / "ldpsim" / "errors").glob("*.json"))
    kinds = [json.loads(r.read_bytes()).get("kind") for r in records]
    failed = sum(kind in ("replicate", "task") for kind in kinds)
    assert failed >= 2, kinds
    records[kinds.index("replicate")].unlink()
    assert main(["errors", str(diverging_copy)]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert f"1 of the {failed} failed replicates has no failure record (deleted, or" in out


def _write_record(store: Path, name: str, record: dict) -> None:
    (store / "ldpsim" / "errors" / name).write_text(json.dumps(record))


def test_replay_of_a_spec_that_no_longer_validates_is_bad_input(diverging_copy, capsys):
    record = _record(diverging_copy, "1__1.json")
    renamed = {("epsilon" if key == "eps" else key): v for key, v in record["spec"].items()}
    for spec, words in (
        ({**record["spec"], "model": "gone_model"}, ("'gone_model'",)),  # plugin uninstalled
        (renamed, ("Unknown key 'epsilon'",)),  # a parameter renamed
        # a type checked since (a TypeError; a mutation hunt, h16c: its traceback passed)
        ({**record["spec"], "eps": "x"}, ("The 'eps' parameter of randomized_response",)),
    ):
        _write_record(diverging_copy, "1__1.json", {**record, "spec": spec})
        code = main(["replay", str(diverging_copy), "--rep", "1"])
        one_error_line(
            capsys.readouterr(),
            code,
            ("The recorded spec of rep 1 at c = 1e+308 no longer validates: ", *words),
            EXIT_BAD_INPUT,
        )


def test_replay_of_a_workers_failure_runs_without_the_workers_limits(diverging_copy, capsys):
    failed = _record(diverging_copy, "1__0.json")
    killed = {
        **failed,
        "kind": "task",
        "error": "KilledWorker: Attempted to run task 'x' on 4 different workers -- the "
        "worker running this task died repeatedly (e.g. out of memory); the replicates "
        "were recorded as failed",
        "traceback": "",
    }
    worker_line = (
        "The recorded failure is the worker's (killed or timed out), not an error of the "
        "computation: replay runs the computation in this process, without the worker's "
        "memory and time limits."
    )
    # The good grid point c = 1, as if its worker had been killed: it runs here.
    _write_record(diverging_copy, "0__0.json", {**killed, "spec": {**failed["spec"], "c": 1.0}})
    result = api.replay(diverging_copy, rep=0, point={"c": "1"})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"Replaying {diverging_copy}/ldpsim/errors/0__0.json (task failure")
    assert lines[1] == worker_line
    assert lines[2].startswith("The computation ran to the end here (")
    assert "not from an error in the computation" in lines[2]
    assert lines[3].startswith("Equal to the store, bit for bit: ")
    assert len(lines) == 4 and "did not happen again" not in "\n".join(lines)
    stored = xr.open_zarr(diverging_copy, consolidated=False).sel(c=1.0, rep=0)
    np.testing.assert_array_equal(result.estimate, stored["estimate"].values, strict=True)
    # One that fails here too says so, without comparing with the worker's error.
    _write_record(diverging_copy, "1__0.json", killed)
    assert main(["replay", str(diverging_copy), "--rep", "0", "--point", "c=1e308"]) == EXIT_FAILED
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == worker_line
    assert lines[2].startswith(
        "The replicate failed here, without the worker's limits: NonFiniteRun: non-finite"
    )


PLUGIN = """
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.models.base import Model
from ldpsim.tasks.validation import check_float, lookup


@njit(inline="always")
def _zero_gradient(d, theta, params, s, g):
    g[0] = 0.0
    return s


@dataclass(frozen=True, kw_only=True)
class Typo(Model):
    name = "typo_params"
    sample_gradient = _zero_gradient

    @property
    def dim(self):
        return 1

    def params(self):
        return np.zeros(self.gradient_rnge())  # the typo

    def truth(self):
        return np.zeros(1)

    def jacobian(self):
        return np.eye(1)

    def gradient_cov(self):
        return np.eye(1)


@dataclass(frozen=True, kw_only=True)
class Shaky(Typo):
    name = "shaky_init"

    def __post_init__(self):
        _check(self)


def _check(model):
    return 1 / 0


@dataclass(frozen=True, kw_only=True)
class NoneParams(Typo):
    name = "none_params"

    def params(self):
        return np.zeros(1) + (None + 1)  # the None bug


@dataclass(frozen=True, kw_only=True)
class ShapeParams(Typo):
    name = "shape_params"

    def params(self):
        return np.zeros(2) + np.zeros(3)  # the shape bug


@dataclass(frozen=True, kw_only=True)
class Picky(Typo):
    name = "picky_width"
    width: float = 1.0
    spread: float = 1.0

    def __post_init__(self):
        if not self.width > 0:
            raise ValueError(f"The 'width' of picky_width must be > 0. Got {self.width}.")
        check_float(self.spread, "spread", owner="picky_width", low=0)


@dataclass(frozen=True, kw_only=True)
class Checksum(Typo):
    name = "checksum_params"

    def params(self):
        return self._checksum()

    def _checksum(self):
        raise ValueError("the table's checksum is wrong\\nexpected 1, got 2")  # the checksum bug


@dataclass(frozen=True, kw_only=True)
class Singular(Typo):
    name = "singular_params"

    def params(self):
        return np.linalg.inv(np.zeros((1, 1)))[0]  # the singular bug


@dataclass(frozen=True, kw_only=True)
class Choosy(Typo):
    name = "choosy_shape"
    shape: str = "flat"

    def __post_init__(self):
        lookup({"flat": 1}, self.shape, "shape")
"""


@pytest.fixture
def typo_site(tmp_path, monkeypatch) -> Path:
    """An installed distribution (a dist-info folder) of the models above, importable."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "replay_units.py").write_text(PLUGIN)
    info = site / "replay_units-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: replay-units\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[ldpsim.models]\ntypo_params = replay_units:Typo\nshaky_init = replay_units:Shaky\n"
        "none_params = replay_units:NoneParams\nshape_params = replay_units:ShapeParams\n"
        "picky_width = replay_units:Picky\nchecksum_params = replay_units:Checksum\n"
        "singular_params = replay_units:Singular\nchoosy_shape = replay_units:Choosy\n"
        "ldpsim_named = ldpsim_named_units:Typo\n"
    )
    # A plugin package whose name begins with "ldpsim" (as the example's does) is not
    # ldpsim's own code.
    (site / "ldpsim_named_units.py").write_text(PLUGIN.replace('"typo_params"', '"ldpsim_named"'))
    monkeypatch.syspath_prepend(str(site))
    # Imported afresh from this site: a module of another test's site has another file.
    monkeypatch.delitem(sys.modules, "replay_units", raising=False)
    monkeypatch.delitem(sys.modules, "ldpsim_named_units", raising=False)
    plugins.plugins.cache_clear()
    yield site
    plugins.plugins.cache_clear()


def test_a_plugins_bug_is_one_line_naming_its_file_and_line(typo_site, tmp_path, capsys):
    lines = PLUGIN.splitlines()
    typo = next(i for i, text in enumerate(lines, 1) if "# the typo" in text)
    zero = next(i for i, text in enumerate(lines, 1) if "1 / 0" in text)
    store = tmp_path / "typo.zarr"
    for model, words in (
        (
            "typo_params",
            (
                "The model plugin 'typo_params' (replay_units:Typo, from replay-units 1.0)",
                f"Typo.params raised AttributeError at {typo_site / 'replay_units.py'}, "
                f"line {typo}: 'Typo' object has no attribute 'gradient_rnge'.",
            ),
        ),
        (
            "shaky_init",
            (
                "The model plugin 'shaky_init' (replay_units:Shaky",
                f"Shaky.__post_init__ (in _check) raised ZeroDivisionError at "
                f"{typo_site / 'replay_units.py'}, line {zero}: division by zero, at the grid "
                "point n = 1000.",
            ),
        ),
    ):
        sweep = write_sweep(
            tmp_path / f"{model}.toml",
            grid={"n": [1000]},
            spec={"model": f'"{model}"', "eps": "inf", "mechanism": '"none"'},
        )
        code = main(["run", str(sweep), "--store", str(store)])
        one_error_line(capsys.readouterr(), code, words, EXIT_BAD_INPUT)
        assert not store.exists()
    # An exception of ldpsim's own code (or the caller's) is not blamed on a plugin.
    try:
        _ = 1 / 0
    except ZeroDivisionError as exc:
        assert plugins.plugin_code_error(exc) is None


def _line_of(marker: str) -> int:
    return next(i for i, text in enumerate(PLUGIN.splitlines(), 1) if marker in text)


def _run_model(tmp_path: Path, model: str, **params: str) -> tuple[int, Path]:
    sweep = write_sweep(
        tmp_path / f"{model}.toml",
        grid={"n": [1000]},
        spec={"model": f'"{model}"', "eps": "inf", "mechanism": '"none"', **params},
    )
    store = tmp_path / f"{model}.zarr"
    return main(["run", str(sweep), "--store", str(store)]), store


def test_a_plugins_type_or_value_error_is_its_bug_unless_its_validation_raised(
    typo_site, tmp_path, capsys
):
    where = typo_site / "replay_units.py"
    # The most common bugs raise TypeError or ValueError: still the plugin's one line.
    for model, unit, error, marker, reason in (
        (
            "none_params",
            "NoneParams",
            "TypeError",
            "# the None bug",
            "unsupported operand type(s) for +: 'NoneType' and 'int'",
        ),
        ("shape_params", "ShapeParams", "ValueError", "# the shape bug", "operands could not"),
    ):
        code, store = _run_model(tmp_path, model)
        one_error_line(
            capsys.readouterr(),
            code,
            (
                f"The model plugin {model!r} (replay_units:{unit}, from replay-units 1.0): "
                f"{unit}.params raised {error} at {where}, line {_line_of(marker)}: {reason}",
            ),
            EXIT_BAD_INPUT,
        )
        assert not store.exists()
    # A refusal by the unit's __post_init__, or by ldpsim's check_* helper it calls,
    # keeps its own message.
    for params, message in (
        ({"width": "-1.0"}, "The 'width' of picky_width must be > 0. Got -1.0, at the grid"),
        ({"spread": "-1.0"}, "The 'spread' parameter of picky_width must be a float in (0,"),
    ):
        code, store = _run_model(tmp_path, "picky_width", **params)
        line = one_error_line(capsys.readouterr(), code, (message,), EXIT_BAD_INPUT)
        assert "plugin" not in line and "raised" not in line
        assert not store.exists()


def test_a_plugins_error_names_its_own_frame_and_a_helper_not_a_refusal(
    typo_site, tmp_path, capsys
):
    # A helper whose name begins with "check" but not "check_" is no validation; the
    # line names the plugin's own frame that called numpy, not numpy's, and the first
    # line of the message; a package named like ldpsim_* is the plugin's (mutation hunt
    # h16g: none of these was tested).
    where = typo_site / "replay_units.py"
    for model, unit, inner, error, marker, reason in (
        ("checksum_params", "Checksum", "_checksum", "ValueError", "# the checksum bug", "the "),
        ("singular_params", "Singular", None, "LinAlgError", "# the singular bug", "Sing"),
    ):
        code, store = _run_model(tmp_path, model)
        out = capsys.readouterr()
        assert "expected 1, got 2" not in out.err  # the first line of its message only
        entry = f"{unit}.params" if inner is None else f"{unit}.params (in {unit}.{inner})"
        one_error_line(
            out,
            code,
            (
                f"The model plugin {model!r} (replay_units:{unit}, from replay-units 1.0): "
                f"{entry} raised {error} at {where}, line {_line_of(marker)}: {reason}",
                "checksum is wrong." if inner else "Singular matrix.",
            ),
            EXIT_BAD_INPUT,
        )
        assert not store.exists()
    code, store = _run_model(tmp_path, "ldpsim_named")
    one_error_line(
        capsys.readouterr(),
        code,
        (
            "The model plugin 'ldpsim_named' (ldpsim_named_units:Typo, from replay-units 1.0): "
            f"Typo.params raised AttributeError at {typo_site / 'ldpsim_named_units.py'}, "
            f"line {_line_of('# the typo')}: 'Typo' object has no attribute 'gradient_rnge'.",
        ),
        EXIT_BAD_INPUT,
    )
    # ldpsim's lookup refusing a plugin's parameter (in its __post_init__) is a refusal.
    code, store = _run_model(tmp_path, "choosy_shape", shape='"round"')
    line = one_error_line(
        capsys.readouterr(),
        code,
        ("Unknown shape 'round'. Available shapes are: 'flat'",),
        EXIT_BAD_INPUT,
    )
    assert "plugin" not in line and "raised" not in line
    assert not store.exists()


@dataclass(frozen=True, kw_only=True)
class NarrowPoint(IntervalMethod):
    """theta_bar -+ 0.01: the first version of a method registered at run time."""

    name = "point_interval"

    def interval(self, stats, level, rng):
        return stats.theta_bar - 0.01, stats.theta_bar + 0.01


@dataclass(frozen=True, kw_only=True)
class WidePoint(IntervalMethod):
    """theta_bar -+ 0.1: its second version, the class edited."""

    name = "point_interval"

    def interval(self, stats, level, rng):
        return stats.theta_bar - 0.1, stats.theta_bar + 0.1


@pytest.fixture(scope="module")
def registered_store(tmp_path_factory, local_cluster) -> Path:
    """DIVERGING with the registered method point_interval: replicates 0 and 1 computed
    by NarrowPoint (code version 0), then replicate 2 by WidePoint, the change accepted
    (code version 1); c = 1e308 fails in every replicate."""
    folder = tmp_path_factory.mktemp("registered")
    sweep = write_sweep(folder / "reg.toml", replicates=2, **DIVERGING)
    sweep.write_text(sweep.read_text() + "[methods.point_interval]\n")
    store = folder / "reg.zarr"
    run = ["run", str(sweep), "--store", str(store), *scheduler(local_cluster)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plugins, "_REGISTERED", {kind: {} for kind in plugins.GROUPS})
        api.register(NarrowPoint)
        assert main(run) == EXIT_FAILED
        api.register(WidePoint)
        assert main([*run, "--replicates", "3", "--accept-code-change"]) == EXIT_FAILED
    versions = xr.open_zarr(store, consolidated=False)["code_version"].sel(c=1.0).values
    np.testing.assert_array_equal(versions, [0, 0, 1])
    return store


@pytest.fixture
def no_registered_units(monkeypatch):
    """This process with no unit registered at run time (as a new `ldpsim` process)."""
    monkeypatch.setattr(plugins, "_REGISTERED", {kind: {} for kind in plugins.GROUPS})


def _compared(store: Path, rep: int, capsys) -> str:
    """The line of replay comparing replicate ``rep`` at c = 1 with the store (exit 0)."""
    assert main(["replay", str(store), "--rep", str(rep), "--point", "c=1"]) == EXIT_OK
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if "the store" in line]
    return line


def test_replay_says_whether_it_equals_the_store_and_names_both_code_versions(
    registered_store, no_registered_units, capsys
):
    equal = (
        "Equal to the store, bit for bit: the estimate, the last iterate, the projected "
        "estimate, the bounds, estimate and failure flag of bb, bm, oracle, point_interval."
    )
    # The latest code (WidePoint) computed replicate 2, not replicates 0 and 1.
    api.register(WidePoint)
    assert _compared(registered_store, 2, capsys) == equal
    line = _compared(registered_store, 0, capsys)
    assert line.startswith(
        "Differs from the store (computed by code version 0; now version 1): "
        "point_interval's lower bound (largest difference 0.09"
    ), line
    assert "point_interval's upper bound (largest difference 0.09)" in line
    assert "estimate;" not in line and "bb's" not in line  # the chain is the same
    # The first code again: replicates 0 and 1 are its own.
    api.register(NarrowPoint)
    assert _compared(registered_store, 1, capsys) == equal
    line = _compared(registered_store, 2, capsys)
    assert line.startswith("Differs from the store (computed by code version 1; now version 0): ")


def test_the_route_to_replay_a_store_of_registered_units_is_python(
    registered_store, no_registered_units, capsys, without_figures
):
    route = (
        "Rerun one in Python: the store used the interval method 'point_interval' (class "
        "test_replay.WidePoint), registered at run time, which `ldpsim replay` cannot load; "
        "where your code defines it, run ldpsim.pipeline.api.register(WidePoint); then "
        "ldpsim.pipeline.api.replay("
    )
    assert main(["errors", str(registered_store)]) == EXIT_FAILED
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(route) and "rep=R, point={AXIS: VALUE, ...}, pdb=True)." in last
    # The report says the same (there, with the store's absolute path).
    from ldpsim.pipeline.report.report import build_context, render_report

    context = build_context(registered_store)
    assert context["replay"].startswith(route)
    assert context["replay"] in html.unescape(render_report(context))
    # `ldpsim replay` (a new process: nothing registered) says how, in one line, with
    # the grid point it chose where none was given (the call fails without it).
    for point in (["--point", "c=1e308"], []):
        code = main(["replay", str(registered_store), "--rep", "1", *point])
        one_error_line(
            capsys.readouterr(),
            code,
            (
                "used the interval method 'point_interval' (class test_replay.WidePoint), "
                "registered at run time, and this process has not registered it",
                "ldpsim.pipeline.api.register(WidePoint); then ldpsim.pipeline.api.replay("
                f"{str(registered_store)!r}, rep=1, point={{'c': '1e+308'}}, pdb=True).",
            ),
            EXIT_BAD_INPUT,
        )
    # Which works, in Python, as the line says.
    api.register(WidePoint)
    with pytest.raises(NonFiniteRun):
        api.replay(registered_store, rep=1, point={"c": "1e+308"})
    assert "The replicate failed again, with the recorded error." in capsys.readouterr().out


def test_status_verify_computes_the_truths_without_a_registered_method(
    registered_store, no_registered_units, capsys
):
    """The coordinates and truths need the model, not the interval methods: a new
    process without point_interval checks them (it said "Unknown method" before)."""
    from ldpsim.pipeline.store.damage import _determined_by
    from ldpsim.pipeline.store.integrity import determined_arrays
    from ldpsim.pipeline.store.reading import read_attrs

    assert main(["status", "--verify", str(registered_store)]) == EXIT_FAILED  # c = 1e308
    out, err = capsys.readouterr()
    assert "Unknown method" not in out + err and "damaged" not in out
    assert "3/6 replicates done, 3 failed" in out
    # What it compares: the arrays of the sweep less the method, labelled as stored.
    sweep, layout = _determined_by(registered_store, read_attrs(registered_store))
    assert "point_interval" not in sweep.methods
    expected = determined_arrays(sweep, layout())
    stored = xr.open_zarr(registered_store, consolidated=False)
    assert list(expected["method"]) == ["bb", "bm", "oracle", "point_interval"]
    for name in ("method", "rep", "coord", "c", "truth"):
        np.testing.assert_array_equal(stored[name].values, expected[name], err_msg=name)


def test_equal_values_are_bit_for_bit_with_any_nan_equal_to_any_nan():
    from ldpsim.pipeline.compute.replay import same_values

    nan = np.float64("nan")
    negative_nan = np.copysign(nan, -1.0)
    assert same_values([1.0, nan], [1.0, negative_nan])  # NaN carries no value
    assert not same_values([0.0], [-0.0])  # bit for bit
    assert not same_values([1.0], [np.nextafter(1.0, 2.0)])  # one ulp
    assert not same_values([1.0, nan], [1.0, 2.0])
    assert not same_values([1.0], [1.0, 1.0])
    assert same_values(np.array([True, False]), np.array([True, False]))
    assert not same_values(np.array(True), np.array(False))


def test_the_comparisons_line_names_what_the_store_records_of_the_code():
    from ldpsim.pipeline.compute.replay import StoreComparison

    differs = ["bb's lower bound (largest difference 0.09)"]

    def line(stored, current, versions, absent=None, pending=()):
        return StoreComparison(
            ["the estimate"], differs, absent, list(pending), stored, current, versions
        ).line()

    assert line(0, 1, 2) == (
        "Differs from the store (computed by code version 0; now version 1): bb's lower "
        "bound (largest difference 0.09)."
    )
    assert line(1, 1, 2).startswith(
        "Differs from the store (computed by code version 1; now version 1, the same "
        "source: a module it imports may have changed): "
    )
    assert line(0, None, 2).startswith(
        "Differs from the store (computed by code version 0; now code of no version the "
        "store records: changed since its last run): "
    )
    assert line(None, 0, 1).startswith(
        "Differs from the store (computed by code whose version the store did not record; "
        "now version 0): "
    )
    assert line(None, None, 0).startswith(
        "Differs from the store (which records no code versions: an older ldpsim wrote it): "
    )
    # Nothing stored to compare: no code version is blamed (a hunt, 2026-12-01).
    failed = line(0, 0, 1, absent="the store records this replicate as failed")
    assert failed == "Not compared: the store records this replicate as failed."
    equal = StoreComparison(["the estimate"], [], None, ["new"], 0, 0, 1).line()
    assert equal == (
        "Equal to the store, bit for bit: the estimate (new: added to the store and not "
        "computed for this replicate yet, so not compared)."
    )


def test_the_code_version_running_now_is_found_by_source_the_latest_first():
    # The store's generations of units (code versions) against this process's sources:
    # a store that another ldpsim release wrote from the same sources runs as its own
    # version; of two versions with this grid point's sources, the latest is named.
    from ldpsim.pipeline.compute.replay import _current_version
    from ldpsim.pipeline.store.code_identity import spec_units, unit_origin

    sweep = api.load_sweep("demo", replicates=1, grid__n=[1000], grid__tau=[0.5])
    spec = sweep.points()[0].normalized
    now = {key: unit_origin(cls) for key, cls in spec_units(spec).items()}
    released = {key: {**origin, "version": "0.0.1"} for key, origin in now.items()}
    other = {"origin": "ldpsim", "version": "0.0.1", "source_sha256": "0" * 64}
    changed = {**now, "model:quantile": other}

    def current(*generations):
        return _current_version({"units": json.dumps(list(generations))}, spec)

    assert current(released) == (1, 0)
    assert current(now, {**now, "mechanism:laplace": other}) == (2, 1)
    assert current(now, changed) == (2, 0) and current(changed, now) == (2, 1)
    assert current(changed) == (1, None) and current() == (0, None)


SCRIPT = """
import sys

from ldpsim.pipeline import api

sweep = api.load_sweep("demo", replicates=1, grid__n=[1000], grid__tau=[0.5])
try:
    api.run(sweep, {store!r}, workers=1, start_timeout=20, progress=False)
except api.InputError as exc:
    print("ERROR", exc)
    sys.exit(2)
"""


def test_a_script_without_a_main_guard_gets_the_hint(tmp_path):
    # pytest's own main module is guarded (or a package's __main__): no hint here.
    assert unguarded_main_script() is None
    script, store = tmp_path / "unguarded.py", tmp_path / "x.zarr"
    script.write_text(textwrap.dedent(SCRIPT.format(store=str(store))))
    env = {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stdout.splitlines() if line.startswith("ERROR")]
    assert any(
        "The local cluster could not start" in line
        and 'put the call under `if __name__ == "__main__":`' in line
        and str(script) in line
        for line in errors
    ), done.stdout
    assert not store.exists()
