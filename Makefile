# gdn.c build. `make` builds ./gdn (CPU backend; the CUDA backend too with CUDA=1, or CUDA=auto to use
# nvcc when present). `make test` builds and runs the test suite (tests/run.sh).
CC      ?= gcc
NVCC    ?= nvcc
CUDA    ?= 0
BLAS    ?= 1
OPT     ?= -O3 -march=native
CFLAGS  += $(OPT) -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
           -fopenmp -fno-fast-math -I. -MMD -MP
LDLIBS  += -lyaml -lcjson $(if $(filter 1,$(BLAS)),-lopenblas) -lutf8proc -lzstd -lsnappy -lz -lm -lpthread -fopenmp
ifneq ($(BLAS),1)
  CFLAGS += -DGDN_NO_BLAS
endif
# DEPS=dir: headers and libraries unpacked there (scripts/device_deps.sh), found at build and run time
ifneq ($(DEPS),)
  CFLAGS  += -I$(DEPS)/include
  LDLIBS  += -L$(DEPS)/lib -Wl,-rpath,$(abspath $(DEPS))/lib
endif
# Hopper: sm_90a machine code (wgmma/TMA capable) plus sm_90 PTX for forward compatibility.
CUDA_ARCH ?= -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_90,code=compute_90
NVFLAGS += -O3 -g -lineinfo -std=c++17 $(CUDA_ARCH) -I. -Xcompiler -fopenmp,-Wall -MMD -MP \
           --expt-relaxed-constexpr

ifeq ($(CUDA),auto)
  override CUDA := $(if $(shell command -v $(NVCC) 2>/dev/null),1,0)
endif

BUILD := build
LIB_DIRS := util model cpu data io train eval infer report
LIB_SRC  := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
# git describe, baked in (gdn --version, logs, checkpoints, reports); the file changes only when it does
GDN_VERSION := $(shell git describe --always --dirty --tags 2>/dev/null || echo unknown)
LIB_OBJ  += $(BUILD)/version.o
# Plots of `gdn report` use Cairo when pkg-config finds it (CAIRO=0 builds without: table and HTML only)
CAIRO    ?= $(if $(shell pkg-config --exists cairo 2>/dev/null && echo y),1,0)
ifeq ($(CAIRO),1)
  CFLAGS += -DGDN_CAIRO $(shell pkg-config --cflags cairo)
  LDLIBS += $(shell pkg-config --libs cairo)
endif
ifeq ($(CUDA),1)
  CU_SRC  := $(wildcard cuda/*.cu)
  LIB_OBJ += $(CU_SRC:%.cu=$(BUILD)/%.o)
  CFLAGS  += -DGDN_CUDA
  NVFLAGS += -DGDN_CUDA
  CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(shell command -v $(NVCC))))
  LDLIBS  += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublasLt -lcublas -lnccl -lstdc++
else
  LIB_OBJ += $(BUILD)/cuda/stub.o
endif
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# GPU tests (tests/gpu/*.c) need a GPU to run: built only with CUDA=1, run by scripts/gpu_check.sh.
GPU_TEST_SRC := $(wildcard tests/gpu/*.c)
GPU_TEST_BIN := $(GPU_TEST_SRC:tests/gpu/%.c=$(BUILD)/gpu_tests/%)

.PHONY: all test clean assets gpu-tests
all: gdn $(TEST_BIN) $(if $(filter 1,$(CUDA)),$(GPU_TEST_BIN))
gpu-tests: $(GPU_TEST_BIN)

# whole-archive: the subcommands are only referenced weakly from gdn.c, so every object must be linked in.
gdn: $(BUILD)/gdn.o $(BUILD)/libgdn.a
	$(CC) -o $@.tmp $(BUILD)/gdn.o -Wl,--whole-archive $(BUILD)/libgdn.a -Wl,--no-whole-archive \
	  $(LDLIBS) && mv -f $@.tmp $@

# Objects and the archive depend on CUDA= and BLAS=: a stamp named by the values rebuilds them on a change.
FLAGS_STAMP := $(BUILD)/flags.cuda$(CUDA).blas$(BLAS).cairo$(CAIRO)
$(FLAGS_STAMP):
	@mkdir -p $(BUILD); rm -f $(BUILD)/flags.*; touch $@
$(LIB_OBJ) $(BUILD)/gdn.o: $(FLAGS_STAMP)

# built aside and renamed so a concurrent link never sees a half-written archive
$(BUILD)/libgdn.a: $(LIB_OBJ)
	@rm -f $@.tmp.$$$$; ar rcs $@.tmp.$$$$ $(LIB_OBJ) && mv -f $@.tmp.$$$$ $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# glibc's vector expf (libmvec) is offered to `omp simd` loops only under -ffast-math: this file only
$(BUILD)/cpu/softmax_simd.o: CFLAGS += -ffast-math

$(BUILD)/version.c: FORCE
	@mkdir -p $(BUILD); printf 'const char gdn_version[] = "%s";\n' '$(GDN_VERSION)' > $@.tmp; \
	  if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
$(BUILD)/version.o: $(BUILD)/version.c
	$(CC) $(CFLAGS) -c $< -o $@
.PHONY: FORCE
FORCE:

$(BUILD)/cuda/stub.o: cuda/stub.c.in
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -x c -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(BUILD)/tests/%: tests/%.c $(BUILD)/libgdn.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libgdn.a $(LDLIBS)

$(BUILD)/gpu_tests/%: tests/gpu/%.c $(BUILD)/libgdn.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libgdn.a $(LDLIBS)

test: all
	bash tests/run.sh

assets:
	bash scripts/fetch_assets.sh

clean:
	rm -rf $(BUILD) gdn

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
