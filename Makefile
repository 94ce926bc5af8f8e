# shardrec build. `make` builds build/libshardrec.{a,so} and build/shardrec;
# `make test` builds and runs every test. Each optional dependency is detected
# and reported with a check mark; NO_BLAS=1 NO_OMP=1 NO_MPI=1 NO_CUDA=1 NO_NCCL=1
# turn them off. SANITIZE=1 builds with ASan+UBSan into build-asan/ (or $(BUILD)
# when BUILD is set to something other than build).
# WERROR=1 makes warnings errors (CI sets it). `make link-flags` prints what a
# program linking $(BUILD)/libshardrec.a needs after it (tools/fuzz.sh uses it).

CC      ?= cc
BUILD   ?= build
OPT     ?= -O3 -march=native
ifeq ($(SANITIZE),1)
ifeq ($(BUILD),build)
BUILD   := build-asan
endif
OPT     := -O1
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif
CFLAGS  := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -fPIC -Iinclude -Isrc $(OPT) -fno-math-errno -g $(SAN)
LDLIBS  := -lm -lpthread
ifeq ($(WERROR),1)
CFLAGS  += -Werror
endif

CHECK = \342\234\223
CROSS = \342\234\227
status = $(info $(if $(filter 1,$(2)),  ✓,  ✗) $(1))

# ---- OpenBLAS ---------------------------------------------------------------
ifneq ($(NO_BLAS),1)
BLAS_INC := $(firstword $(wildcard /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/openblas /usr/include/x86_64-linux-gnu/openblas-openmp))
ifneq ($(BLAS_INC),)
HAVE_BLAS := 1
CFLAGS  += -DSR_USE_BLAS -I$(BLAS_INC)
LDLIBS  += -lopenblas
endif
endif
# ---- OpenMP -----------------------------------------------------------------
ifneq ($(NO_OMP),1)
ifeq ($(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo 1),1)
HAVE_OMP := 1
CFLAGS  += -fopenmp -DSR_USE_OMP
LDFLAGS += -fopenmp
endif
endif
# ---- cJSON (required) -------------------------------------------------------
ifneq ($(wildcard /usr/include/cjson/cJSON.h),)
HAVE_CJSON := 1
LDLIBS  += -lcjson
endif
# ---- MPI --------------------------------------------------------------------
ifneq ($(NO_MPI),1)
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null)
ifneq ($(MPI_LIBS),)
HAVE_MPI := 1
CFLAGS  += -DSR_USE_MPI $(MPI_CFLAGS)
LDLIBS  += $(MPI_LIBS)
endif
endif
# ---- CUDA (the device/cuda backend) and NCCL ----------------------------------
# The CUDA build links the runtime and cuBLASLt only (never libcuda), so the
# binary starts on a machine with the toolkit and no driver and --device cuda
# then says what is missing. Kernels are built for sm_90 (Hopper);
# CUDA_ARCH=... overrides. Sanitizer builds leave CUDA out unless CUDA=1.
ifeq ($(SANITIZE),1)
ifneq ($(CUDA),1)
NO_CUDA := 1
endif
endif
ifneq ($(NO_CUDA),1)
NVCC := $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
ifneq ($(NVCC),)
HAVE_CUDA := 1
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCH ?= -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90
CFLAGS  += -DSR_USE_CUDA -I$(CUDA_HOME)/include
LDLIBS  += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcudart -lstdc++
NVFLAGS := -std=c++20 -O3 $(CUDA_ARCH) -Xcompiler -fPIC,-Wall -Iinclude -Isrc -DSR_USE_CUDA \
           -lineinfo --expt-relaxed-constexpr -fmad=false
ifeq ($(WERROR),1)
NVFLAGS += -Werror all-warnings
endif
endif
endif
# NCCL (comm/comm_nccl.c) needs CUDA and MPI (its bootstrap): nccl.h and
# libnccl.so are looked for beside the CUDA toolkit and in the system's paths.
ifneq ($(NO_NCCL),1)
ifeq ($(HAVE_CUDA)$(HAVE_MPI),11)
NCCL_INC := $(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h /usr/local/include/nccl.h))
NCCL_LIB := $(firstword $(wildcard $(CUDA_HOME)/lib64/libnccl.so /usr/lib/x86_64-linux-gnu/libnccl.so /usr/lib64/libnccl.so /usr/local/lib/libnccl.so))
ifneq ($(NCCL_INC),)
ifneq ($(NCCL_LIB),)
HAVE_NCCL := 1
CFLAGS  += -DSR_USE_NCCL -I$(dir $(NCCL_INC))
LDLIBS  += -L$(dir $(NCCL_LIB)) -Wl,-rpath,$(dir $(NCCL_LIB)) -lnccl
endif
endif
endif
endif
# ---- cmocka (tests) -----------------------------------------------------------
ifneq ($(wildcard /usr/include/cmocka.h),)
HAVE_CMOCKA := 1
endif

ifeq ($(MAKELEVEL)$(filter link-flags,$(MAKECMDGOALS)),0)
$(info shardrec build configuration ($(BUILD)/))
$(call status,OpenBLAS,$(HAVE_BLAS))
$(call status,OpenMP,$(HAVE_OMP))
$(call status,cJSON,$(HAVE_CJSON))
$(call status,MPI,$(HAVE_MPI))
$(call status,CUDA (nvcc; device/cuda for sm_90),$(HAVE_CUDA))
$(call status,NCCL (comm/comm_nccl.c; needs CUDA and MPI),$(HAVE_NCCL))
$(call status,cmocka (tests),$(HAVE_CMOCKA))
endif
ifneq ($(HAVE_CJSON),1)
$(error cJSON is required: apt-get install libcjson-dev)
endif

LIB_SRCS  := $(wildcard src/core/*.c src/device/*.c src/device/cpu/*.c src/comm/*.c \
               src/data/*.c src/embed/*.c src/model/*.c src/plan/*.c src/train/*.c)
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
ifeq ($(HAVE_CUDA),1)
CU_SRCS   := $(wildcard src/device/cuda/*.cu)
LIB_OBJS  += $(CU_SRCS:%.cu=$(BUILD)/obj/%.o)
endif
CLI_SRCS  := $(wildcard cli/*.c)
CLI_OBJS  := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_SRCS := $(wildcard tests/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
TEST_HELPER_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/helpers/*.c))

.PHONY: all lib cli tests test bench test-gpu clean install link-flags
all: lib cli
lib: $(BUILD)/libshardrec.a $(BUILD)/libshardrec.so
cli: $(BUILD)/shardrec
tests: $(TEST_BINS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libshardrec.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libshardrec.so: $(LIB_OBJS)
	$(CC) -shared $(LDFLAGS) -o $@ $^ $(LDLIBS)

link-flags:
	@echo $(LDFLAGS) $(LDLIBS)

$(BUILD)/shardrec: $(CLI_OBJS) $(BUILD)/libshardrec.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJS) $(BUILD)/libshardrec.a $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TEST_HELPER_OBJS) $(BUILD)/libshardrec.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(TEST_HELPER_OBJS) $(BUILD)/libshardrec.a $(LDFLAGS) $(LDLIBS) -lcmocka

# test_backend_ops is one binary from tests/test_backend_ops.c and the files
# of tests/backend_ops/ (its harness and one file of cases per op table).
BACKEND_OPS_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/backend_ops/*.c))
$(BUILD)/tests/test_backend_ops: tests/test_backend_ops.c $(BACKEND_OPS_OBJS) $(TEST_HELPER_OBJS) \
                                 $(BUILD)/libshardrec.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(BACKEND_OPS_OBJS) $(TEST_HELPER_OBJS) \
	    $(BUILD)/libshardrec.a $(LDFLAGS) $(LDLIBS) -lcmocka

# MPI test programs (tests/mpi/*.c, no cmocka), run under mpirun by tests/check_mpi_*.sh
MPI_TEST_BINS := $(if $(HAVE_MPI),$(patsubst tests/mpi/%.c,$(BUILD)/tests/%,$(wildcard tests/mpi/*.c)))
tests: $(MPI_TEST_BINS)
$(BUILD)/tests/mpi_%: tests/mpi/mpi_%.c $(BUILD)/obj/tests/helpers/host_view.o $(BUILD)/libshardrec.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(BUILD)/obj/tests/helpers/host_view.o $(BUILD)/libshardrec.a $(LDFLAGS) $(LDLIBS)

# mpi_sharded_ebc is one program from tests/mpi/mpi_sharded_ebc.c and the files
# of tests/mpi/sharded_ebc/ (its harness and the stage cases).
SHARDED_EBC_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/mpi/sharded_ebc/*.c))
$(BUILD)/tests/mpi_sharded_ebc: tests/mpi/mpi_sharded_ebc.c tests/mpi/sharded_ebc/harness.h \
                                $(SHARDED_EBC_OBJS) $(BUILD)/obj/tests/helpers/host_view.o \
                                $(BUILD)/libshardrec.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(SHARDED_EBC_OBJS) $(BUILD)/obj/tests/helpers/host_view.o \
	    $(BUILD)/libshardrec.a $(LDFLAGS) $(LDLIBS)

# mpi_hybrid (tests/mpi/mpi_hybrid.c) uses the harness of tests/mpi/sharded_ebc/ too.
$(BUILD)/tests/mpi_hybrid: tests/mpi/mpi_hybrid.c tests/mpi/sharded_ebc/harness.h \
                           $(SHARDED_EBC_OBJS) $(BUILD)/obj/tests/helpers/host_view.o \
                           $(BUILD)/libshardrec.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Itests/mpi -o $@ $< $(SHARDED_EBC_OBJS) \
	    $(BUILD)/obj/tests/helpers/host_view.o $(BUILD)/libshardrec.a $(LDFLAGS) $(LDLIBS)

# Benchmark programs (bench/*.c), built with the tests so that CI compiles them
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))
.PHONY: bench
bench: $(BENCH_BINS)
tests: $(BENCH_BINS)
$(BUILD)/bench/%: bench/%.c $(BUILD)/libshardrec.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libshardrec.a $(LDFLAGS) $(LDLIBS)

test: all tests
	BUILD=$(BUILD) tests/run.sh

# The GPU suite, on a machine with an NVIDIA GPU (each script stops with a
# message and a non-zero status when none is visible): every device op on
# CUDA against the CPU (with the table over 2^32 elements), training on CUDA
# against the CPU and 2 ranks against 1, and the PyTorch check on CUDA.
test-gpu: all tests
ifneq ($(HAVE_CUDA),1)
	@echo "test-gpu: this build has no CUDA backend (nvcc not found, or NO_CUDA=1)"; exit 1
endif
	@sh tests/gpu/require_gpu.sh test-gpu
	SR_TEST_DEVICE=cuda SR_TEST_BIG=1 $(BUILD)/tests/test_backend_ops
	BUILD=$(BUILD) sh tests/gpu/check_gpu_train.sh
	BUILD=$(BUILD) sh tests/gpu/check_nccl_train.sh
	BUILD=$(BUILD) sh tests/gpu/check_gpu_torch.sh

PREFIX ?= /usr/local
install: lib
	install -d $(PREFIX)/lib $(PREFIX)/include/shardrec $(PREFIX)/lib/pkgconfig
	install -m 644 $(BUILD)/libshardrec.a $(BUILD)/libshardrec.so $(PREFIX)/lib/
	install -m 644 include/shardrec/*.h $(PREFIX)/include/shardrec/
	sed -e 's|@PREFIX@|$(PREFIX)|' tools/shardrec.pc.in > $(PREFIX)/lib/pkgconfig/shardrec.pc

clean:
	rm -rf build build-asan

-include $(LIB_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(BACKEND_OPS_OBJS:.o=.d) $(SHARDED_EBC_OBJS:.o=.d)
