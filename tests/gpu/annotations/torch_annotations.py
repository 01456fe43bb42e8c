"""PyTorch programs for the library-annotation checks (check_annotations.sh).

  torch_annotations.py conv          a small conv net, forward and backward,
                                     with cudnn.benchmark=True: cuDNN chooses
                                     engines by timing them
  torch_annotations.py dropout SEED  dropout after torch.manual_seed(SEED)
"""
import sys

import torch


def conv():
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10)).cuda()
    x = torch.randn(8, 3, 32, 32, device="cuda")
    loss = net(x).square().mean()
    loss.backward()
    torch.cuda.synchronize()
    print(f"conv: loss {loss.item():.9g}")


def dropout(seed):
    torch.manual_seed(seed)
    x = torch.ones(1 << 16, device="cuda")
    y = torch.nn.functional.dropout(x, p=0.5, training=True)
    torch.cuda.synchronize()
    print(f"dropout: seed {seed} kept {int((y != 0).sum().item())}")


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "conv":
        conv()
    elif len(sys.argv) == 3 and sys.argv[1] == "dropout":
        dropout(int(sys.argv[2]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
