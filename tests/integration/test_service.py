"""The sampler service, dist/systemd/ptrace-gpu-sample.service as configured
into the build: systemd-analyze verifies it, and its command, run as the unit
runs it (its options file, its capability bound), writes profiles that hold
the stacks of a Python process, keeping no more than --keep of them."""
import glob
import gzip
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
import unittest

import ptg

UNIT = os.path.join(ptg.BUILD, "dist", "ptrace-gpu-sample.service")
DEFAULTS = os.path.join(ptg.SRC, "dist", "ptrace-gpu.default")


def unit_settings(path):
    """{key: [values]} of the [Service] section of a unit file."""
    out, section = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("["):
                section = line
                continue
            if section == "[Service]":
                key, _, value = line.partition("=")
                out.setdefault(key, []).append(value)
    return out


@ptg.once
class Service(unittest.TestCase):
    def setUp(self):
        if not os.path.exists(UNIT):
            self.skipTest(f"{UNIT} was not configured")
        self.tmp = tempfile.TemporaryDirectory()
        self.unit = unit_settings(UNIT)

    def tearDown(self):
        self.tmp.cleanup()

    def local_unit(self):
        """The unit, with the build's binary where the installed one would be."""
        with open(UNIT) as f:
            text = f.read()
        exe = shlex.split(self.unit["ExecStart"][0])[0]
        path = os.path.join(self.tmp.name, "ptrace-gpu-sample.service")
        with open(path, "w") as f:
            f.write(text.replace(exe + " ", ptg.PTG + " "))
        return path

    def test_verify(self):
        """systemd-analyze verify passes on the unit (its man page is checked
        by the man page tests, not here: the build's is not installed)."""
        tool = shutil.which("systemd-analyze")
        if not tool:
            self.skipTest("no systemd-analyze here")
        r = subprocess.run([tool, "verify", "--man=no", self.local_unit()],
                           capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stderr.strip()), (0, ""))

    def test_options_file(self):
        """The unit reads the options file the package installs, and that file
        sets the same options as the unit's built-in default."""
        self.assertTrue(self.unit["EnvironmentFile"][0].endswith("/default/ptrace-gpu"))
        with open(DEFAULTS) as f:
            opts = re.search(r'^PTRACE_GPU_SAMPLE_OPTS=(".*")$', f.read(), re.M).group(1)
        self.assertIn(f"PTRACE_GPU_SAMPLE_OPTS={opts}", self.unit["Environment"][0])

    def test_runs_within_its_bound(self):
        """The unit's command, with its capabilities bounded as the unit bounds
        them and --every 1 --keep 2, samples a busy Python process: the newest
        two profiles are kept, and they hold its frames."""
        caps = self.unit["CapabilityBoundingSet"][0].split()
        bound = "-all," + ",".join("+" + c[len("CAP_"):].lower() for c in caps)
        state = os.path.join(self.tmp.name, "state")
        os.mkdir(state, 0o700)
        argv = shlex.split(self.unit["ExecStart"][0])
        argv[0] = ptg.PTG
        i = argv.index("$PTRACE_GPU_SAMPLE_OPTS")
        argv[i:i + 1] = ["-F", "99", "--every", "1", "--keep", "2"]
        argv[argv.index("--dir") + 1] = state
        python = ptg.Python(ptg.ONCE)
        busy = subprocess.Popen(python.argv(os.path.join(ptg.WORKLOADS, "busy.py"), "6"),
                                stdout=subprocess.DEVNULL)
        try:
            sampler = subprocess.Popen(["setpriv", f"--bounding-set={bound}", "--inh-caps=-all",
                                        *argv], stderr=subprocess.PIPE, text=True)
            time.sleep(4.5)
            sampler.terminate()
            _, err = sampler.communicate(timeout=30)
        finally:
            ptg.end(busy)
        self.assertEqual(sampler.returncode, 0, err)
        profiles = sorted(glob.glob(os.path.join(state, "sample-*.pb.gz")))
        self.assertEqual(len(profiles), 2, (os.listdir(state), err))
        # a pprof profile's string table holds each frame's name and file
        with gzip.open(profiles[-1]) as f:
            data = f.read()
        self.assertIn(b"leaf", data)
        self.assertIn(b"busy.py", data)

if __name__ == "__main__":
    ptg.main()
