# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint format bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/ldpsim run demo
	$(BIN)/ldpsim summarize outputs/demo.zarr
	$(BIN)/ldpsim plot outputs/demo.zarr --out outputs/demo-figures
	@echo "store: outputs/demo.zarr   figures: outputs/demo-figures/"

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	bash cluster/slurm-local.sh start || echo "SLURM unavailable (tests marked slurm skip)"
	$(BIN)/python -m pytest -q -ra; rc=$$?; bash cluster/slurm-local.sh stop || true; exit $$rc

lint format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python benchmarks/kernels.py
	$(BIN)/python benchmarks/pipeline.py

clean:
	rm -rf $(VENV) build *.egg-info
