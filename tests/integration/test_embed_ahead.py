"""An embedding program's libpython is probed before it is mapped.

tests/helpers/embed_first.c has no Python: told to go, it dlopen()s
libpython3.X.so.1.0 by name (found along the loader's search path: pyenv's
lib folder through LD_LIBRARY_PATH, Debian's multiarch folder as a default
one, in the chroots too), initializes the interpreter and runs one script
that calls f CALLS times at once, with no pause anywhere for a tracer.
record, attached before the dlopen (-p) or starting the program (-- CMD),
finds that file ahead and probes it before it is mapped, so the trace holds
the interpreter from its first frame (the start-up's <frozen
importlib._bootstrap>) and exactly CALLS calls of f, no frame "opened at
attach", nothing lost.

A libpython loaded by full path from a folder on no search path cannot be
found ahead. The program is held under ptrace, though (-p of a process with
no Python), so the loader's notice stops it there until its interpreter is
found and probed (docs/late-libs.md): tests/helpers/nopy_embed.c, recorded
so, has the interpreter from its first frame too, every call of f, nothing
lost and no warning.
"""
import os
import subprocess
import tempfile
import unittest

import ptg

HELPERS = os.path.abspath(os.path.join(ptg.BUILD, "tests"))
EMBED = os.path.join(HELPERS, "embed_first")
GATED = os.path.join(HELPERS, "nopy_embed")
CALLS = 1000
# embed_first.c's script: first lines of <module>, f and main
MODULE, F, MAIN = "<module>:1", "f:2", "main:5"


def libpython(python):
    """(name the program dlopen()s, env, the file as the host sees it), or a reason to skip."""
    if python.missing:
        return None, python.missing
    name = "libpython%d.%d.so.1.0" % python.version
    if python.root is None and python.exe.startswith(ptg.PYENV):
        folder = os.path.join(os.path.dirname(os.path.dirname(python.exe)), "lib")
        path, env = os.path.join(folder, name), [f"LD_LIBRARY_PATH={folder}"]
    else:
        path, env = python.on_host(f"/usr/lib/x86_64-linux-gnu/{name}"), []
    if not os.path.exists(path):
        return None, f"{python.name} has no shared libpython ({path})"
    return (name, env, path), None


def program(python, args):
    """The helper with args, run where python is (its chroot, if any)."""
    if python.root is None:
        return ["env", *args]
    # python.argv() without the interpreter: unshare + chroot, then the helper in it
    return [*python.argv()[:-1], *args[args.index(EMBED):]]


def read_line(proc, word):
    line = proc.stdout.readline()
    if not line.startswith(word):
        raise AssertionError(f"expected '{word} ...' from the program, got {line!r}")
    return int(line.split()[1])


def wait_stderr(rec, text):
    """Reads record's stderr until a line holds text."""
    while not any(text in line for line in rec.lines):
        line = rec.proc.stderr.readline()
        if not line:
            raise AssertionError(f"record ended before saying '{text}': {rec.stderr}")
        rec.lines.append(line)


class EmbedAhead(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "embed.ptg")

    def tearDown(self):
        self.tmp.cleanup()

    def lib(self, python):
        lib, reason = libpython(python)
        if reason:
            self.skipTest(reason)
        return lib

    def argv(self, python, lib):
        name, env, _ = lib
        return program(python, [*env, EMBED, name, str(CALLS)])

    def verify(self, python, lib, rec, pid):
        self.assertRegex(rec.stderr, rf"python: probing \S*/{lib[0]} ahead \(Python "
                         rf"{python.version[0]}\.{python.version[1]}\.")
        self.assertNotIn("was not found ahead", rec.stderr)
        trace = ptg.Trace(self.out)
        self.assertEqual(trace.meta["python"], "mapped, probed ahead")
        self.assertEqual(os.path.realpath(trace.meta["python.path"]), os.path.realpath(lib[2]))
        lost = [x for x in trace.losses if not x.startswith("py_code_unresolved")]
        self.assertEqual(lost, [], "nothing lost")
        counts = trace.count("<string>")
        self.assertEqual((counts[F], counts[MAIN]), (CALLS, 1))
        calls = trace.calls()
        # main's caller is the script's <module>, entered under the probes too (other
        # <string> code, a .pth line of site, may have a <module> of its own)
        main = next(c for c in calls if f"{c[1]}:{c[3]}" == MAIN and c[2] == "<string>")
        self.assertTrue([c for c in calls if f"{c[1]}:{c[3]}" == MODULE and c[2] == "<string>"
                         and c[0] == main[0] and c[8] == main[8] - 1
                         and c[4] <= main[4] and c[5] >= main[5]], "the script's <module>")
        # every frame was entered under the probes: none was running when they went in
        self.assertEqual([c for c in calls if c[6] & ptg.ENTER_PREEXISTING], [])
        first = next(r for r in trace.records if r.kind == "py_enter")
        self.assertEqual((first.name, first.file), ("<module>", "<frozen importlib._bootstrap>"),
                         "the interpreter's start-up is in the trace from its first frame")
        self.assertTrue(all(r.pid == pid for r in trace.records if r.kind == "py_enter"))

    def check_attached(self, python):
        lib = self.lib(python)
        proc = subprocess.Popen(self.argv(python, lib), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        try:
            pid = read_line(proc, "ready")
            rec = ptg.Recorder(["-p", str(pid)], self.out)
            with open(f"/proc/{pid}/maps") as f:
                self.assertNotIn("libpython", f.read(), "not mapped before go")
            proc.stdin.write("go\n")
            proc.stdin.flush()
            self.assertEqual(proc.stdout.read(), f"done {CALLS}\n")
            self.assertEqual(proc.wait(timeout=300), 0)
            self.assertEqual(rec.wait(), 0, rec.stderr)
            rec.proc.stderr.close()
        finally:
            ptg.close(proc)
        self.verify(python, lib, rec, pid)

    def check_command(self, python):
        lib = self.lib(python)
        rec = ptg.Recorder.__new__(ptg.Recorder)
        rec.proc = subprocess.Popen([ptg.PTG, "record", "-o", self.out, "--",
                                     *self.argv(python, lib)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rec.lines = []
        try:
            pid = read_line(rec.proc, "ready")
            rec.proc.stdin.write("go\n")
            rec.proc.stdin.flush()
            self.assertEqual(rec.proc.stdout.read(), f"done {CALLS}\n")
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            ptg.close(rec.proc)
        self.verify(python, lib, rec, pid)


ptg.per_interpreter(EmbedAhead)


@ptg.once
class OffSearchPath(unittest.TestCase):
    """A full-path dlopen from a folder on no search path: held at the notice, exact."""

    def test_full_path_held(self):
        lib, reason = libpython(ptg.Python("pyenv-3.11"))
        if reason:
            self.skipTest(reason)
        calls = 37
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "full.ptg")
            # no LD_LIBRARY_PATH: pyenv's lib folder is on no search path of the program
            proc = subprocess.Popen([GATED, lib[2], str(calls)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)
            try:
                pid = read_line(proc, "ready")
                rec = ptg.Recorder(["-p", str(pid)], out)
                self.assertNotIn(f"probing {lib[2]} ahead", rec.stderr)
                proc.stdin.write("go\n")
                proc.stdin.flush()
                read_line(proc, "python")
                wait_stderr(rec, f"pid {pid} runs Python")
                proc.stdin.write("go\n")
                proc.stdin.flush()
                self.assertEqual(proc.stdout.read(), "done\n")
                self.assertEqual(proc.wait(timeout=300), 0)
                self.assertEqual(rec.wait(), 0, rec.stderr)
                rec.proc.stderr.close()
            finally:
                ptg.close(proc)
            self.assertNotIn("was not found ahead", rec.stderr)
            self.assertIn(f"pid {pid} runs Python", rec.stderr)
            self.assertIn("recording its calls from the first (held at the loader's notice)",
                          rec.stderr)
            trace = ptg.Trace(out)
            self.assertEqual(trace.meta["python"], "mapped")
            lost = [x for x in trace.losses if not x.startswith("py_code_unresolved")]
            self.assertEqual(lost, [], "nothing lost")
            self.assertEqual(trace.count("<string>")["f:1"], calls)
            self.assertEqual([c for c in trace.calls() if c[6] & ptg.ENTER_PREEXISTING], [])
            first = next(r for r in trace.records if r.kind == "py_enter")
            self.assertEqual((first.name, first.file),
                             ("<module>", "<frozen importlib._bootstrap>"),
                             "the interpreter's start-up is in the trace from its first frame")


if __name__ == "__main__":
    ptg.main()
