"""Shared helpers of the integration tests: run workloads, record them, read traces.

Traces are read through `ptrace-gpu dump`, the same reader every report uses.
"""
import collections
import faulthandler
import functools
import glob
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("PTG_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
BUILD = os.environ.get("PTG_BUILD_DIR", os.path.join(SRC, "build"))
PTG = os.environ.get("PTRACE_GPU", os.path.join(BUILD, "ptrace-gpu"))
WORKLOADS = os.path.join(SRC, "tests", "workloads")


def root_alone(path):
    """Whether only root can have written path: it and every directory above
    it owned by root and writable by neither group nor others (the rule
    ptrace-gpu applies to a library it makes a process load, user/base/trusted.c)."""
    p = os.path.realpath(path)
    while True:
        st = os.stat(p)
        if st.st_uid != 0 or st.st_mode & 0o022:
            return False
        if p == "/":
            return True
        p = os.path.dirname(p)


_stage = None


def trusted_dir():
    """A directory only root can have written, removed at exit: for the
    libraries ptrace-gpu loads, where the build tree is not root's alone."""
    global _stage
    if _stage is None:
        import atexit
        import shutil
        import tempfile
        where = next((d for d in ("/run", "/root", "/var/lib")
                      if os.path.isdir(d) and root_alone(d)), None)
        if where is None:
            raise unittest.SkipTest("no directory only root can write, for the test libraries")
        _stage = tempfile.mkdtemp(prefix="ptg-test-libs.", dir=where)
        os.chmod(_stage, 0o755)
        atexit.register(shutil.rmtree, _stage, True)
    return _stage


def trusted_lib(path):
    """path, a library of the build, where ptrace-gpu will load it (the CUPTI
    agent, inject's LIBRARY): itself in a build tree only root can write, else
    a copy in trusted_dir() (a build under /tmp is refused)."""
    import shutil
    if not os.path.exists(path) or root_alone(path):
        return path
    copy = os.path.join(trusted_dir(), os.path.basename(path))
    shutil.copyfile(path, copy)
    os.chmod(copy, 0o755)
    return copy


# record finds the agent next to ptrace-gpu; where the build is not root's
# alone it would refuse it, so the tests name a trusted copy
_agent = os.path.join(BUILD, "libptg_cupti.so")
if "PTG_CUPTI_AGENT" not in os.environ and os.path.exists(_agent) and os.getuid() == 0 \
        and not root_alone(_agent):
    os.environ["PTG_CUPTI_AGENT"] = trusted_lib(_agent)
# the same for the agent of record --in-process
_agent = os.path.join(BUILD, "libptg_pymon.so")
if "PTG_PYMON_AGENT" not in os.environ and os.path.exists(_agent) and os.getuid() == 0 \
        and not root_alone(_agent):
    os.environ["PTG_PYMON_AGENT"] = trusted_lib(_agent)
CHROOTS = os.environ.get("PTG_CHROOT_DIR", "/var/cache/ptrace-gpu/chroots")
PYENV = os.environ.get("PYENV_ROOT", "/root/.pyenv")

# name -> (where, executable there): "host", "pyenv" (the newest installed
# X.Y.* under $PYENV_ROOT) or a chroot of tools/make-chroots.sh. Debian's is
# static, non-PIE and stripped; pyenv's are PIE libpythons with full symbol
# tables; the chroots hold Debian's newer builds (trixie and forky with torch).
INTERPRETERS = {
    "debian-3.11": ("host", "/usr/bin/python3.11"),
    "pyenv-3.11": ("pyenv", "python3.11"),
    "pyenv-3.12": ("pyenv", "python3.12"),
    "pyenv-3.13": ("pyenv", "python3.13"),
    "trixie-3.13": ("trixie", "/usr/bin/python3.13"),
    "forky-3.14": ("forky", "/usr/bin/python3.14"),
    "sid-3.14": ("sid", "/usr/bin/python3.14"),
    "sid-3.15": ("sid", "/usr/bin/python3.15"),
}
# Interpreter-independent tests (ptg.once) run under this one.
ONCE = "debian-3.11"
# One interpreter of each CPython version, of both builds (static: Debian's;
# shared libpython: pyenv's) and both PyTorch generations: tests/CMakeLists.txt's
# PTG_PYTHONS_PER_VERSION, for only_on().
PER_VERSION = ("debian-3.11", "pyenv-3.12", "trixie-3.13", "forky-3.14", "sid-3.15")

# Runs argv[N+3:] in chroot $1 with the N host dirs $3.. bound at the same
# paths in it (so that a path means the same to the tests, the tracer and the
# target), in the mount namespace of `unshare --mount`: every mount is private
# to it and goes when the interpreter exits; only the empty mount points stay
# in the chroot. Only exec()s from unshare to the interpreter, no fork: the
# pid Popen returns is Python's.
_IN_CHROOT = """r=$1 n=$2
shift 2
mount -t proc proc "$r/proc" && mount -t sysfs -o ro sysfs "$r/sys" || exit 125
while [ "$n" -gt 0 ]; do
	mkdir -p "$r$1" && mount --bind "$1" "$r$1" || exit 125
	shift
	n=$((n - 1))
done
exec chroot "$r" "$@"
"""


def pyenv_exe(version, exe=None):
    """$PYENV_ROOT/versions/<newest version.*>/bin/<exe or pythonX.Y>, or None."""
    found = []
    for d in glob.glob(os.path.join(PYENV, "versions", version + ".*")):
        micro = os.path.basename(d)[len(version) + 1:]
        path = os.path.join(d, "bin", exe or "python" + version)
        if micro.isdigit() and os.access(path, os.X_OK):
            found.append((int(micro), path))
    return max(found)[1] if found else None


class Python:
    """One interpreter of INTERPRETERS, on the host or in a chroot.

    name ("pyenv-3.12"), version ((3, 12)), exe (its path as it sees it), root
    (its chroot, None on the host), missing (why it cannot run here, or None).
    str() is the name.
    """

    def __init__(self, name):
        if name not in INTERPRETERS:
            raise KeyError(f"unknown interpreter {name} (known: {' '.join(INTERPRETERS)})")
        where, exe = INTERPRETERS[name]
        self.name = name
        self.version = tuple(int(x) for x in name.rpartition("-")[2].split("."))
        self.root, self.missing = None, None
        if where == "pyenv":
            ver = name.rpartition("-")[2]
            self.exe = pyenv_exe(ver, exe)
            if not self.exe:
                self.exe = os.path.join(PYENV, "versions", ver + ".*", "bin", exe)
                self.missing = f"no pyenv version {ver}.* ({self.exe})"
        elif where == "host":
            self.exe = exe
            if not os.access(exe, os.X_OK):
                self.missing = f"{exe} not installed (tools/install-deps.sh)"
        else:
            self.exe, self.root = exe, os.path.join(CHROOTS, where)
            if not os.path.exists(os.path.join(self.root, ".ptg-ready")):
                self.missing = f"chroot {self.root} not built (tools/make-chroots.sh)"
            elif not os.access(self.root + exe, os.X_OK):
                self.missing = f"no {exe} in chroot {self.root}"

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"ptg.Python({self.name!r})"

    @staticmethod
    def shared():
        """The host dirs a chroot sees, at the same paths: the sources and the build."""
        dirs = [os.path.abspath(SRC)]
        build = os.path.abspath(BUILD)
        if os.path.commonpath([dirs[0], build]) != dirs[0]:
            dirs.append(build)
        return dirs

    def argv(self, *args):
        """The command that runs this interpreter with args (paths in them: see path())."""
        if self.root is None:
            return [self.exe, *args]
        dirs = self.shared()
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", _IN_CHROOT, "sh",
                self.root, str(len(dirs)), *dirs, self.exe, *args]

    def shell(self):
        """argv() as words for a shell script: f"exec {py.shell()} \"$@\"\n"."""
        return shlex.join(self.argv())

    def path(self, host_path):
        """A file of the host as this interpreter sees it: the same path, but
        in a chroot only those under shared() are there (ValueError)."""
        if self.root is not None:
            p = os.path.abspath(host_path)
            if not any(os.path.commonpath([d, p]) == d for d in self.shared()):
                raise ValueError(f"{host_path} is not visible in {self.name}'s chroot")
        return host_path

    def on_host(self, path):
        """A file this interpreter sees (outside shared()), as the host sees it."""
        return path if self.root is None else self.root + os.path.abspath(path)

    @functools.cached_property
    def has_torch(self):
        res = subprocess.run(self.argv("-c", "import torch"), capture_output=True)
        return res.returncode == 0


def selected(need_torch=False):
    """The interpreters to test: the one $PTG_PYTHON names, or every one here.

    One that is named and cannot run here (or lacks torch when needed) skips
    the whole test file: one line with the reason, exit status 77.
    """
    name = os.environ.get("PTG_PYTHON")
    if not name:
        found = [p for p in map(Python, INTERPRETERS) if not p.missing]
        return [p for p in found if p.has_torch or not need_torch]
    try:
        py = Python(name)
    except KeyError as e:
        print(f"PTG_PYTHON: {e.args[0]}", file=sys.stderr)
        sys.exit(2)
    reason = py.missing or (need_torch and not py.has_torch and f"no PyTorch in {py.exe}")
    if reason:
        print(f"skip: {name}: {reason}", flush=True)
        sys.exit(77)
    return [py]


ENTER_RESUME = 0x1
ENTER_PREEXISTING = 0x2
EXIT_YIELD = 0x1
EXIT_UNWIND = 0x2
EXIT_STOP = 0x4


class Workload:
    """A workload started with --wait: it says ready and blocks until go()."""

    def __init__(self, python, script, *args):
        self.proc = subprocess.Popen(
            python.argv(python.path(os.path.join(WORKLOADS, script)), "--wait", *args),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            self.proc.kill()
            raise RuntimeError(f"{script} did not start: {line!r}")
        self.pid = self.proc.pid

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, timeout=300):
        out = self.proc.stdout.read()
        self.proc.wait(timeout=timeout)
        return out

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self, rec=None):
        """Kills it if it still runs and closes its pipes, and rec's (a Recorder)."""
        self.kill()
        for f in (self.proc.stdin, self.proc.stdout, rec and rec.proc.stderr):
            if f:
                f.close()


class Recorder:
    """`ptrace-gpu record ARGS -o OUT`, returned once the probes are attached."""

    def __init__(self, args, out, **popen):
        self.proc = subprocess.Popen([PTG, "record", "-o", out, *args],
                                     stderr=subprocess.PIPE, text=True, **popen)
        self.lines = []
        while True:
            line = self.proc.stderr.readline()
            if not line:
                self.proc.wait()
                raise RuntimeError("record failed: " + "".join(self.lines))
            self.lines.append(line)
            if "recording pid" in line:
                break

    def wait(self, timeout=300):
        if not self.proc.stderr.closed:
            self.lines.append(self.proc.stderr.read())
            self.proc.stderr.close()
        return self.proc.wait(timeout=timeout)

    @property
    def stderr(self):
        return "".join(self.lines)


def run(args, **kw):
    return subprocess.run([PTG, *args], capture_output=True, text=True, **kw)


_SYM = re.compile(r"^(.*) \((.*):(\d+)\)$")
_FIELD = re.compile(r"^(dur|stream|corr|ext|aux\d|container_pid|container_tid)=")


class Record:
    __slots__ = ("ts", "pid", "tid", "kind", "flags", "fields", "name", "file", "line", "args")


class Trace:
    def __init__(self, path):
        res = run(["dump", path])
        if res.returncode != 0:
            raise RuntimeError(f"dump {path}: {res.stderr}")
        self.meta, self.losses, self.records = {}, [], []
        for line in res.stdout.splitlines():
            if line.startswith("# lost "):
                self.losses.append(line[7:])
            elif line.startswith("# "):
                key, _, value = line[2:].partition(": ")
                self.meta[key] = value
            else:
                self.records.append(self._parse(line))

    @staticmethod
    def _parse(line):
        # the hot loop of every test that reads a trace (millions of lines)
        ts, pidtid, kind, flags, *rest = line.split(" ", 4)
        r = Record()
        r.ts, r.kind, r.flags, r.fields = int(ts), kind, int(flags[6:], 16), {}
        pid, _, tid = pidtid.partition("/")
        r.pid, r.tid = int(pid), int(tid)
        rest = rest[0] if rest else ""
        while rest and _FIELD.match(rest):
            field, _, rest = rest.partition(" ")
            k, _, v = field.partition("=")
            r.fields[k] = int(v)
        # dump ends a line with the record's args blob, if any, after its symbol
        if not rest:
            r.name, r.file, r.line, r.args = "", "", 0, None
            return r
        sym, _, args = (" " + rest).partition(" args=")
        sym, r.args = sym[1:], args or None
        m = _SYM.match(sym) if sym.endswith(")") else None
        r.name, r.file, r.line = (m.group(1), m.group(2), int(m.group(3))) if m else (sym, "", 0)
        return r

    def calls(self):
        """Replays enter/exit per thread. Returns the list of closed segments:
        (tid, name, file, line, enter_ts, exit_ts, enter_flags, exit_flags, depth)
        and raises if the nesting is broken."""
        stacks = collections.defaultdict(list)
        out = []
        for r in self.records:
            if r.kind == "py_enter":
                stacks[r.tid].append(r)
            elif r.kind == "py_exit":
                st = stacks[r.tid]
                if not st:
                    raise AssertionError(f"exit without enter on tid {r.tid} at {r.ts}")
                e = st.pop()
                out.append((r.tid, e.name, e.file, e.line, e.ts, r.ts, e.flags, r.flags,
                            len(st)))
        for tid, st in stacks.items():
            if st:
                raise AssertionError(f"tid {tid}: {len(st)} frames never closed")
        return out

    def count(self, file_suffix=None, by_tid=False):
        """New calls per function name (qualname:firstline), resumptions excluded."""
        c = collections.Counter()
        for seg in self.calls():
            tid, name, file, line, _, _, eflags, _, _ = seg
            if eflags & ENTER_RESUME:
                continue
            if file_suffix and not file.endswith(file_suffix):
                continue
            key = f"{name}:{line}"
            c[(tid, key) if by_tid else key] += 1
        return c


def per_interpreter(cls=None, need_torch=False):
    """Turns each check_NAME(self, python) of cls into test_NAME_<interpreter>,
    python a Python, for the interpreters of selected(). Also
    @per_interpreter(need_torch=True): only those that import torch."""
    def wrap(cls):
        pythons = selected(need_torch)
        for attr in [a for a in vars(cls) if a.startswith("check_")]:
            for python in pythons:
                def test(self, check=getattr(cls, attr), python=python):
                    only = getattr(check, "only_on", None)
                    if only and python.name not in only[0]:
                        self.skipTest(f"runs on {', '.join(only[0])} only: {only[1]}")
                    check(self, python)
                suffix = re.sub(r"[^0-9a-zA-Z]", "_", python.name)
                setattr(cls, f"test_{attr[6:]}_{suffix}", test)
        return cls
    return wrap if cls is None else wrap(cls)


def only_on(names, why):
    """A check of a per_interpreter class that runs on the interpreters NAMES
    alone (skipped, saying WHY, on the others): what it tests depends on
    neither the CPython version nor the build beyond what NAMES cover, and
    running it on each one would cost CI minutes for no coverage."""
    def mark(check):
        check.only_on = (tuple(names), why)
        return check
    return mark


def once(cls):
    """For the interpreter-independent tests of a per-interpreter file: they
    run when it runs for ONE or for all, not again for each other one."""
    name = os.environ.get("PTG_PYTHON")
    if name and name != ONCE:
        return unittest.skip(f"runs under PTG_PYTHON={ONCE} only")(cls)
    return cls


def descendants(pid):
    """Every running descendant of pid, through all its threads."""
    out, pending = [], [pid]
    while pending:
        p = pending.pop()
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    kids = [int(k) for k in f.read().split()]
                out += kids
                pending += kids
        except OSError:
            pass
    return out


def end(*procs):
    """Kills what still runs of procs (Popen objects; None is skipped) and
    closes their pipes: a test's cleanup, whatever state it failed in."""
    procs = [p for p in procs if p is not None]
    # all are killed before any is waited for: a process traced by a recorder
    # that is stopped (SIGSTOP) is only reported to its parent once that
    # recorder is gone, so waiting for it first would wait for ever
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait()
        for f in (p.stdin, p.stdout, p.stderr):
            if f:
                f.close()


def oracle(python, script):
    """{function: calls} of a workload run alone by python with --oracle, as
    its own sys.setprofile hook counts them."""
    return json.loads(subprocess.run(
        python.argv(python.path(os.path.join(WORKLOADS, script)), "--oracle"),
        check=True, capture_output=True, text=True).stdout)


def as_oracle(counts, oracle_counts):
    """A trace's counts (Trace.count()) as the oracle counts: without the
    <module> frames it does not count (the module ran before its hook)."""
    return {k: v for k, v in counts.items()
            if k in oracle_counts or not k.startswith("<module>")}


def record_workloads(test, workloads, args, out):
    """`record -p A,B,.. ARGS -o OUT` of the started workloads (Workload): lets
    them go, waits for each to say "done" and for the recorder to exit 0, and
    cleans up whatever happened. Returns (the recorder's stderr, each
    workload's output)."""
    rec, printed = None, []
    try:
        rec = Recorder(["-p", ",".join(str(w.pid) for w in workloads), *args], out)
        for w in workloads:
            w.go()
        printed = [w.finish() for w in workloads]
        for text in printed:
            test.assertIn("done", text)
        test.assertEqual(rec.wait(), 0, rec.stderr)
    finally:
        for w in workloads:
            w.kill()
            w.proc.stdin.close()
            w.proc.stdout.close()
        if rec:
            rec.proc.stderr.close()
    return rec.stderr, printed


def killed_then_again(test, python, out, workload_args=(), rec_args=("--in-process",),
                      after_extra=None):
    """inproc_again.py WORKLOAD_ARGS under record REC_ARGS (--in-process, or
    the default's agent of ops alone): the first recorder killed with
    SIGKILL (the target goes on, the agent frees what it held), then a
    second one, stopped with SIGINT, writing OUT. Checks the workload's
    reports at each step; returns the target's pid."""
    w = Workload(python, "inproc_again.py", *workload_args)
    try:
        first = Recorder([*rec_args, "-p", str(w.pid)], out + ".killed")
        w.go()
        test.assertEqual(w.proc.stdout.readline().strip(), "phase1")
        first.proc.kill()
        first.proc.wait()
        w.go()
        after = json.loads(w.proc.stdout.readline())
        test.assertEqual(after, {"tools": {}, "fib20": 6765, **(after_extra or {})})
        second = Recorder([*rec_args, "-p", str(w.pid)], out)
        w.go()
        test.assertEqual(w.proc.stdout.readline().strip(), "phase2")
        second.proc.send_signal(signal.SIGINT)
        test.assertEqual(second.wait(), 0, second.stderr)
        w.go()
        test.assertEqual(json.loads(w.proc.stdout.readline()), {"tools": {}})
        test.assertIn("done", w.finish())
        test.assertEqual(w.proc.returncode, 0)
    finally:
        w.kill()
        for f in (w.proc.stdin, w.proc.stdout):
            if f:
                f.close()
    return w.pid


def cuda_counts(trace):
    """{pid: {api: calls}} of the trace's CUDA call records."""
    got = collections.defaultdict(collections.Counter)
    for r in trace.records:
        if r.kind == "cuda_call":
            got[r.pid][r.name] += 1
    return {pid: dict(c) for pid, c in got.items()}


@functools.lru_cache(maxsize=None)
def _libzstd():
    import ctypes
    import ctypes.util
    lib = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
    size_t, buf = ctypes.c_size_t, ctypes.c_char_p
    for name, args in (("ZSTD_compress", [buf, size_t, buf, size_t, ctypes.c_int]),
                       ("ZSTD_decompress", [buf, size_t, buf, size_t]),
                       ("ZSTD_compressBound", [size_t]), ("ZSTD_isError", [size_t])):
        getattr(lib, name).argtypes = args
        getattr(lib, name).restype = size_t if name != "ZSTD_isError" else ctypes.c_uint
    return lib


def chunk_payload(data, version, raw_len):
    """A .ptg chunk's stored bytes decompressed (docs/trace-format.md)."""
    import ctypes
    import zlib
    if version < 3:
        return zlib.decompress(data)
    out = ctypes.create_string_buffer(raw_len + 1)
    n = _libzstd().ZSTD_decompress(out, raw_len + 1, data, len(data))
    assert not _libzstd().ZSTD_isError(n) and n == raw_len, "chunk does not decompress"
    return out.raw[:n]


def chunk_store(payload, version):
    """A chunk's payload compressed as a file of that version stores it."""
    import ctypes
    import zlib
    if version < 3:
        return zlib.compress(payload)
    cap = _libzstd().ZSTD_compressBound(len(payload))
    out = ctypes.create_string_buffer(cap)
    n = _libzstd().ZSTD_compress(out, cap, payload, len(payload), 1)
    assert not _libzstd().ZSTD_isError(n), "ZSTD_compress failed"
    return out.raw[:n]


def go(proc):
    """Releases a workload that waits for a line on its stdin."""
    proc.stdin.write("go\n")
    proc.stdin.flush()


def close(proc):
    """Kills proc if it still runs, and closes its pipes."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for f in (proc.stdin, proc.stdout, proc.stderr):
        if f:
            f.close()


def proc_status(pid):
    """(State letter, TracerPid) of pid; (None, 0) once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            text = f.read()
    except OSError:
        return None, 0
    return (re.search(r"^State:\s+(\S)", text, re.M).group(1),
            int(re.search(r"^TracerPid:\s+(\d+)", text, re.M).group(1)))


def wait_until(pred, timeout=30.0):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


class TestHung(Exception):
    """A test ran past PTG_TEST_TIMEOUT: raised where it waited."""


def _watched(run):
    """unittest.TestCase.run with a deadline: a test that waits past it (a read
    of a pipe nobody closes, a wait on a process left stopped) fails there with
    its traceback, and every thread's stack is printed, instead of holding the
    whole file until ctest kills it with nothing said."""
    limit = int(os.environ.get("PTG_TEST_TIMEOUT", "240"))

    def expired(signum, frame):
        faulthandler.dump_traceback(file=sys.stderr)
        signal.alarm(30)  # its cleanup gets 30 s more, then is cut short too
        raise TestHung(f"test still running after {limit} s (PTG_TEST_TIMEOUT)")

    @functools.wraps(run)
    def wrapper(self, result=None):
        old = signal.signal(signal.SIGALRM, expired)
        signal.alarm(limit)
        try:
            return run(self, result)
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
    return wrapper


def main(testcase_module="__main__"):
    if os.geteuid() != 0:
        print("integration tests need root", file=sys.stderr)
        sys.exit(1)
    unittest.TestCase.run = _watched(unittest.TestCase.run)
    unittest.main(module=testcase_module, verbosity=2)
