// SPDX-License-Identifier: MIT
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>

#include "sigframe.h"

#ifdef __x86_64__

/* The kernel's restart codes (include/linux/errno.h), in rax after a stop in a system call */
#define ERESTARTSYS_	       512
#define ERESTARTNOINTR_	       513
#define ERESTARTNOHAND_	       514
#define ERESTART_RESTARTBLOCK_ 516

/* UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS: ss is in the frame, restore it as is */
#define UC_FLAGS 0x6

/* Where the software bytes of a signal frame sit in the legacy FXSAVE area */
#define FX_SW_BYTES 464
#define FX_LEN	    512

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

/*
 * The ptrace copy has the software bytes of a signal frame already (the
 * kernel's own view of the size); without them they are made from the
 * XSAVE header. magic2 goes after the size they give. An area without
 * XSAVE (legacy FXSAVE only) is restored by the kernel as such.
 */
size_t sigframe_fill_fpstate(uint8_t *fp, const void *xstate, size_t len)
{
	struct _fpx_sw_bytes sw;
	uint32_t magic2 = FP_XSTATE_MAGIC2;

	memcpy(fp, xstate, len);
	if (len <= FX_LEN)
		return len;
	memcpy(&sw, fp + FX_SW_BYTES, sizeof(sw));
	if (sw.magic1 != FP_XSTATE_MAGIC1 || sw.xstate_size > len || sw.xstate_size <= FX_LEN) {
		sw.magic1 = FP_XSTATE_MAGIC1;
		sw.xstate_size = (uint32_t)len;
		memcpy(&sw.xstate_bv, fp + FX_LEN, sizeof(sw.xstate_bv));
	}
	sw.extended_size = sw.xstate_size + FP_XSTATE_MAGIC2_SIZE;
	memcpy(fp + FX_SW_BYTES, &sw, sizeof(sw));
	memcpy(fp + sw.xstate_size, &magic2, sizeof(magic2));
	return sw.xstate_size + FP_XSTATE_MAGIC2_SIZE;
}

#endif /* __x86_64__ */
