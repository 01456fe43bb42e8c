"""interpose_ctypes_check.py CUDA_LIB_DIR TEST_LIB [--reference]

Loads the CUDA libraries the way `import torch` (2.11) does, with the
recorder preloaded, then the test library (interpose_real_calls.cpp) the way
Python imports torch._C, and has it call the entry points the recorder wraps.
What the calls give (statuses, and whether cuBLAS / cuBLASLt logged them) must
equal what they give without the preload: the script runs itself again
without LD_PRELOAD (--reference) to find out.

torch/__init__.py `_load_global_deps()`: ctypes.CDLL(libtorch_global_deps.so,
RTLD_GLOBAL), whose one CUDA dependency is libcudart; then, since libcudart is
mapped, `_preload_cuda_deps()`: ctypes.CDLL(path) (RTLD_LOCAL) for each of the
libraries below, in this order, from the nvidia wheels. Then
`from torch._C import *` opens the extension with sys.getdlopenflags()
(RTLD_NOW, local), and libtorch_cuda.so, linked to cuBLAS, cuBLASLt and cuDNN,
is the caller.
"""
import ctypes
import glob
import os
import subprocess
import sys

# torch 2.11 _preload_cuda_deps(): (wheel folder, file pattern), in order.
TORCH_CUDA_LIBS = [
    ("cublas", "libcublasLt.so.*[0-9]"),
    ("cublas", "libcublas.so.*[0-9]"),
    ("cudnn", "libcudnn.so.*[0-9]"),
    ("cuda_nvrtc", "libnvrtc.so.*[0-9]"),
    ("cuda_nvrtc", "libnvrtc-builtins.so.*[0-9]"),
    ("cuda_runtime", "libcudart.so.*[0-9]"),
    ("cuda_cupti", "libcupti.so.*[0-9]"),
    ("cufft", "libcufft.so.*[0-9]"),
    ("curand", "libcurand.so.*[0-9]"),
    ("nvjitlink", "libnvJitLink.so.*[0-9]"),
    ("cusparse", "libcusparse.so.*[0-9]"),
    ("cusparselt", "libcusparseLt.so.*[0-9]"),
    ("cusolver", "libcusolver.so.*[0-9]"),
    ("nccl", "libnccl.so.*[0-9]"),
    ("nvshmem", "libnvshmem_host.so.*[0-9]"),
    ("cufile", "libcufile.so.*[0-9]"),
]


def load_like_torch(cuda_lib_dir, test_lib):
    # libtorch_global_deps.so, RTLD_GLOBAL: brings libcudart in globally.
    ctypes.CDLL(os.path.join(cuda_lib_dir, "libcudart.so.13"), mode=ctypes.RTLD_GLOBAL)
    loaded = []
    for _, pattern in TORCH_CUDA_LIBS:
        paths = sorted(glob.glob(os.path.join(cuda_lib_dir, pattern)))
        if paths:  # the toolkit here lacks a few of the wheels' libraries
            ctypes.CDLL(paths[0])  # ctypes.DEFAULT_MODE: RTLD_LOCAL
            loaded.append(os.path.basename(paths[0]))
    for needed in ("libcublasLt.so.13", "libcublas.so.13", "libcudnn.so.9", "libcurand.so.10"):
        if needed not in loaded:
            sys.exit(f"{needed} not found in {cuda_lib_dir}")
    # The extension module: the flags Python's import uses.
    lib = ctypes.CDLL(test_lib, mode=sys.getdlopenflags())
    lib.gpurrInterposeCalls.restype = ctypes.c_char_p
    lib.gpurrInterposeBinding.restype = ctypes.c_char_p
    return lib


def main():
    cuda_lib_dir, test_lib = sys.argv[1], sys.argv[2]
    if "--reference" in sys.argv[3:]:
        print(load_like_torch(cuda_lib_dir, test_lib).gpurrInterposeCalls().decode(), end="")
        return 0

    failures = []
    preload = os.environ.get("LD_PRELOAD", "")
    if "libgpurr_recorder" not in preload:
        failures.append(f"the recorder is not preloaded (LD_PRELOAD={preload!r})")
    lib = load_like_torch(cuda_lib_dir, test_lib)
    for row in lib.gpurrInterposeBinding().decode().splitlines():
        name, obj = row.split()
        if "libgpurr_recorder" not in obj:
            failures.append(f"{name} binds to {obj}, not to the recorder")
    mine = lib.gpurrInterposeCalls().decode()

    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    reference = subprocess.run([sys.executable, __file__, cuda_lib_dir, test_lib, "--reference"], env=env,
                               capture_output=True, text=True)
    print(f"with the recorder preloaded:\n{mine}\nwithout:\n{reference.stdout}", end="")
    if reference.returncode != 0 or not reference.stdout:
        failures.append(f"the reference run failed: {reference.stderr}")
    elif mine != reference.stdout:
        failures.append("the calls give other statuses, or miss the libraries, with the recorder preloaded")
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
