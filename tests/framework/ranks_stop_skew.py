"""ranks_stop_skew.py: two ranks of DistributedDataParallel over gloo on the
CPU, 6 steps, whose ranks end step 2 a second apart; between the two, rank
0 names step 2 in gpurr record's stop file (GPURR_STOP_FILE), as gpurr
bisect's comparison may. A rank that stopped after step 2 while the other
ran on into step 3's all-reduce would leave it waiting (NCCL) or failing
(gloo): the job must run to its end. A stop file there from the start
stops both ranks after the step it names. Prints each step each rank
finishes."""
import os
import time

import two_ranks


def worker():
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    ddp = nn.parallel.DistributedDataParallel(nn.Linear(8, 8))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    stop = os.environ["GPURR_STOP_FILE"]
    for step in range(6):
        loss = ddp(torch.randn(4, 8)).square().mean()
        loss.backward()
        if rank == 1 and step == 2:
            time.sleep(1.0)  # rank 1 a second behind rank 0
        opt.step()
        opt.zero_grad()
        if rank == 0 and step == 2:  # after rank 0's step 2, before rank 1's
            with open(stop + ".part", "w") as f:
                f.write("2\n")
            os.rename(stop + ".part", stop)
        os.write(1, f"{rank} finished step {step}\n".encode())  # one write: the ranks share the pipe
    dist.destroy_process_group()


if __name__ == "__main__":
    two_ranks.run(worker, __file__)
