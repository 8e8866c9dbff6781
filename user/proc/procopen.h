/* SPDX-License-Identifier: MIT */
/*
 * Opening a target's files as root without letting the target choose what
 * we open. A path in /proc/PID/maps, or one built under /proc/PID/root, is
 * the target's to change: a FIFO there would hang us in open(), a link
 * would hand us a tty, a device or a host file. So objects are reached
 * through /proc/PID/map_files (the mapping itself) or openat2() inside the
 * target's root, always as O_PATH (which opens nothing: no FIFO blocks, no
 * device sees an open), and kept only when fstat() says they are what was
 * asked for. What is refused is counted and said.
 */
#ifndef PTG_PROCOPEN_H
#define PTG_PROCOPEN_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "proc/procfs.h"

/*
 * An O_PATH fd of the file mapped at m (a line of pid's maps): a regular
 * file whose device and inode are the line's. Through map_files where we
 * may (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), else by its path inside
 * the target's root with no symbolic link followed. -ENOENT/-ESRCH when the
 * mapping or process is gone; -EPERM (not a regular file) or -ESTALE
 * (another file) when refused, said once per object and counted.
 */
int proc_map_open(pid_t pid, const struct proc_map *m);
/*
 * An O_PATH fd of path (absolute, as the target names it) inside pid's root
 * by openat2(RESOLVE_IN_ROOT): ".." and absolute links stay inside that
 * root; follow = false refuses every symbolic link. Regular files only
 * (dir: directories only), -EPERM for any other type; -EACCES for one the
 * target itself could not read (by its mode bits), where a link of its own
 * led us.
 */
int proc_root_open(pid_t pid, const char *path, bool follow, bool dir);
/* The directory path inside pid's root, as proc_root_open(follow) finds it, to read. */
DIR *proc_root_opendir(pid_t pid, const char *path);
/* Whether path inside pid's root, links followed inside it, is a regular file (dir: a folder). */
bool proc_root_is(pid_t pid, const char *path, bool dir);
/* An fd for reading of what pathfd (O_PATH, checked) names: O_NONBLOCK, O_NOCTTY. */
int proc_fd_reopen(int pathfd);
/*
 * "/proc/self/fd/N" of fd: a path that the kernel, libelf and libbpf resolve
 * to exactly that inode (a uprobe attached through it sits on that file).
 */
void proc_fd_path(int fd, char *buf, size_t len);
/*
 * Keeps fd open until we exit (one per file: a second fd of a kept file is
 * closed) and writes its proc_fd_path(): for a path given to whatever may
 * open it later, after the target exited. Takes fd in any case; 0 or -errno.
 */
int proc_keep_fd(int fd, char *buf, size_t len);
/* proc_map_open(), then proc_keep_fd(). */
int proc_map_path(pid_t pid, const struct proc_map *m, char *buf, size_t len);
/* proc_root_open() of a regular file, then proc_keep_fd(). */
int proc_root_path(pid_t pid, const char *path, bool follow, char *buf, size_t len);
/*
 * How many files were refused so far, each said (mapped objects that are not
 * the mapped file, or not regular; files the target may not read).
 */
unsigned long proc_open_refusals(void);

#endif /* PTG_PROCOPEN_H */
