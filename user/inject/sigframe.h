/* SPDX-License-Identifier: MIT */
/*
 * The x86-64 signal frame that rt_sigreturn reads, built by the tracer for
 * a thread it holds: inject.c writes one below the borrowed thread's red
 * zone so that an rt_sigreturn over it puts the thread back as it was,
 * whatever happens to ptrace-gpu meanwhile.
 */
#ifndef PTG_SIGFRAME_H
#define PTG_SIGFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/user.h>

/* The kernel's struct ucontext and the siginfo after it in a frame. */
#define SIGFRAME_UC_ROOM 512

/* libc's signal trampoline, __restore_rt: mov $15,%rax; syscall */
extern const uint8_t sigframe_restorer_code[9];

/*
 * What the kernel does to a system call that a stop interrupted, when no
 * handler runs: back to the syscall instruction, to run it again; a call
 * with a restart block goes through restart_syscall when restart_block,
 * else starts over with its own arguments. orig_rax becomes -1.
 */
void sigframe_restart_regs(struct user_regs_struct *r, bool restart_block);

/*
 * Fills uc (SIGFRAME_UC_ROOM bytes, to be written at a 16-byte aligned
 * address) with regs (an interrupted system call set to start over), the
 * signal mask and fp_addr, the address of the XSAVE area.
 */
void sigframe_fill_ucontext(uint8_t *uc, const struct user_regs_struct *regs, uint64_t sigmask,
			    uint64_t fp_addr);

/*
 * Copies the XSAVE area from PTRACE_GETREGSET (len bytes) into fp (len + 4
 * bytes, to be written at a 64-byte aligned address) with the software
 * bytes and magic words rt_sigreturn checks, sized as the kernel sizes its
 * own frames for the thread (not the copy's length: see sigframe.c).
 * Returns the bytes used.
 */
size_t sigframe_fill_fpstate(uint8_t *fp, const void *xstate, size_t len);

#endif /* PTG_SIGFRAME_H */
