// SPDX-License-Identifier: MIT
/*
 * Seed of fuzz/corpus/elf/: PyTorch's op entry points in miniature, for
 * opscan. Exported at::_ops::<op>::call symbols; one that gets its schema
 * name from findSchemaOrThrow (through the PLT, in rdx) in a callee, one that
 * ends in a tail call, and DT_NEEDED entries.
 */
struct handle {
	void *op[4]; /* returned in memory: this in rsi, name in rdx, overload in rcx */
};

extern struct handle
find_schema(void *self, const char *name,
	    const char *overload) __asm__("_ZN3c1010Dispatcher17findSchemaOrThrowEPKcS2_");
extern int redispatch(int x);

int addmm_call(int x) __asm__("_ZN2at4_ops5addmm4callERKNS_6TensorE");
int mul_call(int x) __asm__("_ZN2at4_ops3mul4callERKNS_6TensorE");
int relu_call(int x) __asm__("_ZN2at4_ops4relu4callERKNS_6TensorE");

static void *dispatcher;

__attribute__((noinline)) static void *create_addmm_typed_handle(void)
{
	return find_schema(dispatcher, "aten::addmm", "").op[0];
}

int addmm_call(int x)
{
	static void *op;

	if (!op)
		op = create_addmm_typed_handle();
	return x + (op != 0);
}

int mul_call(int x)
{
	return redispatch(x * 3);
}

int relu_call(int x)
{
	if (x < 0)
		return 0;
	return addmm_call(x) + mul_call(x);
}
