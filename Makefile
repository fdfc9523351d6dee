# Two commands set everything up on a fresh machine with Python >= 3.10 and Java 17:
#   make demo   -- create .venv, install, run the demo
#   make test   -- create .venv if needed, install, run the whole test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo airflow test test-fast install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv

# Bytecode is compiled at install, as pip does: otherwise every Airflow task, CLI call and Spark application
# compiles its imports again wherever the cache cannot be written (PYTHONDONTWRITEBYTECODE, read-only images).
# pyspark is published only as a source archive: uv builds it at every install and keeps each build (1.4 GB of
# sources and wheel) as a new revision in its cache, so the cache is pruned of the revisions no install can reach.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/uv pip install --python $(BIN)/python --quiet --compile-bytecode -e ".[test]"
	$(BIN)/uv cache prune --quiet
	touch $(STAMP)

# Azurite, the Azure Storage emulator the object-store tests run against (npm's `azurite`, in the git-ignored
# .tools/); without npm the tests install nothing and skip the Azure runs. Its version: tests/cloud_servers.py.
AZURITE := .tools/azurite/node_modules/.bin/azurite-blob
$(AZURITE):
	@if command -v npm >/dev/null; then \
		npm install --prefix .tools/azurite --no-audit --no-fund --loglevel=error \
			azurite@$$(sed -n 's/^AZURITE_VERSION = "\(.*\)"/\1/p' tests/cloud_servers.py); \
	else echo "npm not found: the Azure (Azurite) tests will be skipped"; fi

install: $(STAMP) $(AZURITE)

# The warehouse may be on an object store: make demo WAREHOUSE=s3://bucket/path OPTIONS="s3.endpoint=... ..."
# (options under Paimon's names; keys from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY). See scripts/demo.py.
demo: $(STAMP)
	DEMO_WAREHOUSE="$(WAREHOUSE)" DEMO_OPTIONS="$(OPTIONS)" $(BIN)/python scripts/demo.py

# The Airflow UI (airflow standalone) on the demo's home: see the DAGs, start a backfill.
airflow: $(STAMP)
	DEMO_WAREHOUSE="$(WAREHOUSE)" DEMO_OPTIONS="$(OPTIONS)" $(BIN)/python scripts/demo.py standalone

# Spread over the machine's cores, a test module to a worker (module fixtures, such as a started server, are made
# once); much of the suite waits on other processes (spark-submit, Airflow services, pypaimon's interpreter), and
# tests/conftest.py starts the slowest kinds first (xdist would otherwise hand out the modules with the most tests
# first, leaving the few-test, minutes-long end-to-end modules to the end, one worker busy and the other idle).
test: $(STAMP) $(AZURITE)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -n auto --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The quick subset: no Spark, Airflow, pypaimon, end-to-end tests, site build, nor tests that start other programs
# (ruff, mypy, fresh interpreters); the model tests (tests/format/test_model.py,
# test_change_model.py) on 2 random histories of 12 steps instead of 50 of 50, and the other randomised tests on a
# fifth of their examples (tests/sizes.py); `make test` runs them all in full.
# Spread over the machine's cores; tests/airflow, tests/e2e and tests/interop hold only tests of the excluded
# kinds, so they are not even imported (collecting them imports Airflow).
# pytest keeps its rewritten test modules in __pycache__ (also where the environment sets PYTHONDONTWRITEBYTECODE),
# so a second run does not parse every test module again.
# Extra pytest arguments: make test-fast PYTEST_ARGS="--durations=15".
test-fast: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" PYTHONDONTWRITEBYTECODE= PAIMON_MODEL_EXAMPLES=2 PAIMON_MODEL_STEPS=12 PAIMON_TEST_SIZE=fast $(BIN)/python -m pytest -n auto \
		-m "not spark and not airflow and not interop and not e2e and not bench and not docs and not objectstore and not cluster and not subprocess" \
		--ignore=tests/airflow --ignore=tests/e2e --ignore=tests/interop --ignore=tests/objectstore --ignore=tests/cluster \
		$(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .venv-interop* demo .tools
