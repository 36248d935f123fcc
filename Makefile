# Targets named in README.md. Everything runs from the project's own .venv.
# `make test PYTEST_ARGS="-k timers -x"` passes arguments to every pytest run.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LINT_PATHS := durable_workflow tests example_project reliability

.PHONY: venv example test test-all test-routed test-under-load lint typecheck docs docs-serve docs-screenshots

venv: $(STAMP)

# Re-install only when the dependency list changes; the install is editable.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

example: venv
	cd example_project && ../$(BIN)/python manage.py migrate --noinput && ../$(BIN)/python manage.py run_example

# `make test`: everything but the tests marked slow; `make test-all`: every test (CI).
test: venv
	bash scripts/test $(PYTEST_ARGS)

test-all: venv
	bash scripts/test --all $(PYTEST_ARGS)

# The integration tier with the engine's tables on a second PostgreSQL database.
test-routed: venv
	bash scripts/test --routed $(PYTEST_ARGS)

# `make test` three times in a row with every core kept busy (see README.md).
test-under-load: venv
	bash scripts/test-under-load 3

lint: venv typecheck
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)

# mypy (strict, on the files listed in pyproject.toml) and the import-layering contracts.
typecheck: venv
	$(BIN)/mypy
	$(BIN)/lint-imports

# The documentation site from docs/ and mkdocs.yml, into site/ (strict: a broken link,
# anchor or API page fails the build). docs-serve rebuilds on change at 127.0.0.1:8000.
DOCS_STAMP := $(VENV)/.installed-docs
export NO_MKDOCS_2_WARNING := 1

$(DOCS_STAMP): pyproject.toml $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(BIN)/mkdocs build --strict

docs-serve: $(DOCS_STAMP)
	$(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:8000

# The admin screenshots in docs/images/admin are taken by the browser test.
docs-screenshots: venv
	DW_SCREENSHOT_DIR=$(CURDIR)/docs/images/admin DW_TEST_DB=sqlite PYTHONPATH=. \
		$(BIN)/python -m pytest tests/browser -q

# Benchmarks against bare Celery and DBOS (needs the local PostgreSQL and Redis).
.PHONY: bench
bench:
	bash benchmarks/bench.sh $(BENCH_ARGS)

# The reliability suite: faults injected into real workers, its own PostgreSQL and Redis.
# `make chaos CHAOS_ARGS="--quick"` (see docs/reliability.md).
.PHONY: chaos
chaos:
	bash reliability/chaos.sh $(CHAOS_ARGS)
