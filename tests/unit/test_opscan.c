// SPDX-License-Identifier: MIT
/*
 * opscan on Debian's libtorch_cpu.so (python3-torch 1.13.1) when installed:
 * the op count, names as torch.profiler prints them, and exit sites that the
 * disassembly must find. Without the library only the symbol parser runs.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/types.h>
#include "ptrace_gpu/events.h"
#include "test.h"
#include "torch/opscan.h"

#define LIBTORCH "/usr/lib/python3/dist-packages/torch/lib/libtorch_cpu.so"

static void test_symbol_names(void)
{
	char buf[64];

	ASSERT_EQ(opscan_name_from_symbol("_ZN2at4_ops5addmm4callERKNS_6TensorE", buf, sizeof(buf)),
		  0, "addmm parses");
	ASSERT_STREQ(buf, "aten::addmm", "addmm fallback name");
	ASSERT_EQ(
	    opscan_name_from_symbol("_ZN2at4_ops10add_Tensor4callERKNS_6TensorE", buf, sizeof(buf)),
	    0, "add_Tensor parses");
	ASSERT_STREQ(buf, "aten::add_Tensor", "the fallback keeps the overload suffix");
	ASSERT_TRUE(opscan_name_from_symbol("_ZN2at4_ops5addmm10redispatchE", buf, sizeof(buf)),
		    "redispatch is not an entry point");
	ASSERT_TRUE(opscan_name_from_symbol("_ZN2at4_ops99addmm4callE", buf, sizeof(buf)),
		    "a length past the end is rejected");
}

static const struct opscan_op *find_op(const struct opscan *s, const char *name)
{
	for (size_t i = 0; i < s->nops; i++) {
		if (!strcmp(s->ops[i].name, name))
			return &s->ops[i];
	}
	return NULL;
}

static void test_libtorch(void)
{
	size_t entries = 0, rets = 0, checks = 0, tails = 0, linear = 0;
	struct opscan *s = NULL;

	if (access(LIBTORCH, R_OK)) {
		printf("no %s: skipping the library checks\n", LIBTORCH);
		return;
	}
	if (!ASSERT_EQ(opscan__run(LIBTORCH, &s), 0, "scan libtorch_cpu"))
		return;
	printf("libtorch_cpu: %u ops, %u rets (%u probed at their stack check), %u tail jumps, "
	       "%u without exit, %u unnamed, %u conditional tail jumps, %u sites single-stepped, "
	       "%.3f s\n",
	       s->st.ops, s->st.rets, s->st.checks, s->st.tails, s->st.no_exit, s->st.unnamed,
	       s->st.cond_tails, s->st.stepped, s->st.elapsed_ns / 1e9);
	ASSERT_EQ(s->st.ops, 2952, "at::_ops::<op>::call functions");
	ASSERT_EQ(s->st.unnamed, 0, "every op named by its findSchemaOrThrow call");
	ASSERT_EQ(s->st.no_exit, 0, "every op has an exit site");
	ASSERT_EQ(s->st.cond_tails, 0, "no conditional tail calls");
	ASSERT_TRUE(find_op(s, "aten::addmm") != NULL, "aten::addmm");
	ASSERT_TRUE(find_op(s, "aten::linear") != NULL, "aten::linear");
	ASSERT_TRUE(find_op(s, "aten::native_layer_norm") != NULL, "underscores kept");
	ASSERT_TRUE(find_op(s, "aten::add_Tensor") == NULL, "overload names dropped");
	ASSERT_TRUE(find_op(s, "aten::add") != NULL, "aten::add");
	for (size_t i = 0; i < s->nsites; i++) {
		entries += s->sites[i].site == PTG_OP_SITE_ENTRY;
		rets += s->sites[i].site == PTG_OP_SITE_RET;
		checks += s->sites[i].site == PTG_OP_SITE_CHECK;
		tails += s->sites[i].site == PTG_OP_SITE_TAIL;
	}
	ASSERT_EQ(entries, s->st.ops, "one entry site per op");
	ASSERT_EQ(rets + checks, s->st.rets, "one exit site per ret");
	ASSERT_EQ(checks, s->st.checks, "stack-check sites");
	ASSERT_EQ(tails, s->st.tails, "tail sites");
	/* measured with objdump: 2951 ops end in one ret, _cudnn_rnn_backward_out in a tail jump */
	ASSERT_EQ(s->st.rets, 2951, "rets");
	/* every ret of 1.13 follows a stack-protector check: none is probed out of line */
	ASSERT_EQ(s->st.checks, 2951, "rets probed at their stack check");
	ASSERT_EQ(s->st.tails, 1, "tail jumps");
	/*
	 * entries on a push, exits on a stack check's jne and one relative jmp:
	 * the kernel emulates every site (PyTorch 2.11's pip wheel: one ret per
	 * op single-stepped, docs/gpu.md)
	 */
	ASSERT_EQ(s->st.stepped, 0, "sites single-stepped");
	/* .text is mapped at file offset == vaddr in this library */
	for (size_t i = 0; i < s->nops; i++)
		linear += s->sites[0].offset != 0 && s->ops[i].addr != 0;
	ASSERT_EQ(linear, s->nops, "ops have addresses");
	opscan__free(s);
}

int main(void)
{
	test_symbol_names();
	test_libtorch();
	return TEST_DONE();
}
