"""Python processes in a container: a mount and a pid namespace of their own
(`unshare --mount --pid --fork --mount-proc`) around a Debian chroot, so the
files the target sees (/srv/fib.py) are not where the host sees them, and
its pid there is 1. `record -p HOSTPID` and `sample -p HOSTPID` must give
the container's own file names and exact counts, the trace both pids, and
an injected library must reach the target without ptrace-gpu opening
anything the container's root could have planted.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ptg  # noqa: E402
import test_inject as ti  # noqa: E402
import test_sample  # noqa: E402

CHROOTED = ("trixie-3.13", "forky-3.14", "sid-3.14")
MARKER_LIB = os.path.join(ptg.BUILD, "tests", "libinject_marker.so")

# In the new mount namespace: a tmpfs of its own at the chroot's /tmp (the
# chroots are shared and read only), procfs at its /proc when $3 is 1, the
# workloads at /srv, and whatever $PTG_PLANT says planted in /tmp by the
# container's root; then the interpreter, as pid 1 of the new pid namespace.
# $PTG_TMP_RO: its /tmp read only; $PTG_SHM_FULL: its /dev/shm full.
CONTAINER = """r=$1 wl=$2 proc=$3
shift 3
for d in tmp dev/shm var/tmp; do
	mount -t tmpfs -o mode=1777,size=256k tmpfs "$r/$d" || exit 125
done
if [ -n "$PTG_SHM_FULL" ]; then dd if=/dev/zero of="$r/dev/shm/fill" bs=4k 2>/dev/null; fi
if [ "$proc" = 1 ]; then mount -t proc proc "$r/proc" || exit 125; fi
mount --bind "$wl" "$r/srv" || exit 125
if [ -n "$PTG_MNT" ]; then mount --bind "$PTG_MNT" "$r/mnt" || exit 125; fi
if [ -n "$PTG_PLANT" ]; then ln -s "$PTG_PLANT_TO" "$r/tmp/$PTG_PLANT" || exit 125; fi
if [ -n "$PTG_TMP_RO" ]; then mount -o remount,ro "$r/tmp" || exit 125; fi
exec chroot "$r" "$@"
"""


def chroot_python():
    """The first chroot interpreter here, or exits 77 saying why there is none."""
    names = [os.environ["PTG_PYTHON"]] if os.environ.get("PTG_PYTHON") in CHROOTED else CHROOTED
    found = [ptg.Python(n) for n in names]
    py = next((p for p in found if not p.missing), None)
    if py is None:
        print("skip: no chroot interpreter: " + "; ".join(p.missing for p in found), flush=True)
        sys.exit(77)
    res = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--mount-proc", "true"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        print(f"skip: unshare --mount --pid --fork --mount-proc: {res.stderr.strip()}",
              flush=True)
        sys.exit(77)
    return py


def fnv1a(data):
    """user/base/u64map.c's u64map_hash from its seed: what names ptrace-gpu's copies."""
    h = 14695981039346656037
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


class Container(ptg.Workload):
    """A workload of tests/workloads run as pid 1 of a container; pid is its host pid.
    go() and finish() are the Workload's; it starts and ends its own way."""

    def __init__(self, python, script, *args, procfs=True, plant=None, env=None):
        env = dict(os.environ, **(env or {}))
        if plant:
            env["PTG_PLANT"], env["PTG_PLANT_TO"] = plant
        script = script if script.startswith("/") else f"/srv/{script}"
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc",
             "--propagation",
             "private", "sh", "-c", CONTAINER, "sh", python.root, ptg.WORKLOADS,
             "1" if procfs else "0", python.exe, script, *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.root = python.root
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            self.kill()
            raise RuntimeError(f"{script} did not start in the container: {line!r}")
        # the gate prints os.getpid() as the workload sees it
        self.ns_pid = int(line.split()[1]) if len(line.split()) > 1 else None
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
            self.pid = int(f.read().split()[0])

    def kill(self):
        # pid 1 of the namespace: its end ends every process in it
        if self.proc.poll() is None and getattr(self, "pid", None):
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            f.close()


class TestContainer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.python = chroot_python()

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "c.ptg")

    def tearDown(self):
        self.tmp.cleanup()

    def container(self, script, *args, **kw):
        c = Container(self.python, script, *args, **kw)
        self.addCleanup(c.kill)
        return c

    def record(self, script):
        c = self.container(script, "--wait")
        with open(f"/proc/{c.pid}/status") as f:
            nspid = next(line.split()[1:] for line in f if line.startswith("NSpid:"))
        self.assertEqual(nspid, [str(c.pid), "1"])
        self.assertEqual(c.ns_pid, 1)
        rec = ptg.Recorder(["-p", str(c.pid)], self.out)
        c.go()
        self.assertIn("done", c.finish())
        self.assertEqual(rec.wait(), 0, rec.stderr)
        self.assertIn(f"ptrace-gpu: recording pid {c.pid} (container pid 1, Python ",
                      rec.stderr)
        trace = ptg.Trace(self.out)
        self.assertEqual(trace.losses, [], "events were lost")
        self.assertEqual(trace.meta["stop.reason"], "target exited")
        return c, trace

    def test_fib_counts_names_pids(self):
        """Exact calls of f in the container's /srv/fib.py; both pids in dump, report and
        the Chrome export."""
        c, trace = self.record("fib.py")
        calls = [x for x in trace.calls() if x[1] == "f"]
        self.assertEqual(len(calls), 5919)
        self.assertEqual({x[2] for x in calls}, {"/srv/fib.py"})
        self.assertEqual({x[3] for x in calls}, {7})
        self.assertEqual(trace.meta["pid"], str(c.pid))
        self.assertEqual(trace.meta["nspid"], f"{c.pid} 1")
        threads = [r for r in trace.records if r.kind == "thread"]
        self.assertEqual([(r.pid, r.tid, r.fields.get("container_pid"),
                           r.fields.get("container_tid")) for r in threads],
                         [(c.pid, c.pid, 1, 1)])
        res = ptg.run(["report", "--per-thread", self.out])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn(f"\npid: {c.pid} (container pid 1)\n", res.stdout)
        self.assertIn(f"\nthread {c.pid} (pid {c.pid}; container tid 1, pid 1)", res.stdout)
        self.assertIn("/srv/fib.py:7(f)", res.stdout)
        # off-CPU intervals come only if the scheduler took it off the CPU meanwhile
        if "off-CPU time by thread" in res.stdout:
            self.assertIn(f"\n  tid {c.pid} (container tid 1) \"", res.stdout)
        chrome = os.path.join(self.tmp.name, "c.json")
        res = ptg.run(["export", "--chrome", chrome, self.out])
        self.assertEqual(res.returncode, 0, res.stderr)
        with open(chrome) as f:
            events = json.load(f)["traceEvents"]
        meta = {(e["name"], e["pid"], e["tid"]): e["args"]["name"]
                for e in events if e["ph"] == "M" and e["name"].endswith("_name")}
        self.assertEqual(meta[("process_name", c.pid, 0)], f"pid {c.pid} (container pid 1)")
        self.assertTrue(meta[("thread_name", c.pid, c.pid)].endswith(" (container tid 1)"),
                        meta)

    def test_exception_chain(self):
        """The exceptions workload of test_record_counts: 100 calls each, unwinds marked."""
        _, trace = self.record("exceptions.py")
        segs = {}
        for x in trace.calls():
            if x[2] == "/srv/exceptions.py" and x[1] in ("outer", "middle", "innermost"):
                segs.setdefault(x[1], []).append(x)
        self.assertEqual({k: len(v) for k, v in segs.items()},
                         {"outer": 100, "middle": 100, "innermost": 100})
        self.assertTrue(all(x[7] == ptg.EXIT_UNWIND for x in segs["innermost"]))
        self.assertTrue(all(x[7] == ptg.EXIT_UNWIND for x in segs["middle"]))
        self.assertTrue(all(x[7] == 0 for x in segs["outer"]))

    def test_sample_resolves_stacks(self):
        """sample -p HOSTPID: the container's stacks, with its file names."""
        c = self.container("busy.py", "--wait", "30")
        c.go()
        res = ptg.run(["sample", "-p", str(c.pid), "-d", "2", "-o", "-"], timeout=120)
        self.assertEqual(res.returncode, 0, res.stderr)
        stacks = {}
        for line in res.stdout.splitlines():
            stack, _, n = line.rpartition(" ")
            stacks[stack] = stacks.get(stack, 0) + int(n)
        ours = {s: n for s, n in stacks.items() if s.endswith(";main (/srv/busy.py:12)")
                or s.endswith(";leaf (/srv/busy.py:8)")}
        self.assertTrue(ours, res.stdout)
        self.assertTrue(all(s.split(";")[0].endswith(f" [{c.pid}, container pid 1]")
                            for s in ours), ours)
        # busy.py spends its time in main and leaf: nearly every sample resolves there
        self.assertGreater(sum(ours.values()), 0.8 * sum(stacks.values()), stacks)
        # pprof: the container's pid as a label beside the host's
        prof = os.path.join(self.tmp.name, "c.pb.gz")
        res = ptg.run(["sample", "-p", str(c.pid), "-d", "1", "-o", prof], timeout=120)
        self.assertEqual(res.returncode, 0, res.stderr)
        profile = test_sample.Profile(prof)
        labels = {(lab["pid"], lab.get("container_pid")) for _, _, lab in profile.samples}
        self.assertEqual(labels, {(c.pid, 1)})
        self.assertIn("/srv/busy.py", {f[1] for f in profile.functions.values()})

    def test_inject_copy_tmp_ro_shm_full(self):
        """No procfs at its /proc, /tmp read only, /dev/shm full: the copy goes to /var/tmp,
        and nothing is left behind in any of them."""
        lib = ptg.trusted_lib(MARKER_LIB)
        c = self.container("fib.py", "--wait", procfs=False,
                           env={"PTG_TMP_RO": "1", "PTG_SHM_FULL": "1"})
        root = f"/proc/{c.pid}/root"
        res = ptg.run(["inject", "-p", str(c.pid), lib], timeout=120)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("from a copy in its file system", res.stdout)
        with open(f"/proc/{c.pid}/maps") as f:
            maps = {line.split()[5] for line in f if "libinject_marker" in line}
        self.assertEqual(len(maps), 1, maps)
        self.assertTrue(maps.pop().startswith(self.python.root + "/var/tmp/ptg-"))
        self.assertEqual(os.listdir(os.path.join(root, "tmp")), [])
        self.assertEqual(os.listdir(os.path.join(root, "dev/shm")), ["fill"])
        self.assertEqual([d for d in os.listdir(os.path.join(root, "var/tmp"))
                          if d.startswith("ptg-")], [])
        c.go()
        self.assertIn("done", c.finish())

    def test_record_gpu_agent(self):
        """record -p HOSTPID of a CUDA program in the container (the stand-in CUPTI of
        test_inject): the agent comes in from a memfd, and its GPU records carry the
        host's pid."""
        stub = next((p for p in ti.CUDA_STUBS if os.path.exists(p)), None)
        if not os.path.exists(ti.AGENT) or stub is None:
            self.skipTest("no CUPTI agent in this build (CUPTI not found)")
        mnt = tempfile.mkdtemp(prefix="ptg-container-gpu.", dir=ptg.trusted_dir())
        self.addCleanup(shutil.rmtree, mnt)
        os.chmod(mnt, 0o755)
        shutil.copyfile(stub, os.path.join(mnt, "libcuda.so"))
        shutil.copyfile(ti.FAKE_CUPTI, os.path.join(mnt, "libcupti.so.13"))
        with open(os.path.join(mnt, "gpu_target.py"), "w") as f:
            f.write(ti.GPU_TARGET)
        c = self.container("/mnt/gpu_target.py", "loop", "0", "0", "/mnt/libcuda.so",
                           env={"PTG_MNT": mnt, "LD_LIBRARY_PATH": "/mnt"})
        rec = ptg.Recorder(["-p", str(c.pid), "-d", "1.5"], self.out)
        self.assertEqual(rec.wait(), 0, rec.stderr)
        with open(f"/proc/{c.pid}/maps") as f:
            maps = {line.split()[5] for line in f if "libptg_cupti" in line}
        left = [d for d in ("tmp", "dev/shm", "var/tmp")
                if os.listdir(f"/proc/{c.pid}/root/{d}")]
        c.proc.stdin.write("stop\n")
        c.proc.stdin.flush()
        self.assertEqual(c.proc.wait(timeout=30), 0)
        self.assertIn(f"recording GPU activity of pid {c.pid}", rec.stderr)
        self.assertEqual(len(maps), 1, maps)
        self.assertTrue(maps.pop().startswith("/memfd:ptg-"), rec.stderr)
        self.assertEqual(left, [], "files left in the container")
        trace = ptg.Trace(self.out)
        kernels = [r for r in trace.records if r.kind == "kernel"]
        self.assertGreater(len(kernels), 10)
        self.assertEqual({r.pid for r in kernels}, {c.pid})

    def inject_planted(self, procfs):
        """inject into a container whose root planted, at the /tmp path a copy of the
        library would take, a link to a directory of the host; returns the result, the
        victim directory and the target's mappings of the library."""
        lib = ptg.trusted_lib(MARKER_LIB)
        with open(lib, "rb") as f:
            dname = f"ptg-{fnv1a(f.read()):016x}"
        victim = tempfile.mkdtemp(prefix="ptg-victim.", dir=ptg.trusted_dir())
        self.addCleanup(shutil.rmtree, victim)
        c = self.container("fib.py", "--wait", procfs=procfs, plant=(dname, victim))
        link = os.path.join(f"/proc/{c.pid}/root/tmp", dname)
        self.assertEqual(os.readlink(link), victim)
        res = ptg.run(["inject", "-p", str(c.pid), lib, "--call", "inject_marker_call",
                       "--arg", "in-container"], timeout=120)
        with open(f"/proc/{c.pid}/maps") as f:
            maps = {line.split()[5] for line in f if len(line.split()) > 5
                    and os.path.basename(lib) in line}
        # the library ran in the container: as its pid 1, writing to its own /tmp
        tmp = f"/proc/{c.pid}/root/tmp"
        with open(os.path.join(tmp, "ptg-inject-marker.1")) as f:
            self.assertEqual(f.read(), "1\n")
        with open(os.path.join(tmp, "ptg-inject-call.1")) as f:
            self.assertEqual(f.read(), "in-container")
        self.assertEqual(os.readlink(link), victim, "the planted link was replaced")
        self.assertEqual(os.listdir(victim), [], "something was written through the link")
        c.go()
        self.assertIn("done", c.finish())
        return res, maps, dname

    def test_inject_memfd_planted_tmp(self):
        """procfs at its /proc: the library comes in a memfd of its own; /tmp is not used."""
        res, maps, dname = self.inject_planted(procfs=True)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("from a memfd of its own", res.stdout)
        self.assertIn("inject_marker_call returned 42", res.stdout)
        self.assertEqual(maps, {f"/memfd:{dname}.libinject_marker.so"}, maps)

    def test_inject_copy_planted_tmp(self):
        """No procfs at its /proc: a copy in its /tmp, in a directory of our own beside the
        planted link, which is not followed."""
        res, maps, dname = self.inject_planted(procfs=False)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("from a copy in its file system", res.stdout)
        self.assertIn("inject_marker_call returned 42", res.stdout)
        self.assertEqual(len(maps), 1, maps)
        path = maps.pop()
        # maps names it from the host's root: <chroot>/tmp/<our directory>/<library>
        ours, base = path.split("/")[-2:]
        self.assertEqual(os.path.dirname(os.path.dirname(path)), self.python.root + "/tmp")
        self.assertTrue(ours.startswith(dname + ".") and ours != dname, path)
        self.assertEqual(base, "libinject_marker.so")


if __name__ == "__main__":
    ptg.main()
