# gdn.c build. `make` builds ./gdn (CPU backend; the CUDA backend too with CUDA=1, or CUDA=auto to use
# nvcc when present). `make test` builds and runs the test suite (tests/run.sh).
CC      ?= gcc
NVCC    ?= nvcc
CUDA    ?= 0
BLAS    ?= 1
OPT     ?= -O3 -march=native
CFLAGS  += $(OPT) -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
           -fopenmp -fno-fast-math -I. -MMD -MP $(CFLAGS_EXTRA)
LDLIBS  += -lyaml -lcjson $(if $(filter 1,$(BLAS)),-lopenblas) -lutf8proc -lzstd -lsnappy -lz -lm -lpthread -fopenmp
# Gloo (CPU collectives of launcher-started ranks, train/comm_gloo.cc): Debian ships only the versioned .so
CXX     ?= g++
CXXFLAGS += $(OPT) -g -std=c++17 -Wall -Wextra -Wno-unused-parameter -I. -MMD -MP
LDLIBS  += -l:libgloo.so.0 -lstdc++
ifneq ($(BLAS),1)
  CFLAGS += -DGDN_NO_BLAS
endif
# DEPS=dir: headers and libraries unpacked there (scripts/device_deps.sh), found at build and run time
ifneq ($(DEPS),)
  CFLAGS  += -I$(DEPS)/include
  CXXFLAGS += -I$(DEPS)/include
  LDLIBS  += -L$(DEPS)/lib -Wl,-rpath,$(abspath $(DEPS))/lib -Wl,--disable-new-dtags # RPATH: libgloo's own deps too
endif
# Hopper: sm_90a machine code (wgmma/TMA capable) plus sm_90 PTX for forward compatibility.
CUDA_ARCH ?= -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_90,code=compute_90
NVFLAGS += -O3 -g -lineinfo -std=c++17 $(CUDA_ARCH) -I. -Xcompiler -fopenmp,-Wall -MMD -MP \
           --expt-relaxed-constexpr

ifeq ($(CUDA),auto)
  override CUDA := $(if $(shell command -v $(NVCC) 2>/dev/null),1,0)
endif

# Plots of `gdn report` use Cairo when pkg-config finds it (CAIRO=0 builds without: table and HTML only)
CAIRO    ?= $(if $(shell pkg-config --exists cairo 2>/dev/null && echo y),1,0)
ifeq ($(CAIRO),1)
  CFLAGS += -DGDN_CAIRO $(shell pkg-config --cflags cairo)
  LDLIBS += $(shell pkg-config --libs cairo)
endif
BUILD ?= build
BIN   ?= gdn
# Objects of each CUDA=/BLAS=/CAIRO= configuration live apart (build/obj-cuda0-blas1-cairo1/, ...), so switching between
# them (scripts/demo.sh then scripts/test.sh) relinks instead of recompiling everything.
OBJ := $(BUILD)/obj-cuda$(CUDA)-blas$(BLAS)-cairo$(CAIRO)
LIB_DIRS := util model cpu data io train eval infer report
LIB_SRC  := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(OBJ)/%.o) $(patsubst %.cc,$(OBJ)/%.o,$(wildcard train/*.cc))
# git describe, baked in (gdn --version, logs, checkpoints, reports); the file changes only when it does
GDN_VERSION := $(shell git describe --always --dirty --tags 2>/dev/null || echo unknown)
LIB_OBJ  += $(OBJ)/version.o
ifeq ($(CUDA),1)
  CU_SRC  := $(wildcard cuda/*.cu)
  LIB_OBJ += $(CU_SRC:%.cu=$(OBJ)/%.o)
  CFLAGS  += -DGDN_CUDA
  NVFLAGS += -DGDN_CUDA
  CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(shell command -v $(NVCC))))
  LDLIBS  += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublasLt -lcublas -lnccl -lstdc++
else
  LIB_OBJ += $(OBJ)/cuda/stub.o
endif
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# GPU tests (tests/gpu/*.c) need a GPU to run: built only with CUDA=1, run by scripts/gpu_check.sh.
GPU_TEST_SRC := $(wildcard tests/gpu/*.c)
GPU_TEST_BIN := $(GPU_TEST_SRC:tests/gpu/%.c=$(BUILD)/gpu_tests/%)

.PHONY: all test clean assets gpu-tests sanitize fuzz
all: $(BIN) $(TEST_BIN) $(if $(filter 1,$(CUDA)),$(GPU_TEST_BIN))
gpu-tests: $(GPU_TEST_BIN)

# whole-archive: the subcommands are only referenced weakly from gdn.c, so every object must be linked in.
$(BIN): $(OBJ)/gdn.o $(BUILD)/libgdn.a
	$(CC) $(SAN) -o $@.tmp $(OBJ)/gdn.o -Wl,--whole-archive $(BUILD)/libgdn.a -Wl,--no-whole-archive \
	  $(LDLIBS) && mv -f $@.tmp $@

# build/libgdn.a (what gdn, the tests and scripts link) is the current configuration's archive: a stamp named
# by CUDA=, BLAS= and CAIRO= makes a change of configuration replace it (a copy) and relink what uses it.
FLAGS_STAMP := $(BUILD)/flags.cuda$(CUDA).blas$(BLAS).cairo$(CAIRO)
$(FLAGS_STAMP):
	@mkdir -p $(BUILD); rm -f $(BUILD)/flags.*; touch $@

# built aside and renamed so a concurrent link never sees a half-written archive
$(OBJ)/libgdn.a: $(LIB_OBJ)
	@rm -f $@.tmp.$$$$; ar rcs $@.tmp.$$$$ $(LIB_OBJ) && mv -f $@.tmp.$$$$ $@
# what a program linking the archive needs (tests/t_eval_*.sh link their drivers with it)
$(BUILD)/ldlibs.txt: $(FLAGS_STAMP) Makefile
	@printf '%s\n' '$(LDLIBS)' > $@

$(BUILD)/libgdn.a: $(OBJ)/libgdn.a $(FLAGS_STAMP) $(BUILD)/ldlibs.txt
	@rm -f $@.tmp.$$$$; cp $< $@.tmp.$$$$ && mv -f $@.tmp.$$$$ $@

$(OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# glibc's vector expf (libmvec) is offered to `omp simd` loops only under -ffast-math: this file only
$(OBJ)/cpu/softmax_simd.o: CFLAGS += -ffast-math

$(BUILD)/version.c: FORCE
	@mkdir -p $(BUILD); printf 'const char gdn_version[] = "%s";\n' '$(GDN_VERSION)' > $@.tmp; \
	  if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
$(OBJ)/version.o: $(BUILD)/version.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@
.PHONY: FORCE
FORCE:

$(OBJ)/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(OBJ)/cuda/stub.o: cuda/stub.c.in
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -x c -c $< -o $@

$(OBJ)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@
# compile checks of one kernel file: make CUDA=1 build/cuda/FILE.o
$(BUILD)/cuda/%.o: cuda/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(BUILD)/tests/%: tests/%.c $(BUILD)/libgdn.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libgdn.a $(LDLIBS)

# `make sanitize`: ASan + UBSan build of gdn and the fuzz driver in build-san/ (beside, not over, build/).
# Any report aborts the process, so a fuzz input that trips one fails the test (tests/t_fuzz.sh).
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
sanitize:
	$(MAKE) BUILD=build-san BIN=build-san/gdn CUDA=0 OPT="-O1" SAN="$(SAN_FLAGS)" CFLAGS_EXTRA="$(SAN_FLAGS)" \
	  build-san/gdn build-san/fuzz
fuzz: sanitize
	bash tests/t_fuzz.sh

$(BUILD)/fuzz: tests/fuzz/fuzz.c $(wildcard tests/fuzz/*.h) $(BUILD)/libgdn.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libgdn.a $(LDLIBS)

$(BUILD)/gpu_tests/%: tests/gpu/%.c $(BUILD)/libgdn.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libgdn.a $(LDLIBS)
# test_cuda_ops: its harness and the cases of each op family live in tests/gpu/ops/
$(BUILD)/gpu_tests/test_cuda_ops: tests/gpu/test_cuda_ops.c $(wildcard tests/gpu/ops/*.c) $(BUILD)/libgdn.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ tests/gpu/test_cuda_ops.c $(wildcard tests/gpu/ops/*.c) $(BUILD)/libgdn.a $(LDLIBS)

test: all
	bash tests/run.sh

assets:
	bash scripts/fetch_assets.sh

clean:
	rm -rf $(BUILD) build-san gdn

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
