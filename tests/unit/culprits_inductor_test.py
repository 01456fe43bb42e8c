#!/usr/bin/env python3
"""data/known_culprits.json's entry for Inductor's atomic scatters, held to the
kernels the installed torch.compile generates.

usage: culprits_inductor_test.py [KNOWN_CULPRITS_JSON]

Compiles, with Inductor on the CPU (its C++ kernels are named as its Triton
ones are, from the ATen ops they fuse: cpp_fused_index_add_0 on the CPU,
triton_poi_fused_index_add_0 on a GPU; both accumulate with atomic adds), a
step that uses index_add, scatter_add, index_put with accumulate=True,
F.fold and nn.Embedding's backward, and a step of pointwise ops and
slice/select scatters. Fails unless every kernel that accumulates with
atomic adds matches the entry's `kernel` pattern (and there are some), no
kernel of the second step does, and with deterministic algorithms on (the
entry's fix) Inductor generates no atomic add. Exits 77 (ctest: skipped)
when torch cannot be imported."""
import json
import os
import re
import sys
import tempfile

sys.dont_write_bytecode = True

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_FILE = os.path.join(HERE, '..', '..', 'data', 'known_culprits.json')
ENTRY = 'inductor-atomic-accumulate'


def kernels(step):
    """The kernels Inductor generated while step() ran (its forward and
    backward): name -> whether it accumulates with atomic adds."""
    from torch._inductor.utils import run_and_get_code

    _, codes = run_and_get_code(step)
    out = {}
    for code in codes:
        for m in re.finditer(r"^(\w+_fused_\w+) = async_compile\.\w+\((.*?)'''\)", code, re.MULTILINE | re.DOTALL):
            out[m.group(1)] = 'atomic_add' in m.group(2)
    return out


def scattering_step(torch):
    F = torch.nn.functional
    w = torch.randn(10, 4, requires_grad=True)

    @torch.compile
    def step(idx, src, patches):
        a = torch.zeros(8, 4).index_add(0, idx, src)
        b = torch.zeros(8, 4).scatter_add(0, idx.view(-1, 1).expand(-1, 4), src)
        c = torch.zeros(8, 4).index_put((idx,), src, accumulate=True)
        d = F.fold(patches, output_size=(4, 4), kernel_size=2)
        e = F.embedding(idx, w)
        return a.sum() + b.sum() + c.sum() + d.sum() + e.sum()

    idx, src, patches = torch.randint(0, 8, (16,)), torch.randn(16, 4), torch.randn(1, 4, 9)
    return lambda: step(idx, src, patches).backward()


def plain_step(torch):
    @torch.compile
    def step(x, y):
        z = torch.select_scatter(x, y[0], 0, 1)
        z = torch.slice_scatter(z, y[:2], 0, 2, 4)
        return (z * 2 + 1).relu().sum()

    x, y = torch.randn(8, 4), torch.randn(8, 4)
    return lambda: step(x, y)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_FILE
    entries = {e['id']: e for e in json.load(open(path))['entries']}
    if ENTRY not in entries:
        print(f'FAIL: {path} has no entry {ENTRY}')
        return 1
    pattern = re.compile(entries[ENTRY]['kernel'])
    os.environ['TORCHINDUCTOR_CACHE_DIR'] = tempfile.mkdtemp(prefix='gpurr-inductor-')  # every kernel generated here
    try:
        import torch
    except ImportError as e:
        print(f'skipped: no torch ({e})')
        return SKIP
    torch.manual_seed(0)
    torch.set_num_threads(2)  # on one thread Inductor's C++ kernels add without atomics
    failures = []

    generated = kernels(scattering_step(torch))
    print('scattering step:', ', '.join(f'{n}{" (atomic)" if a else ""}' for n, a in sorted(generated.items())))
    atomic = [n for n, a in generated.items() if a]
    if len(atomic) < 2:
        failures.append(f'{len(atomic)} kernels with atomic adds (torch {torch.__version__}): the test is stale')
    failures += [f'{n} accumulates with atomic adds but does not match the entry' for n in atomic if not pattern.search(n)]

    generated = kernels(plain_step(torch))
    print('plain step:', ', '.join(sorted(generated)))
    if not generated:
        failures.append('the plain step generated no kernel')
    failures += [f'{n} matches the entry but adds nothing atomically' for n, a in generated.items()
                 if pattern.search(n) and not a]

    torch.use_deterministic_algorithms(True)
    generated = kernels(scattering_step(torch))
    print('scattering step, deterministic algorithms on:', ', '.join(sorted(generated)))
    failures += [f'{n} accumulates with atomic adds with deterministic algorithms on (the entry\'s fix)'
                 for n, a in generated.items() if a]

    for f in failures:
        print('FAIL:', f)
    print('ok' if not failures else f'{len(failures)} failures')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
