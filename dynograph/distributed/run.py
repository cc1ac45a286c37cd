"""dynograph-run: start a training script on N processes through mpiexec (like torchrun).

    dynograph-run -n 4 train.py --epochs 3
    dynograph-run -n 16 --hostfile hosts train.py        # across machines
    dynograph-run -n 2 -m mypackage.train

Each process gets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE in its environment, and
unless OMP_NUM_THREADS is set, its share of the machine's cores as OMP_NUM_THREADS (the thread
count dynograph's kernels and numpy's BLAS start with), then runs the script as ``__main__``.
An exception that ends one rank aborts the whole job, and mpiexec kills the other ranks; the
launcher exits with the job's (non-zero) status.  SIGINT, SIGTERM and SIGHUP are forwarded to
mpiexec, which forwards them to the ranks; a second one kills the job.
"""
import argparse
import os
import runpy
import shutil
import signal
import subprocess
import sys
import time
import traceback

from dynograph.runtime import threads

_ENV = (  # (our name, names MPI launchers use: MPICH's hydra, Open MPI, PMIx, Slurm)
    ("RANK", ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")),
    ("WORLD_SIZE", ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")),
    ("LOCAL_RANK", ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")),
    ("LOCAL_WORLD_SIZE", ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE")),
)


def _parser():
    p = argparse.ArgumentParser(
        prog="dynograph-run", description="Run a dynograph training script on N processes with mpiexec.")
    p.add_argument("-n", "--nproc", dest="nproc", type=int, default=1,
                   help="number of processes (ranks) in all, over every machine of --hostfile")
    p.add_argument("--hostfile", help="MPI hostfile: the machines to start ranks on")
    p.add_argument("--mpiexec", default=None,
                   help="the mpiexec to use (default: the one next to this Python, then PATH)")
    p.add_argument("--mpi-arg", action="append", default=[], metavar="ARG",
                   help="an extra argument for mpiexec (repeatable)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds a collective may wait for the other ranks before failing "
                        "(sets DYNOGRAPH_DIST_TIMEOUT; default 1800)")
    p.add_argument("-m", dest="module", action="store_true", help="run the target as a module")
    p.add_argument("target", help="the script (or module with -m)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    return p


def find_mpiexec(given=None):
    if given:
        return given
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.exists(here):
        return here
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if found is None:
        raise SystemExit("dynograph-run: no mpiexec found; pip install \"dynograph[distributed]\" "
                         "(MPICH) or install an MPI, or pass --mpiexec PATH")
    return found


def command(ns):
    cmd = [find_mpiexec(ns.mpiexec), "-n", str(ns.nproc)]
    if ns.hostfile:
        cmd += ["-hostfile", ns.hostfile]      # both MPICH's and Open MPI's spelling
    cmd += ns.mpi_arg
    cmd += [sys.executable, "-m", "dynograph.distributed.run", "--worker"]
    cmd += (["-m"] if ns.module else []) + [ns.target] + ns.args
    return cmd


def environment(ns, base=None):
    """The ranks' environment: ``base`` (this process's), the timeout, and, for several ranks
    with no ``OMP_NUM_THREADS`` given, each rank's share of this machine's cores (every rank
    splitting its kernels over every core would oversubscribe them; with a hostfile, where the
    ranks per machine are not known here, one thread as torchrun does)."""
    env = dict(os.environ if base is None else base)
    if ns.timeout is not None:
        env["DYNOGRAPH_DIST_TIMEOUT"] = str(ns.timeout)
    if ns.nproc > 1 and not env.get("OMP_NUM_THREADS"):
        share = 1 if ns.hostfile else max(1, threads.usable_cores() // ns.nproc)
        env["OMP_NUM_THREADS"] = str(share)
        print(f"dynograph-run: OMP_NUM_THREADS={share} for each of the {ns.nproc} ranks (set it to "
              "choose another thread count)", file=sys.stderr)
    return env


def launch(argv):
    ns = _parser().parse_args(argv)
    if ns.nproc < 1:
        raise SystemExit("dynograph-run: -n must be at least 1")
    proc = subprocess.Popen(command(ns), env=environment(ns), start_new_session=True)
    received = []

    def forward(signum, frame):
        received.append(signum)
        try:
            if len(received) == 1:
                proc.send_signal(signum)
            else:                                  # asked twice: kill the whole job
                os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, forward)
    rc = proc.wait()
    try:
        os.killpg(proc.pid, signal.SIGKILL)        # a rank mpiexec left behind
    except (ProcessLookupError, PermissionError):
        pass
    if rc < 0:
        return 128 - rc
    if rc == 0 and received:
        return 128 + received[0]
    return rc


def worker(argv):
    """Inside mpiexec: set the rank environment, run the target, abort the job on an error."""
    module = argv[:1] == ["-m"]
    if module:
        argv = argv[1:]
    target, args = argv[0], argv[1:]
    for ours, theirs in _ENV:
        for name in theirs:
            if name in os.environ:
                os.environ.setdefault(ours, os.environ[name])
                break
    sys.argv = [target] + args
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            _abort(e.code if isinstance(e.code, int) else 1)
        raise
    except BaseException:
        sys.stderr.write(traceback.format_exc())    # one write: the abort may follow at once
        _abort(1)
    return 0


def _abort(code):
    """End every rank now: the others may be waiting in a collective for this one."""
    sys.stdout.flush()
    sys.stderr.flush()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and "mpi4py.MPI" in sys.modules:
        # mpiexec's proxies forward a rank's output from pipes; the abort ends them, and the
        # last lines written (the traceback's message) were sometimes lost with them
        time.sleep(0.25)
        sys.modules["mpi4py.MPI"].COMM_WORLD.Abort(code)
    os._exit(code)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker(argv[1:])
    return launch(argv)


if __name__ == "__main__":
    sys.exit(main())
