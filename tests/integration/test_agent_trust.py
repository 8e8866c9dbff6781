"""The CUPTI agent is code that ptrace-gpu, as root, makes other processes
run: it loads only a file that no one but root can have written, every
process loads the very bytes that were checked, and the agent's socket
takes records from the target alone.
"""
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ptg  # noqa: E402
import test_inject as ti  # noqa: E402

BUILD = ptg.BUILD
NOBODY = 65534

# Swaps the link it is given to another library, then runs the GPU target:
# by then record has checked the link, so what loads must be what it checked.
SWAP = """
import os, runpy, sys
link, other = sys.argv[1], sys.argv[2]
os.unlink(link)
os.symlink(other, link)
print("injection", os.environ["CUDA_INJECTION64_PATH"], flush=True)
sys.argv = sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


# Connects to the abstract socket argv[1], sends stdin (a valid agent session),
# and says whether the loader closes the connection while it is recording.
CONNECT = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\\0" + sys.argv[1])
s.settimeout(10)
try:
    s.sendall(sys.stdin.buffer.read())
    closed = s.recv(1) == b""
except (BrokenPipeError, ConnectionResetError):
    closed = True
except socket.timeout:
    closed = False
print("closed" if closed else "open", flush=True)
"""
# Opens argv[2] connections to the abstract socket argv[1] and says how many
# the loader closed.
FLOOD = """
import socket, sys, time
socks = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\\0" + sys.argv[1])
    socks.append(s)
closed = 0
for s in socks:
    s.settimeout(10)
    try:
        closed += s.recv(1) == b""
    except (BrokenPipeError, ConnectionResetError):
        closed += 1
    except socket.timeout:
        pass
print(closed, flush=True)
"""
# Runs argv[2:] once the file argv[1] exists.
GATED = """
import os, runpy, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
# The command of record -- is a peer the loader accepts: as an agent that
# lies, it sends the HELLO of a real session (stdin), a STATUS with terminal
# escapes, then a kernel name for pointer 0, and says whether it was closed.
HOSTILE = """
import os, socket, struct, sys
hello = sys.stdin.buffer.read()[:24]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\\0" + os.environ["PTG_CUPTI_SOCKET"])
text = b"\\x1b[31mred\\x07"
s.sendall(hello + struct.pack("=IIii", 2, 8 + len(text), 3, 0) + text)
s.sendall(struct.pack("=IIQ", 4, 9, 0) + b"k")
s.settimeout(10)
try:
    closed = s.recv(1) == b""
except (BrokenPipeError, ConnectionResetError):
    closed = True
except socket.timeout:
    closed = False
print("closed" if closed else "open", flush=True)
"""
SESSION = os.path.join(ptg.SRC, "fuzz", "corpus", "agent_proto", "session.bin")
# Waits in a read as a user namespace's root (nobody outside) that put the
# directory argv[1] (root's, 0755) at its /tmp and a tmpfs at its /proc, which
# rules out the memfd.
USERNS_TARGET = """
import sys
print("ready", flush=True)
sys.stdin.read()
"""


def watch_creates(path):
    """An inotify descriptor that sees anything made or moved into path."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0 or libc.inotify_add_watch(fd, path.encode(), 0x100 | 0x80) < 0:
        raise OSError(ctypes.get_errno(), "inotify")
    return fd


def created(fd):
    try:
        return len(os.read(fd, 65536)) > 0
    except BlockingIOError:
        return False


@ptg.once
class TestAgentTrust(unittest.TestCase):
    setUpClass = ti.TestAgent.__dict__["setUpClass"]
    tearDownClass = ti.TestAgent.__dict__["tearDownClass"]
    argv = ti.TestAgent.argv
    start_target = ti.TestAgent.start_target

    def setUp(self):
        # root's, 0755, in a root-only tree: a place where an agent is trusted
        where = BUILD if ptg.root_alone(BUILD) else ptg.trusted_dir()
        self.dir = tempfile.mkdtemp(prefix="agent-trust.", dir=where)
        os.chmod(self.dir, 0o755)
        self.out = os.path.join(self.dir, "out.ptg")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            for f in (p.stdin, p.stdout):
                if f:
                    f.close()
        shutil.rmtree(self.dir)

    def agent_copy(self, where, mode=0o755, uid=0):
        dst = os.path.join(where, "libptg_cupti.so")
        shutil.copyfile(ti.AGENT, dst)
        os.chmod(dst, mode)
        os.chown(dst, uid, 0)
        return dst

    def subdir(self, name, mode=0o755, uid=0):
        d = os.path.join(self.dir, name)
        os.mkdir(d)
        os.chmod(d, mode)
        os.chown(d, uid, 0)
        return d

    def record_cmd(self, agent, *cmd, **kw):
        kw = dict(dict(capture_output=True, text=True, timeout=120), **kw)
        return subprocess.run([ptg.PTG, "record", "-o", self.out, "--", *cmd],
                              env=dict(self.env, PTG_CUPTI_AGENT=agent), **kw)

    def test_default_agent_refused_records_anyway(self):
        """The agent found next to ptrace-gpu, in a place others can write: a warning, no
        GPU activity, and the recording goes on (only the agent a user names is an error)."""
        where = tempfile.mkdtemp(prefix="ptg-untrusted.", dir="/tmp")
        self.addCleanup(shutil.rmtree, where)
        os.chmod(where, 0o777)
        exe = os.path.join(where, "ptrace-gpu")
        shutil.copy2(ptg.PTG, exe)
        shutil.copy2(ti.AGENT, os.path.join(where, "libptg_cupti.so"))
        env = {k: v for k, v in os.environ.items() if k != "PTG_CUPTI_AGENT"}
        res = subprocess.run([exe, "record", "-q", "-o", self.out, "--",
                              *self.python.argv("-c", "print(6 * 7)")],
                             capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(res.stdout, "42\n")
        self.assertIn(f"ptrace-gpu: warning: no usable CUPTI agent: {where} is writable by "
                      "others (mode 0777)", res.stderr)
        self.assertGreater(os.path.getsize(self.out), 0)

    def test_refused(self):
        """Each file someone else could have written: one line, no recording, no command."""
        fifo = os.path.join(self.subdir("fifo"), "libptg_cupti.so")
        os.mkfifo(fifo, 0o644)
        link = os.path.join(self.dir, "link.so")
        os.symlink(self.agent_copy(self.subdir("open", mode=0o777)), link)
        cases = [
            (self.agent_copy(self.subdir("nobody"), uid=NOBODY),
             "libptg_cupti.so is owned by uid 65534, not by root"),
            (self.agent_copy(self.subdir("group"), mode=0o775),
             "libptg_cupti.so is writable by its group (mode 0775)"),
            (self.agent_copy(self.subdir("others"), mode=0o646),
             "libptg_cupti.so is writable by others (mode 0646)"),
            (self.agent_copy(self.subdir("sticky-others", mode=0o1777), uid=NOBODY),
             "libptg_cupti.so is owned by uid 65534, not by root"),
            (self.agent_copy(self.subdir("dir-nobody", uid=NOBODY)),
             "/dir-nobody is owned by uid 65534, not by root"),
            # the link is root's, in a root-only directory: what counts is where it leads
            (link, "/open is writable by others (mode 0777)"),
            (os.path.join(self.dir, "missing.so"), "No such file or directory"),
            (self.subdir("adir"), "is not a regular file"),
            (fifo, "is not a regular file"),
        ]
        marker = os.path.join(self.dir, "ran")
        for agent, why in cases:
            with self.subTest(agent=agent):
                res = self.record_cmd(agent, "touch", marker)
                self.assertNotEqual(res.returncode, 0)
                lines = res.stderr.splitlines()
                self.assertEqual(len(lines), 1, res.stderr)
                self.assertTrue(lines[0].startswith(
                    f"ptrace-gpu: refusing the CUPTI agent {agent} ($PTG_CUPTI_AGENT): "),
                    lines[0])
                self.assertIn(why, lines[0])
                self.assertFalse(os.path.exists(marker), "the command ran")
                self.assertFalse(os.path.exists(self.out), "a trace was written")

    def test_sticky_parent(self):
        """Root's agent in root's directory inside a sticky one others write (/tmp, or
        one like it): nobody else can rename or remove it there, so it is used."""
        tmp = tempfile.mkdtemp(prefix="ptg-agent-trust.", dir="/tmp")
        os.chmod(tmp, 0o755)
        self.addCleanup(shutil.rmtree, tmp)
        marker = os.path.join(self.dir, "ran")
        for agent in (self.agent_copy(self.subdir("sticky", mode=0o1777)), self.agent_copy(tmp)):
            with self.subTest(agent=agent):
                res = self.record_cmd(agent, "touch", marker)
                self.assertEqual(res.returncode, 0, res.stderr)
                self.assertNotIn("refusing", res.stderr)
                self.assertNotIn("no usable CUPTI agent", res.stderr)
                self.assertTrue(os.path.exists(marker), "the command did not run")
                os.unlink(marker)

    def test_trusted_link_swapped(self):
        """A link swapped after the check: the command still loads the agent checked."""
        link = os.path.join(self.subdir("links"), "agent.so")
        os.symlink(self.agent_copy(self.subdir("real")), link)
        swap = os.path.join(self.dir, "swap.py")
        with open(swap, "w") as f:
            f.write(SWAP)
        res = self.record_cmd(link, *self.python.argv(swap, link, ti.MARKER_LIB,
                                                      *self.argv("launch", 20, 5)[1:]))
        self.assertEqual(res.returncode, 0, res.stderr)
        lines = res.stdout.splitlines()
        self.assertEqual(os.readlink(link), ti.MARKER_LIB, "the link was not swapped")
        injected = lines[0].split(" ", 1)[1]
        self.assertNotEqual(injected, link)
        self.assertNotIn(os.path.dirname(injected), (self.dir, os.path.dirname(link)))
        self.assertFalse(os.path.exists(injected), "the copy outlived the recording")
        self.assertIn("state 106", lines)
        self.assertIn("GPU: 20 kernels", res.stderr)
        pid = int(ti.read_trace(self.out).meta["pid"])
        marker = f"/tmp/ptg-inject-marker.{pid}"
        self.assertFalse(os.path.exists(marker), "the swapped-in library ran")

    def test_attach_twice_one_copy(self):
        """record -p twice: the agent comes in a memfd of the target's own, and the second
        finds the first loaded."""
        p = self.start_target("loop", 0, 0)
        env = dict(self.env, PTG_CUPTI_AGENT=self.agent_copy(self.dir))
        for _ in range(2):
            rec = ptg.Recorder(["-p", str(p.pid), "-d", "1"], self.out, env=env)
            self.assertEqual(rec.wait(), 0, rec.stderr)
            kernels = sum(r.kind == "kernel" for r in ti.read_trace(self.out).records)
            self.assertGreater(kernels, 10)
        with open(f"/proc/{p.pid}/maps") as f:
            maps = [line.split() for line in f if "libptg_cupti" in line]
        p.stdin.write("stop\n")
        p.stdin.flush()
        self.assertEqual(p.wait(timeout=30), 0)
        self.assertEqual(len({m[4] for m in maps}), 1, maps)
        self.assertTrue(all(m[-1] == "(deleted)" for m in maps), maps)
        self.assertTrue(all(m[5].startswith("/memfd:ptg-") for m in maps), maps)

    def test_attach_in_chroot(self):
        """A target in another mount namespace and root: it loads the agent from a memfd of
        its own, and nothing is left in its /tmp."""
        py = ptg.Python("trixie-3.13")
        if py.missing:
            self.skipTest(py.missing)
        tmp = py.on_host("/tmp")
        before = {d for d in os.listdir(tmp) if d.startswith("ptg-")}
        # what the target loads itself must be inside the chroot: under the build tree
        vis = tempfile.mkdtemp(prefix="agent-chroot.", dir=BUILD)
        os.chmod(vis, 0o755)
        self.addCleanup(shutil.rmtree, vis)
        stub = os.path.join(vis, "libcuda.so")
        shutil.copyfile(self.stub, stub)
        shutil.copyfile(ti.FAKE_CUPTI, os.path.join(vis, "libcupti.so.13"))
        script = os.path.join(vis, "gpu_target.py")
        shutil.copyfile(self.script, script)
        p = subprocess.Popen(py.argv(script, "loop", "0", "0", stub), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, LD_LIBRARY_PATH=vis))
        self.procs.append(p)
        self.assertEqual(p.stdout.readline(), "ready\n")
        rec = ptg.Recorder(["-p", str(p.pid), "-d", "1.5"], self.out)
        self.assertEqual(rec.wait(), 0, rec.stderr)
        with open(f"/proc/{p.pid}/maps") as f:
            maps = {line.split()[5] for line in f if "libptg_cupti" in line}
        p.stdin.write("stop\n")
        p.stdin.flush()
        self.assertEqual(p.wait(timeout=30), 0)
        self.assertIn(f"recording GPU activity of pid {p.pid}", rec.stderr)
        kernels = sum(r.kind == "kernel" for r in ti.read_trace(self.out).records)
        self.assertGreater(kernels, 10)
        self.assertEqual(len(maps), 1, maps)
        self.assertTrue(maps.pop().startswith("/memfd:ptg-"), "not from a memfd")
        self.assertEqual({d for d in os.listdir(tmp) if d.startswith("ptg-")}, before,
                         "the copy was left in the chroot")

    def test_attach_not_root(self):
        """A target of another user: it can read the copy (even under root's umask 077),
        and its agent, of its uid, is accepted."""
        p = subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                              "--clear-groups", *self.argv("loop", 0, 0)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=self.env)
        self.procs.append(p)
        self.assertEqual(p.stdout.readline(), "ready\n")
        rec = ptg.Recorder(["-p", str(p.pid), "-d", "1.5"], self.out, umask=0o077)
        self.assertEqual(rec.wait(), 0, rec.stderr)
        p.stdin.write("stop\n")
        p.stdin.flush()
        self.assertEqual(p.wait(timeout=30), 0)
        self.assertIn(f"recording GPU activity of pid {p.pid}", rec.stderr)
        self.assertNotIn("not the target", rec.stderr)
        kernels = sum(r.kind == "kernel" for r in ti.read_trace(self.out).records)
        self.assertGreater(kernels, 10)

    def test_attach_other_pid_namespace(self):
        """A target that is pid 1 of its own PID namespace: found and accepted by its pid here."""
        u = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc",
                              *self.argv("loop", 0, 0)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=self.env)
        self.procs.append(u)
        self.assertEqual(u.stdout.readline(), "ready\n")
        with open(f"/proc/{u.pid}/task/{u.pid}/children") as f:
            pid = int(f.read().split()[0])
        with open(f"/proc/{pid}/status") as f:
            nspid = next(line.split()[1:] for line in f if line.startswith("NSpid:"))
        self.assertEqual(nspid, [str(pid), "1"])
        rec = ptg.Recorder(["-p", str(pid), "-d", "1.5"], self.out)
        self.assertEqual(rec.wait(), 0, rec.stderr)
        u.stdin.write("stop\n")
        u.stdin.flush()
        self.assertEqual(u.wait(timeout=30), 0)
        self.assertIn(f"recording GPU activity of pid {pid}", rec.stderr)
        self.assertNotIn("not the target", rec.stderr)
        kernels = [r for r in ti.read_trace(self.out).records if r.kind == "kernel"]
        self.assertGreater(len(kernels), 10)
        self.assertEqual({r.pid for r in kernels}, {pid})

    def attach_noexec(self, noexec, procfs=True):
        """record -p of a target that sees the directories noexec mounted noexec (and
        a tmpfs at /proc unless procfs, which rules out the memfd); its stderr and the
        paths of the agent mapped in the target."""
        shutil.copyfile(ti.FAKE_CUPTI, os.path.join(self.dir, "libcupti.so.13"))
        script = os.path.join(self.dir, "gpu_target.py")
        shutil.copyfile(self.script, script)
        mounts = " && ".join([f"mount -t tmpfs -o noexec tmpfs {d}" for d in noexec] +
                             ([] if procfs else ["mount -t tmpfs tmpfs /proc"]))
        p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                              mounts + ' && exec "$@"', "sh",
                              *self.python.argv(script, "loop", "0", "0", self.stub)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, LD_LIBRARY_PATH=self.dir))
        self.procs.append(p)
        self.assertEqual(p.stdout.readline(), "ready\n")
        rec = ptg.Recorder(["-p", str(p.pid), "-d", "0.5"], self.out)
        self.assertEqual(rec.wait(), 0, rec.stderr)
        with open(f"/proc/{p.pid}/maps") as f:
            maps = {line.split()[5] for line in f if "libptg_cupti" in line}
        p.stdin.write("stop\n")
        p.stdin.flush()
        self.assertEqual(p.wait(timeout=30), 0)
        return p.pid, rec.stderr, maps

    def test_attach_noexec_memfd(self):
        """Every candidate directory of the target is noexec: the memfd does not care."""
        pid, stderr, maps = self.attach_noexec(["/tmp", "/dev/shm", "/var/tmp"])
        self.assertIn(f"recording GPU activity of pid {pid}", stderr)
        self.assertEqual(len(maps), 1, maps)
        self.assertTrue(maps.pop().startswith("/memfd:ptg-"), stderr)

    def test_attach_tmp_noexec(self):
        """No procfs at the target's /proc, its /tmp noexec: the copy goes to the next
        candidate, /dev/shm."""
        pid, stderr, maps = self.attach_noexec(["/tmp"], procfs=False)
        self.assertIn(f"recording GPU activity of pid {pid}", stderr)
        self.assertEqual(len(maps), 1, maps)
        self.assertTrue(maps.pop().startswith("/dev/shm/ptg-"), stderr)

    def test_attach_no_place_for_copy(self):
        """No procfs at the target's /proc and every candidate directory noexec: one clear
        warning, no GPU data."""
        pid, stderr, maps = self.attach_noexec(["/tmp", "/dev/shm", "/var/tmp"], procfs=False)
        self.assertEqual(maps, set())
        self.assertIn("ptrace-gpu: warning: no GPU activity: cannot load the CUPTI agent: "
                      f"pid {pid} has no /tmp, /dev/shm or /var/tmp owned by root, writable "
                      "only with the sticky bit, and mounted with exec\n", stderr)

    def userns_target(self, victim):
        """A target of nobody's in a user and mount namespace of its own, with
        victim bound at its /tmp and a tmpfs at its /proc."""
        sh = (f"mount --bind {victim} /tmp && mount -t tmpfs tmpfs /proc && "
              'exec "$@"')
        p = subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                              "--clear-groups", "unshare", "--user", "--map-root-user",
                              "--mount", "sh", "-c", sh, "sh", "/usr/bin/python3", "-c",
                              USERNS_TARGET],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        line = p.stdout.readline()
        if line != "ready\n":
            p.kill()
            self.skipTest(f"no unprivileged user namespace here: {p.communicate()[1]}")
        return p

    def test_userns_tmp_refused(self):
        """A user's own user namespace binds a directory of root's over its /tmp: the
        copy of an agent is refused in one line, and nothing is made in that directory."""
        # root's and 0755: what the copy's checks take for a /tmp only root can write
        victim = tempfile.mkdtemp(prefix="ptg-victim.", dir="/var/tmp")
        self.addCleanup(shutil.rmtree, victim, True)
        os.chmod(victim, 0o755)
        p = self.userns_target(victim)
        w = watch_creates(victim)
        self.addCleanup(os.close, w)
        line = (f"pid {p.pid}'s mounts belong to another user namespace (unshare -U, a "
                "rootless container), whose owner can put any directory at its /tmp: no "
                "copy of the library is made there\n")
        res = ptg.run(["inject", "-p", str(p.pid), ti.MARKER_LIB], timeout=60)
        self.assertEqual(res.returncode, 1, res.stderr)
        self.assertEqual(res.stderr, "ptrace-gpu: inject: " + line)
        rec = ptg.run(["record", "-p", str(p.pid), "--in-process", "-d", "0.5", "-o",
                       self.out], timeout=120)
        self.assertEqual(rec.returncode, 1, rec.stderr)
        self.assertIn("ptrace-gpu: record --in-process: " + line, rec.stderr)
        self.assertFalse(created(w), "something was made in the directory at its /tmp")
        self.assertEqual(os.listdir(victim), [])
        p.stdin.close()
        p.wait(timeout=30)

    def socket_name(self, pid):
        with open("/proc/net/unix") as f:
            for line in f:
                path = line.split()[-1]
                if path.startswith(f"@ptrace-gpu-cupti-{pid}-"):
                    return path[1:]
        return None

    def test_attach_no_socket_name(self):
        """record -p: the injected agent's connection is a socketpair the target made,
        so /proc/net/unix names no socket of the recording for others to flood, and
        every kernel is recorded."""
        p = self.start_target("attach", 20, 20)
        rec = ptg.Recorder(["-p", str(p.pid), "-d", "1.5"], self.out)
        self.procs.append(rec.proc)
        # the agent is in and recording: what it connected to is in no list
        self.assertEqual(p.stdout.readline().strip(), "state 106")
        self.assertIsNone(self.socket_name(rec.proc.pid))
        self.assertEqual(rec.wait(), 0, rec.stderr)
        lines = [x.strip() for x in p.stdout]
        self.assertEqual(p.wait(timeout=30), 0)
        self.assertEqual(len(ti.TestAgent.launches(self, lines)), 20)
        kernels = [r for r in ti.read_trace(self.out).records if r.kind == "kernel"]
        self.assertEqual(len(kernels), 20)
        self.assertEqual({r.pid for r in kernels}, {p.pid})

    def test_foreign_connections(self):
        """record -- CMD, whose agents find the socket by name: others who find it in
        /proc/net/unix are closed at once, their records ignored."""
        gated = os.path.join(self.dir, "gated.py")
        with open(gated, "w") as f:
            f.write(GATED)
        go = os.path.join(self.dir, "go")
        proc = subprocess.Popen([ptg.PTG, "record", "-o", self.out, "--",
                                 *self.python.argv(gated, go, *self.argv("launch", 20, 5)[1:])],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env=self.env)
        self.procs.append(proc)
        while "recording pid" not in proc.stderr.readline():
            self.assertIsNone(proc.poll())
        name = self.socket_name(proc.pid)
        self.assertIsNotNone(name, "no socket in /proc/net/unix")
        with open(SESSION, "rb") as f:
            session = f.read()
        # another user, and root from a process that is not the target
        others = [subprocess.Popen(pre + ["/usr/bin/python3", "-c", CONNECT, name],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                  for pre in (["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                               "--clear-groups"], [])]
        said = [o.communicate(session, timeout=30)[0].decode().strip() for o in others]
        with open(go, "w"):
            pass
        stderr = proc.stderr.read()
        self.assertEqual(proc.wait(timeout=120), 0, stderr)
        self.assertEqual(said, ["closed", "closed"], stderr)
        for o, uid in zip(others, (NOBODY, 0)):
            self.assertIn(f"pid {o.pid} (uid {uid}) connected to the CUPTI agents' socket "
                          "and is not the target: closed, ignored", stderr)
        self.assertIn("GPU: 20 kernels", stderr)
        trace = ti.read_trace(self.out)
        kernels = [r for r in trace.records if r.kind == "kernel"]
        self.assertEqual(len(kernels), 20)
        self.assertEqual({r.pid for r in trace.records if r.kind in ("kernel", "cuda_call")},
                         {int(trace.meta["pid"])})
        # the names and threads of the session the others sent
        self.assertFalse([r for r in kernels if r.name == "volta_sgemm_128x64_nn"])
        self.assertFalse([r for r in trace.records if r.tid in (777, 778)])
        # the names and threads of the session the others sent
        self.assertFalse([r for r in kernels if r.name == "volta_sgemm_128x64_nn"])
        self.assertFalse([r for r in trace.records if r.tid in (777, 778)])

    def flood(self, during_load):
        """300 connections from another user, while the probes load or once they are in,
        then the command's own agent: it must still get a slot."""
        gated = os.path.join(self.dir, "gated.py")
        with open(gated, "w") as f:
            f.write(GATED)
        go = os.path.join(self.dir, "go")
        argv = [ptg.PTG, "record", "-o", self.out, "--",
                *self.python.argv(gated, go, *self.argv("launch", 20, 5)[1:])]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, env=self.env)
        self.procs.append(proc)
        if during_load:
            # the socket is there some 10 ms after the start, the probes take some 800
            self.assertTrue(ptg.wait_until(lambda: self.socket_name(proc.pid), 10))
            time.sleep(0.1)
        else:
            while "recording pid" not in proc.stderr.readline():
                self.assertIsNone(proc.poll())
        name = self.socket_name(proc.pid)
        flood = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                                "--clear-groups", "/usr/bin/python3", "-c", FLOOD, name, "300"],
                               capture_output=True, text=True, timeout=60)
        with open(go, "w"):
            pass
        stderr = proc.stderr.read()
        self.assertEqual(proc.wait(timeout=120), 0, stderr)
        self.assertEqual(flood.stdout.strip(), "300", flood.stderr)
        self.assertIn("GPU: 20 kernels", stderr)
        self.assertEqual(stderr.count("is not the target: closed, ignored"), 8, stderr[-3000:])
        self.assertEqual(stderr.count("closed without a word"), 1, stderr[-3000:])

    def test_foreign_flood(self):
        """More connections from others than there are slots: the target's agent still gets one."""
        self.flood(during_load=False)

    def test_foreign_flood_while_loading(self):
        """The same while the probes load, before the recording starts."""
        self.flood(during_load=True)

    def test_hostile_agent(self):
        """The target's own peer lies: escapes are defused, the connection dropped, no crash."""
        with open(SESSION, "rb") as f:
            session = f.read()
        res = self.record_cmd(ti.AGENT, *self.python.argv("-c", HOSTILE), input=session,
                              text=False)
        stderr = res.stderr.decode()
        self.assertEqual(res.returncode, 0, stderr)
        self.assertEqual(res.stdout.decode().strip(), "closed")
        self.assertIn(": CUPTI failed: ?[31mred?; recording host-side data only", stderr)
        self.assertNotIn("\x1b", stderr)
        self.assertIn("dropping the CUPTI agent's connection: malformed message", stderr)
        self.assertNotIn("not the target", stderr)


if __name__ == "__main__":
    ptg.main()
