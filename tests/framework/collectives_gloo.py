"""collectives_gloo.py: a two-rank torch.distributed job on the CPU (gloo),
launched as torchrun would (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in
each worker's environment). With COLLECTIVES_PLANT=1 in the environment (the
command line stays the same, so that the runs compare), rank 1 draws its
tensor from another seed before the all_reduce: the job's divergence starts
on rank 1 and reaches rank 0 through the collective; with
COLLECTIVES_PLANT=mismatch, rank 1 reduces one element fewer, which gloo
finds, and the job fails there. It gathers a dict
holding a tensor too (all_gather_object: two all_gathers of pickled bytes).
With GPURR_TEST_LAUNCHER, under the test's fake recorder, a "kernel" is
launched inside each aten::mul (so that the recorder keeps what it holds
when a signal ends a rank, as from a program's first CUDA call)."""
import ctypes
import datetime
import os

import two_ranks


def worker(plant):
    import torch
    import torch.distributed as dist

    if os.environ.get("GPURR_TEST_LAUNCHER"):
        recorder = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
        launcher = ctypes.CDLL(os.environ["GPURR_TEST_LAUNCHER"])
        launcher.gpurr_test_launch_on_ops.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        assert launcher.gpurr_test_launch_on_ops(recorder._handle, b"aten::mul") == 0
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    torch.manual_seed(0)
    w = torch.randn(256)
    if plant == "1" and rank == 1:
        torch.manual_seed(1)
        w = torch.randn(256)  # at:planted
    if plant == "mismatch" and rank == 1:
        w = w[:255]
    x = w * (rank + 1)
    dist.all_reduce(x)  # at:allreduce
    dist.broadcast(x, group_src=0)  # at:broadcast (its root by its rank in the group)
    gathered = [torch.empty(256) for _ in range(2)]
    dist.all_gather(gathered, x)  # at:allgather
    # Pickled: the tensor's storage key is a host address, run to run.
    objects = [None, None]
    dist.all_gather_object(objects, {"sum": x.sum()})  # at:objects
    dist.barrier()
    dist.monitored_barrier()  # at:monitored (gloo's: names the ranks that did not reach it)
    if rank == 0:
        dist.send(x, dst=1)  # at:send (torch's send calls isend: one call)
    else:
        dist.recv(x, src=0)
    print(rank, round(float(x.sum()), 3))
    dist.destroy_process_group()


if __name__ == "__main__":
    two_ranks.run(lambda: worker(os.environ.get("COLLECTIVES_PLANT")), __file__)
