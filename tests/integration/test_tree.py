"""record of several processes: -p A,B,C and --children (forks and execs followed
live), each process's calls counted exactly against its known call plan."""
import collections
import json
import shutil
import signal
import os
import subprocess
import tempfile
import unittest

import ptg

TREE = os.path.join(ptg.WORKLOADS, "tree.py")
# tests/workloads/tree.py: the new calls of each process, by its role
PLAN = {
    "parent": {"leaf_parent": 300, "fib": 465},
    "child": {"child": 1, "leaf_child": 200},
    "grand": {"grandchild": 1, "leaf_grand": 100},
    "exec": {"leaf_exec": 150},
}
PLANNED = {name for plan in PLAN.values() for name in plan}


def roles(stdout):
    """{pid: role} from the "ROLE PID" lines the workload's processes print."""
    out = {}
    for line in stdout.splitlines():
        role, _, pid = line.partition(" ")
        if role in PLAN:
            out[int(pid)] = role
    return out


def new_calls(trace, suffix):
    """{pid: Counter(name)}: the calls each process made (not resumptions, not
    frames it had from its parent at fork) of functions of files ending in suffix."""
    tid_pid = {r.tid: r.pid for r in trace.records}
    got = collections.defaultdict(collections.Counter)
    for tid, name, file, _, _, _, eflags, _, _ in trace.calls():
        if file.endswith(suffix) and not eflags & (ptg.ENTER_RESUME | ptg.ENTER_PREEXISTING):
            got[tid_pid[tid]][name] += 1
    return got


class Tree(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def assert_plan(self, trace, pids):
        self.assertEqual(sorted(pids.values()), sorted(PLAN), "every process said who it is")
        self.assertEqual(trace.losses, [], "events were lost")
        got = new_calls(trace, "tree.py")
        for pid, role in pids.items():
            planned = {k: v for k, v in got[pid].items() if k in PLANNED}
            self.assertEqual(planned, PLAN[role], f"pid {pid} ({role})")
        self.assertEqual(set(got) - set(pids), set(), "calls of processes not in the tree")

    def check_children_of_attached(self, python):
        """-p PID --children: two forks, a grandchild and a fork that execs the
        interpreter again, all started after the attach."""
        out = os.path.join(self.tmp.name, "tree.ptg")
        w = ptg.Workload(python, "tree.py")
        try:
            rec = ptg.Recorder(["-p", str(w.pid), "--children"], out)
            w.go()
            stdout = w.finish()
            self.assertIn("done", stdout)
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            w.kill()
        self.assertIn("from 4 processes", rec.stderr)
        trace = ptg.Trace(out)
        self.assertEqual(trace.meta["stop.reason"], "target exited")
        self.assertEqual(trace.meta["children"], "1")
        pids = roles(stdout)
        self.assert_plan(trace, pids)
        # report --pid: the table of one process of the recording
        grand = [p for p, r in pids.items() if r == "grand"][0]
        res = ptg.run(["report", "--pid", str(grand), out])
        self.assertEqual(res.returncode, 0, res.stderr)
        rows = {line.split()[-1].rpartition("(")[2].rstrip(")"): line.split()[0]
                for line in res.stdout.splitlines() if "tree.py:" in line}
        self.assertEqual((rows.get("leaf_grand"), rows.get("leaf_parent")), ("100", None))
        self.assertIn(f" in process {grand}\n", res.stdout)

    def check_children_already_running(self, python):
        """-p PID --children: a child forked before the attach is recorded too."""
        out = os.path.join(self.tmp.name, "prefork.ptg")
        w = ptg.Workload(python, "prefork.py")
        try:
            rec = ptg.Recorder(["-p", str(w.pid), "--children"], out)
            w.go()
            stdout = w.finish()
            self.assertIn("done", stdout)
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            w.kill()
        child = int(stdout.split("child ")[1].split()[0])
        got = new_calls(ptg.Trace(out), "prefork.py")
        self.assertEqual(sorted(got), sorted([w.pid, child]))
        self.assertEqual(dict(got[child]), {"leaf_child": 200})
        self.assertEqual(got[w.pid]["leaf_parent"], 300)

    def check_children_of_command(self, python):
        """record --children -- CMD: the same tree, from the command's first call."""
        out = os.path.join(self.tmp.name, "cmd.ptg")
        res = ptg.run(["record", "--children", "-o", out, "--", *python.argv(python.path(TREE))])
        self.assertEqual(res.returncode, 0, res.stderr)
        trace = ptg.Trace(out)
        pids = roles(res.stdout)
        self.assert_plan(trace, pids)
        parent = [p for p, r in pids.items() if r == "parent"][0]
        self.assertEqual(new_calls(trace, "tree.py")[parent]["main"], 1)

    def check_without_children_only_the_root(self, python):
        """-p PID alone keeps to that process, its forks are not recorded."""
        out = os.path.join(self.tmp.name, "root.ptg")
        w = ptg.Workload(python, "tree.py")
        try:
            rec = ptg.Recorder(["-p", str(w.pid)], out)
            w.go()
            stdout = w.finish()
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            w.kill()
        pids = roles(stdout)
        got = new_calls(ptg.Trace(out), "tree.py")
        parent = [p for p, r in pids.items() if r == "parent"][0]
        self.assertEqual(list(got), [parent])
        self.assertEqual({k: v for k, v in got[parent].items() if k in PLANNED},
                         PLAN["parent"])

    def check_per_process_ranks(self, python):
        """Two ranks (RANK=0, RANK=1) with --per-process: run.rank0.ptg and
        run.rank1.ptg, each of its own process, with its rank for export; a
        LOCAL_RANK alone names a file, but is no rank of the job."""
        out = os.path.join(self.tmp.name, "run.ptg")
        ws = []
        try:
            for rank in (0, 1):
                os.environ.update(RANK=str(rank), WORLD_SIZE="2")
                ws.append(ptg.Workload(python, "fib.py"))
            del os.environ["WORLD_SIZE"]
            os.environ["RANK"] = "3"
            ws.append(ptg.Workload(python, "fib.py"))
            del os.environ["RANK"]
            os.environ["LOCAL_RANK"] = "7"
            ws.append(ptg.Workload(python, "fib.py"))
        finally:
            for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
                os.environ.pop(k, None)
        ptg.record_workloads(self, ws, ["--per-process"], out)
        self.assertEqual(sorted(os.listdir(self.tmp.name)),
                         ["run.rank0.ptg", "run.rank1.ptg", "run.rank3.ptg", "run.rank7.ptg"])
        local = ptg.Trace(os.path.join(self.tmp.name, "run.rank7.ptg"))
        self.assertEqual(local.meta["pid"], str(ws[3].pid))
        self.assertNotIn("dist.rank", local.meta)
        # RANK with no WORLD_SIZE: the rank (idle's cross-rank view), no distributedInfo
        alone = ptg.Trace(os.path.join(self.tmp.name, "run.rank3.ptg"))
        self.assertEqual((alone.meta["pid"], alone.meta["dist.rank"]), (str(ws[2].pid), "3"))
        self.assertNotIn("dist.world_size", alone.meta)
        for rank, w in enumerate(ws[:2]):
            path = os.path.join(self.tmp.name, f"run.rank{rank}.ptg")
            trace = ptg.Trace(path)
            self.assertEqual((trace.meta["pid"], trace.meta["dist.rank"],
                              trace.meta["dist.world_size"]), (str(w.pid), str(rank), "2"))
            self.assertEqual({r.pid for r in trace.records}, {w.pid})
            self.assertEqual(new_calls(trace, "fib.py")[w.pid]["f"], 5919)
            chrome = os.path.join(self.tmp.name, f"rank{rank}.json")
            res = ptg.run(["export", "--chrome", chrome, path])
            self.assertEqual(res.returncode, 0, res.stderr)
            with open(chrome) as f:
                info = json.load(f)["distributedInfo"]
            os.unlink(chrome)
            self.assertEqual((info["rank"], info["world_size"]), (rank, 2))

    def check_per_process_tree(self, python):
        """--children --per-process without ranks: OUT.pidP.ptg for each process."""
        out = os.path.join(self.tmp.name, "tree.ptg")
        res = ptg.run(["record", "--children", "--per-process", "-o", out, "--",
                       *python.argv(python.path(TREE))])
        self.assertEqual(res.returncode, 0, res.stderr)
        pids = roles(res.stdout)
        self.assertEqual(sorted(os.listdir(self.tmp.name)),
                         sorted(f"tree.pid{p}.ptg" for p in pids))
        for pid, role in pids.items():
            trace = ptg.Trace(os.path.join(self.tmp.name, f"tree.pid{pid}.ptg"))
            self.assertEqual(trace.meta["pid"], str(pid))
            self.assertNotIn("dist.rank", trace.meta)
            got = new_calls(trace, "tree.py")
            self.assertEqual(list(got), [pid])
            self.assertEqual({k: v for k, v in got[pid].items() if k in PLANNED}, PLAN[role])



ptg.per_interpreter(Tree)


@ptg.once
class PidList(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def test_two_interpreters(self):
        """-p A,B of two different interpreters: one pyframe each, exact counts each."""
        pythons = [ptg.Python("debian-3.11"), ptg.Python("pyenv-3.12")]
        missing = [f"{p}: {p.missing}" for p in pythons if p.missing]
        if missing:
            self.skipTest("; ".join(missing))
        out = os.path.join(self.tmp.name, "two.ptg")
        ws = [ptg.Workload(p, "fib.py") for p in pythons]
        err, _ = ptg.record_workloads(self, ws, [], out)
        self.assertIn("from 2 processes (2 interpreters", err)
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        self.assertEqual(trace.meta["pids"], ",".join(str(w.pid) for w in ws))
        got = new_calls(trace, "fib.py")
        self.assertEqual(sorted(got), sorted(w.pid for w in ws))
        for w in ws:
            self.assertEqual(got[w.pid]["f"], 5919, f"pid {w.pid}")
            self.assertEqual(got[w.pid]["main"], 1, f"pid {w.pid}")

    def pythons(self, *names):
        pythons = [ptg.Python(n) for n in names]
        missing = [f"{p}: {p.missing}" for p in pythons if p.missing]
        if missing:
            self.skipTest("; ".join(missing))
        return pythons

    def test_exec_of_another_interpreter(self):
        """-p PID --children: a Debian 3.11 parent runs pyenv 3.12, an interpreter
        file not probed yet: the child is stopped at its exec until its probes are
        in, and every call of it is recorded."""
        parent, child = self.pythons("debian-3.11", "pyenv-3.12")
        out = os.path.join(self.tmp.name, "spawn.ptg")
        w = ptg.Workload(parent, "spawn.py", *child.argv())
        try:
            rec = ptg.Recorder(["-p", str(w.pid), "--children"], out)
            w.go()
            stdout = w.finish()
            self.assertIn("done", stdout)
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            w.kill()
        self.assertIn("from 2 processes (2 interpreters", rec.stderr)
        pids = {role: int(pid) for role, _, pid in (l.partition(" ") for l in stdout.split("\n"))
                if role in ("parent", "child")}
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        got = new_calls(trace, "")
        self.assertEqual(got[pids["child"]]["g"], 500)
        self.assertEqual(got[pids["parent"]]["leaf"], 100)
        self.assertEqual(got[pids["parent"]]["g"], 0)

    def test_killed_while_an_exec_is_held(self):
        """kill -9 of the recorder while it holds an exec'd child under ptrace:
        the child runs on unchanged, the parent too."""
        parent, child = self.pythons("debian-3.11", "pyenv-3.12")
        w = ptg.Workload(parent, "spawn.py", *child.argv())

        def held():
            try:
                with open(f"/proc/{w.pid}/task/{w.pid}/children") as f:
                    kids = f.read().split()
                for kid in kids:
                    with open(f"/proc/{kid}/stat") as f:
                        if f.read().rpartition(")")[2].split()[0] == "t":
                            return True
            except OSError:
                pass
            return False

        try:
            rec = ptg.Recorder(["-p", str(w.pid), "--children"],
                               os.path.join(self.tmp.name, "killed.ptg"))
            w.go()
            caught = ptg.wait_until(held, timeout=60)
            rec.proc.kill()
            rec.proc.wait()
            stdout = w.finish(timeout=60)
        finally:
            w.kill()
        self.assertTrue(caught, "the child was never seen held")
        self.assertEqual(w.proc.returncode, 0)
        self.assertRegex(stdout, r"child \d+\n")
        self.assertIn("done", stdout)

    def test_command_through_shell(self):
        """record --children -- sh -c '...': the shell runs no Python, the two
        interpreters it starts are recorded from their first call."""
        py311, py312 = self.pythons("debian-3.11", "pyenv-3.12")
        out = os.path.join(self.tmp.name, "sh.ptg")
        script = (f"{py312.shell()} -c 'def g(i): return i\nfor i in range(500): g(i)'\n"
                  f"{py311.shell()} -c 'def h(i): return i\nfor i in range(300): h(i)'\n"
                  "echo end\n")
        res = ptg.run(["record", "--children", "-o", out, "--", "sh", "-c", script])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(res.stdout, "end\n")
        self.assertIn("(sh): no Python: CUDA calls, ops and off-CPU time; Python it execs or "
                      "loads is followed, and the processes it starts", res.stderr)
        # each interpreter found at its exec, once: none taken for a libpython it loaded
        self.assertEqual(res.stderr.count("too (Python "), 2, res.stderr)
        self.assertNotIn("since it mapped it", res.stderr)
        self.assertIn("1 of them ran no supported Python", res.stderr)
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        got = new_calls(trace, "<string>")
        planned = sorted(({k: v for k, v in c.items() if k in ("g", "h")} for c in got.values()),
                         key=str)
        self.assertEqual(planned, sorted([{"g": 500}, {"h": 300}], key=str), got)

    def test_uid(self):
        """--uid: a user's running Python and one it starts while recording are
        recorded exactly; root's Python, running the same interpreter, is not."""
        py = ptg.Python(ptg.ONCE)
        # a uid of no user: no other process of the machine runs as it
        uid = 54321 + os.getpid() % 1000
        nobody = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        if shutil.which("setpriv") is None:
            self.skipTest("no setpriv (util-linux)")
        # the other user cannot read the checkout (under a 0700 directory in CI):
        # it runs copies of the workload in a folder anyone can read
        shared = tempfile.mkdtemp(prefix="ptg-uid.")
        self.addCleanup(shutil.rmtree, shared, True)
        os.chmod(shared, 0o755)
        for name in ("fib.py", "gate.py"):
            shutil.copy(os.path.join(ptg.WORKLOADS, name), shared)
            os.chmod(os.path.join(shared, name), 0o644)
        fib = py.path(os.path.join(shared, "fib.py"))
        theirs = subprocess.Popen([*nobody, *py.argv(fib, "--wait")], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        ours = ptg.Workload(py, "fib.py")
        out = os.path.join(self.tmp.name, "uid.ptg")
        try:
            self.assertTrue(theirs.stdout.readline().startswith("ready"))
            rec = ptg.Recorder(["--uid", str(uid)], out)
            late = subprocess.run(
                [*nobody, *py.argv("-c", "import os\ndef g(i): return i\n"
                                         "for i in range(500): g(i)\nprint(os.getpid())")],
                capture_output=True, text=True, check=True)
            for proc in (theirs, ours.proc):
                proc.stdin.write("go\n")
                proc.stdin.flush()
            self.assertIn("done", theirs.stdout.read())
            self.assertIn("done", ours.finish())
            rec.proc.send_signal(signal.SIGINT)
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            for proc in (theirs, ours.proc):
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
            theirs.stdin.close()
            theirs.stdout.close()
        trace = ptg.Trace(out)
        self.assertEqual((trace.meta["uid"], trace.meta["stop.reason"]), (str(uid), "interrupted"))
        self.assertEqual(trace.losses, [])
        got = new_calls(trace, "")
        self.assertEqual(sorted(got), sorted([theirs.pid, int(late.stdout)]))
        self.assertEqual(got[theirs.pid]["f"], 5919)
        self.assertEqual(got[int(late.stdout)]["g"], 500)

    def test_cgroup(self):
        """--cgroup: a process moved into the cgroup and one that execs Python
        there while recording are recorded exactly; one outside is not."""
        with open("/proc/mounts") as f:
            mounts = [line.split()[1] for line in f if line.split()[2] == "cgroup2"]
        if not mounts:
            self.skipTest("no cgroup v2 mounted")
        cg = os.path.join(mounts[0], f"ptg-test-{os.getpid()}")
        try:
            os.mkdir(cg)
        except OSError as e:
            self.skipTest(f"cannot make a cgroup in {mounts[0]}: {e}")
        py = ptg.Python(ptg.ONCE)
        out = os.path.join(self.tmp.name, "cg.ptg")
        inside, outside = ptg.Workload(py, "fib.py"), ptg.Workload(py, "fib.py")
        try:
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write(str(inside.pid))
            rec = ptg.Recorder(["--cgroup", cg], out)
            code = "import os\ndef g(i): return i\nfor i in range(500): g(i)\nprint(os.getpid())"
            late = subprocess.run(
                ["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$0" "$@"',
                 *py.argv("-c", code)], capture_output=True, text=True, check=True)
            for w in (inside, outside):
                w.go()
            for w in (inside, outside):
                self.assertIn("done", w.finish())
            rec.proc.send_signal(signal.SIGINT)
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            inside.kill()
            outside.kill()
            os.rmdir(cg)
        trace = ptg.Trace(out)
        self.assertEqual(trace.meta["cgroup"], cg)
        self.assertEqual(trace.losses, [])
        got = new_calls(trace, "")
        self.assertEqual(sorted(got), sorted([inside.pid, int(late.stdout)]))
        self.assertEqual(got[inside.pid]["f"], 5919)
        self.assertEqual(got[int(late.stdout)]["g"], 500)

    def test_vanished_pid(self):
        """A pid of the list that is gone: one line naming it, exit 1, no trace."""
        gone = subprocess.Popen(["true"])
        gone.wait()
        w = ptg.Workload(ptg.Python(ptg.ONCE), "fib.py")
        out = os.path.join(self.tmp.name, "gone.ptg")
        try:
            res = ptg.run(["record", "-p", f"{w.pid},{gone.pid}", "-o", out])
        finally:
            w.kill()
        self.assertEqual(res.returncode, 1, res.stderr)
        self.assertEqual(res.stderr, f"ptrace-gpu: no such process: {gone.pid}\n")
        self.assertFalse(os.path.exists(out))

    def test_bad_lists(self):
        for arg in ["1,,2", "1,", ",1", "1,x", "1,0", "1,4294967297"]:
            res = ptg.run(["record", "-p", arg, "-o", os.path.join(self.tmp.name, "x")])
            self.assertEqual(res.returncode, 2, arg)
            self.assertEqual(res.stderr, f"ptrace-gpu: record: bad PID '{arg}'\n")

    def test_same_pid_twice(self):
        w = ptg.Workload(ptg.Python(ptg.ONCE), "fib.py")
        try:
            res = ptg.run(["record", "-p", f"{w.pid},{w.pid}",
                           "-o", os.path.join(self.tmp.name, "x")])
        finally:
            w.kill()
        self.assertEqual(res.returncode, 1)
        self.assertIn(f"ptrace-gpu: pid {w.pid} is given twice\n", res.stderr)


if __name__ == "__main__":
    ptg.main()
