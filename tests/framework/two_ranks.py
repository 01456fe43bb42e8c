"""two_ranks.py: runs a script as a two-rank (or `ranks`-rank)
torch.distributed job on this machine, launched as torchrun would: the script runs again once per rank,
with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT in its
environment and the same command line (so that two recordings compare)."""
import os
import socket
import subprocess
import sys


def run(worker, script, ranks=2):
    """In a rank's process, calls `worker()`; otherwise starts the `ranks`
    ranks of `script` and exits with the worst of their statuses."""
    if "RANK" in os.environ:
        worker()
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(ranks):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        # Under launch_in.py (sys.argv rewritten), each rank runs under it too.
        launched = any(os.path.basename(a) == "launch_in.py" for a in sys.orig_argv[1:])
        command = sys.orig_argv[1:] if launched else [os.path.abspath(script)] + sys.argv[1:]
        procs.append(subprocess.Popen([sys.executable] + command, env=env))
    sys.exit(max(p.wait() for p in procs))
