# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-suite docs lint format bench clean

# uv installs the project and its test extra, and pip, in under half of pip's time (the
# venv and uv included, 34 to 40 s against 86 s on a fresh 2-core machine with empty
# caches). The modules' bytecode is compiled as pip would (uv's default leaves that to
# the first import, and the suite's many fresh processes then each compiled it again,
# side by side), but by compileall, without the packages' own test folders, which no
# process imports: 29 per cent of the installed source (pandas' tests alone are 1,143
# files), 20 s and 36 CPU-seconds instead of uv's --compile-bytecode's 26 s and 49
# (2026-11-30, 2 cores). Where a module fails to compile, it is compiled when imported.
# uv itself comes from the system Python's pip into $(UV_TOOL), and the venv starts
# without pip (venv's ensurepip took 6 of those seconds; uv installs pip). Where that
# pip or uv is missing or fails, the venv gets ensurepip's pip, which does the same
# install and compiles every module.
UV_TOOL := $(VENV)/uv-tool
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv --without-pip $(VENV)
	{ $(PYTHON) -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
			--upgrade --target $(UV_TOOL) uv \
		&& $(UV_TOOL)/bin/uv pip install --quiet \
			--python $(BIN)/python --upgrade-package pip -e '.[test]' pip \
		&& { $(BIN)/python -m compileall -qq -j 0 -x /tests/ \
			"$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
			|| true; }; } \
		|| { $(BIN)/python -m ensurepip --upgrade \
			&& $(BIN)/python -m pip install --quiet --upgrade pip \
			&& $(BIN)/python -m pip install --quiet -e '.[test]'; }
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/ldpsim run demo
	$(BIN)/ldpsim summarize outputs/demo.zarr
	$(BIN)/ldpsim plot outputs/demo.zarr --out outputs/demo-figures
	$(BIN)/ldpsim report outputs/demo.zarr --out outputs/demo-report.html
	@echo "store: outputs/demo.zarr   figures: outputs/demo-figures/   report: outputs/demo-report.html"

# SLURM runs for the whole suite: `cluster/slurm-local.sh around` starts it unless it is
# running, runs `make test-suite`, and then stops only the daemons that its start
# started (it records them), so a SLURM that was running before stays running.
# The SLURM tests mostly wait for their jobs, so they run alongside the other tests in a
# pytest process of their own; their output (-s: the job ids over time) is shown after
# the others'. The tests of tasks/ (one replicate: compiling and statistics) run
# alongside the pipeline's (clusters, stores, subprocesses: much waiting) in a third
# process, so that both cores stay busy; the notebooks', the benchmarks' and the docs
# build's tests (subprocesses, about two minutes) run in that third process too, which
# would otherwise finish first (in a fresh clone's run of 2026-11-30 without them: 777
# s, the pipeline's 847 s). The installed wheel's tests too (a wheel built, a demo run
# from it with empty caches: 27 s, mostly in its own processes): with them the
# pipeline's process ended last in each of four runs of 2026-12-02 (one from a fresh
# clone), 36 to 69 s after the tasks' (pipeline and tasks: 638 and 569 s, 565 and 518,
# 514 and 478, 608 and 554), alone on the machine for that time.
# Not a fourth process for these: tried in a
# fresh clone, the processes kept 1.9 cores busy instead of 1.83, but the benchmarks'
# test, its clusters waiting longer beside three busy processes, took 101 CPU-seconds
# instead of 59 (tests of pure computation 10 to 15 per cent more: a slower hour), and
# the pipeline's tests ended a minute after the others. The exit code is non-zero if a
# test of any process fails.
# The report's browser test needs Debian's chromium: tests/install-chromium.sh installs it
# when missing (root or passwordless sudo, apt reachable).
ALONGSIDE := tests/test_notebook.py tests/test_benchmarks.py tests/test_docs_build.py \
	tests/test_packaging.py
# The SLURM process collects only the files that mark tests `slurm` (found by grep), not
# the whole of tests/: collecting every module (hypothesis, matplotlib, ...) to select
# six tests cost about 14 CPU-seconds (2026-11-30), 3.6 for these files.
SLURM_TESTS := $(shell grep -rl --include='*.py' 'mark\.slurm' tests | sort)
# Each process lists its slowest tests: where the suite's 10 minutes go.
DURATIONS := --durations=15 --durations-min=5
# The package is installed editable, so nothing compiled its modules' bytecode; where
# PYTHONDONTWRITEBYTECODE is set (as on the 2-core machine of docs/performance.md) no
# process writes it, and each of the suite's processes (pytest, Dask workers, `ldpsim`
# subprocesses) compiled the modules it imports again from source. compileall writes it
# once (0.5 s).
test: $(STAMP)
	$(BIN)/python -m compileall -q pipeline tasks
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	bash tests/install-chromium.sh || echo "chromium unavailable (the report's browser test skips)"
	bash cluster/slurm-local.sh around $(MAKE) --no-print-directory test-suite

test-suite: $(STAMP)
	@log=$$(mktemp); tasks_log=$$(mktemp); \
	$(BIN)/python -m pytest -q -ra -s -m slurm -p no:cacheprovider $(DURATIONS) $(SLURM_TESTS) \
		>$$log 2>&1 & slurm=$$!; \
	$(BIN)/python -m pytest -q -ra -m "not slurm" -p no:cacheprovider $(DURATIONS) tests/tasks \
		$(ALONGSIDE) >$$tasks_log 2>&1 & tasks=$$!; \
	trap 'kill $$slurm $$tasks 2>/dev/null; rm -f $$log $$tasks_log' INT TERM; \
	echo "pytest -m 'not slurm' --ignore=tests/tasks (tests/tasks $(ALONGSIDE) and -m slurm run alongside, output below)"; \
	$(BIN)/python -m pytest -q -ra -m "not slurm" $(DURATIONS) --ignore=tests/tasks \
		$(ALONGSIDE:%=--ignore=%); rc=$$?; \
	wait $$tasks; tasks_rc=$$?; \
	echo "==== pytest tests/tasks $(ALONGSIDE) (ran alongside; exit code $$tasks_rc) ===="; \
	cat $$tasks_log; rm -f $$tasks_log; \
	wait $$slurm; slurm_rc=$$?; \
	echo "==== pytest -m slurm (ran alongside; exit code $$slurm_rc) ===="; \
	cat $$log; rm -f $$log; \
	test $$rc -eq 0 && test $$tasks_rc -eq 0 && test $$slurm_rc -eq 0

# The Sphinx site (API reference, CLI options, the markdown docs) in build/docs/; any
# warning fails the build. The test extra installs the docs extra's packages.
docs: $(STAMP)
	$(BIN)/python -m sphinx -E -W --keep-going -b html -q docs build/docs
	@echo "docs: build/docs/index.html"

lint format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python benchmarks/kernels.py
	$(BIN)/python benchmarks/pipeline.py

clean:
	rm -rf $(VENV) build *.egg-info
