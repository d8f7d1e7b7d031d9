"""Sweeps with the Gaussian mechanisms and per-user budgets run end to end (in-process CLI)."""

from __future__ import annotations

import json

from ldpsim.pipeline.cli import main

SWEEP = """description = "gdp with a grid over mu, and per-user budgets"
replicates = 3
seed = 8
[spec]
model = "mean"
d = 2
n = 3000
{mechanism}
[methods.bb]
B = 50
[methods.oracle]
"""


def test_gaussian_gdp_and_budget_range_sweeps_run(tmp_path, local_cluster, capsys):
    cases = {
        "gdp": 'mechanism = "gdp"\n[grid]\nmu = [0.5, 2.0]',
        "gaussian": 'mechanism = "gaussian"\neps = 0.5\ndelta = 1e-3',
        "budget": 'mechanism = "laplace"\nbudget_range = [0.5, 2.0]',
    }
    for name, mechanism in cases.items():
        sweep = tmp_path / f"{name}.toml"
        sweep.write_text(SWEEP.format(mechanism=mechanism))
        store = tmp_path / f"{name}.zarr"
        sched = ["--scheduler", local_cluster.scheduler_address]
        assert main(["run", str(sweep), "--store", str(store), *sched]) == 0
        capsys.readouterr()
        assert main(["summarize", str(store), "--format", "json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        oracle = [r for r in rows if r["method"] == "oracle"]
        assert oracle and all(r["n_done"] == 3 for r in oracle)
        if name == "gdp":
            assert sorted({r["mu"] for r in oracle}) == [0.5, 2.0]
