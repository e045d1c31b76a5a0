# tensorgrid: every target installs what it needs into a local virtual environment first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
PROTO_SRC := $(wildcard protos/tensorgrid/*.proto)
PYTEST_ARGS ?=

.PHONY: install test unit lint format typecheck protos protos-check demo bench clean browser-deps secret up certs up-tls

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# The one test command (README, CI): lint (with the layer contracts), type check, generated code
# check, tests.
test: install lint typecheck protos-check
	$(PY) -m pytest -q $(PYTEST_ARGS)

# Debian's chromium for the dashboard's browser test (tests/browser; Playwright comes with .[dev]).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

unit: install
	$(PY) -m pytest -q tests/unit $(PYTEST_ARGS)

# ruff, then the shape: the layer contracts of .importlinter and tools/layering_report.py --check
# (no import cycles, no function-level imports without a `# lazy:` reason, no file over 500 lines,
# no environment read outside tensorgrid/settings.py).
lint: install
	$(PY) -m ruff check tensorgrid services tests bench examples tools
	$(VENV)/bin/lint-imports --no-logo
	$(PY) tools/layering_report.py --check

format: install
	$(PY) -m ruff format tensorgrid services tests bench examples
	$(PY) -m ruff check --fix tensorgrid services tests bench examples

typecheck: install
	$(PY) -m mypy tensorgrid

# Regenerate the protobuf/gRPC code under tensorgrid/pb from protos/tensorgrid.
protos: install
	$(PY) -m grpc_tools.protoc -Itensorgrid/pb=protos/tensorgrid --python_out=. --pyi_out=. --grpc_python_out=. $(PROTO_SRC:protos/tensorgrid/%=tensorgrid/pb/%)

# Fails when the committed generated code differs from a fresh generation.
protos-check: install
	@rm -rf .protos-check && mkdir -p .protos-check
	$(PY) -m grpc_tools.protoc -Itensorgrid/pb=protos/tensorgrid --python_out=.protos-check --pyi_out=.protos-check --grpc_python_out=.protos-check $(PROTO_SRC:protos/tensorgrid/%=tensorgrid/pb/%)
	@for f in .protos-check/tensorgrid/pb/*; do cmp -s $$f tensorgrid/pb/$$(basename $$f) || { echo "generated code is stale: $$f (run make protos)"; exit 1; }; done
	@rm -rf .protos-check
	@echo "generated protobuf code is up to date"

# Benchmarks: tensorgrid and TensorFlow (.venv-tf or TENSORGRID_TF_PYTHON, optional) side by side;
# writes bench/results/raw-<date>.jsonl and bench/RESULTS.md. BENCH selects parts (local, dist,
# dist.train.mlp, ...; see bench/README.md); BENCH_QUICK=1 makes a short smoke run.
BENCH ?= all
bench: install
	$(PY) bench/run.py --parts '$(BENCH)' --command 'make bench BENCH=$(BENCH)'

# The main job: a local cluster trains the linear regression and an MLP data-parallel on two
# workers, and writes out/loss.png.
demo: install
	$(PY) examples/demo.py --out out

# The cluster's bearer token for docker compose: .tensorgrid.env (mode 0600) holds
# TENSORGRID_TOKEN, the same secret `tensorgrid token` prints (made on first use).
secret: install
	$(VENV)/bin/tensorgrid token --env-file .tensorgrid.env > /dev/null
	@echo "bearer token in .tensorgrid.env (tensorgrid token prints it)"

up: secret
	docker compose up -d --build

# TLS for docker compose (docker-compose.tls.yml): the cluster's CA and one certificate per
# service in .tensorgrid-tls (keys 0600, ignored by git and docker), made once; delete the
# directory to make new ones. The services run as the user who owns the keys.
TLS_DIR := .tensorgrid-tls
COMPOSE_CLUSTER := {"ps": ["ps:2222"], "worker": ["worker0:2222", "worker1:2222"]}

certs: $(TLS_DIR)/ca.pem

$(TLS_DIR)/ca.pem: | install
	$(VENV)/bin/tensorgrid certs --out $(TLS_DIR) --cluster '$(COMPOSE_CLUSTER)' --master-host master

up-tls: secret certs
	TENSORGRID_UID=$$(id -u) TENSORGRID_GID=$$(id -g) \
		docker compose -f docker-compose.yml -f docker-compose.tls.yml up -d --build

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .protos-check
