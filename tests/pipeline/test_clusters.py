"""Clusters are checked and started before any write; a start that fails is one line.

With S a finished demo store (conftest.demo_store), `ldpsim run demo --replicates 3`
would extend S; on a new path it would create a store. Each way a cluster can fail to
start must leave S byte for byte as it was and create nothing.
"""

from __future__ import annotations

import importlib
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import DEMO_ARGS, one_error_line, scheduler, tree_hash

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.compute.clusters import WORKER_MEMORY_MIN
from ldpsim.pipeline.compute.limits import usable_memory

ROOT = Path(__file__).resolve().parents[2]
#: `ldpsim run` arguments that would extend S (made with --replicates 2) to 3 replicates.
EXTEND_S = ["run", *DEMO_ARGS[:1], "--replicates", "3", *DEMO_ARGS[3:]]

#: The local workers the memory this process may use holds at 384 MiB each: the
#: machine's, or a cgroup's limit below it (a SLURM job's --mem, a systemd slice's).
FITTING_WORKERS = usable_memory() // WORKER_MEMORY_MIN
#: (case id, cluster YAML or None, run arguments, words of the one error line)
START_FAILURES = [
    (
        "n-workers-not-a-number",
        'kind: local\noptions: {n_workers: "x"}\n',
        [],
        ["n_workers", "integer >= 1", "'x'"],
    ),
    (
        "unknown-local-option",
        "kind: local\noptions: {colour: red}\n",
        [],
        ["'colour'", "Allowed options", "n_workers"],
    ),
    (
        "misspelt-local-option",
        "kind: local\noptions: {n_worker: 2}\n",
        [],
        ["'n_worker' (did you mean 'n_workers'?) for a local cluster", "Allowed options"],
    ),
    (
        # No silence_logs in the file: distributed's nanny logged the worker's traceback
        # (24 lines) before ldpsim's line (a hunt, 2026-12-02).
        "preload-not-found",
        "kind: local\noptions: {n_workers: 1, preload: [no_such_module_x]}\n",
        [],
        ["local cluster could not start", "No module named 'no_such_module_x'"],
    ),
    (
        "bad-dashboard-address",
        'kind: local\noptions: {dashboard_address: "127.0.0.1:http"}\n',
        [],
        ["dashboard_address", "[0, 65535]", "127.0.0.1:http"],
    ),
    (
        "negative-memory-limit",
        'kind: local\noptions: {memory_limit: "-5GB"}\n',
        [],
        ["memory_limit", "4GB", "-5GB"],
    ),
    (
        # 192.0.2.1 (TEST-NET-1, RFC 5737) is no address of this host: nothing can bind.
        "host-not-on-this-machine",
        "kind: local\noptions: {host: 192.0.2.1, n_workers: 1}\n",
        [],
        ["local cluster could not start", "assign"],
    ),
    ("scheduler-without-port", None, ["--scheduler", "foo"], ["'foo'", "tcp://HOST:8786"]),
    (
        "scheduler-unreachable",
        None,
        ["--scheduler", "tcp://127.0.0.1:1", "--start-timeout", "1"],
        ["tcp://127.0.0.1:1", "Cannot connect"],
    ),
    ("scheduler-empty", None, ["--scheduler", ""], ["--scheduler", "empty"]),
    (
        "n-workers-negative",
        None,
        ["--cluster", "local", "--cluster-option", "n_workers=-1"],
        ["n_workers", "integer >= 1", "-1"],
    ),
    (
        "unknown-worker-start",
        None,
        ["--cluster", "local", "--cluster-option", "worker_start=fork"],
        ["worker_start", "'forkserver' or 'spawn'", "'fork'"],
    ),
    (
        "worker-profile-not-a-bool",
        None,
        ["--cluster", "local", "--cluster-option", "worker_profile=sometimes"],
        ["worker_profile", "true or false", "'sometimes'"],
    ),
    (
        "launches-per-gpu-zero",  # named the local cluster before
        None,
        ["--cluster", "local-gpu", "--cluster-option", "launches_per_gpu=0"],
        ["'launches_per_gpu' option of the local-gpu cluster", "integer >= 1", "Got 0."],
    ),
    (
        # Dask shares the machine's memory out: one worker more than 384 MiB each allows
        # (it would wait paused, its memory past 80% of its part, without a word).
        "workers-beyond-the-memory",
        None,
        ["--workers", str(FITTING_WORKERS + 1)],
        ["'n_workers'", "(--workers)", "384 MiB", f"at most {FITTING_WORKERS} workers fit"],
    ),
    (
        "n-workers-beyond-the-memory",
        f"kind: local\noptions: {{n_workers: {FITTING_WORKERS + 1}}}\n",
        [],
        [
            "'n_workers'",
            "GiB, the memory this process may use, over",
            f"at most {FITTING_WORKERS} workers fit",
        ],
    ),
    ("jobs-on-local", None, ["--cluster", "local", "--jobs", "2"], ["--jobs", "--workers"]),
    ("adapt-on-local", None, ["--cluster", "local", "--adapt", "1:2"], ["--adapt", "batch"]),
]


def _has_interface(name: str) -> bool:
    return name in psutil.net_if_addrs()


@pytest.mark.parametrize("case", START_FAILURES, ids=[c[0] for c in START_FAILURES])
def test_cluster_failure_changes_nothing(case, demo_store, tmp_path, capfd):
    _, cluster_yaml, args, words = case
    if cluster_yaml is not None:
        (tmp_path / "cluster.yaml").write_text(cluster_yaml)
        args = [*args, "--cluster", str(tmp_path / "cluster.yaml")]
    _check_refused(demo_store, tmp_path, args, words, capfd)


@pytest.mark.skipif(_has_interface("ib0"), reason="this host has ib0, the pbs.yaml interface")
def test_shipped_pbs_config_without_its_interface(demo_store, tmp_path, capfd):
    # cluster/pbs.yaml names `interface: ib0`; PBSCluster's scheduler fails to start
    # on a host without it (no PBS server is needed to get that far).
    _check_refused(demo_store, tmp_path, ["--cluster", "pbs"], ["pbs", "ib0"], capfd)


def _check_refused(demo_store: Path, tmp_path: Path, args, words, capfd) -> None:
    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    before = tree_hash(store)
    for path in (store, tmp_path / "new.zarr"):
        code = main([*EXTEND_S, *args, "--store", str(path)])
        one_error_line(capfd.readouterr(), code, words)
    assert tree_hash(store) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["S.zarr", *(["cluster.yaml"] if (tmp_path / "cluster.yaml").exists() else [])]
    ), "a store (or a hidden creation folder) was made"


def test_no_worker_within_start_timeout(demo_store, tmp_path, capfd):
    """A scheduler without workers: one line once the start timeout is over, not a hang."""
    from distributed import LocalCluster

    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    before = tree_hash(store)
    with LocalCluster(
        n_workers=0, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0"
    ) as empty:
        start = time.monotonic()
        argv = [*EXTEND_S, "--store", str(store), *scheduler(empty), "--start-timeout", "1"]
        code = main(argv)
        seconds = time.monotonic() - start
    one_error_line(capfd.readouterr(), code, ["No Dask worker", "start timeout"])
    assert 1 <= seconds < 60, seconds  # the timeout, plus imports on a loaded machine
    assert tree_hash(store) == before


def test_start_timeout_in_cluster_file_is_checked(tmp_path, capfd):
    (tmp_path / "c.yaml").write_text("kind: local\nstart_timeout: -1\n")
    cluster = ["--cluster", str(tmp_path / "c.yaml")]
    code = main(["run", "demo", "--store", str(tmp_path / "x.zarr"), *cluster])
    one_error_line(capfd.readouterr(), code, ["start_timeout", "(0, inf]", "-1"])
    assert not (tmp_path / "x.zarr").exists()


def test_many_workers_shut_down_quietly(tmp_path, capfd):
    """8 local workers for one replicate: the run's stderr holds no Dask log or traceback.

    Closing workers that are slow to exit (8 processes on 2 shared cores) made the
    nanny log "Worker process still alive after 4.0 seconds, killing".
    """
    store = tmp_path / "many.zarr"
    one = ["--replicates", "1", "--set", "grid.n=[1000]", "--set", "grid.tau=[0.5]"]
    code = main(["run", "demo", *one, "--store", str(store), "--workers", "8"])
    captured = capfd.readouterr()
    assert code == 0, captured
    assert "Computed 1 replicates, 0 failed" in captured.out
    assert captured.err == "", captured.err


def test_a_local_cluster_of_threads_runs(tmp_path, capfd):
    """processes: false (workers as threads of the driver) with the shipped host: Dask
    would talk inproc://, which takes no host, and refused to start."""
    store = tmp_path / "threads.zarr"
    one = ["--replicates", "1", "--set", "grid.n=[1000]", "--set", "grid.tau=[0.5]"]
    options = ["--cluster", "local", "--cluster-option", "processes=false"]
    code = main(["run", "demo", *one, "--store", str(store), *options])
    captured = capfd.readouterr()
    assert code == 0, captured
    assert "Computed 1 replicates, 0 failed" in captured.out


#: A driver of its own: a forked local cluster, then one after the environment changed.
FORK_SCRIPT = """
import os, sys
from ldpsim.pipeline.compute.worker_start import start_server_early

def worker_state():
    import os, sys
    return ("ldpsim.tasks.grid_point" in sys.modules,
            "ldpsim.pipeline.compute.forkserver_preload" in sys.modules,
            os.environ.get("LDPSIM_START_MARK"), os.environ.get("LDPSIM_GONE"))

def gpu_worker_state():
    import os, sys
    return ("ldpsim.pipeline.compute.forkserver_preload" in sys.modules,
            os.environ.get("CUDA_VISIBLE_DEVICES"))

def states(kind="local", state=worker_state, **options):
    from distributed import Client
    from ldpsim.pipeline.compute.clusters import build_cluster, load_cluster_config

    workers = {"n_workers": 1} if kind == "local" else {"cpu_workers": 1}
    cluster = build_cluster(load_cluster_config(kind), {**workers, **options})
    with cluster, Client(cluster, set_as_default=False) as client:
        return sorted(set(client.run(state).values()), key=str)

if __name__ == "__main__":
    os.environ.update(LDPSIM_START_MARK="first", LDPSIM_GONE="here")
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    print(start_server_early(), "distributed" in sys.modules)
    print(states())
    print(states(), "pandas" in sys.modules)
    os.environ["LDPSIM_START_MARK"] = "second"
    del os.environ["LDPSIM_GONE"]
    print(states())
    print(states(worker_start="spawn"))
"""


def test_local_workers_fork_with_ldpsim_imported_until_the_environment_changes(tmp_path):
    """A local cluster's workers fork from a server that imported ldpsim's task modules
    and set numba up (ldpsim.pipeline.compute.worker_start, forkserver_preload): they hold
    them before their first task. The server may start before distributed is imported
    (start_server_early, as `ldpsim run` does for a new store); the cluster then forks
    from it, and so does the driver's next cluster, although Dask's nanny set its
    variables (OMP_NUM_THREADS, PYTHONHASHSEED, ...) in the driver meanwhile. A later
    cluster of the same driver, after its environment changed, spawns its workers: they
    see the new environment, not the server's (a variable removed stays removed).
    worker_start: spawn always spawns. The driver has not imported pandas (which
    distributed's first forkserver context would, for a preload list ldpsim replaces)."""
    script = tmp_path / "fork.py"
    script.write_text(FORK_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "True False",
        "[(True, True, 'first', 'here')]",
        "[(True, True, 'first', 'here')] False",
        "[(False, False, 'second', None)]",
        "[(False, False, 'second', None)]",
    ]


def test_local_gpu_workers_fork_and_the_gpu_worker_sees_its_own_device(tmp_path):
    """The local-gpu cluster's workers, GPU and CPU, fork from the same server as the
    local cluster's (on an H200 machine their first chunks of methods took 1.0-1.5 s
    instead of 3.6-5.5 s spawned); the GPU worker's CUDA_VISIBLE_DEVICES is set by its
    nanny after the fork, the CPU worker keeps the driver's (none here). A driver of its
    own, the server started early as `ldpsim run` does; numba's simulator counts 1 GPU."""
    script = tmp_path / "fork_gpu.py"
    script.write_text(
        FORK_SCRIPT.split("if __name__")[0]
        + "if __name__ == '__main__':\n"
        + "    os.environ.pop('CUDA_VISIBLE_DEVICES', None)\n"
        + "    start_server_early()\n"
        + "    print(states('local-gpu', gpu_worker_state))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[(True, '0'), (True, None)]"]


#: A driver that starts the forkserver early, as `ldpsim run` does, then stops it.
STOP_SCRIPT = """
import time
from ldpsim.pipeline.compute.worker_start import server_processes, start_server_early, stop_server

def started_server():
    # multiprocessing returns once the server is forked, maybe before its exec: until
    # then its command line is this script's, and server_processes() does not see it.
    deadline = time.monotonic() + 10
    while not server_processes() and time.monotonic() < deadline:
        time.sleep(0.005)
    (server,) = server_processes()
    return server

if __name__ == "__main__":
    assert start_server_early()
    server = started_server()
    stop_server()
    print(int(server.wait(timeout=60)))
"""


def test_a_driver_stops_its_forkserver_while_it_imports():
    """A refused `ldpsim run` exits while the server it started early still imports
    ldpsim's worker modules; at exit the driver terminates it (stop_server), which would
    otherwise wait for forks as long as the driver lives, or import on after it is gone
    with the run's stdout and stderr held open."""
    done = subprocess.run(
        [sys.executable, "-c", STOP_SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(-signal.SIGTERM)]


#: In a fresh interpreter (dask_jobqueue not imported yet): ldpsim's SIGINT handler set,
#: then what first imports dask_jobqueue for a batch cluster; prints whether the handler
#: is still ldpsim's.
JOBQUEUE_SCRIPT = """
import signal
from ldpsim.pipeline.compute.clusters import {call}

def ldpsim_handler(signum, frame):
    pass

signal.signal(signal.SIGINT, ldpsim_handler)
{call}({args})
print(signal.getsignal(signal.SIGINT) is ldpsim_handler)
"""


@pytest.mark.parametrize(
    ("call", "args"),
    [
        ("check_options", "'slurm', {'cores': 1}, 'test'"),
        ("check_options", "'pbs', {'cores': 1}, 'test'"),
        ("jobqueue", ""),
    ],
)
def test_a_batch_cluster_leaves_the_sigint_handler_alone(call, args):
    """dask_jobqueue sets the process's SIGINT handler to sys.exit() when first imported
    (dask_jobqueue/runner.py); ldpsim imports it after `ldpsim run` has set its own, so
    Ctrl-C ended a `--cluster slurm` run with exit code 0 and no line, its store not
    finished. The handler in place before the import is kept."""
    script = JOBQUEUE_SCRIPT.format(call=call, args=args)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"]


#: A driver that starts the forkserver early, as `ldpsim run` does, and sends it SIGINT
#: (Ctrl-C in a terminal reaches the whole process group) while it imports.
SIGINT_SCRIPT = (
    STOP_SCRIPT.split("if __name__")[0]
    + """
import os, signal

if __name__ == "__main__":
    assert start_server_early()
    server = started_server()
    time.sleep(0.3)  # distributed, numba and ldpsim's task modules take seconds
    os.kill(server.pid, signal.SIGINT)
    time.sleep(1.0)
    print(server.is_running() and server.status() != "zombie")
    stop_server()
    server.wait(timeout=60)
"""
)


def test_ctrl_c_while_the_forkserver_imports_prints_nothing():
    """Python's forkserver ignores SIGINT only once its preloads are imported: Ctrl-C in
    the first seconds of `ldpsim run` on a new store stopped the server's imports and
    printed their KeyboardInterrupt traceback (10 to 40 lines) above the run's one line.
    The server now starts with SIGINT blocked and ignores it first thing."""
    done = subprocess.run(
        [sys.executable, "-c", SIGINT_SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr
    assert done.stdout.split() == ["True"]  # it ignored the signal and imports on


#: A forkserver started as `ldpsim run` starts it; what a process forked from it starts
#: with: Python's SIGINT handler, the signal not blocked (printed as two booleans).
FORKED_CHILD_SCRIPT = """
import multiprocessing, signal

def report(queue):
    handler = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    queue.put((handler, signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())))

if __name__ == "__main__":
    from ldpsim.pipeline.compute.worker_start import start_server_early

    assert start_server_early(True)
    context = multiprocessing.get_context("forkserver")
    queue = context.Queue()
    child = context.Process(target=report, args=(queue,))
    child.start()
    print(*queue.get(timeout=120))
    child.join()
"""


def test_the_forkserver_hands_on_ctrl_c_and_its_module_acts_only_there(tmp_path):
    # The second read (2026-12-01): the first preload's SIG_IGN stayed the server's
    # children's handler (a program's own forkserver Pool beside a run ignored Ctrl-C),
    # and importing the module anywhere (a docs build) made that process ignore Ctrl-C.
    script = tmp_path / "forked.py"
    script.write_text(FORKED_CHILD_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False"]  # default handler, not blocked
    import ldpsim.pipeline.compute.forkserver_signals as module

    before = signal.getsignal(signal.SIGINT)
    importlib.reload(module)  # its code run again here, outside any forkserver
    assert signal.getsignal(signal.SIGINT) is before


def test_the_workers_profiler_is_off_unless_asked_for():
    """cluster/local.yaml turns distributed's profiler of the workers' tasks off
    (worker_profile: false); worker_profile=true turns it on, and a file without the
    option keeps Dask's setting (on). The housekeeping intervals are ldpsim's where Dask
    has its shipped values, the user's where they were configured."""
    import dask
    from distributed import Client

    from ldpsim.pipeline.compute.clusters import build_cluster, load_cluster_config

    def state(dask_worker) -> tuple:
        tick = dask.config.get("distributed.admin.tick.interval")
        memory = dask_worker.memory_manager.memory_monitor_interval
        return "profile" in dask_worker.periodic_callbacks, tick, memory

    config = load_cluster_config("local")
    options = {k: v for k, v in config["options"].items() if k != "worker_profile"}
    unset = {**config, "options": options}
    cases = [(config, {}, {}), (config, {"worker_profile": True}, {}), (unset, {}, {})]
    cases.append((config, {}, {"distributed.admin.tick.interval": "50ms"}))
    seen = []
    for chosen, overrides, configured in cases:
        with dask.config.set(configured):
            cluster = build_cluster(chosen, {"n_workers": 1, **overrides})
        with cluster, Client(cluster, set_as_default=False) as client:
            seen.append(set(client.run(state).values()))
    assert seen == [
        {(False, "200ms", 0.5)},
        {(True, "200ms", 0.5)},
        {(True, "200ms", 0.5)},
        {(False, "50ms", 0.5)},
    ]


def test_a_dashboard_only_for_a_run_estimated_at_30_seconds_or_more(capsys):
    """cluster/local.yaml's ``dashboard_address: auto``: a dashboard for a run the cost
    model puts at 30 s or more on the workers, none below (no bokeh page; the
    scheduler's own health page on a free loopback port, not 8787), one where nothing
    is estimated; an address in the file or on the command line as given."""
    import urllib.error
    import urllib.request

    from ldpsim.pipeline.compute.clusters import DASHBOARD_SECONDS, auto_dashboard, connect

    assert auto_dashboard(None) == auto_dashboard(DASHBOARD_SECONDS) == "127.0.0.1:0"
    assert auto_dashboard(DASHBOARD_SECONDS * 0.99) is None

    def status_page(client) -> int:
        port = client.scheduler_info()["services"]["dashboard"]
        assert port != 8787
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=30).status
        except urllib.error.HTTPError as exc:
            return exc.code

    # 2 workers: 59 core-seconds are 29.5 s of wall time, 61 are 30.5.
    for work, page, line in [(59.0, 404, "no dashboard"), (61.0, 200, "dashboard: http")]:
        with connect(workers=2, work_seconds=work) as client:
            assert status_page(client) == page
        assert line in capsys.readouterr().out
    with connect(
        workers=1, work_seconds=1.0, cluster="local", options={"dashboard_address": "127.0.0.1:0"}
    ) as client:
        assert status_page(client) == 200
    with connect(
        workers=1, work_seconds=1e6, cluster="local", options={"dashboard_address": None}
    ) as client:
        assert status_page(client) == 404
    assert "no dashboard (dashboard_address: null)" in capsys.readouterr().out


def _slurm_running() -> bool:
    script = ROOT / "cluster" / "slurm-local.sh"
    if shutil.which("sinfo") is None:
        return False
    return subprocess.run(["bash", str(script), "status"], capture_output=True).returncode == 0


@pytest.mark.slurm
@pytest.mark.timeout(300)
def test_sbatch_failure_is_one_line(tmp_path, capfd, monkeypatch):
    """A job SLURM refuses (no such partition): one line quickly, not a traceback and a hang."""
    if not _slurm_running():
        pytest.skip("SLURM is not running here (`make test` starts it)")
    monkeypatch.chdir(tmp_path)  # cluster/slurm.yaml logs to the relative logs/dask-jobqueue
    store = tmp_path / "slurm.zarr"
    start = time.monotonic()
    cluster = ["--cluster", "slurm", "--cluster-option", "queue=ldpsim-no-such-partition"]
    one = ["--replicates", "1", "--set", "grid.n=[1000]"]
    argv = ["run", "demo", *one, "--store", str(store), *cluster, "--start-timeout", "240"]
    code = main(argv)
    seconds = time.monotonic() - start
    line = one_error_line(capfd.readouterr(), code, ["slurm cluster", "sbatch"])
    assert "partition" in line.lower(), line
    assert seconds < 240, seconds  # the submission error ends the wait, not the timeout
    assert not store.exists()


def test_a_misspelt_cluster_name_or_kind_is_named_with_the_closest_one(tmp_path):
    # The hint the other refusals of a misspelt name give (did_you_mean) was missing here.
    from ldpsim.pipeline.compute.clusters import load_cluster_config
    from ldpsim.pipeline.errors import InputError

    with pytest.raises(InputError, match=r"^--cluster 'lcoal' \(did you mean 'local'\?\) is"):
        load_cluster_config("lcoal")
    (tmp_path / "k.yaml").write_text("kind: locl\n")
    with pytest.raises(InputError, match=r"Got 'locl' \(did you mean 'local'\?\)\.$"):
        load_cluster_config(str(tmp_path / "k.yaml"))
