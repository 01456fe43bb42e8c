"""subgroups.py: a four-rank gloo job on the CPU whose ranks 1 and 2 share a
subgroup (dist.new_group) that all-reduces five times a step, while every
rank all-reduces once a step in the world group, on data of its own.
SUBGROUPS_PLANT="RANK:STEP,..." in the environment (the command line stays
the same, so that the runs compare) adds 1 to a rank's data at that step,
before its collectives of the step: in the subgroup's data on ranks 1 and
2, in the world's on ranks 0 and 3. A divergence planted on rank 2 at step
1 reaches rank 0 through the world's all-reduce of step 1, so it happened
before one planted on rank 0 at step 2, although rank 0 has taken part in
fewer collectives by then. Prints each rank's result."""
import os

import two_ranks


def worker(plant):
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo")
    sub = dist.new_group([1, 2])
    generator = torch.Generator().manual_seed(100 + rank)
    total = torch.zeros(32)
    for step in range(4):
        world = torch.randn(32, generator=generator)
        mine = torch.randn(32, generator=generator)
        if plant.get(rank) == step:
            if rank in (1, 2):
                mine = torch.add(mine, 1.0)  # at:plant-subgroup
            else:
                world = torch.add(world, 1.0)  # at:plant-world
        if rank in (1, 2):
            for _ in range(5):
                mine = torch.relu(mine)
                dist.all_reduce(mine, group=sub)  # at:subgroup
            total = torch.add(total, mine)
        world = torch.relu(world)
        dist.all_reduce(world)  # at:world
        total = torch.add(total, world)
    print(rank, float(total.sum()).hex(), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    plants = os.environ.get("SUBGROUPS_PLANT", "")
    two_ranks.run(lambda: worker(dict(tuple(map(int, p.split(":"))) for p in plants.split(",") if p)), __file__,
                  ranks=4)
