# The two commands of the README: `make run` and `make test` (CI adds `make test-ci`).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

# Both locks from pyproject.toml, every package pinned with its hashes (make lock; add
# UV_ARGS=--upgrade to move pins that pyproject leaves free).
UV_COMPILE = $(BIN)/uv pip compile pyproject.toml --quiet --generate-hashes --universal \
	--python-version 3.11 $(UV_ARGS)

.PHONY: run test test-ci lint format bench soak clean lock messages controlplane test-real run-real

# Installs exactly the locked tree (anything without a matching hash is refused), then the
# project itself without letting it pull anything more. pip installs uv from the lock (its
# own entry, hashes and all), and uv the rest: 10 s where pip took a minute.
UV_PIN = awk '/^uv==/ { on = 1 } on { print } on && !/\\$$/ { exit }' requirements-dev.txt
UV_INSTALL = $(BIN)/uv pip install --quiet --python $(BIN)/python
$(STAMP): pyproject.toml requirements-dev.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(UV_PIN) | $(BIN)/python -m pip install --quiet --require-hashes -r /dev/stdin
	$(UV_INSTALL) --require-hashes -r requirements-dev.txt
	$(UV_INSTALL) --no-deps -e .
	touch $(STAMP)

lock: $(STAMP)
	$(UV_COMPILE) -o requirements.txt
	$(UV_COMPILE) --extra dev -o requirements-dev.txt

run: $(STAMP)
	$(BIN)/python manage.py run_portal

# Every test but the CI-only ones, in parallel (pytest-xdist, each worker on its own test
# database, files and broker: tests/support/workers.py): one worker more than there are cores,
# up to 8, since a part of the suite waits on browsers, servers and subprocesses. An idle
# worker takes tests queued for a busy one (worksteal): the long tests no longer end the run
# on one worker while the others wait.
TEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print(min(8, len(os.sched_getaffinity(0)) + 1))')
test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --maxprocesses=8 --dist worksteal -m "not ci_only" \
		$(PYTEST_ARGS)

# What CI runs besides `make test`: the tests marked ci_only, i.e. tests/real on the real control
# plane (built by `make controlplane`), the 75-second soak and the benchmarks' timed runs; one
# process, so one control plane for the session.
test-ci: $(STAMP)
	$(BIN)/python -m pytest -m ci_only $(PYTEST_ARGS)

# The real control plane (kube-apiserver, etcd, controllers, kwok, Kueue, Volcano) built from
# the wrapper Go modules in controlplane/ into a cache outside the repository; needs Go 1.26.
controlplane: $(STAMP)
	$(BIN)/python -m controlplane.build

# The demo with cluster demo on the real control plane (built first if missing), GPU work
# submitted to it once the approved quota is in force; prints the KUBECONFIG for kubectl.
run-real: controlplane
	$(BIN)/python manage.py run_portal --real-cluster

# Only the tests on the real control plane (part of make test-ci).
test-real: $(STAMP)
	$(BIN)/python -m pytest tests/real $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf var staticfiles .pytest_cache

# Every benchmark, one table (figure, value, baseline, ratio, database) and bench/results.json;
# BENCH_QUICK=1 for the small sizes, BENCH_ARGS="sync apply" for some of them only.
bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

# Translations: collect every marked string into locale/zh_Hans/LC_MESSAGES/django.po (needs GNU
# gettext's xgettext/msgmerge), then compile the .mo files in pure Python. Translate the new
# entries (and clear any "fuzzy" flag) in the .po, run `make messages` again, commit .po and .mo.
MAKEMESSAGES_IGNORE := --ignore=tests --ignore=bench --ignore=kubesandbox --ignore=deploy \
	--ignore=var --ignore=staticfiles --ignore=static --ignore=node_modules

messages: $(STAMP)
	$(BIN)/python manage.py makemessages -l zh_Hans --no-obsolete --add-location=file \
		$(MAKEMESSAGES_IGNORE)
	$(BIN)/python manage.py compile_translations

# The whole system on loopback under faults for SOAK_SECONDS (default 300), then the end
# invariants; needs redis-server and a PostgreSQL server (see the README).
soak: $(STAMP)
	$(BIN)/python -m soak $(SOAK_ARGS)
