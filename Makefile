# Courier — the two commands a new user needs are `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: venv java chromium spark-classes test lint demo bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Spark needs a Java runtime; install one from the OS packages when it is missing.
java:
	@command -v java >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
	  $(SUDO) apt-get install -y -qq default-jre-headless; }

# Spark's driver maps an archive of the classes it loads, built once per install, so
# a fresh session starts and analyses faster (courier.analysis.class_archive). Only
# a speed-up: if it cannot be built, everything runs without it.
spark-classes: venv java
	-@$(BIN)/python -m courier.analysis.class_archive

# The console's browser tests drive the system Chromium.
chromium:
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
	  $(SUDO) apt-get install -y -qq chromium; }

# Two workers, one per core of the development box; a file's tests stay together so
# that its module fixtures (servers, Spark runs) start once.
test: venv java chromium spark-classes
	$(BIN)/pytest -n 2 --dist loadfile

lint: venv
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy

demo: venv java spark-classes
	$(BIN)/courier demo

bench: venv java spark-classes
	$(BIN)/pytest tests/benchmarks -s -p no:cacheprovider

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
