"""What the bench scripts that attach record to one process share."""
import subprocess


def attach(ptg, pid, args, out):
    """`ptg record -p PID ARGS -o OUT`, returned once its probes are in (it says
    "recording pid"); its stderr is a pipe, read to the end by finish()."""
    rec = subprocess.Popen([ptg, "record", "-p", str(pid), *args, "-o", out],
                           stderr=subprocess.PIPE, text=True)
    for line in rec.stderr:
        if "recording pid" in line:
            return rec
    rec.wait()
    raise RuntimeError(f"{ptg} record failed")


def finish(rec):
    """Waits for record (attach()) to end, once its target did."""
    if rec:
        rec.stderr.read()
        rec.wait()


def kill(*procs):
    """What still runs of procs (None for none), killed."""
    for p in procs:
        if p and p.poll() is None:
            p.kill()
            p.wait()
