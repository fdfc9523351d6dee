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
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/uv pip install --python $(BIN)/python --quiet --compile-bytecode -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

# The Airflow UI (airflow standalone) on the demo's home: see the DAGs, start a backfill.
airflow: $(STAMP)
	$(BIN)/python scripts/demo.py standalone

test: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest

test-fast: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -m "not spark and not airflow and not interop and not e2e"

clean:
	rm -rf $(VENV) .venv-interop demo
