/* SPDX-License-Identifier: MIT */
/*
 * Below launch.c (the main thread's stops): the stops of the other threads
 * of a held process and those every thread has (launch_threads.c). Only
 * launch__drop_new() and LAUNCH_FORK are for users of launch.h.
 */
#ifndef PTG_LAUNCH_THREADS_H
#define PTG_LAUNCH_THREADS_H

#include <stdbool.h>
#include <sys/types.h>

#define LAUNCH_FORK 3 /* it forked: *child is under ptrace from birth, pid runs on */

/*
 * A child born under ptrace (LAUNCH_FORK) that is not to be held: waits
 * for its first stop (it stops at once, seized) and lets it go.
 */
int launch__drop_new(pid_t pid);

#define SYSCALL_STOP (SIGTRAP | 0x80) /* with PTRACE_O_TRACESYSGOOD */

/* Waits for the next stop of pid (a clone there noted): 0, or -ECHILD when it ended. */
int launch_wait_stop(pid_t pid, int *status);
int launch_cont(pid_t tid, int request, int sig);
/* The signal a stop holds for the thread: none for events and system-call stops. */
int launch_stop_signal(int status);
/*
 * A fork stop of thread tid taken: it runs on, and *child (0 if unknown)
 * is under ptrace from birth. LAUNCH_FORK when there is a child, 0 when
 * not, -errno when it cannot be resumed.
 */
int launch_forked(pid_t tid, pid_t *child);
/* A stop that is no event of ours passed on: a group stop stays one, a signal goes on. */
int launch_pass_stop(pid_t tid, int status);
/* What launch_our_urg() did (apart from LAUNCH_* codes). */
#define URG_RESUMED 1
#define URG_LET_GO  16
#define URG_ENDED   17
/*
 * A SIGURG stop of thread tid of held process pid: URG_RESUMED when one of
 * ours (launch__on_urg()) and the thread resumed, URG_LET_GO when the
 * process was let go there (all its threads), URG_ENDED when it ended
 * meanwhile (*wstatus), 0 when it is not ours: the signal is the process's.
 * launch.c's launch_our_urg(), handed to threads_poll().
 */
typedef int (*launch_our_urg_fn)(pid_t pid, pid_t tid, int *wstatus);

/*
 * Every other thread of held process pid under ptrace too, with the main
 * thread's options (opts has PTRACE_O_TRACECLONE: the threads they start
 * are ours from birth). One that cannot be taken (gone, another tracer's)
 * runs on unheld.
 */
int threads_seize(pid_t pid, long opts);
/* A stop of thread tid of pid: at a clone, the new thread is one of pid's to handle. */
void threads_note_clone(pid_t pid, pid_t tid, int status);
/*
 * The stops of pid's other threads, without blocking: a signal passed on,
 * a SIGURG of ours handled (our_urg), a new thread taken in, an ended one
 * reaped. 0 when nothing is left to report; LAUNCH_FORK with *child (one
 * forked, under ptrace from birth); URG_LET_GO or URG_ENDED as our_urg.
 */
int threads_poll(pid_t pid, pid_t *child, int *wstatus, launch_our_urg_fn our_urg);
/* Lets go of pid's other threads but keep (stopped: the caller's to detach). */
void threads_release(pid_t pid, pid_t keep);
/* pid ended, or is let go: its threads are no more ours to handle. */
void threads_forget(pid_t pid);

#endif /* PTG_LAUNCH_THREADS_H */
