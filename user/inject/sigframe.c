// SPDX-License-Identifier: MIT
#include <cpuid.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>

#include "inject/sigframe.h"

#ifdef __x86_64__

/* The kernel's restart codes (include/linux/errno.h), in rax after a stop in a system call */
#define ERESTARTSYS_	       512
#define ERESTARTNOINTR_	       513
#define ERESTARTNOHAND_	       514
#define ERESTART_RESTARTBLOCK_ 516

/* UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS: ss is in the frame, restore it as is */
#define UC_FLAGS 0x6

/* Where the software bytes of a signal frame sit in the legacy FXSAVE area */
#define FX_SW_BYTES   464
#define FX_LEN	      512
#define XSAVE_HDR_LEN 64
/* AMX tile data: only in the area of a thread that asked for it (arch_prctl) */
#define XFEATURE_DYNAMIC (1ull << 18)

const uint8_t sigframe_restorer_code[9] = {0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05};

/* The kernel's struct ucontext on x86-64 (not glibc's ucontext_t, which is larger). */
struct kernel_ucontext {
	uint64_t flags;
	uint64_t link;
	stack_t stack;
	struct sigcontext mcontext;
	uint64_t sigmask;
};
_Static_assert(sizeof(struct kernel_ucontext) + 128 <= SIGFRAME_UC_ROOM, "room for a ucontext");

void sigframe_restart_regs(struct user_regs_struct *r, bool restart_block)
{
	long ret = (long)r->rax;

	if ((long)r->orig_rax >= 0) {
		if (ret == -ERESTARTSYS_ || ret == -ERESTARTNOINTR_ || ret == -ERESTARTNOHAND_) {
			r->rax = r->orig_rax;
			r->rip -= 2;
		} else if (ret == -ERESTART_RESTARTBLOCK_) {
			r->rax = restart_block ? SYS_restart_syscall : r->orig_rax;
			r->rip -= 2;
		}
	}
	/* no second restart by the kernel on the way back to user mode */
	r->orig_rax = (unsigned long long)-1;
}

void sigframe_fill_ucontext(uint8_t *uc, const struct user_regs_struct *regs, uint64_t sigmask,
			    uint64_t fp_addr)
{
	struct kernel_ucontext k = {.flags = UC_FLAGS, .sigmask = sigmask};
	struct user_regs_struct r = *regs;

	/* rt_sigreturn empties the restart block: a sleep starts over rather than fail with EINTR
	 */
	sigframe_restart_regs(&r, false);
	/* an invalid ss_flags: rt_sigreturn leaves the thread's sigaltstack as it is */
	k.stack.ss_flags = SS_ONSTACK | SS_DISABLE;
	k.mcontext = (struct sigcontext){
	    .r8 = r.r8,
	    .r9 = r.r9,
	    .r10 = r.r10,
	    .r11 = r.r11,
	    .r12 = r.r12,
	    .r13 = r.r13,
	    .r14 = r.r14,
	    .r15 = r.r15,
	    .rdi = r.rdi,
	    .rsi = r.rsi,
	    .rbp = r.rbp,
	    .rbx = r.rbx,
	    .rdx = r.rdx,
	    .rax = r.rax,
	    .rcx = r.rcx,
	    .rsp = r.rsp,
	    .rip = r.rip,
	    .eflags = r.eflags,
	    .cs = (unsigned short)r.cs,
	    .__pad0 = (unsigned short)r.ss, /* the kernel's ss (UC_SIGCONTEXT_SS) */
	};
	k.mcontext.__fpstate_word = fp_addr;
	memset(uc, 0, SIGFRAME_UC_ROOM);
	memcpy(uc, &k, sizeof(k));
}

/* XCR0: the state components the kernel enabled (valid once CPUID says OSXSAVE). */
static uint64_t xcr0(void)
{
	unsigned int a, b, c, d;
	uint32_t lo, hi;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
		return 0;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (uint64_t)hi << 32 | lo;
}

/* Where component set `features` ends in the standard (non-compacted) XSAVE layout. */
static size_t xsave_end(uint64_t features)
{
	size_t end = FX_LEN + XSAVE_HDR_LEN;

	for (unsigned int i = 2; i < 64; i++) {
		unsigned int size, offset, c, d;

		if (!(features >> i & 1) || !__get_cpuid_count(0xd, i, &size, &offset, &c, &d))
			continue;
		if (offset + size > end)
			end = offset + size;
	}
	return end;
}

/*
 * The software bytes are the kernel's test of a frame: a size above what
 * the thread may use makes it restore the legacy x87/SSE part alone and
 * reset the rest, AVX's upper halves included. The ptrace copy holds no
 * such bytes (its words there are XCR0 for debuggers) and is as long as
 * the largest area the CPU has, AMX tiles included, while a thread that
 * never asked for AMX may only use the default features. So the bytes are
 * made as the kernel makes them for its own frames: the enabled features
 * less the dynamic ones (AMX tile data) the area does not hold, and the
 * size they take.
 */
size_t sigframe_fill_fpstate(uint8_t *fp, const void *xstate, size_t len)
{
	struct _fpx_sw_bytes sw = {.magic1 = FP_XSTATE_MAGIC1};
	uint32_t magic2 = FP_XSTATE_MAGIC2;
	uint64_t bv = 0, enabled = xcr0();
	size_t size;

	memcpy(fp, xstate, len);
	if (len < FX_LEN + XSAVE_HDR_LEN || !enabled)
		return len < FX_LEN ? len : FX_LEN;
	memcpy(&bv, fp + FX_LEN, sizeof(bv));
	sw.xstate_bv = (enabled & ~XFEATURE_DYNAMIC) | (bv & XFEATURE_DYNAMIC);
	size = xsave_end(sw.xstate_bv);
	if (size > len)
		size = len;
	sw.xstate_size = (uint32_t)size;
	sw.extended_size = (uint32_t)size + FP_XSTATE_MAGIC2_SIZE;
	memcpy(fp + FX_SW_BYTES, &sw, sizeof(sw));
	memcpy(fp + size, &magic2, sizeof(magic2));
	return size + FP_XSTATE_MAGIC2_SIZE;
}

#endif /* __x86_64__ */
