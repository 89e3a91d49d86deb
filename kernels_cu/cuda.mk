# The CUDA plugin, $(BUILD)/libhetero-cuda.so, run by the top Makefile's
# `cuda` target as: $(MAKE) -f kernels_cu/cuda.mk BUILD=... NVCC=...
#
# Machine code for Ampere (sm_80) and Hopper (sm_90), plus compute_90 PTX
# that newer GPUs compile at load; CUDA 12 and 13 both build it.  The
# plugin links cuBLAS/cuBLASLt dynamically (found through its rpath) and
# the CUDA runtime statically, so it only needs the driver and cuBLAS.

BUILD ?= build
NVCC ?= nvcc
Q := $(if $(V),,@)

CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(realpath $(NVCC)))
CUDA_LIBDIR := $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/targets/x86_64-linux/lib $(CUDA_HOME)/lib))
NVCC_VERSION := $(shell $(NVCC) --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')

ARCHS := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
         -gencode arch=compute_90,code=compute_90
BUILD_INFO := CUDA $(NVCC_VERSION); sm_80 sm_90 compute_90

NVFLAGS := -O3 -std=c++17 $(ARCHS) -I. -Iinclude -Xcompiler -fPIC,-fvisibility=hidden,-Wall \
           -DHX_CUDA_BUILD='"$(BUILD_INFO)"' $(NVCCFLAGS)

CU_SRC := $(sort $(wildcard kernels_cu/*.cu))
CU_OBJ := $(CU_SRC:%.cu=$(BUILD)/obj/%.o)
PLUGIN := $(BUILD)/libhetero-cuda.so

.PHONY: all
all: $(PLUGIN)

$(BUILD)/obj/kernels_cu/%.o: kernels_cu/%.cu kernels_cu/cuda.mk
	@mkdir -p $(dir $@)
	$(if $(V),,@echo "  NVCC    $<")
	$(Q)$(NVCC) $(NVFLAGS) -MD -MP -MF $(@:.o=.d) -c $< -o $@

$(PLUGIN): $(CU_OBJ)
	@echo "  LD      $@"
	$(Q)$(NVCC) -shared $(ARCHS) -o $@ $^ -L$(CUDA_LIBDIR) -lcublasLt -lcublas -Xlinker -rpath=$(CUDA_LIBDIR)

-include $(CU_OBJ:.o=.d)
