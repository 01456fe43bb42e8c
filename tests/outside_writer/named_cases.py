"""run_cases.py's cases where two runs differ in one way and `gpurr diff`
must name the divergence right: its launch, cause and evidence."""
import os
import re
import subprocess

import case_kit as kit
from case_kit import (case, diff, expect, expect_cause, expect_identical, image_copies, process, record, seq_of,
                      text_report, verify)
from gpurr_outside import bufhash, training
from gpurr_outside.training import Variant


@case
def extra_kernel_workspace():
    """Run B runs one extra kernel with a 2 MiB workspace of its own (a common
    size: the caching allocator's small segments are 2 MiB too): one path
    divergence there, nothing tainted after it."""
    a, pa = record(Variant(seed=1))
    b, pb = record(Variant(seed=2, extra_kernel_step=3))
    j, fd = expect_cause(a, b, 'algorithmChoice', 'extra kernel')
    p = process(j)
    st = fd['stretch']
    expect(fd['path'] and fd['a'] is None and st['a']['count'] == 0 and st['b']['count'] == 1,
           'a stretch of nothing in run A and one operation in run B', st)
    expect(fd['b']['seq'] == seq_of(pb, 'splitKreduce') and 'splitKreduce' in fd['b']['name'],
           'run B\'s stretch is the extra kernel (#%d)' % fd['b']['seq'], fd['b'])
    expect(p['pathDivergences']['count'] == 1, '1 path divergence', p['pathDivergences'])
    br = p['blastRadius']
    expect(br['taintedOperations'] == 0 and br['laterDivergentOperations'] == 0 and br['independentCount'] == 0,
           'no later operation tainted or divergent', br)


@case
def extra_launch_before_first_use():
    """Run B launches the dropout kernel once more at step 0, before the real
    dropout, on two 2 MiB buffers a library took for itself. The real dropout
    is the first launch of its kernel to use a fresh segment of the caching
    allocator, which every later step uses again: counted among that kernel's
    launches, run B's is one later, so the segment's identity is the one run
    A gives the extra launch's buffer. One path divergence (the extra launch),
    nothing after it: the diff names the segment as run A's, from where the
    launches it pairs by shape point, and says so. The extra launch has the
    real dropout's op, line and kernel, and a trace numbers no op call: one
    more call of the op and one more launch within a call look alike, and
    no library chose another kernel, so the cause is unknown, saying both."""
    a, pa = record(Variant(seed=1))
    b, pb = record(Variant(seed=2, extra_dropout_step=0))
    j, fd = expect_cause(a, b, 'unknown', 'one more dropout launch')
    expect('once more than run A: the program called it again' in fd['summary'] and
           'or it launched again within a call' in fd['summary'], 'the summary says both', fd['summary'])
    p = process(j)
    st = fd['stretch']
    expect(fd['path'] and st['a']['count'] == 0 and st['b']['count'] == 1 and 'fused_dropout' in fd['b']['name'],
           'a stretch of the extra dropout launch alone', st)
    expect(p['pathDivergences']['count'] == 1, '1 path divergence', p['pathDivergences'])
    br = p['blastRadius']
    expect(br['laterDivergentOperations'] == 0 and br['independentCount'] == 0, 'nothing divergent after it', br)
    expect(p.get('allocationsRenamed', 0) >= 1, 'the renamed segment counted', p.get('allocationsRenamed'))
    expect("of run B's allocations named as run A's" in text_report(a, b), 'the text report says so')
    # A real divergence later (index_add's atomics at step 2) is still found
    # after it, as the one independent divergence, with its cause.
    b, _ = record(Variant(seed=2, extra_dropout_step=0, atomics_step=2))
    _, j, _ = diff(a, b)
    p = process(j)
    ind = p['blastRadius']['independent']
    expect(p['blastRadius']['independentCount'] == 1 and 'indexFuncLargeIndex' in ind[0]['a']['name'],
           "index_add's launch of step 2, alone", ind)


@case
def written_only_ranges():
    """Every input hashed (hashInputs), and the writer leaves out of a
    launch's inputs the ranges it only writes (FORMAT.md section 3): run B's
    cuDNN times a benchmark candidate at step 2 that writes a tensor of the
    conv's size, freed before the conv's output takes its block. One path
    divergence there; the conv only writes that block, so nothing after it
    reads data derived from the candidate. Where the writer lists the block
    among the conv's inputs too (it may be read), the conv reads it."""
    a, _ = record(Variant(seed=1, hash_inputs=True, written_out_of_inputs=True))
    b, pb = record(Variant(seed=2, hash_inputs=True, written_out_of_inputs=True, autotune_step=2))
    j, fd = expect_cause(a, b, 'algorithmChoice', 'a benchmark candidate in run B')
    expect(fd['b']['seq'] == seq_of(pb, 'bench_candidate'), 'the first divergence is the candidate', fd['b'])
    p = process(j)
    expect(p['pathDivergences']['count'] == 1 and p['blastRadius']['taintedOperations'] == 0 and
           p['blastRadius']['independentCount'] == 0, 'nothing read what it wrote', p['blastRadius'])
    a, _ = record(Variant(seed=3, hash_inputs=True))
    b, _ = record(Variant(seed=4, hash_inputs=True, autotune_step=2))
    j, _ = expect_cause(a, b, 'algorithmChoice', 'the same, its block among the conv\'s inputs')
    expect(process(j)['blastRadius']['taintedOperations'] > 0, 'the conv reads it: tainted',
           process(j)['blastRadius'])


@case
def inductor_autotuning():
    """Run B autotunes a kernel at step 2 (Inductor at its first call: an L2
    flush, then three candidates timed into a clone, every one marked
    Origin.benchmarking, FORMAT.md): set aside, the runs identical; and a
    divergence after it is found at its place among the program's own
    operations, numbered as in the run that did not autotune."""
    a, pa = record(Variant(seed=1))
    b, pb = record(Variant(seed=2, inductor_autotune_step=2))
    rc, j, err = diff(a, b)
    expect(rc == 0 and j['identical'], 'identical, exit 0', {'rc': rc, 'err': err})
    expect(process(j).get('setAside') == {'benchmarking': {'a': 0, 'b': 4}}, 'four operations of run B set aside',
           process(j).get('setAside'))
    expect(process(j)['operations']['a'] == process(j)['operations']['b'], 'the same operations compared',
           process(j)['operations'])
    a, pa = record(Variant(seed=3, atomics_step=3))
    b, pb = record(Variant(seed=4, inductor_autotune_step=2))
    j, fd = expect_cause(a, b, 'nondeterministicKernel', 'atomics after the autotuning')
    expect(fd['a']['seq'] == seq_of(pa, 'indexFuncLargeIndex', step=3), 'the index_add of step 3', fd['a'])
    expect(fd['a']['index'] == fd['b']['index'], 'at the same operation number in both runs', (fd['a'], fd['b']))


@case
def compiled_other_binary():
    """The mean is torch.compile's reduction kernel, built in run B for
    another configuration: its block sizes are in the code, so run B loads
    another image for the same kernel name and launches it with the same
    grid and block, and it adds in another order. Algorithm choice at that
    launch, matched one to one, its evidence naming both images' digests
    (FORMAT.md, ModuleLoad.digest), and the known culprit for autotuned
    reductions; the same configuration in both runs is identical."""
    a, pa = record(Variant(seed=1, compiled_mean='XBLOCK=1,R0_BLOCK=64'))
    b, pb = record(Variant(seed=2, compiled_mean='XBLOCK=1,R0_BLOCK=64'))
    expect_identical(a, b, 'the same configuration')
    b, pb = record(Variant(seed=2, compiled_mean='XBLOCK=1,R0_BLOCK=128'))
    j, fd = expect_cause(a, b, 'algorithmChoice', 'another binary of the reduction')
    expect(not fd['path'] and fd['a']['seq'] == seq_of(pa, 'triton_red_fused_mean_0', step=0),
           'the reduction of step 0, matched one to one', fd['a'])
    digests = []
    for prog in (pa, pb):
        image = [bytes(m) for m in prog.modules if b'triton_red_fused_mean_0' in bytes(m)][0]
        digests.append('%016x' % bufhash.digest(image))
    ev = ' '.join(fd['evidence'])
    expect(all(d in ev for d in digests) and "the kernel's code differs" in ev,
           "evidence: the kernel's code differs, both images' digests", fd['evidence'])
    expect([k['id'] for k in fd['known']] == ['inductor-reduction-autotune'], 'the autotuned reduction culprit',
           fd['known'])


@case
def pointer_parameter():
    """Same kernel and shape, one pointer 128 bytes earlier (a slice at
    another offset), or into another allocation: scalar parameters, with the
    operand and both sides' allocation and offset."""
    a, pa = record(Variant(seed=1))
    for target, words in (('slice', ['128 bytes earlier in run B', 'the same allocation']),
                          ('other', ['another allocation'])):
        b, pb = record(Variant(seed=2, pointer_step=2, pointer_target=target))
        j, fd = expect_cause(a, b, 'scalarParameters', 'pointer (%s)' % target)
        expect(not fd['path'] and fd['a']['seq'] == seq_of(pa, 'CUDAFunctor_add', step=2),
               'the add of step 2, matched one to one', fd['a'])
        ptr = [d for d in fd['params']['differing'] if d['meaning'] == 'pointer']
        expect(len(ptr) == 1 and ptr[0]['param'] == 3 and ptr[0]['offset'] == 0x18,
               'parameter 3 (bytes 0x18-0x20) differs as a pointer', fd['params'])
        ev = ' '.join(fd['evidence'])
        m = re.search(r'run A offset (0x[0-9a-f]+) of alloc#(\d+).*run B offset (0x[0-9a-f]+) of alloc#(\d+)', ev)
        expect(m is not None, 'evidence names allocation and offset on each side', fd['evidence'])
        ea = [e for e in pa.events if e['seq'] == fd['a']['seq']][0]['launch']['pointers']
        eb = [e for e in pb.events if e['seq'] == fd['b']['seq']][0]['launch']['pointers']
        pa3 = [x for x in ea if x['byteOffset'] == 0x18][0]
        expect(int(m.group(1), 16) == pa3['offset'] and int(m.group(2)) == pa3['allocation'],
               'run A side: alloc#%d+0x%x as written' % (pa3['allocation'], pa3['offset']))
        pb3 = [x for x in eb if x['byteOffset'] == 0x18][0]
        expect(int(m.group(3), 16) == pb3['offset'], 'run B side: offset 0x%x as written' % pb3['offset'])
        for w in words:
            expect(w in ev, 'evidence says "%s"' % w, fd['evidence'])
        expect(process(j)['pathDivergences']['count'] == 0, 'no path divergence', process(j)['pathDivergences'])


@case
def nondeterministic_kernel():
    """index_add's atomics add in another order in run B."""
    for hash_inputs in (False, True):
        a, pa = record(Variant(seed=1, hash_inputs=hash_inputs))
        b, _ = record(Variant(seed=2, hash_inputs=hash_inputs, atomics_step=2))
        j, fd = expect_cause(a, b, 'nondeterministicKernel', 'atomics (hash inputs %s)' % hash_inputs)
        expect(fd['a']['seq'] == seq_of(pa, 'indexFuncLargeIndex', step=2), 'the index_add of step 2', fd['a'])
        expect(fd['inputs']['identical'] and fd['params']['identical'], 'inputs and parameters identical')
        expect(any(k['matchedBy'] == 'framework op' and 'index_add' in k['op'] for k in fd['known']),
               'known culprit: index_add, by its framework op', fd['known'])
        out = fd['outputs']['differing']
        expect(len(out) == 1 and out[0]['chunks'] == 20 and 1 <= out[0]['differingChunks'] < 20,
               'the embedding gradient differs in some of its 20 chunks', out)
        p = process(j)
        expect(p['pathDivergences']['count'] == 0 and p['blastRadius']['independentCount'] == 0,
               'no path divergence, no independent divergence', p['blastRadius'])


@case
def host_addresses_in_parameters():
    """Recorded with the host's layout randomised (gpurr record --aslr):
    index_add's functor reference, a host address, differs in every launch.
    Alone it is no difference; with the atomics of step 2 in another order,
    the kernel is still the cause, not its parameters."""
    a, pa = record(Variant(seed=1, host_layout=1))
    b, _ = record(Variant(seed=2, host_layout=2))
    expect_identical(a, b, 'host addresses alone')
    b, _ = record(Variant(seed=2, host_layout=2, atomics_step=2))
    j, fd = expect_cause(a, b, 'nondeterministicKernel', 'atomics, host addresses differing')
    expect(fd['a']['seq'] == seq_of(pa, 'indexFuncLargeIndex', step=2), 'the index_add of step 2', fd['a'])
    diff = fd['params']['differing']
    expect(len(diff) == 1 and diff[0]['meaning'] == 'host addresses' and diff[0]['param'] == 4,
           'parameter 4 differs, as host addresses', fd['params'])
    expect(any('host addresses in no recorded allocation' in e for e in fd['evidence']),
           'the evidence says why they do not count', fd['evidence'])
    p = process(j)
    expect(p['blastRadius']['independentCount'] == 0, 'no independent divergence', p['blastRadius'])


@case
def heap_addresses_in_parameters():
    """index_add's functor is a heap object below 4 GiB, where a non-PIE
    Python keeps its heap with the layout fixed, at another place in each
    run. The trace's host regions (the index) say it is host memory: no
    difference, and with the atomics of step 2 the kernel is the cause. A
    trace without host regions (an older recorder) has no such evidence: the
    value counts, and the parameters are blamed as they were on a GPU."""
    a, pa = record(Variant(seed=1, host_heap=1))
    b, _ = record(Variant(seed=2, host_heap=2))
    expect_identical(a, b, 'heap addresses alone')
    c, _ = record(Variant(seed=2, host_heap=2, atomics_step=2))
    j, fd = expect_cause(a, c, 'nondeterministicKernel', 'atomics, heap addresses differing')
    diff = fd['params']['differing']
    expect(len(diff) == 1 and diff[0]['meaning'] == 'host addresses' and diff[0]['param'] == 4,
           'parameter 4 differs, as host addresses', fd['params'])
    d, _ = record(Variant(seed=2, host_heap=2, atomics_step=2), host_regions=())
    j, fd = expect_cause(a, d, 'scalarParameters', 'atomics, heap addresses, run B without host regions')
    expect(fd['params']['differing'][0]['meaning'] == '', 'no meaning claimed', fd['params'])


@case
def snapshots_and_chunks():
    """Chunks of 1 KiB (hashChunkBytes) and snapshots of some of step 2's
    launches: gpurr verify re-hashes every snapshot against the Python hash;
    the diff locates the atomics' difference by chunk and by value."""
    a, pa = record(Variant(seed=1, chunk_bytes=1024, snapshot_step=2))
    b, _ = record(Variant(seed=2, chunk_bytes=1024, snapshot_step=2, atomics_step=2))
    for t in (a, b):
        rc, j = verify(t)
        expect(j['snapshots'] >= 8, 'verify re-hashed %d snapshots of %s' % (j['snapshots'], os.path.basename(t)), j)
    j, fd = expect_cause(a, b, 'nondeterministicKernel', 'atomics, with snapshots')
    expect(fd['a']['seq'] == seq_of(pa, 'indexFuncLargeIndex', step=2), 'the index_add of step 2', fd['a'])
    out = [d for d in fd['outputs']['differing'] if d['a']['size'] == training.VOCAB * training.DIM * 4]
    expect(len(out) == 1, 'the embedding gradient differs', fd['outputs'])
    d = out[0]
    expect(d['chunkBytes'] == 0, 'no chunk digests for a range of 1250 chunks (FORMAT.md: 2 to 256)',
           {k: d[k] for k in ('chunkBytes', 'chunks', 'differingChunks')})
    v = d.get('values') or {}
    spans = d['differingSpans']
    expect(spans and all(e - b <= 8 for b, e in spans[:5]), 'differing spans at byte granularity: %s' % spans[:3], spans[:5])
    expect(v.get('differingBytes', 0) > 0 and v.get('differingFloat32', 0) >= 1 and v.get('maxAbsDiff', 1) < 1e-3,
           'from the snapshots: %s bytes, %s float32 values differ, max |d| %s'
           % (v.get('differingBytes'), v.get('differingFloat32'), v.get('maxAbsDiff')), d)


@case
def rng_state():
    """Dropout's Philox seed, then its offset, differ."""
    a, pa = record(Variant(seed=1))
    b, _ = record(Variant(seed=2, philox_seed=0xbad5eed))
    j, fd = expect_cause(a, b, 'rngState', 'Philox seed')
    expect(fd['a']['seq'] == seq_of(pa, 'fused_dropout', step=0), 'the first dropout', fd['a'])
    expect(any(d['meaning'] == 'philox seed/offset' for d in fd['params']['differing']),
           'the differing parameter is the Philox state', fd['params'])
    b, _ = record(Variant(seed=2, philox_offset_step=3))
    j, fd = expect_cause(a, b, 'rngState', 'Philox offset')
    expect(fd['a']['seq'] == seq_of(pa, 'fused_dropout', step=3), 'the dropout of step 3', fd['a'])


# Unset, PyTorch draws its CUDA generator's seed at random, 53 bits wide.
SEED_A, SEED_B = 0x1b2f5e07c4d9a3, 0x0e61d4a8f9b207


@case
def philox_inside_struct():
    """scaled_dot_product_attention with dropout, as memory-efficient
    attention runs it: the Philox state lies inside the kernel's one
    parameter, a struct, beside a heap address that differs anyway. The
    recorder cannot decode it there; the diff finds it by the seed the run's
    dropout launches take."""
    a, pa = record(Variant(seed=1, attention=True, philox_seed=SEED_A, host_heap=1))
    b, _ = record(Variant(seed=2, attention=True, philox_seed=SEED_B, host_heap=2))
    j, fd = expect_cause(a, b, 'rngState', 'unseeded runs')
    expect(fd['a']['seq'] == seq_of(pa, 'fmha_cutlassF', step=0), 'the first attention launch', fd['a'])
    differing = fd['params']['differing']
    expect(len(differing) == 1 and differing[0]['param'] == 0 and differing[0]['meaning'] == 'philox seed/offset',
           'its one parameter differs, as the Philox state', differing)
    expect(any('inside parameter 0' in e and 'seed=%d offset=16' % SEED_A in e and 'seed=%d' % SEED_B in e
               for e in fd['evidence']), 'the evidence gives both seeds, inside parameter 0', fd['evidence'])
    b, _ = record(Variant(seed=2, attention=True, philox_seed=SEED_A, host_heap=2, philox_offset_step=3))
    j, fd = expect_cause(a, b, 'rngState', 'the same seed, the offset advanced from step 3')
    expect(fd['a']['seq'] == seq_of(pa, 'fmha_cutlassF', step=3), 'the attention launch of step 3', fd['a'])
    # A seed no Philox launch of the run took, or a small one both runs share:
    # any field may hold such a value, and nothing says it is a seed.
    b, _ = record(Variant(seed=2, attention=True, philox_seed=SEED_A, attention_seed=SEED_B, host_heap=2))
    expect_cause(a, b, 'scalarParameters', 'a seed the run\'s Philox launches never took')
    a, _ = record(Variant(seed=1, attention=True, philox_seed=42))
    b, _ = record(Variant(seed=2, attention=True, philox_seed=42, philox_offset_step=3))
    expect_cause(a, b, 'scalarParameters', 'torch.manual_seed(42) in both, the offset advanced')


@case
def host_input():
    """One pixel of step 3's batch differs."""
    for capture in (False, True):
        a, pa = record(Variant(seed=1, capture_host_data=capture))
        b, pb = record(Variant(seed=2, capture_host_data=capture, host_input_step=3))
        j, fd = expect_cause(a, b, 'hostInput', 'host input (captured %s)' % capture)
        copies = image_copies(pa)
        expect(fd['a']['kind'] == 'memcpy' and fd['a']['seq'] == copies[3], 'the copy of step 3\'s images', fd['a'])
        if capture:
            expect(any('123' in e or '0x1ec' in e for e in fd['evidence']), 'evidence locates the byte (float 123)',
                   fd['evidence'])


@case
def algorithm_choice():
    """cuDNN picks an FFT engine (three kernels) at step 2."""
    a, pa = record(Variant(seed=1))
    b, pb = record(Variant(seed=2, algo_step=2))
    j, fd = expect_cause(a, b, 'algorithmChoice', 'FFT engine')
    st = fd['stretch']
    expect(st['a']['count'] == 1 and st['b']['count'] == 3, 'one kernel in run A, three in run B', st)
    expect(fd['a']['seq'] == seq_of(pa, 'fprop_implicit_gemm', step=2) and 'fft_r2c' in fd['b']['name'],
           'at step 2\'s convolution', fd)
    expect(any('engine=12' in e for e in fd['evidence']) and any('engine=3' in e for e in fd['evidence']),
           'evidence shows both engines', fd['evidence'])


@case
def uninitialised_memory():
    """The mean kernel reads a torch.empty buffer nothing wrote (both runs)."""
    a, pa = record(Variant(seed=1, uninit_step=2))
    b, _ = record(Variant(seed=2, uninit_step=2))
    j, fd = expect_cause(a, b, 'uninitialisedMemory', 'torch.empty read')
    expect(fd['a']['seq'] == seq_of(pa, 'reduce_kernel', step=2), 'the mean of step 2', fd['a'])
    d = [x for x in fd['inputs']['differing'] if x.get('unwrittenBytes')]
    expect(len(d) == 1 and d[0]['a']['size'] == 12 << 20, 'the 12 MiB buffer, never written', fd['inputs'])


@case
def inplace_op_on_empty_memory():
    """An in-place op (addcmul_) on a torch.empty buffer reads its garbage,
    while the functor it takes by value holds stack bytes that differ too (as
    empty_read.py showed on a GPU): uninitialised memory, not the parameters.
    An op that overwrites what it writes (copy_) is not taken to read it: its
    buffer's old contents are set aside and the parameters explain it. Where
    the trace says whether the op works in place (Origin.inPlace), that
    decides, not the op's name."""
    a, pa = record(Variant(seed=1, inplace_empty_step=2))
    b, _ = record(Variant(seed=2, inplace_empty_step=2))
    j, fd = expect_cause(a, b, 'uninitialisedMemory', 'in-place op on torch.empty')
    expect(fd['a']['seq'] == seq_of(pa, 'AddcmulFunctor', step=2), 'the addcmul_ of step 2', fd['a'])
    expect(any('aten::addcmul_ works in place' in e for e in fd['evidence']), 'the evidence says it works in place',
           fd['evidence'])
    a, _ = record(Variant(seed=1, inplace_empty_step=2, inplace_op='aten::copy_'))
    b, _ = record(Variant(seed=2, inplace_empty_step=2, inplace_op='aten::copy_'))
    j, fd = expect_cause(a, b, 'scalarParameters', 'copy_ onto torch.empty with other functor bytes')
    expect(not any('works in place' in e for e in fd['evidence']), 'copy_: not in place', fd['evidence'])
    expect(any("an output buffer's old contents" in e for e in fd['evidence']),
           'the evidence sets the old contents aside', fd['evidence'])
    # Batch norm updates running statistics that Module.to_empty left
    # uninitialised: its name does not say it works in place, its schema
    # (Origin.inPlace) does. Without the field, the name rule sets the old
    # contents aside and blames the functor bytes.
    a, _ = record(Variant(seed=1, inplace_empty_step=2, inplace_op='aten::native_batch_norm', inplace_schema='yes'))
    b, _ = record(Variant(seed=2, inplace_empty_step=2, inplace_op='aten::native_batch_norm', inplace_schema='yes'))
    j, fd = expect_cause(a, b, 'uninitialisedMemory', 'batch norm on running statistics left by to_empty')
    expect(any('aten::native_batch_norm works in place' in e for e in fd['evidence']),
           'the evidence says batch norm works in place', fd['evidence'])
    a, _ = record(Variant(seed=1, inplace_empty_step=2, inplace_op='aten::native_batch_norm'))
    b, _ = record(Variant(seed=2, inplace_empty_step=2, inplace_op='aten::native_batch_norm'))
    expect_cause(a, b, 'scalarParameters', 'batch norm without Origin.inPlace: the name rule')
    # A word of the functor that holds a stale device address in run A only
    # (empty_read.py on an H200): the recorder counts one more pointer there,
    # and hashes one more range. The launches still pair up (same kernel and
    # launch configuration), and the unwritten accumulator is the cause.
    a, pa = record(Variant(seed=1, inplace_empty_step=2, stale_pointer=True))
    b, _ = record(Variant(seed=2, inplace_empty_step=2, stale_pointer=True))
    j, fd = expect_cause(a, b, 'uninitialisedMemory', 'in-place op with a stale device address in one run')
    expect(fd['a']['seq'] == seq_of(pa, 'AddcmulFunctor', step=2), 'the addcmul_ of step 2', fd['a'])
    # The accumulator pairs with its counterpart; the range hashed through
    # the stale address, run A's alone, weighs nothing (DIFF.md): it is not
    # listed, and the evidence says it was left out.
    outs = fd['outputs']['differing']
    expect(any(o['a']['size'] == o['b']['size'] > 0 for o in outs) and
           not any(o['a']['size'] == 0 or o['b']['size'] == 0 for o in outs),
           'the accumulator compared, the stale range not', outs)
    expect(any('1 stale word' in e and '1 range hashed through it in one run alone' in e for e in fd['evidence']),
           'the evidence names the stale word and its range', fd['evidence'])
    # An op the schema says writes only its outputs is not in place, whatever its name.
    a, _ = record(Variant(seed=1, inplace_empty_step=2, inplace_schema='no'))
    b, _ = record(Variant(seed=2, inplace_empty_step=2, inplace_schema='no'))
    expect_cause(a, b, 'scalarParameters', "Origin.inPlace 'no' overrides the name")


@case
def stale_word_alone():
    """The in-place op's functor holds a stale device address in run A only
    (as ReduceOp's and TensorListMetadata's unwritten words did on an H200),
    and fresh memory reads zeros in both runs, so the op computes the same
    bits: the launches pair up despite the stale word, the range hashed
    through it is run A's alone, and the runs are identical. The report says
    which launch was paired so, in text, JSON and HTML."""
    a, pa = record(Variant(seed=1, inplace_empty_step=2, stale_pointer=True, fresh_zeros=True))
    b, _ = record(Variant(seed=2, inplace_empty_step=2, stale_pointer=True, fresh_zeros=True))
    j = expect_identical(a, b, 'a stale device address in one run only, the same bits computed')
    paired = process(j).get('pairedDespite', {}).get('staleWords')
    expect(paired is not None and paired['count'] == 1, 'one launch paired despite a stale word', paired)
    expect(paired['first']['seq'] == seq_of(pa, 'AddcmulFunctor', step=2), 'the addcmul_ of step 2', paired)
    expect('paired despite a stale word' in text_report(a, b), 'the text report says so')
    page = os.path.join(os.path.dirname(a), 'report.html')
    subprocess.run([kit.GPURR, 'diff', '--html', page, a, b], capture_output=True)
    with open(page, encoding='utf-8') as f:
        expect('1 launch paired despite a stale word' in f.read(), 'the HTML page says so')


@case
def dead_device_address():
    """The in-place op's functor holds, in both runs, a device address where
    no allocation is live at the launch (memory freed long before), other in
    each run: no pointer (FORMAT.md section 4), and the host-address rule
    takes it as an address a kernel does not read through (DIFF.md, params):
    identical where the op computes the same bits. Where fresh memory differs,
    the cause is the uninitialised memory, not the word."""
    a, _ = record(Variant(seed=1, inplace_empty_step=2, stale_pointer='dead', fresh_zeros=True))
    b, _ = record(Variant(seed=2, inplace_empty_step=2, stale_pointer='dead', fresh_zeros=True))
    expect_identical(a, b, 'a dead device address in a functor, the same bits computed')
    a, _ = record(Variant(seed=3, inplace_empty_step=2, stale_pointer='dead'))
    b, _ = record(Variant(seed=4, inplace_empty_step=2, stale_pointer='dead'))
    _, fd = expect_cause(a, b, 'uninitialisedMemory', 'the same op on fresh memory that differs')
    marked = [d for d in fd['params']['differing'] if d.get('meaning') == 'host addresses']
    expect(len(marked) == len(fd['params']['differing']) == 1, 'the word marked host addresses', fd['params'])


@case
def environment():
    """CUBLAS_WORKSPACE_CONFIG unset in run B, where cuBLAS splits K at step 1;
    and an environment difference alone, with equal data."""
    env_b = {'PYTHONHASHSEED': '0'}
    a, pa = record(Variant(seed=1))
    b, _ = record(Variant(seed=2, split_k_step=1, env=env_b))
    j, fd = expect_cause(a, b, 'environment', 'split-K without CUBLAS_WORKSPACE_CONFIG')
    expect(fd['mechanism'] == 'nondeterministicKernel', 'mechanism: nondeterministic kernel', fd['mechanism'])
    expect(fd['a']['seq'] == seq_of(pa, 'tn_n_tilesize128x64x32', step=1), 'the linear layer of step 1', fd['a'])
    envs = process(j)['environment']
    expect(any(e['field'] == 'env CUBLAS_WORKSPACE_CONFIG' and e['a'] == ':4096:8' and e['b'] is None for e in envs),
           'environment lists CUBLAS_WORKSPACE_CONFIG', envs)
    b, _ = record(Variant(seed=2, env=env_b))
    j = expect_identical(a, b, 'environment difference alone')
    expect(len(process(j)['environment']) >= 1, 'the difference is still shown', process(j)['environment'])
