"""`ldpsim errors` groups identical tracebacks: one block per distinct failure, with its count."""

from __future__ import annotations

import json
import traceback

import numpy as np
import synthetic as syn
import xarray as xr

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.compute.failures import (
    GridNames,
    format_group,
    group_failures,
    record_failures,
    rep_ranges,
    split_traceback,
)

TRACEBACK = (
    'Traceback (most recent call last):\n  File "plugin.py", line 3\nZeroDivisionError: x\n'
)


def traceback_at(line: int) -> str:
    """:data:`TRACEBACK` raised at another line of plugin.py: another failure."""
    return TRACEBACK.replace("line 3", f"line {line}")


def method_record(rep: int, key: str, traceback: str = TRACEBACK) -> dict:
    return {
        "key": key,
        "rep": rep,
        "seed": 7,
        "spec": {"model": "quantile", "n": 100},
        "kind": "method",
        "error": "flaky: ZeroDivisionError: x",
        "methods": {"flaky": "ZeroDivisionError: x"},
        "tracebacks": {"flaky": traceback},
    }


def test_rep_ranges():
    assert rep_ranges([4, 0, 1, 2, 7, 9, 10]) == "0-2, 4, 7, 9-10"
    assert rep_ranges([3]) == "3"
    assert rep_ranges([4, 3, 3]) == "3-4"  # a replicate met twice is named once


def test_groups_by_kind_and_traceback():
    records = [method_record(r, "n=100") for r in range(60)]
    records += [method_record(r, "n=1000") for r in range(40)]
    # The same frames and type with another message (a step number): the same failure.
    records += [method_record(5, "n=10", TRACEBACK.replace(": x", ": y"))]
    records += [method_record(6, "n=100", traceback_at(4))]
    records.append({"key": "n=100", "rep": 99, "seed": 7, "kind": "replicate", "error": "E"})
    groups = group_failures(records)
    assert [(g.kind, g.count) for g in groups] == [
        ("method flaky", 101),
        ("method flaky", 1),
        ("replicate", 1),
    ]
    assert groups[0].where == {"n=100": list(range(60)), "n=1000": list(range(40)), "n=10": [5]}
    assert groups[0].messages == {"ZeroDivisionError: x", "ZeroDivisionError: y"}
    assert "(2 distinct messages; the first is shown)" in format_group(groups[0])


def test_grid_points_are_listed_in_grid_order_not_file_name_order():
    # `ldpsim errors` of a grid of 12 values listed tau index 10 and 11 after index 0
    # (the records' files sorted by name: "-10-" before "-2-").
    names = GridNames.of({"tau": [0.05 * i for i in range(12)], "n": [100, 1000]})
    keys = [f"ldpsim-ab12-{i}-{j}-c{c}" for i in (0, 10, 11, 2) for j in (1, 0) for c in (10, 2)]
    records = [method_record(rep, key) for rep, key in enumerate(sorted(keys))]
    records.append(method_record(0, "ldpsim-ab12-3-0-c0", TRACEBACK.replace("3", "4")))
    records.append(method_record(0, "ldpsim-ab12-1-0-c0", TRACEBACK.replace("3", "5")))
    first, *ties = group_failures(records)
    where = format_group(first, names.name_of_key).splitlines()[1]
    places = [place.split(":")[0] for place in where.removeprefix("where: ").split("; ")]
    order = [(i, j) for i in (0, 2, 10, 11) for j in (0, 1)]
    assert places == [names.name(index) for index in order]
    assert [group.where for group in ties] == [  # groups of one failure: grid order too
        {"ldpsim-ab12-1-0-c0": [0]},
        {"ldpsim-ab12-3-0-c0": [0]},
    ]


def test_chained_failures_group_by_every_link():
    # A hunt (2026-12-01): a method that caught a KeyError and raised RuntimeError for
    # some replicates and TypeError for others was one group of 6, keyed on the KeyError.
    def chained(last: str) -> str:
        first = TRACEBACK.replace("ZeroDivisionError: x", "KeyError: 'k'")
        separator = "\nDuring handling of the above exception, another exception occurred:\n\n"
        return first + separator + traceback_at(9).replace("ZeroDivisionError: x", last)

    records = [method_record(r, "n=100", chained("RuntimeError: r")) for r in (1, 2, 5)]
    records += [method_record(r, "n=100", chained(f"TypeError: t{r}")) for r in (0, 3, 4)]
    groups = group_failures(records)
    assert sorted((g.count, g.where["n=100"][0]) for g in groups) == [(3, 0), (3, 1)]
    typed = next(g for g in groups if g.where["n=100"] == [0, 3, 4])
    assert len(typed.messages) == 3 and all("TypeError: t" in m for m in typed.messages)
    # A message quoting Python's separator line (a remote traceback) is not a link.
    quoted = TRACEBACK.replace(
        "ZeroDivisionError: x",
        "RuntimeError: remote\nDuring handling of the above exception, another exception "
        "occurred:\nKeyError: {}",
    )
    frames, message = split_traceback(quoted.replace("{}", "1"))
    assert frames == split_traceback(quoted.replace("{}", "2"))[0] and "KeyError: 1" in message


def test_a_grid_points_chunks_are_in_the_order_of_their_numbers():
    # Two failures of one replicate each at one grid point, in chunks 2 and 10: the
    # chunk of rep 25 first. The chunks were compared as strings, "-c10" before "-c2"
    # (found by the h15d mutation hunt).
    def record(rep: int, chunk: int, line: int) -> dict:
        return method_record(rep, f"ldpsim-ab12-0-c{chunk}", traceback_at(line))

    groups = group_failures([record(105, 10, 9), record(25, 2, 3), record(7, 0, 4)])
    assert [group.where for group in groups] == [
        {"ldpsim-ab12-0-c0": [7]},
        {"ldpsim-ab12-0-c2": [25]},
        {"ldpsim-ab12-0-c10": [105]},
    ]
    # A key that is no chunk key comes after every one that is.
    groups = group_failures([method_record(1, "n=100"), record(105, 10, 9)])
    assert [group.where for group in groups] == [{"ldpsim-ab12-0-c10": [105]}, {"n=100": [1]}]


def test_a_block_shows_its_count_seeds_first_parameters_and_traceback():
    first = method_record(0, "n=100")
    second = method_record(1, "n=100") | {"seed": 8, "spec": {"model": "quantile", "n": 9}}
    one, two = (format_group(group_failures(records)[0]) for records in ([first], [first, second]))
    assert one.splitlines()[0] == "--- 1 method flaky failure with this traceback (seed 7)"
    assert two.splitlines()[:3] == [
        "--- 2 method flaky failures with this traceback (seed 7, 8)",
        "where: n=100: rep 0-1",
        'parameters (the first): {"model": "quantile", "n": 100}',
    ]
    assert two.splitlines()[3:] == TRACEBACK.rstrip().splitlines()  # with its message
    # A hunt (h21d): no trailing newline (the blocks are joined by blank lines), and
    # parameters JSON cannot hold are shown as text.
    assert not two.endswith("\n")
    odd = method_record(2, "n=100") | {"spec": {"model": "quantile", "tau": np.float32(0.5)}}
    block = format_group(group_failures([odd])[0])
    assert 'parameters (the first): {"model": "quantile", "tau": "0.5"}' in block


def test_what_groups_failures_and_what_does_not():
    # A failed replicate is grouped by its traceback, not by its one-line error.
    def replicate(rep: int, line: int) -> dict:
        traceback = traceback_at(line)
        return {"key": "n=100", "rep": rep, "kind": "replicate", "traceback": traceback,
                "error": "ZeroDivisionError: x"}  # fmt: skip

    groups = group_failures([replicate(0, 3), replicate(1, 4)])
    assert [group.traceback for group in groups] == [traceback_at(line) for line in (3, 4)]
    # A method record without its methods (not one ldpsim writes) is one failure.
    assert record_failures({"kind": "method", "error": "E: e"}) == [("method", "E: e")]
    # A message left out ("raise ZeroDivisionError") is the same failure.
    bare = TRACEBACK.replace("ZeroDivisionError: x", "ZeroDivisionError")
    assert split_traceback(bare)[0] == split_traceback(TRACEBACK)[0]
    # A traceback cut before its exception line is keyed on all it has.
    cut = TRACEBACK.rpartition("\nZeroDivisionError")[0]
    assert split_traceback(cut) == (cut, "")
    # Chains differ in how their links are joined; each link's message is kept.
    first = TRACEBACK.replace("ZeroDivisionError: x", "KeyError: 'k'")
    during = "\nDuring handling of the above exception, another exception occurred:\n\n"
    cause = "\nThe above exception was the direct cause of the following exception:\n\n"
    assert split_traceback(first + during + TRACEBACK)[1] == "KeyError: 'k'\nZeroDivisionError: x"
    assert (
        split_traceback(first + during + TRACEBACK)[0]
        != (split_traceback(first + cause + TRACEBACK)[0])
    )


def test_a_key_that_names_no_grid_point_is_shown_as_it_is():
    names = GridNames.of({"tau": [0.5, 0.9], "n": [100]})
    assert names.name_of_key("ldpsim-ab12-1-0-c3") == "tau = 0.9, n = 100"
    for key in ("ldpsim-ab12-1-c3", "ldpsim-ab12-1-0-0-c3", "ldpsim-ab12-2-0-c3"):
        assert names.name_of_key(key) == key
    # A sweep without grid axes: its chunk keys say "0".
    bare = GridNames.of({})
    assert bare.name_of_key("ldpsim-ab12-0-c3") == "the grid point"
    assert bare.name_of_key("ldpsim-ab12-1-c3") == "ldpsim-ab12-1-c3"
    # A grid of one axis: its first point's key says "0" too (a hunt, h21d).
    assert GridNames.of({"tau": [0.5, 0.9]}).name_of_key("ldpsim-ab12-0-c3") == "tau = 0.5"


def test_errors_prints_one_block_for_100_identical_failures(tmp_path, capsys):
    store = tmp_path / "s.zarr"
    syn.save_store(syn.grid_store(), store)
    folder = store / "ldpsim" / "errors"
    folder.mkdir()
    for rep in range(100):
        record = method_record(rep, "tau=0.5,n=100")
        (folder / f"0_0__{rep}.json").write_text(json.dumps(record))
    main(["errors", str(store)])
    out = capsys.readouterr().out
    assert out.count("--- ") == 1 and out.count("ZeroDivisionError") == 1
    assert "--- 100 method flaky failures with this traceback (seed 7)" in out
    assert "where: tau=0.5,n=100: rep 0-99" in out
    assert len(out.splitlines()) < 10


#: A finished store of the oracle alone, to which bb is added: bb fails at the
#: checkpoint n = 3 (one block) in every replicate, in the tasks that compute added
#: methods, whose keys end in "-methods".
ORACLE_ONLY = """replicates = 2
seed = 7
rep_chunk = 1
[spec]
model = "quantile"
eps = 1.0
n = 1000
checkpoints = [3, 1000]
[grid]
tau = [0.5, 0.9]
[methods.oracle]
"""


def test_added_methods_failures_are_named_by_their_grid_point(
    tmp_path, local_cluster, capsys, without_figures
):
    from conftest import scheduler

    from ldpsim.pipeline.cli import EXIT_FAILED, EXIT_OK
    from ldpsim.pipeline.compute.task_keys import KEY_SUFFIX
    from ldpsim.pipeline.report.report import build_context
    from ldpsim.pipeline.store.reading import iter_errors

    sweep, store = tmp_path / "oracle.toml", tmp_path / "S.zarr"
    sweep.write_text(ORACLE_ONLY)
    run = ["run", str(sweep), "--store", str(store), *scheduler(local_cluster)]
    assert main(run) == EXIT_OK
    sweep.write_text(ORACLE_ONLY + "[methods.bb]\nB = 50\n")
    assert main(run) == EXIT_FAILED
    keys = {record["key"] for record in iter_errors(store)}
    assert len(keys) == 4 and all(key.endswith(KEY_SUFFIX) for key in keys), keys
    # Each record is a method record of its replicate, with bb's traceback (a mutation
    # hunt, h16c: the tracebacks or the spec's seed left out passed every test).
    for record in iter_errors(store):
        assert record["kind"] == "method" and record["seed"] == record["spec"]["seed"] == 7
        assert "ValueError: bb needs at least 2 blocks" in record["tracebacks"]["bb"]
    capsys.readouterr()
    assert main(["errors", str(store)]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert "--- 4 method bb failures with this traceback" in out
    assert "where: tau = 0.5: rep 0-1; tau = 0.9: rep 0-1\n" in out, out
    # The report's failures table names them the same way.
    (group,) = build_context(store)["failures"]
    rows = [(row["key"], row["rep"]) for row in group["rows"]]
    assert rows == [("tau = 0.5", 0), ("tau = 0.5", 1), ("tau = 0.9", 0), ("tau = 0.9", 1)]


def test_only_files_named_as_records_are_failure_records(tmp_path, capsys):
    # A hunt (h16f): every *.json of the errors folder was read as a record. A sync
    # tool's copy of a record counted its failures again (3 failures and their copies
    # from Dropbox, OneDrive and Syncthing: `ldpsim errors` said 12, and so did the
    # report), and macOS's `._0_0__1.json` beside one (binary, no JSON) made every verb
    # call the store damaged, exit 4.
    store = tmp_path / "s.zarr"
    syn.save_store(syn.grid_store(), store)
    folder = store / "ldpsim" / "errors"
    folder.mkdir()
    for rep in range(3):
        text = json.dumps(method_record(rep, "tau=0.5,n=100"))
        for name in (
            "0_0__{}.json",
            "0_0__{} (conflicted copy 2026-12-02).json",
            "0_0__{}-HOSTNAME.json",
            "0_0__{}.sync-conflict-20261202-123456-ABCDEFG.json",
        ):
            (folder / name.format(rep)).write_text(text)
    assert main(["errors", str(store)]) == 1
    out = capsys.readouterr().out
    assert out.count("--- ") == 1, out
    assert "--- 3 method flaky failures with this traceback (seed 7)" in out, out
    for rep in range(3):
        (folder / f"._0_0__{rep}.json").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X")
    assert main(["errors", str(store)]) == 1
    assert "--- 3 method flaky failures" in capsys.readouterr().out
    assert main(["summarize", str(store)]) == 0


def test_every_kind_of_chain_link_is_split_and_only_a_real_one():
    # A hunt (h21d): "raise ... from" chains, chains into an exception group and a
    # message quoting the separator were each keyed like a plain chain or not split.
    first = TRACEBACK.replace("ZeroDivisionError: x", "KeyError: 'k'")
    cause = "\nThe above exception was the direct cause of the following exception:\n\n"
    frames, message = split_traceback(first + cause + TRACEBACK)
    assert message == "KeyError: 'k'\nZeroDivisionError: x"
    assert cause.strip() in frames.splitlines()
    # A message quoting the separator (not followed by a traceback) stays one message.
    quoted = TRACEBACK.replace("ZeroDivisionError: x", f"RuntimeError: remote{cause}KeyError: 1")
    assert split_traceback(quoted)[1] == f"RuntimeError: remote{cause}KeyError: 1".rstrip()
    # Python's own text of a chain into an exception group, whose link has no message
    # line of its own (every line indented): the key's links, the first one's message.
    try:
        try:
            raise KeyError("k")
        except KeyError:
            raise ExceptionGroup("many", [ValueError("v")])  # noqa: B904
    except ExceptionGroup as group:
        text = "".join(traceback.format_exception(group))
    during = "During handling of the above exception, another exception occurred:"
    assert f"\n\n{during}\n\n  + Exception Group Traceback" in text  # Python's words
    frames, message = split_traceback(text)
    assert message == "KeyError: 'k'"
    assert during in frames.splitlines() and "ExceptionGroup: many" in frames


def test_a_record_without_its_replicate_is_not_taken_for_replicate_0():
    # A hunt (h21d): a record that names no replicate is listed as rep -1, before rep 0.
    record = {"key": "n=100", "kind": "replicate", "error": "E: e"}
    (group,) = group_failures([record | {"rep": 0}, record])
    assert group.where == {"n=100": [-1, 0]} and group.count == 2


def test_a_stores_grid_points_are_named_by_its_axes_but_rep():
    # A hunt (h21d): the replicates' dimension of `done` is no grid axis.
    done = xr.DataArray(np.zeros((2, 1, 3), bool), dims=("tau", "n", "rep"))
    ds = xr.Dataset({"done": done}, coords={"tau": [0.5, 0.9], "n": [100], "rep": [0, 1, 2]})
    names = GridNames.of_dataset(ds)
    assert list(names.labels) == ["tau", "n"]
    assert names.name_of_key("ldpsim-ab12-1-0-c3") == "tau = 0.9, n = 100"


def test_naming_grid_points_imports_no_unit():
    # `ldpsim status` names its grid points with GridNames: the module imported the
    # task plan for its chunk-key pattern, and the plan the cost model, the spec and
    # every model, mechanism and interval method (a quarter of a second of each status).
    import subprocess
    import sys

    code = (
        "import json, sys; from ldpsim.pipeline.compute.failures import GridNames; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('ldpsim.'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    assert not [m for m in loaded if m.startswith("ldpsim.tasks")], loaded
    assert "ldpsim.pipeline.compute.plan" not in loaded
