# One entry point for people and CI. `make lab` opens the curriculum, `make test` runs every test.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup lab test lint notebooks labs bench controlplane clean

setup: $(STAMP)

# The first run downloads a few hundred MB from PyPI: say so, and let pip show its progress.
$(STAMP): pyproject.toml
	@echo "setting up $(VENV): gpu-lab and its dependencies from PyPI (first run: a few minutes)"
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install -e '.[dev,lab]'
	@echo "$(VENV) is ready"
	touch $(STAMP)

# The project's JupyterLab settings (jupyter/lab-settings/overrides.json: no news pop-up over
# the first lesson). As root (containers, Binder-style images) Jupyter refuses to start
# without --allow-root: pass it, and say so.
LAB_FLAGS := --LabApp.app_settings_dir=$(CURDIR)/jupyter/lab-settings
lab: setup
	@if [ "$$(id -u)" = "0" ]; then \
	  echo "make lab: running as root, so JupyterLab is started with --allow-root"; \
	  exec $(VENV)/bin/jupyter lab --allow-root $(LAB_FLAGS) lessons/00_start_here.ipynb; \
	else \
	  exec $(VENV)/bin/jupyter lab $(LAB_FLAGS) lessons/00_start_here.ipynb; \
	fi

# mypy reads its settings and the package to check from pyproject.toml's [tool.mypy].
lint: setup
	$(PY) -m ruff check gpu_lab tests
	$(PY) -m mypy

notebooks: setup
	$(PY) -m pytest -q -p no:randomly --nbval-lax --nbval-current-env lessons

# Labs are generated from their solutions: edit solutions/, then `make labs`.
labs: setup
	$(VENV)/bin/gpu-lab labs generate

test: lint
	$(VENV)/bin/gpu-lab labs check
	$(PY) -m pytest -q tests
	@# Lessons in a private gpu-lab home: lesson 05 starts the real control plane where it is
	@# built, and a test run must not leave a lab running in yours.
	@home=$$(mktemp -d); echo "$(PY) -m pytest -q --nbval-lax --nbval-current-env lessons"; \
	GPU_LAB_HOME=$$home $(PY) -m pytest -q --nbval-lax --nbval-current-env lessons; rc=$$?; \
	GPU_LAB_HOME=$$home $(VENV)/bin/gpu-lab down --purge >/dev/null 2>&1; rm -rf $$home; exit $$rc

bench: setup
	$(VENV)/bin/gpu-lab bench --json | tee benchmarks/results/latest.json

controlplane: setup
	$(VENV)/bin/gpu-lab controlplane build

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis
