# One entry point for people and CI. `make lab` opens the curriculum, `make test` runs every test.
VENV ?= .venv
PY := $(VENV)/bin/python
# What a learner needs (.[lab]: the package, JupyterLab, charts) and what a developer adds
# (.[dev,lab]: pytest, nbval, ruff, mypy, repo2docker, Playwright).
LAB_STAMP := $(VENV)/.installed-lab
DEV_STAMP := $(VENV)/.installed-dev
# Test workers (pytest-xdist). A real-cluster test mostly waits (on a kubelet, a controller, a
# grace period), so three keep two cores busy; tests/conftest.py hands whole modules out,
# longest first.
TEST_WORKERS ?= 3
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadgroup
# Extra pytest options for `make test`, e.g. PYTEST_REPORT=--junitxml=run.xml (.ci/run does, and
# prints where the time went with benchmarks/suite_times.py).
PYTEST_REPORT ?=
PHASE := ./.ci/phase

.PHONY: setup setup-lab lab test test-sim lint notebooks labs bench controlplane clean

setup: $(DEV_STAMP)
	@$(NOTEBOOK_FILTER)
setup-lab: $(LAB_STAMP)
	@$(NOTEBOOK_FILTER)

# Running a lesson in JupyterLab writes outputs and the kernel's Python version into it. This git
# clean filter (named in .gitattributes) keeps them out of `git status` and out of commits; make
# test checks that every committed notebook is in that form (gpu_lab/curriculum/notebooks.py).
NOTEBOOK_FILTER = if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	  git config filter.gpulab-notebook.clean "$(abspath $(PY)) -m gpu_lab.curriculum.notebooks clean"; fi

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# The first run downloads a few hundred MB from PyPI: say so, and let pip show its progress.
$(LAB_STAMP): pyproject.toml | $(PY)
	@echo "setting up $(VENV) for the lessons: gpu-lab and JupyterLab from PyPI (first run: a few minutes)"
	$(PY) -m pip install -e '.[lab]'
	@echo "$(VENV) is ready for the lessons"
	touch $@

$(DEV_STAMP): pyproject.toml | $(PY)
	@echo "setting up $(VENV) for development: gpu-lab, JupyterLab and the test tools from PyPI (first run: a few minutes)"
	$(PY) -m pip install -e '.[dev,lab]'
	@echo "$(VENV) is ready"
	touch $@ $(LAB_STAMP)

# The project's JupyterLab settings (jupyter/lab-settings/overrides.json: no news pop-up over
# the first lesson). As root (containers, Binder-style images) Jupyter refuses to start
# without --allow-root: pass it, and say so.
LAB_FLAGS := --LabApp.app_settings_dir=$(CURDIR)/jupyter/lab-settings
lab: setup-lab
	@if [ "$$(id -u)" = "0" ]; then \
	  echo "make lab: running as root, so JupyterLab is started with --allow-root"; \
	  exec $(VENV)/bin/jupyter lab --allow-root $(LAB_FLAGS) lessons/00_start_here.ipynb; \
	else \
	  exec $(VENV)/bin/jupyter lab $(LAB_FLAGS) lessons/00_start_here.ipynb; \
	fi

# mypy reads its settings and the package to check from pyproject.toml's [tool.mypy].
# mypy's cache lives with the other build caches, outside the clone: a clean clone (CI) then
# checks in seconds what has not changed, instead of a minute from nothing.
MYPY_CACHE_DIR ?= $(or $(GPU_LAB_CACHE),$(HOME)/.cache/gpu-lab)/mypy
lint: setup
	$(PY) -m ruff check gpu_lab tests
	MYPY_CACHE_DIR=$(MYPY_CACHE_DIR) $(PY) -m mypy
	$(VENV)/bin/lint-imports --no-cache  # the layers contract (pyproject.toml, drawn in the README)

notebooks: setup
	$(PY) -m pytest -q -p no:randomly --nbval-lax --nbval-current-env lessons

# Labs are generated from their solutions: edit solutions/, then `make labs`.
labs: setup
	$(VENV)/bin/gpu-lab labs generate

# Every lesson is executed once per run: in the environment built only from binder/
# (tests/delivery/test_binder.py, on the simulator, as on Binder), which also renders the static
# edition. nbval runs here only the lessons with a cell that uses the real control plane when it
# is built (lesson 05); `make test-sim` runs every lesson with nbval.
LESSONS_ON_BUILT := $(shell grep -l backend_available lessons/*.ipynb)

# Everything, as CI runs it: lint, the labs' drift check, then the tests and the lessons in one
# parallel run, in a private gpu-lab home (lesson 05 starts the real control plane where it is
# built, and a test run must not leave a lab running in yours). Each phase prints its time.
test: setup
	@$(PHASE) lint $(MAKE) --no-print-directory lint
	@$(PHASE) "labs check" $(VENV)/bin/gpu-lab labs check
	@home=$$(mktemp -d); \
	echo "$(PY) -m pytest -q $(PYTEST_PARALLEL) $(PYTEST_REPORT) tests $(LESSONS_ON_BUILT) --nbval-lax --nbval-current-env"; \
	GPU_LAB_HOME=$$home $(PHASE) "tests and lessons" \
	  $(PY) -m pytest -q $(PYTEST_PARALLEL) $(PYTEST_REPORT) tests $(LESSONS_ON_BUILT) --nbval-lax --nbval-current-env; rc=$$?; \
	GPU_LAB_HOME=$$home $(VENV)/bin/gpu-lab down --purge >/dev/null 2>&1; rm -rf $$home; exit $$rc

# The inner loop of anyone changing the sim or the lessons: every test that needs neither the Go
# binaries nor Docker (nor the delivery tools: repo2docker, Chromium), and every lesson on the sim
# (the control plane hidden, as on Binder). A few minutes.
test-sim: setup
	@home=$$(mktemp -d); \
	GPU_LAB_HOME=$$home GPU_LAB_CACHE=$$home/no-binaries $(PHASE) "sim tests and lessons" \
	  $(PY) -m pytest -q $(PYTEST_PARALLEL) -m "not controlplane and not kind and not delivery" \
	  tests lessons --nbval-lax --nbval-current-env; rc=$$?; rm -rf $$home; exit $$rc

bench: setup
	$(VENV)/bin/gpu-lab bench --json | tee benchmarks/results/latest.json

controlplane: setup
	$(VENV)/bin/gpu-lab controlplane build

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis
