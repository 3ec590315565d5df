# odradek: the two set-up commands are `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = "0" ] || echo sudo)
PYTEST_ARGS ?=
# the packages held to `mypy --strict` (the broker and what decides for it)
STRICT_PACKAGES := src/odradek/broker src/odradek/coordinator src/odradek/controller src/odradek/cluster

.PHONY: run test check package-check stress spark-kill test-cluster-slow venv install install-test system-deps lint typecheck bench clean console-assets

run: install ## create .venv, install odradek, start one broker on 127.0.0.1:9092
	$(BIN)/odradek broker --set schema.registry.listeners=http://127.0.0.1:8081

test: install-test system-deps ## install what the tests need, then run the whole suite
	$(BIN)/ruff check src tests bench tools
	$(BIN)/mypy
	$(BIN)/mypy --strict $(STRICT_PACKAGES)
	$(BIN)/python tools/check_docs.py
	$(BIN)/python tools/package_check.py
	$(BIN)/python tools/package_check.py --no-compiler
	$(BIN)/python -m pytest $(PYTEST_ARGS)

check: install-test ## the quick tier: ruff, mypy, the docs check and the tests that start no broker, ZooKeeper, Spark or browser
	$(BIN)/ruff check src tests bench tools
	$(BIN)/mypy
	$(BIN)/mypy --strict $(STRICT_PACKAGES)
	$(BIN)/python tools/check_docs.py
	$(BIN)/python -m pytest -p no:cacheprovider -m "not interop and not spark and not slow" $$($(BIN)/python tools/quick_tests.py) $(PYTEST_ARGS)

package-check: install-test ## build the wheel and sdist, install the wheel in a scratch venv, run a broker and a round trip (with and without a C compiler)
	$(BIN)/python tools/package_check.py
	$(BIN)/python tools/package_check.py --no-compiler

stress: install-test ## the producer stress tests with 20 tries of every case (make test runs 3)
	ODRADEK_STRESS_TRIES=$${ODRADEK_STRESS_TRIES:-20} $(BIN)/python -m pytest tests/client/test_stress.py -p no:cacheprovider $(PYTEST_ARGS)

spark-kill: install-test ## the long kill test of the exactly-once Spark sink (>= 200 micro-batches, driver and executor kills)
	ODRADEK_SPARK_KILL_LONG=1 $(BIN)/python -m pytest tests/spark/test_eos_kill.py -p no:cacheprovider $(PYTEST_ARGS)

test-cluster-slow: install-test system-deps ## the cluster and fault tests with their long runs (ODRADEK_SLOW=1, ODRADEK_FAULT_SECONDS)
	ODRADEK_SLOW=1 ODRADEK_FAULT_SECONDS=$${ODRADEK_FAULT_SECONDS:-60} $(BIN)/python -m pytest tests/cluster tests/faults -p no:cacheprovider $(PYTEST_ARGS)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

venv: $(BIN)/python

$(VENV)/.installed: pyproject.toml src/odradek/client/_speedups.c | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml src/odradek/client/_speedups.c | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# Debian packages the interop (kcat; Go: Sarama and kafka-go built offline in GOPATH mode;
# Burrow; node and npm for KafkaJS), Spark, cluster and console (browser) tests use; installed
# only when missing.
system-deps:
	@missing=""; \
	command -v kcat >/dev/null 2>&1 || missing="$$missing kcat"; \
	command -v java >/dev/null 2>&1 || missing="$$missing openjdk-17-jre-headless"; \
	[ -e /usr/share/java/zookeeper.jar ] || missing="$$missing zookeeper"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null 2>&1 || missing="$$missing chromium-driver"; \
	command -v go >/dev/null 2>&1 || missing="$$missing golang-go"; \
	[ -d /usr/share/gocode/src/github.com/Shopify/sarama ] || missing="$$missing golang-github-shopify-sarama-dev"; \
	[ -d /usr/share/gocode/src/github.com/segmentio/kafka-go ] || missing="$$missing golang-github-segmentio-kafka-go-dev"; \
	command -v Burrow >/dev/null 2>&1 || missing="$$missing burrow"; \
	command -v node >/dev/null 2>&1 || missing="$$missing nodejs"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	command -v iptables >/dev/null 2>&1 || missing="$$missing iptables"; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

lint: install-test
	$(BIN)/ruff check src tests bench tools
	$(BIN)/mypy

typecheck: lint

# Benchmarks (never part of `make test`): every script docs/benchmarks.md lists, with the
# command the page gives, one after the other (hours on 2 cores). Each prints its table;
# `make bench-clients` (or `make bench BENCH="clients groups"`) runs some of them.
BENCH ?= storage compare clients groups embedded spark cleaner transactions console_scrape downconvert fetch_versions cluster replication spark_eos replication_cpu replication_lag security
BENCH_ARGS_compare := --runs 3
BENCH_ARGS_clients := --broker odradek --records 1000000 --reps 3
BENCH_ARGS_transactions := --records 300000 --reps 3
BENCH_ARGS_console_scrape := --brokers 1 --pairs 80 --round 3
BENCH_ARGS_downconvert := --broker
BENCH_ARGS_cluster := --records 100000 --failovers 3
BENCH_ARGS_replication := --records 100000 --runs 3
BENCH_ARGS_spark_eos := --records 200000 --batches 4 --repeat 3
BENCH_ARGS_replication_cpu := --records 1000000 --runs 5
BENCH_ARGS_security := --records 1000000 --runs 3 --logins 300
bench: $(addprefix bench-,$(BENCH))
bench-%: install-test system-deps
	$(BIN)/python bench/$*.py $(BENCH_ARGS_$*)

# The console's browser assets (htmx, uPlot) come from the npm registry; the minified files and
# their licences are committed under src/odradek/console/static (package data, no CDN).
HTMX_VERSION ?= 2.0.11
UPLOT_VERSION ?= 1.6.32
console-assets:
	rm -rf build/npm && mkdir -p build/npm
	cd build/npm && npm pack --silent htmx.org@$(HTMX_VERSION) uplot@$(UPLOT_VERSION) >/dev/null
	cd build/npm && for f in *.tgz; do mkdir -p $${f%.tgz} && tar xzf $$f -C $${f%.tgz}; done
	cp build/npm/htmx.org-$(HTMX_VERSION)/package/dist/htmx.min.js src/odradek/console/static/
	cp build/npm/htmx.org-$(HTMX_VERSION)/package/LICENSE src/odradek/console/static/htmx.LICENSE
	cp build/npm/uplot-$(UPLOT_VERSION)/package/dist/uPlot.iife.min.js src/odradek/console/static/
	cp build/npm/uplot-$(UPLOT_VERSION)/package/dist/uPlot.min.css src/odradek/console/static/
	cp build/npm/uplot-$(UPLOT_VERSION)/package/LICENSE src/odradek/console/static/uPlot.LICENSE

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
