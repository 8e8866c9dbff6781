"""The Debian packages, as a user gets them: cpack -G DEB from a /usr build,
then `apt-get install ./ptrace-gpu_*.deb` in a fresh copy of a Debian 12
chroot that has Python and nothing else (tools/make-chroots.sh bookworm; the
libraries the package depends on wait in its apt cache, so no network is
needed). The installed binary records an exact trace of a Python process in
that chroot; dpkg -L names no build path; a purge leaves the chroot as it
was, the sampler's state directory included."""
import glob
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import ptg

ROOT = os.path.join(ptg.CHROOTS, "bookworm")
# what a purge may leave changed: package manager state and logs
VOLATILE = ("./var/lib/dpkg/", "./var/lib/apt/", "./var/cache/", "./var/log/", "./tmp/",
            "./proc/", "./sys/", "./dev/", "./run/")
# in a private mount namespace, with /proc, /sys and /dev of the host, and
# the environment of a login there (none of the tests' settings, such as the
# agents' paths of this build)
IN_CHROOT = """r=$1
shift
mount -t proc proc "$r/proc" && mount --rbind /sys "$r/sys" && mount --rbind /dev "$r/dev" || exit 125
exec chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"
"""


def files(root):
    """Every path under root (not following links), but VOLATILE's, with its mode."""
    out = set()
    for d, dirs, names in os.walk(root):
        for n in dirs + names:
            p = os.path.join(d, n)
            rel = "./" + os.path.relpath(p, root)
            if rel.startswith(VOLATILE) or (rel + "/").startswith(VOLATILE):
                continue
            out.add((rel, os.lstat(p).st_mode))
    return out


@ptg.once
class Package(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.missing = None
        if not os.path.exists(os.path.join(ROOT, ".ptg-ready")):
            cls.missing = f"chroot {ROOT} not built (tools/make-chroots.sh bookworm)"
        elif not shutil.which("cpack") or not shutil.which("dpkg-shlibdeps"):
            cls.missing = "cpack or dpkg-shlibdeps (dpkg-dev) missing"
        if cls.missing:
            return
        cls.tmp = tempfile.TemporaryDirectory(dir="/var/tmp")
        build = os.path.join(cls.tmp.name, "build")
        # only what is installed is built: the binary and its agents
        subprocess.run(["cmake", "-S", ptg.SRC, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                        "-DCMAKE_INSTALL_PREFIX=/usr", "-DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON"],
                       check=True, stdout=subprocess.DEVNULL)
        targets = ["ptrace-gpu", "ptg_pymon"]
        if os.path.exists(os.path.join(ptg.BUILD, "libptg_cupti.so")):
            targets.append("ptg_cupti")
        subprocess.run(["cmake", "--build", build, "-j", str(os.cpu_count()), "--target", *targets],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cpack", "-G", "DEB"], cwd=build, check=True, stdout=subprocess.DEVNULL)
        cls.debs = sorted(glob.glob(os.path.join(build, "*.deb")))
        cls.build = build

    @classmethod
    def tearDownClass(cls):
        if not cls.missing:
            cls.tmp.cleanup()

    def setUp(self):
        if self.missing:
            self.skipTest(self.missing)
        self.root = os.path.join(self.tmp.name, "root")
        subprocess.run(["cp", "-a", "--reflink=auto", ROOT, self.root], check=True)
        self.addCleanup(shutil.rmtree, self.root, True)

    def chroot(self, *argv, check=True):
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            IN_CHROOT, "sh", self.root, *argv], capture_output=True, text=True)
        if check:
            self.assertEqual(r.returncode, 0, f"{argv}: {r.stdout}{r.stderr}")
        return r

    def test_install_record_purge(self):
        names = [os.path.basename(d) for d in self.debs]
        self.assertIn(f"ptrace-gpu_{self.version()}_amd64.deb", names)
        before = files(self.root)
        for d in self.debs:
            shutil.copy(d, os.path.join(self.root, "tmp"))
        self.chroot("apt-get", "install", "-y", "-q", "--no-install-recommends",
                    "-o", "Acquire::Retries=0", *[f"./tmp/{n}" for n in names])

        listed = self.chroot("dpkg", "-L", "ptrace-gpu").stdout.split()
        self.assertIn("/usr/bin/ptrace-gpu", listed)
        self.assertIn("/usr/lib/ptrace-gpu/libptg_pymon.so", listed)
        self.assertIn("/usr/lib/systemd/system/ptrace-gpu-sample.service", listed)
        self.assertIn("/etc/default/ptrace-gpu", listed)
        for path in listed:
            self.assertFalse(path.startswith(("/work", "/tmp", "/var/tmp", "/root", "/home"))
                             or self.build in path or ptg.SRC in path, path)

        # an exact trace of a Python process, by the installed binary, in there
        work = os.path.join(self.root, "tmp", "w")
        os.mkdir(work)
        for n in ("fib.py", "gate.py"):
            shutil.copy(os.path.join(ptg.WORKLOADS, n), work)
        r = self.chroot("ptrace-gpu", "record", "-o", "/tmp/w/fib.ptg", "--",
                        "python3", "/tmp/w/fib.py")
        self.assertIn("recording", r.stderr)
        # no complaint of an agent (the line that says how calls are taken names one)
        said = [x for x in r.stderr.splitlines() if "python calls:" not in x]
        self.assertNotIn("agent", "\n".join(said).replace("in-process agent", ""), r.stderr)
        counts = ptg.Trace(os.path.join(work, "fib.ptg")).count("fib.py")
        self.assertEqual((counts["f:7"], counts["<module>:1"]), (5919, 1), r.stderr)
        # the sampler's unit as installed (its binary at the chroot's path),
        # verified by this host's systemd where there is one
        if shutil.which("systemd-analyze"):
            with open(os.path.join(self.root, "usr/lib/systemd/system/ptrace-gpu-sample.service")) as f:
                unit = f.read().replace("ExecStart=/usr/bin/", f"ExecStart={self.root}/usr/bin/")
            path = os.path.join(self.tmp.name, "ptrace-gpu-sample.service")
            with open(path, "w") as f:
                f.write(unit)
            v = subprocess.run(["systemd-analyze", "verify", "--man=no", path],
                               capture_output=True, text=True)
            self.assertEqual((v.returncode, v.stderr.strip()), (0, ""))

        # the service's profiles go with a purge; nothing else stays
        os.makedirs(os.path.join(self.root, "var/lib/ptrace-gpu"), mode=0o700)
        open(os.path.join(self.root, "var/lib/ptrace-gpu/sample-x.pb.gz"), "w").close()
        shutil.rmtree(work)
        self.chroot("apt-get", "purge", "-y", "-q", "--autoremove", "ptrace-gpu")
        for n in names:
            os.unlink(os.path.join(self.root, "tmp", n))
        self.assertEqual(sorted(files(self.root) ^ before), [])

    def version(self):
        with open(os.path.join(ptg.SRC, "CMakeLists.txt")) as f:
            return re.search(r"project\(ptrace-gpu VERSION (\S+)", f.read()).group(1)


if __name__ == "__main__":
    ptg.main()
