// SPDX-License-Identifier: MIT
/*
 * A C program that drives a real GPU through NVIDIA's driver API, with no
 * Python and no CUDA toolkit at build time (tools/gpu-check-nopy.sh): it
 * loads libcuda.so.1 with dlopen, JIT-compiles a one-line PTX kernel, and
 * launches it LAUNCHES times on the default stream (cuLaunchKernel), with
 * SYNCS cuStreamSynchronize among them, then reads the buffer back and checks
 * what the last kernel wrote.
 *
 * --wait: says "ready PID" and waits for a line on stdin before launching
 * (for record -p). --late: the driver is loaded only after that line, as
 * PyTorch loads it at its first CUDA use: the recorder attached to a process
 * with no CUDA in it. Says "launched N synced M" at the end; exit status 0,
 * or 1 with the driver's error.
 *
 * usage: gpu_nopy [--wait] [--late] LAUNCHES SYNCS
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

/* one thread block of 32 writes v at p[threadIdx.x] */
static const char ptx[] =
    ".version 7.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry ptg_fill(.param .u64 ptg_fill_p, .param .u32 ptg_fill_v)\n"
    "{\n"
    "  .reg .b32 %r<3>;\n"
    "  .reg .b64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [ptg_fill_p];\n"
    "  ld.param.u32 %r1, [ptg_fill_v];\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "  mov.u32 %r2, %tid.x;\n"
    "  mul.wide.u32 %rd3, %r2, 4;\n"
    "  add.s64 %rd2, %rd2, %rd3;\n"
    "  st.global.u32 [%rd2], %r1;\n"
    "  ret;\n"
    "}\n";

static struct {
	CUresult (*init)(unsigned int);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*primary_retain)(CUcontext *, CUdevice);
	CUresult (*ctx_set)(CUcontext);
	CUresult (*module_load)(CUmodule *, const void *);
	CUresult (*get_function)(CUfunction *, CUmodule, const char *);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*launch)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
			   unsigned int, unsigned int, unsigned int, CUstream, void **, void **);
	CUresult (*sync)(CUstream);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*error_string)(CUresult, const char **);
} cu;

static int load_driver(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	struct {
		void **fn;
		const char *name;
	} syms[] = {
	    {(void **)&cu.init, "cuInit"},
	    {(void **)&cu.device_get, "cuDeviceGet"},
	    {(void **)&cu.primary_retain, "cuDevicePrimaryCtxRetain"},
	    {(void **)&cu.ctx_set, "cuCtxSetCurrent"},
	    {(void **)&cu.module_load, "cuModuleLoadData"},
	    {(void **)&cu.get_function, "cuModuleGetFunction"},
	    {(void **)&cu.mem_alloc, "cuMemAlloc_v2"},
	    {(void **)&cu.launch, "cuLaunchKernel"},
	    {(void **)&cu.sync, "cuStreamSynchronize"},
	    {(void **)&cu.dtoh, "cuMemcpyDtoH_v2"},
	    {(void **)&cu.error_string, "cuGetErrorString"},
	};

	if (!h) {
		fprintf(stderr, "gpu_nopy: %s\n", dlerror());
		return -1;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].fn = dlsym(h, syms[i].name);
		if (!*syms[i].fn) {
			fprintf(stderr, "gpu_nopy: libcuda.so.1 has no %s\n", syms[i].name);
			return -1;
		}
	}
	return 0;
}

static int check(CUresult r, const char *what)
{
	const char *s = "?";

	if (!r)
		return 0;
	cu.error_string(r, &s);
	fprintf(stderr, "gpu_nopy: %s: error %d: %s\n", what, r, s ? s : "?");
	return -1;
}

struct gpu {
	CUfunction fn;
	CUdeviceptr buf;
};

static int set_up(struct gpu *g)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;

	if (load_driver() || check(cu.init(0), "cuInit") ||
	    check(cu.device_get(&dev, 0), "cuDeviceGet") ||
	    check(cu.primary_retain(&ctx, dev), "cuDevicePrimaryCtxRetain") ||
	    check(cu.ctx_set(ctx), "cuCtxSetCurrent") ||
	    check(cu.module_load(&mod, ptx), "cuModuleLoadData") ||
	    check(cu.get_function(&g->fn, mod, "ptg_fill"), "cuModuleGetFunction") ||
	    check(cu.mem_alloc(&g->buf, 32 * sizeof(unsigned int)), "cuMemAlloc"))
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	int wait = 0, late = 0, a = 1;
	unsigned int out[32];
	struct gpu g;
	char line[64];

	for (; a < argc && argv[a][0] == '-'; a++) {
		if (!strcmp(argv[a], "--wait"))
			wait = 1;
		else if (!strcmp(argv[a], "--late"))
			late = 1;
		else
			break;
	}
	if (argc - a != 2 || (late && !wait)) {
		fprintf(stderr, "usage: gpu_nopy [--wait [--late]] LAUNCHES SYNCS\n");
		return 2;
	}
	long launches = atol(argv[a]), syncs = atol(argv[a + 1]), synced = 0;

	if (!late && set_up(&g))
		return 1;
	if (wait) {
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	if (late && set_up(&g))
		return 1;
	for (long i = 0; i < launches; i++) {
		unsigned int v = (unsigned int)i + 1;
		void *params[] = {&g.buf, &v};

		if (check(cu.launch(g.fn, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL),
			  "cuLaunchKernel"))
			return 1;
		/* spread over the run: the last one waits for every kernel */
		if (syncs && (i + 1) % ((launches + syncs - 1) / syncs) == 0) {
			if (check(cu.sync(NULL), "cuStreamSynchronize"))
				return 1;
			synced++;
		}
	}
	if (check(cu.dtoh(out, g.buf, sizeof(out)), "cuMemcpyDtoH"))
		return 1;
	for (int i = 0; i < 32; i++) {
		if (out[i] != (unsigned int)launches) {
			fprintf(stderr, "gpu_nopy: the GPU wrote %u at %d, not %ld\n", out[i], i,
				launches);
			return 1;
		}
	}
	printf("launched %ld synced %ld\n", launches, synced);
	fflush(stdout);
	return 0;
}
