// SPDX-License-Identifier: MIT
/*
 * user/inject/sigframe.c: the frame read through glibc's own ucontext_t (an
 * independent statement of the kernel's layout), the restart rules, and the
 * XSAVE area's magic words. The frame against the real kernel is
 * tests/integration/test_kill_safe.py's.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>

#include "../../user/inject/sigframe.h"
#include "test.h"

#ifdef __x86_64__

#define SYSCALL_AT 0x401000ull /* where a thread stopped just after a syscall instruction */

static struct user_regs_struct regs_in_syscall(long nr, long ret)
{
	return (struct user_regs_struct){.rip = SYSCALL_AT, .orig_rax = nr, .rax = ret};
}

static void test_restart(void)
{
	struct user_regs_struct r;

	r = regs_in_syscall(SYS_read, -512); /* -ERESTARTSYS */
	sigframe_restart_regs(&r, true);
	ASSERT_EQ(r.rax, SYS_read, "ERESTARTSYS: the call again");
	ASSERT_EQ(r.rip, SYSCALL_AT - 2, "ERESTARTSYS: at the syscall instruction");
	ASSERT_EQ((long)r.orig_rax, -1, "no restart left to the kernel");
	r = regs_in_syscall(SYS_clock_nanosleep, -516); /* -ERESTART_RESTARTBLOCK */
	sigframe_restart_regs(&r, true);
	ASSERT_EQ(r.rax, SYS_restart_syscall, "restart block kept: restart_syscall");
	ASSERT_EQ(r.rip, SYSCALL_AT - 2, "restart block: at the syscall instruction");
	r = regs_in_syscall(SYS_clock_nanosleep, -516);
	sigframe_restart_regs(&r, false);
	ASSERT_EQ(r.rax, SYS_clock_nanosleep, "restart block emptied: the call again");
	r = regs_in_syscall(SYS_read, 5);
	sigframe_restart_regs(&r, true);
	ASSERT_EQ(r.rax, 5, "a call that ended keeps its result");
	ASSERT_EQ(r.rip, SYSCALL_AT, "and its rip");
	r = regs_in_syscall(SYS_read, -EINTR);
	sigframe_restart_regs(&r, true);
	ASSERT_EQ((long)r.rax, -EINTR, "EINTR is not restarted");
	r = regs_in_syscall(-1, -512);
	sigframe_restart_regs(&r, true);
	ASSERT_EQ((long)r.rax, -512, "not in a system call: rax as it is");
	ASSERT_EQ(r.rip, SYSCALL_AT, "not in a system call: rip as it is");
}

static void test_ucontext(void)
{
	struct user_regs_struct r = {.r8 = 8,
				     .r9 = 9,
				     .r10 = 10,
				     .r11 = 11,
				     .r12 = 12,
				     .r13 = 13,
				     .r14 = 14,
				     .r15 = 15,
				     .rdi = 21,
				     .rsi = 22,
				     .rbp = 23,
				     .rbx = 24,
				     .rdx = 25,
				     .rax = -514,
				     .rcx = 27,
				     .rsp = 0x7ffd0000,
				     .rip = SYSCALL_AT,
				     .eflags = 0x246,
				     .cs = 0x33,
				     .ss = 0x2b,
				     .orig_rax = SYS_poll};
	/* glibc's ucontext_t is larger: the kernel's part is what is filled */
	static union {
		uint8_t bytes[SIGFRAME_UC_ROOM];
		ucontext_t uc;
	} buf;
	const ucontext_t *uc = &buf.uc;
	const greg_t *g = uc->uc_mcontext.gregs;

	sigframe_fill_ucontext(buf.bytes, &r, 1ull << (SIGUSR2 - 1), 0x7ffc0040);
	ASSERT_EQ(uc->uc_flags, 0x6, "UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS");
	ASSERT_EQ(uc->uc_stack.ss_flags, SS_ONSTACK | SS_DISABLE, "invalid: sigaltstack kept");
	ASSERT_EQ(g[REG_R8], 8, "r8");
	ASSERT_EQ(g[REG_R15], 15, "r15");
	ASSERT_EQ(g[REG_RDI], 21, "rdi");
	ASSERT_EQ(g[REG_RBX], 24, "rbx");
	ASSERT_EQ(g[REG_RCX], 27, "rcx");
	ASSERT_EQ(g[REG_RSP], 0x7ffd0000, "rsp");
	ASSERT_EQ(g[REG_EFL], 0x246, "eflags");
	ASSERT_EQ(g[REG_RAX], SYS_poll, "-ERESTARTNOHAND: the call again");
	ASSERT_EQ(g[REG_RIP], SYSCALL_AT - 2, "at its syscall instruction");
	ASSERT_EQ(g[REG_CSGSFS] & 0xffff, 0x33, "cs");
	ASSERT_EQ((uint64_t)g[REG_CSGSFS] >> 48, 0x2b, "ss where the kernel reads it");
	ASSERT_EQ((uint64_t)uc->uc_mcontext.fpregs, 0x7ffc0040, "fpstate pointer");
	ASSERT_TRUE(sigismember(&uc->uc_sigmask, SIGUSR2) == 1, "mask: SIGUSR2");
	ASSERT_TRUE(sigismember(&uc->uc_sigmask, SIGUSR1) == 0, "mask: not SIGUSR1");
}

static uint32_t u32_at(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* The software bytes of the kernel's own signal frames on this machine. */
static struct _fpx_sw_bytes kernel_sw;

static void grab_sw(int sig, siginfo_t *info, void *ucv)
{
	ucontext_t *uc = ucv;

	(void)sig;
	(void)info;
	memcpy(&kernel_sw, (uint8_t *)uc->uc_mcontext.fpregs + 464, sizeof(kernel_sw));
}

static void test_fpstate(void)
{
	/* as long as a ptrace copy can be (AMX included), the header as a thread's */
	static _Alignas(64) uint8_t xs[16384], fp[16384 + 4];
	struct sigaction sa = {.sa_sigaction = grab_sw, .sa_flags = SA_SIGINFO}, old;
	struct _fpx_sw_bytes sw;
	uint64_t bv = 0x3; /* x87 and SSE in use */
	size_t n;

	for (size_t i = 0; i < sizeof(xs); i++)
		xs[i] = (uint8_t)i;
	ASSERT_EQ(sigframe_fill_fpstate(fp, xs, 512), 512, "legacy area: as it is");
	ASSERT_TRUE(!memcmp(fp, xs, 512), "legacy area copied");
	sigaction(SIGUSR1, &sa, &old);
	raise(SIGUSR1);
	sigaction(SIGUSR1, &old, NULL);
	if (kernel_sw.magic1 != FP_XSTATE_MAGIC1) {
		printf("sigframe: this kernel's frames have no XSAVE area: the rest skipped\n");
		return;
	}
	/* the ptrace copy's words there are XCR0 for debuggers, no magic */
	memset(xs + 464, 0, 48);
	memcpy(xs + 512, &bv, sizeof(bv));
	n = sigframe_fill_fpstate(fp, xs, sizeof(xs));
	memcpy(&sw, fp + 464, sizeof(sw));
	/* what rt_sigreturn accepts as a full area is what the kernel itself writes */
	ASSERT_EQ(sw.magic1, FP_XSTATE_MAGIC1, "magic1 made");
	ASSERT_EQ(sw.xstate_size, kernel_sw.xstate_size, "the kernel's size, not the copy's");
	ASSERT_EQ(sw.extended_size, kernel_sw.extended_size, "the kernel's extended size");
	ASSERT_EQ(sw.xstate_bv, kernel_sw.xstate_bv, "the kernel's features");
	ASSERT_EQ(n, (size_t)sw.xstate_size + 4, "bytes used: the area and magic2");
	ASSERT_EQ(u32_at(fp + sw.xstate_size), FP_XSTATE_MAGIC2, "magic2 after the area");
	ASSERT_TRUE(!memcmp(fp + 512, xs + 512, sw.xstate_size - 512), "registers copied");
}

int main(void)
{
	test_restart();
	test_ucontext();
	test_fpstate();
	return TEST_DONE();
}

#else

int main(void)
{
	printf("sigframe: x86-64 only\n");
	return 0;
}

#endif
