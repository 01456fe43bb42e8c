"""Prints, colon-separated, the folders of the shared libraries that PyTorch's
wheels (torch/lib and the nvidia-* packages) bring: where the GPU suite looks
for CUDA libraries a machine has only inside the Python environment."""
import glob
import os

roots = []
try:
    import nvidia

    roots += list(nvidia.__path__)
except ImportError:
    pass
try:
    import torch

    roots.append(os.path.join(os.path.dirname(torch.__file__), "lib"))
except ImportError:
    pass
dirs = set()
for root in roots:
    for lib in glob.glob(os.path.join(root, "**", "lib*.so*"), recursive=True):
        dirs.add(os.path.dirname(lib))
print(":".join(sorted(dirs)))
