"""collectives_gloo.py: a two-rank torch.distributed job on the CPU (gloo),
launched as torchrun would (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in
each worker's environment). With COLLECTIVES_PLANT=1 in the environment (the
command line stays the same, so that the runs compare), rank 1 draws its
tensor from another seed before the all_reduce: the job's divergence starts
on rank 1 and reaches rank 0 through the collective. It gathers a dict
holding a tensor too (all_gather_object: two all_gathers of pickled bytes)."""
import os

import two_ranks


def worker(plant):
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    w = torch.randn(256)
    if plant and rank == 1:
        torch.manual_seed(1)
        w = torch.randn(256)  # at:planted
    x = w * (rank + 1)
    dist.all_reduce(x)  # at:allreduce
    dist.broadcast(x, group_src=0)  # at:broadcast (its root by its rank in the group)
    gathered = [torch.empty(256) for _ in range(2)]
    dist.all_gather(gathered, x)  # at:allgather
    # Pickled: the tensor's storage key is a host address, run to run.
    objects = [None, None]
    dist.all_gather_object(objects, {"sum": x.sum()})  # at:objects
    dist.barrier()
    print(rank, round(float(x.sum()), 3))
    dist.destroy_process_group()


if __name__ == "__main__":
    two_ranks.run(lambda: worker(os.environ.get("COLLECTIVES_PLANT") == "1"), __file__)
