// SPDX-License-Identifier: MIT
/*
 * Writes a synthetic but realistic recording of GPU training, through the
 * project's trace writer, for timing the analyses on traces of a given size
 * (bench/run.sh uses 10 million records). Not a test.
 *
 * One process, two threads and one GPU with two streams:
 * - the main thread runs training steps: Python frames nested up to ~14 deep
 *   (train loop, Module.__call__, forward of 24 layers, helpers from a pool of
 *   2,000 functions), dispatcher ops nested in them and in each other, CUDA
 *   launches inside ops (correlation id shared with the kernel, external id
 *   of the op), a host-to-device copy per step, backward ops without Python
 *   frames, optimizer ops, and a synchronizing .item() that blocks the thread
 *   (a CUDA call and an off-CPU interval) until the GPU drains;
 * - a data-loader thread runs bursts of Python calls and sleeps in between
 *   (off-CPU intervals), its records interleaved with the main thread's in
 *   time order, as the loader's shared ring buffer delivers them;
 * - the GPU runs each kernel at max(launch + latency, end of the previous op
 *   on its stream): it starves while Python is slow and queues up while the
 *   CPU runs ahead, so `idle` finds idle gaps, queue depth and falling phases.
 *   GPU records arrive in batches, as CUPTI delivers its buffers.
 *
 *   cc -O2 -D_GNU_SOURCE -Iuser bench/gen_trace.c user/trace/trace_writer.c -lz -lzstd -o gen_trace
 *   gen_trace [-n RECORDS] [-o PATH]     (default 10000000, ptg-gen.ptg)
 *
 * Prints one JSON line: path, records, bytes, steps, kernels.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace/trace.h"

#define PID	       4242
#define MAIN_TID       4242
#define LOADER_TID     4250
#define NPYFUNCS       2000
#define NLAYERS	       24
#define GPU_BATCH      4096 /* GPU records per delivered buffer */
#define STREAM_COMPUTE 7
#define STREAM_COPY    13

enum {
	OP_LINEAR,
	OP_ADDMM,
	OP_RELU,
	OP_LAYER_NORM,
	OP_SOFTMAX,
	OP_ADD,
	OP_MUL,
	OP_TO,
	OP_COPY,
	OP_ITEM,
	OP_LOCAL_SCALAR,
	OP_MM_BWD,
	OP_RELU_BWD,
	OP_NORM_BWD,
	OP_SUM,
	OP_FOREACH_ADD,
	OP_FOREACH_MUL,
	OP_FOREACH_SQRT,
	OP_ZERO,
	OP_CE,
	NOPS
};

static const char *const op_names[NOPS] = {
    "aten::linear",
    "aten::addmm",
    "aten::relu",
    "aten::layer_norm",
    "aten::softmax",
    "aten::add",
    "aten::mul",
    "aten::to",
    "aten::copy_",
    "aten::item",
    "aten::_local_scalar_dense",
    "MmBackward0",
    "ReluBackward0",
    "NativeLayerNormBackward0",
    "aten::sum",
    "aten::_foreach_add_",
    "aten::_foreach_mul_",
    "aten::_foreach_sqrt",
    "aten::zero_",
    "aten::cross_entropy_loss",
};

static const char *const kernel_names[] = {
    "ampere_sgemm_128x64_tn",
    "ampere_sgemm_64x64_nn",
    "ampere_sgemm_128x128_nt",
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>",
    "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>>",
    "void at::native::vectorized_elementwise_kernel<4, at::native::ReluFunctor<float>>",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>",
    "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<float, float>",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::sum>>",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>",
    "void at::native::multi_tensor_apply_kernel<at::native::TensorListMetadata<4>>",
    "void at::native::unrolled_elementwise_kernel<at::native::FillFunctor<float>>",
};
#define NKERNELS (sizeof(kernel_names) / sizeof(kernel_names[0]))

enum { API_LAUNCH, API_MEMCPY, API_SYNC, NAPIS };

struct gen {
	struct trace_writer *w;
	uint64_t target, written, steps, kernels;
	uint64_t ts;	      /* main thread clock */
	uint64_t gpu_free[2]; /* end of the last op per stream */
	uint64_t corr, ext, cur_ext;
	uint32_t py[NPYFUNCS], op[NOPS], kernel[NKERNELS], api[NAPIS];
	uint32_t memcpy_sym, sync_sym, loop_fn;
	struct ptg_record gpu[GPU_BATCH];
	size_t ngpu;
	struct ptg_record *dl; /* data-loader records not yet written, in time order */
	size_t ndl, dl_head, dl_cap;
	uint64_t dl_ts;
	int err;
};

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static uint64_t between(uint64_t lo, uint64_t hi)
{
	return lo + rng() % (hi - lo + 1);
}

static void put(struct gen *g, const struct ptg_record *r)
{
	if (!g->err)
		g->err = trace_writer__record(g->w, r);
	g->written++;
}

static void flush_gpu(struct gen *g)
{
	for (size_t i = 0; i < g->ngpu; i++)
		put(g, &g->gpu[i]);
	g->ngpu = 0;
}

static void queue_gpu(struct gen *g, const struct ptg_record *r)
{
	if (g->ngpu == GPU_BATCH)
		flush_gpu(g);
	g->gpu[g->ngpu++] = *r;
}

static int dl_push(struct gen *g, const struct ptg_record *r)
{
	struct ptg_record *n;

	if (g->ndl == g->dl_cap) {
		g->dl_cap = g->dl_cap ? 2 * g->dl_cap : 1024;
		n = realloc(g->dl, g->dl_cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		g->dl = n;
	}
	g->dl[g->ndl++] = *r;
	return 0;
}

static void dl_rec(struct gen *g, uint16_t kind, uint32_t sym, uint64_t dur, int64_t aux0)
{
	struct ptg_record r = {.kind = kind, .pid = PID, .tid = LOADER_TID, .sym = sym};

	r.ts = g->dl_ts;
	r.dur = dur;
	r.aux[0] = aux0;
	if (!g->err)
		g->err = dl_push(g, &r);
}

/* One batch of the data loader: __next__, 32 x (__getitem__, transform, helper), then a sleep. */
static void dl_burst(struct gen *g)
{
	struct ptg_record r = {.kind = PTG_REC_SCHED, .pid = PID, .tid = LOADER_TID};
	int i;

	g->ndl = g->dl_head = 0;
	dl_rec(g, PTG_REC_PY_ENTER, g->py[10], 0, 0);
	for (i = 0; i < 32; i++) {
		g->dl_ts += between(200, 600);
		dl_rec(g, PTG_REC_PY_ENTER, g->py[11], 0, 0);
		g->dl_ts += between(300, 900);
		dl_rec(g, PTG_REC_PY_ENTER, g->py[12 + i % 4], 0, 0);
		g->dl_ts += between(1000, 4000);
		dl_rec(g, PTG_REC_PY_EXIT, 0, 0, 0);
		g->dl_ts += between(100, 300);
		dl_rec(g, PTG_REC_PY_EXIT, 0, 0, 0);
	}
	g->dl_ts += between(200, 600);
	dl_rec(g, PTG_REC_PY_EXIT, 0, 0, 0);
	/* blocked on the queue until the trainer takes the batch */
	r.dur = between(2000000, 6000000);
	r.ts = g->dl_ts;
	r.aux[0] = PTG_SCHED_BLOCKED;
	r.aux[1] = (int64_t)between(2000, 40000);
	r.aux[2] = MAIN_TID;
	g->dl_ts += r.dur;
	if (!g->err)
		g->err = dl_push(g, &r);
}

/* Main-thread record at the current time: data-loader records before it go first. */
static void main_rec(struct gen *g, struct ptg_record *r)
{
	r->pid = PID;
	r->tid = MAIN_TID;
	for (;;) {
		if (g->dl_head == g->ndl) {
			if (g->dl_ts > r->ts)
				break;
			dl_burst(g);
		}
		if (g->err || g->dl[g->dl_head].ts > r->ts)
			break;
		put(g, &g->dl[g->dl_head++]);
	}
	put(g, r);
}

static void py_enter(struct gen *g, uint32_t sym)
{
	struct ptg_record r = {.kind = PTG_REC_PY_ENTER, .sym = sym};

	g->ts += between(60, 400);
	r.ts = g->ts;
	main_rec(g, &r);
}

static void py_exit(struct gen *g)
{
	struct ptg_record r = {.kind = PTG_REC_PY_EXIT};

	g->ts += between(40, 300);
	r.ts = g->ts;
	main_rec(g, &r);
}

static uint64_t op_enter(struct gen *g, int op)
{
	struct ptg_record r = {.kind = PTG_REC_OP_ENTER, .sym = g->op[op]};
	uint64_t outer = g->cur_ext;

	g->ts += between(500, 2000);
	r.ts = g->ts;
	r.ext = g->cur_ext = ++g->ext;
	main_rec(g, &r);
	return outer;
}

static void op_exit(struct gen *g, uint64_t outer)
{
	struct ptg_record r = {.kind = PTG_REC_OP_EXIT};

	g->ts += between(300, 1500);
	r.ts = g->ts;
	g->cur_ext = outer;
	main_rec(g, &r);
}

/* A CUDA call (written at its end, as the loader does) and the GPU op it starts. */
static void launch(struct gen *g, uint16_t kind, uint32_t sym, int stream, uint64_t gpu_dur)
{
	struct ptg_record c = {.kind = PTG_REC_CUDA_CALL, .stream = 0};
	struct ptg_record k = {.kind = kind, .pid = 0, .device = 0};
	int s = stream == STREAM_COPY;

	c.sym = kind == PTG_REC_GPU_KERNEL ? g->api[API_LAUNCH] : g->api[API_MEMCPY];
	c.ts = g->ts + between(100, 400);
	c.dur = between(2500, 6000);
	c.stream = stream;
	c.corr = ++g->corr;
	c.ext = g->cur_ext;
	g->ts = c.ts + c.dur;
	k.tid = stream;
	k.stream = stream;
	k.sym = sym;
	k.corr = c.corr;
	k.ext = c.ext;
	k.ts = c.ts + c.dur / 2 + between(2000, 6000);
	if (k.ts < g->gpu_free[s])
		k.ts = g->gpu_free[s] + between(500, 1500);
	k.dur = gpu_dur;
	if (kind == PTG_REC_GPU_KERNEL) {
		k.aux[0] = (int64_t)(between(1, 4096) | 1ull << 32);
		k.aux[2] = 256 | 1ll << 32;
		g->kernels++;
	} else {
		k.aux[0] = 4 << 20;
		k.aux[1] = 1; /* HtoD */
	}
	g->gpu_free[s] = k.ts + k.dur;
	main_rec(g, &c);
	queue_gpu(g, &k);
}

static void kernel(struct gen *g, int which, uint64_t lo, uint64_t hi)
{
	launch(g, PTG_REC_GPU_KERNEL, g->kernel[which], STREAM_COMPUTE, between(lo, hi));
}

/* Python helpers between the layer and its ops: 0-3 deep, from the pool. */
static int helpers_enter(struct gen *g, int layer, int site)
{
	int depth = (int)(rng() % 4), i;

	for (i = 0; i < depth; i++)
		py_enter(g,
			 g->py[100 + (layer * 37 + site * 11 + i * 7 + (int)(rng() % 16)) % 1900]);
	return depth;
}

static void helpers_exit(struct gen *g, int depth)
{
	while (depth--)
		py_exit(g);
}

static void linear(struct gen *g, int layer, int site)
{
	int d = helpers_enter(g, layer, site);
	uint64_t o1 = op_enter(g, OP_LINEAR), o2 = op_enter(g, OP_ADDMM);

	kernel(g, site % 3, 8000, 60000);
	op_exit(g, o2);
	op_exit(g, o1);
	helpers_exit(g, d);
}

static void pointwise(struct gen *g, int layer, int site, int op, int k)
{
	int d = helpers_enter(g, layer, site);
	uint64_t o = op_enter(g, op);

	kernel(g, k, 2000, 10000);
	op_exit(g, o);
	helpers_exit(g, d);
}

/* Module.__call__ -> Block.forward -> norm, attention-ish and MLP pieces. */
static void layer_forward(struct gen *g, int layer)
{
	py_enter(g, g->py[20]);
	py_enter(g, g->py[30 + layer]);
	pointwise(g, layer, 0, OP_LAYER_NORM, 6);
	linear(g, layer, 1);
	pointwise(g, layer, 2, OP_SOFTMAX, 9);
	linear(g, layer, 3);
	pointwise(g, layer, 4, OP_ADD, 3);
	pointwise(g, layer, 5, OP_LAYER_NORM, 6);
	linear(g, layer, 6);
	pointwise(g, layer, 7, OP_RELU, 5);
	linear(g, layer, 8);
	pointwise(g, layer, 9, OP_ADD, 3);
	py_exit(g);
	py_exit(g);
}

/* Autograd runs backward ops from C: no Python frame around them. */
static void layer_backward(struct gen *g)
{
	static const int ops[] = {OP_MM_BWD, OP_RELU_BWD, OP_MM_BWD,  OP_NORM_BWD,
				  OP_MM_BWD, OP_MM_BWD,	  OP_NORM_BWD};
	size_t i;
	uint64_t o;

	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		o = op_enter(g, ops[i]);
		if (ops[i] == OP_MM_BWD) {
			kernel(g, 1, 8000, 60000);
			kernel(g, 2, 8000, 60000);
		} else {
			kernel(g, ops[i] == OP_RELU_BWD ? 5 : 7, 4000, 20000);
		}
		op_exit(g, o);
	}
}

static void copy_batch(struct gen *g)
{
	uint64_t o1, o2;

	py_enter(g, g->py[3]);
	o1 = op_enter(g, OP_TO);
	o2 = op_enter(g, OP_COPY);
	launch(g, PTG_REC_GPU_MEMCPY, g->memcpy_sym, STREAM_COPY, between(80000, 200000));
	op_exit(g, o2);
	op_exit(g, o1);
	py_exit(g);
}

/* loss.item(): the host waits for the GPU to drain (a CUDA call and an off-CPU interval). */
static void sync_item(struct gen *g)
{
	struct ptg_record c = {.kind = PTG_REC_CUDA_CALL}, s = {.kind = PTG_REC_SCHED};
	uint64_t o1, o2, end;

	py_enter(g, g->py[6]);
	o1 = op_enter(g, OP_ITEM);
	o2 = op_enter(g, OP_LOCAL_SCALAR);
	c.sym = g->api[API_SYNC];
	c.ts = g->ts + between(100, 400);
	end = g->gpu_free[0] > c.ts ? g->gpu_free[0] + between(3000, 8000) : c.ts + 4000;
	c.dur = end - c.ts;
	c.ext = g->cur_ext;
	s.ts = c.ts + 1500;
	s.dur = end - 2000 > s.ts ? end - 2000 - s.ts : 0;
	s.aux[0] = PTG_SCHED_BLOCKED;
	s.aux[1] = (int64_t)between(3000, 30000);
	s.ext = g->cur_ext;
	g->ts = end;
	if (s.dur)
		main_rec(g, &s);
	main_rec(g, &c);
	op_exit(g, o2);
	op_exit(g, o1);
	py_exit(g);
}

static void optimizer_step(struct gen *g)
{
	static const int ops[] = {OP_FOREACH_MUL,  OP_FOREACH_ADD, OP_FOREACH_MUL, OP_FOREACH_ADD,
				  OP_FOREACH_SQRT, OP_FOREACH_ADD, OP_ZERO};
	size_t i;
	uint64_t o;

	py_enter(g, g->py[7]);
	py_enter(g, g->py[8]);
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		o = op_enter(g, ops[i]);
		kernel(g, ops[i] == OP_ZERO ? 11 : 10, 30000, 90000);
		op_exit(g, o);
	}
	py_exit(g);
	py_exit(g);
}

static void train_step(struct gen *g)
{
	uint64_t o;
	int l;

	py_enter(g, g->py[2]);		 /* train_step */
	g->ts += between(20000, 400000); /* Python work of its own: the GPU starves */
	copy_batch(g);
	py_enter(g, g->py[4]); /* model.forward */
	for (l = 0; l < NLAYERS; l++)
		layer_forward(g, l);
	py_exit(g);
	py_enter(g, g->py[5]); /* loss */
	o = op_enter(g, OP_CE);
	kernel(g, 9, 5000, 20000);
	op_exit(g, o);
	py_exit(g);
	py_enter(g, g->py[9]); /* loss.backward() */
	for (l = 0; l < NLAYERS; l++)
		layer_backward(g);
	py_exit(g);
	optimizer_step(g);
	sync_item(g);
	py_exit(g);
	g->steps++;
}

static void thread_name(struct gen *g, uint32_t tid, const char *name)
{
	struct ptg_record r = {.kind = PTG_REC_THREAD, .pid = PID, .tid = tid, .ts = g->ts};

	r.sym = trace_writer__sym(g->w, PTG_SYM_STRING, name, "", 0);
	put(g, &r);
}

static void register_syms(struct gen *g)
{
	static const char *const apis[NAPIS] = {"cudaLaunchKernel", "cudaMemcpyAsync",
						"cudaStreamSynchronize"};
	static const char *const fixed[] = {"<module>", "main",		"train_step", "to_device",
					    "forward",	"compute_loss", "item",	      "step",
					    "adam",	"backward",	"__next__",   "__getitem__",
					    "decode",	"augment",	"normalize",  "collate"};
	char name[64], file[64];
	size_t i;

	for (i = 0; i < NPYFUNCS; i++) {
		if (i < sizeof(fixed) / sizeof(fixed[0]))
			snprintf(name, sizeof(name), "%s", fixed[i]);
		else if (i == 20)
			snprintf(name, sizeof(name), "Module._call_impl");
		else if (i >= 30 && i < 30 + NLAYERS)
			snprintf(name, sizeof(name), "Block.forward");
		else
			snprintf(name, sizeof(name), "mod%zu.Helper%zu.method_%zu", i / 100, i / 10,
				 i);
		snprintf(file, sizeof(file), "/srv/app/pkg%zu/mod%zu.py", i / 400, i / 100);
		/* one symbol per layer: each Block.forward at its own line */
		g->py[i] = trace_writer__sym(g->w, PTG_SYM_PY_FUNC, name, file, 10 + (uint32_t)i);
	}
	for (i = 0; i < NOPS; i++)
		g->op[i] = trace_writer__sym(g->w, PTG_SYM_OP, op_names[i], "", 0);
	for (i = 0; i < NKERNELS; i++)
		g->kernel[i] = trace_writer__sym(g->w, PTG_SYM_KERNEL, kernel_names[i], "", 0);
	for (i = 0; i < NAPIS; i++)
		g->api[i] = trace_writer__sym(g->w, PTG_SYM_CUDA_API, apis[i], "", 0);
	g->memcpy_sym =
	    trace_writer__sym(g->w, PTG_SYM_STRING, "Memcpy HtoD (Pageable -> Device)", "", 0);
}

static int write_meta(struct gen *g)
{
	int err = 0;

	err = err ?: trace_writer__meta(g->w, "source", "bench/gen_trace (synthetic)");
	err = err ?: trace_writer__meta(g->w, "clock", "CLOCK_MONOTONIC");
	err = err ?: trace_writer__meta(g->w, "pid", "4242");
	err = err ?: trace_writer__meta(g->w, "start.monotonic_ns", "1000000000");
	err = err ?: trace_writer__meta(g->w, "start.realtime_ns", "1767225600000000000");
	return err;
}

static int generate(struct gen *g, const char *path)
{
	int err;

	err = trace_writer__open(path, &g->w);
	if (err)
		return err;
	g->ts = g->dl_ts = 1000000000ull;
	register_syms(g);
	err = write_meta(g);
	if (err)
		goto cleanup;
	thread_name(g, MAIN_TID, "python3");
	thread_name(g, LOADER_TID, "pt_data_worker");
	py_enter(g, g->py[0]);
	py_enter(g, g->py[1]);
	while (!g->err && g->written + 2 + g->ngpu + (g->ndl - g->dl_head) < g->target)
		train_step(g);
	py_exit(g);
	py_exit(g);
	while (g->dl_head < g->ndl)
		put(g, &g->dl[g->dl_head++]);
	flush_gpu(g);
	err = g->err;
cleanup:
	if (err) {
		trace_writer__abort(g->w);
		return err;
	}
	return trace_writer__close(g->w);
}

int main(int argc, char **argv)
{
	static struct gen g;
	const char *path = "ptg-gen.ptg";
	struct stat st;
	int c, err;

	g.target = 10000000;
	while ((c = getopt(argc, argv, "n:o:")) != -1) {
		if (c == 'n')
			g.target = strtoull(optarg, NULL, 0);
		else if (c == 'o')
			path = optarg;
		else {
			fprintf(stderr, "usage: gen_trace [-n RECORDS] [-o PATH]\n");
			return 2;
		}
	}
	err = generate(&g, path);
	free(g.dl);
	if (err || stat(path, &st)) {
		fprintf(stderr, "gen_trace: cannot write %s: %s\n", path,
			strerror(err ? -err : errno));
		return 1;
	}
	printf("{\"path\": \"%s\", \"records\": %llu, \"bytes\": %lld, \"steps\": %llu, "
	       "\"kernels\": %llu}\n",
	       path, (unsigned long long)g.written, (long long)st.st_size,
	       (unsigned long long)g.steps, (unsigned long long)g.kernels);
	return 0;
}
