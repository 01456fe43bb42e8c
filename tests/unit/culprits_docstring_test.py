#!/usr/bin/env python3
"""data/known_culprits.json held to the installed torch's documentation.

usage: culprits_docstring_test.py [KNOWN_CULPRITS_JSON]

Reads the two bullet lists of torch.use_deterministic_algorithms.__doc__ (the
operations that act deterministically when mode=True, and those that throw a
RuntimeError), takes each item's op name (":class:`torch.nn.AvgPool3d` when
attempting to differentiate a CUDA tensor" -> torch.nn.AvgPool3d), and fails
naming every item that applies to CUDA which no entry of the culprits file
lists in its `documented` array, and every such item that depends on an
argument ("with ``accumulate=False``", "when ``reduce='sum'``", "when dtype
is ...") whose entries have no `argument`. An item applies to CUDA unless it
names the CPU only. A `documented` name the docstring no longer has is only
warned about. Exits 77 (ctest: skipped) when torch cannot be imported."""
import importlib.util
import json
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_FILE = os.path.join(HERE, '..', '..', 'data', 'known_culprits.json')

# The two lists and their headers ("The following normally-nondeterministic
# operations will act deterministically when ``mode=True``:").
HEADER = re.compile(r'The following normally-nondeterministic operations will\s+'
                    r'(act\s+deterministically|throw\s+a\s+:class:`RuntimeError`)\s+when\s+``mode=True``:[ \t]*\n')
NAME = re.compile(r':(?:class|func|meth|attr):`~?([A-Za-z_][\w.]*)`')
# Conditions on an argument, which gpurr does not record: "with
# ``accumulate=True``", "when ``reduce='prod'``", "when `src` type is Tensor",
# "when dtype is floating point", "``weights`` tensor is given", "with indices
# output", "one of the following modes is used", "sparse-dense", "called with a
# quantized tensor".
ARGUMENT = re.compile(r'``\w+\s*=|`\w+` type is|\bdtype\b|\bweights\b|with indices|modes? is used|'
                      r'sparse|quantized|index is a list')

# Items that name no device but cannot run on CUDA: the op has no CUDA kernel
# for the case the item describes. Checked against torchgen's copy of
# native_functions.yaml where the wheel ships it.
NOT_ON_CUDA = {
    'torch.Tensor.resize_': ('resize_', 'QuantizedCUDA',
                             'resize_ of a quantized tensor has a QuantizedCPU kernel only'),
}


def docstring_items(doc):
    """[(list, name, text)] for every bullet of both lists."""
    items = []
    headers = list(HEADER.finditer(doc))
    for h in headers:
        kind = 'deterministic' if h.group(1).startswith('act') else 'throws'
        lines = doc[h.end():].split('\n')
        indent = None
        for line in lines:
            if not line.strip():
                continue
            depth = len(line) - len(line.lstrip())
            bullet = line.lstrip().startswith('* ')
            if indent is None:
                if not bullet:
                    break
                indent = depth
            if bullet and depth == indent:
                items.append([kind, line.strip()[2:]])
            elif depth > indent:
                items[-1][1] += ' ' + line.strip()  # a continuation or a nested list
            else:
                break
    out = []
    for kind, text in items:
        text = ' '.join(text.split())
        m = NAME.search(text)
        out.append((kind, m.group(1) if m else None, text))
    return out, len(headers)


def on_cuda(text):
    return 'CUDA' in text or 'CPU' not in text


def dispatch_keys(func):
    """The dispatch keys of `- func: NAME(` in torchgen's native_functions.yaml, or None."""
    spec = importlib.util.find_spec('torchgen')
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = os.path.join(root, 'packaged', 'ATen', 'native', 'native_functions.yaml')
        if not os.path.exists(path):
            continue
        block = re.search(r'^- func: ' + re.escape(func) + r'\(.*?(?=^- func:)', open(path).read(), re.M | re.S)
        if block is None:
            return None
        keys = set()
        for line in block.group(0).split('\n'):
            m = re.match(r'\s+([\w, ]+):\s*\w+\s*$', line)
            if m:
                keys.update(k.strip() for k in m.group(1).split(','))
        return keys
    return None


def main():
    culprits_path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_FILE
    try:
        import torch
    except Exception as e:  # not installed, or a broken install
        print('SKIP: torch cannot be imported (%s: %s)' % (type(e).__name__, e))
        return SKIP
    doc = torch.use_deterministic_algorithms.__doc__ or ''
    items, lists = docstring_items(doc)
    failures, warnings = [], []
    if lists != 2 or len(items) < 10 or any(name is None for _, name, _ in items):
        print('FAIL: torch %s: the docstring of torch.use_deterministic_algorithms no longer reads as two '
              'bullet lists of operations (%d lists, %d items, names: %s): update this test'
              % (torch.__version__, lists, len(items), [n for _, n, _ in items]))
        return 1

    with open(culprits_path) as f:
        culprits = json.load(f)
    about = culprits.get('about', '')
    for field in ('argument:', 'documented:'):
        if field not in about:
            failures.append('the "about" text does not document the field %s' % field.rstrip(':'))
    by_name = {}
    for e in culprits['entries']:
        documented = e.get('documented', [])
        if not isinstance(documented, list) or not all(isinstance(n, str) for n in documented):
            failures.append('%s: "documented" must be an array of names' % e.get('id'))
            continue
        if 'argument' in e and (not isinstance(e['argument'], str) or not e['argument'].strip()):
            failures.append('%s: "argument" must be a non-empty string' % e.get('id'))
        for n in documented:
            by_name.setdefault(n, []).append(e)

    names = {name for _, name, _ in items}
    cuda = 0
    for kind, name, text in items:
        label = '%s (%s)' % (text, 'deterministic with the flag' if kind == 'deterministic' else 'throws')
        if not on_cuda(text):
            print('cpu   %s' % label)
            continue
        if name in NOT_ON_CUDA:
            func, key, why = NOT_ON_CUDA[name]
            keys = dispatch_keys(func)
            if keys is not None and key in keys:
                failures.append('%s: %s now has a %s kernel: it applies to CUDA and needs an entry'
                                % (label, func, key))
            else:
                print('cpu   %s: %s%s' % (label, why, '' if keys is not None else ' (not checked: no torchgen)'))
            continue
        cuda += 1
        entries = by_name.get(name, [])
        if not entries:
            failures.append('no entry of %s documents %s: %s'
                            % (os.path.basename(culprits_path), name, label))
            continue
        ids = ', '.join(e['id'] for e in entries)
        if ARGUMENT.search(text):
            missing = [e['id'] for e in entries if not e.get('argument')]
            if missing:
                failures.append('%s depends on an argument, but %s has no "argument": %s'
                                % (name, ', '.join(missing), label))
                continue
            print('ok    %s -> %s (argument: %s)' % (label, ids, '; '.join(e['argument'] for e in entries)))
        else:
            print('ok    %s -> %s' % (label, ids))

    for n, entries in sorted(by_name.items()):
        if n not in names:
            warnings.append('%s documents %s, which torch %s\'s docstring does not list'
                            % (', '.join(e['id'] for e in entries), n, torch.__version__))
    for w in warnings:
        print('WARNING: %s' % w)
    for f in failures:
        print('FAIL: %s' % f)
    print('torch %s: %d docstring items (%d deterministic with the flag, %d throwing), %d on CUDA; '
          '%d entries document them; %d failures, %d warnings'
          % (torch.__version__, len(items), sum(k == 'deterministic' for k, _, _ in items),
             sum(k == 'throws' for k, _, _ in items), cuda,
             sum(1 for e in culprits['entries'] if e.get('documented')), len(failures), len(warnings)))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
