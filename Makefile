# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
EXTRAS := dev,postgres,celery,openai,anthropic,docs

.PHONY: install lint test docs demo demo-ui demo-cli bench bench-ui bench-llm bench-bedrock bench-effects e2e-distributed e2e-approval e2e-ui e2e-effects dist check-dist compat browser clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstall whenever the project's metadata or the pinned constraints change.
$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade "pip==25.3"
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 $(BIN)/python -m pip install --quiet -c constraints.txt -e ".[$(EXTRAS)]"
	touch $@

install: $(STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	@if [ -x $(BIN)/lint-imports ]; then $(BIN)/lint-imports; \
	else echo "lint-imports skipped: import-linter needs Python >= 3.11"; fi

# The suite on TEST_WORKERS processes (pytest-xdist); tests that share a costly fixture stay together
# on one worker (tests/conftest.py groups them). Four beat three on 2 cores (the tests wait on child
# processes and servers much of the time); TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= 4

# The suite's temporary files (pytest's tmp_path, TMPDIR for every child) on tmpfs where there is one:
# the crash and durability tests fsync thousands of times and a VM's disk makes each a wait (the
# restore suite: 28 s on the disk, 14 s on tmpfs). What they prove (a SIGKILL mid-write, a lock, a
# link count, a seal) holds on any POSIX file system. One folder per checkout; kept after a failure.
TEST_TMP ?= $(if $(wildcard /dev/shm/.),/dev/shm,$(or $(TMPDIR),/tmp))/airflow-idempotent-jobs-tests-$(shell printf %s "$(CURDIR)" | cksum | cut -d" " -f1)

test: lint
	rm -rf "$(TEST_TMP)" && mkdir -p "$(TEST_TMP)/tmp"
	TMPDIR="$(TEST_TMP)/tmp" $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=25 \
	  --basetemp="$(TEST_TMP)/base"
	rm -rf "$(TEST_TMP)"

# The documentation site (mkdocs.yml, docs/) into site/. --strict: a broken link or anchor, a page
# missing from the nav, or a generated reference section the code cannot fill fails the build.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --clean

# The example DAG under real Airflow: retries, a lost provider answer, two runs in a week, one the next.
# Then the paid layer on its own: a worker killed in flight, refused, reconciled and resumed.
# Last, a real scheduler and api-server: one approval answered through Airflow's REST API.
demo: install
	$(BIN)/python demo/airflow_demo.py
	$(BIN)/python demo/paid_walkthrough.py
	$(BIN)/python demo/approval_demo.py
	@echo "Optional: make demo-ui keeps a deployment running and prints the Idempotent Jobs page's URL and logins."

# The Idempotent Jobs page on a running deployment (api-server, scheduler, dag-processor, triggerer on
# 127.0.0.1): the example DAG runs three times (one provider answer lost), then it prints the logins
# and the page's URL and runs until Ctrl-C.
demo-ui: install
	$(BIN)/python demo/ui_demo.py

demo-cli: install
	$(BIN)/python demo/cli_walkthrough.py
	$(BIN)/python demo/paid_walkthrough.py

bench: install
	$(BIN)/python benchmarks/allocate.py

# The page's JSON against listing the week, in a 20 000-episode store: a whole 500-episode week, and
# one page of rows of a 5 000-episode week (filtered, sorted, searched).
bench-ui: install
	$(BIN)/python benchmarks/ui_week.py

# What the effects ledger costs per effect against a bare update, and as an episode's effects grow.
bench-effects: install
	$(BIN)/python benchmarks/effects.py

# Airflow's own LLM batch operators and ours, side by side under real dag.test() runs against local
# doubles of the OpenAI and Anthropic APIs: billed batches per operator and fault, as a Markdown table.
bench-llm: install
	$(BIN)/python benchmarks/llm_side_by_side.py

# Airflow's BedrockBatchInferenceOperator and ours, side by side under real dag.test() runs against
# local doubles of Bedrock: billed jobs per operator, fault and job-name rule, as a Markdown table.
bench-bedrock: install
	$(BIN)/python benchmarks/bedrock_side_by_side.py

# A real CeleryExecutor deployment (2 workers) backfills 14 runs against the PostgreSQL store.
e2e-distributed: install
	$(BIN)/python -m e2e.distributed

# The approval gate under a LocalExecutor deployment, answered through Airflow's REST API as a
# logged-in user: approve, reject, a killed approval task, a cleared run, an unknown episode and
# require_approval without a decision, against the file and the PostgreSQL store.
e2e-approval: install
	$(BIN)/python -m e2e.approval

# Debian's Chromium (and its driver), installed with apt-get only when missing: no browser downloads.
browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	fi

# The "Idempotent Jobs" page's JSON API on a real api-server (auth, per-DAG access, 400/404/503),
# then the page in a real headless Chromium: each user logs in through Airflow's login page, reads
# the week and episode views, and sees only the episodes of the DAGs they may read.
e2e-ui: install browser
	$(BIN)/python -m pytest -q -p no:cacheprovider e2e/test_ui_api.py
	$(BIN)/python -m e2e.ui_browser

# The effects ledger under a LocalExecutor deployment, counted through Airflow's REST API: a producer
# run cleared three times (one sink line, one asset event, one run of the DAG scheduled on the asset),
# and publish's process SIGKILLed right after its sink answered, with effect_capability "none" (try 2
# fails naming reconcile) and "idempotent_key" (try 2 sends the same token; the sink keeps one line).
e2e-effects: install
	$(BIN)/python -m e2e.effects

# The sdist and wheel (hatchling, pinned in constraints.txt; no isolated build env) into dist/, checked
# by twine. check-dist installs the wheel alone into a fresh venv and runs it there (e2e/wheel_install.py).
dist: install
	rm -rf dist
	$(BIN)/python -m build --no-isolation --outdir dist .
	$(BIN)/twine check --strict dist/*

check-dist: dist
	$(BIN)/python -m e2e.wheel_install

# The compatibility subset on another Airflow release: `make compat V=3.1.8`. A venv of its own
# (.compat/V) with that Airflow, pinned by constraints/airflow-V.txt where the project keeps one
# (3.1.0, 3.1.8, 3.2.0, 3.2.2; otherwise unconstrained, with a warning), the package from this checkout without
# its dependencies, then allocation, paid (lost answers, worker and deferred), TaskFlow, provider
# registration and the plugin; then the approval gate answered through the REST API of a real
# deployment of that release (e2e/approval.py, the client of the same version). The full suite
# runs on constraints.txt's Airflow (make test).
COMPAT_TESTS := tests/airflow/test_allocation_runs.py tests/airflow/test_paid_runs.py \
  tests/airflow/test_taskflow_runs.py tests/airflow/test_provider_registration.py \
  tests/airflow/test_approval_definitions.py
COMPAT_PINS = $(wildcard constraints/airflow-$(V).txt)
compat:
	@test -n "$(V)" || { echo "usage: make compat V=<Airflow version, e.g. 3.1.8>"; exit 2; }
	@test -n "$(COMPAT_PINS)" || echo "make compat: no constraints/airflow-$(V).txt: installing Airflow $(V) unconstrained"
	test -x .compat/$(V)/bin/python || $(PYTHON) -m venv .compat/$(V)
	test -f .compat/$(V)/.installed || { .compat/$(V)/bin/python -m pip install --quiet "pip==25.3" && \
	  .compat/$(V)/bin/python -m pip install --quiet $(if $(COMPAT_PINS),-c $(COMPAT_PINS)) "apache-airflow==$(V)" \
	    apache-airflow-providers-postgres "psycopg[binary]" "sqlalchemy>=2.0" psutil pendulum pytest pytest-timeout \
	    pytest-xdist hypothesis filelock statsd redis "apache-airflow-client==$(V)" && \
	  .compat/$(V)/bin/python -m pip install --quiet --no-deps -e . && touch .compat/$(V)/.installed; }
	rm -rf "$(TEST_TMP)-compat" && mkdir -p "$(TEST_TMP)-compat/tmp"
	TMPDIR="$(TEST_TMP)-compat/tmp" .compat/$(V)/bin/python -m pytest -p no:cacheprovider -n $(TEST_WORKERS) \
	  --dist loadgroup --basetemp="$(TEST_TMP)-compat/base" $(COMPAT_TESTS)
	rm -rf "$(TEST_TMP)-compat"
	.compat/$(V)/bin/python -m e2e.approval --workdir "$(CURDIR)/.e2e/approval-$(V)"

clean:
	rm -rf $(VENV) dist site .compat .demo .e2e .pytest_cache .mypy_cache .ruff_cache .grimp_cache .import_linter_cache
