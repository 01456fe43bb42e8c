#!/usr/bin/env python3
"""Compares two recordings of the same program launch by launch, from
`gpurr dump --json`, and checks where they are allowed to differ.

    compare_traces.py --gpurr BIN/gpurr A B [--differ REGEX=ASPECTS]...
                      [--may-differ REGEX=ASPECTS]... [--min-launches N]
                      [--graph-ranges N]

A and B are traces, or directories of traces (rank0.gpurr, ...) matched by
name. Each launch is compared in four aspects:
  config   grid, block, cluster, dynamic shared memory, launch attributes
  params   parameter bytes, with pointers compared as (allocation, offset)
           and host addresses (8-byte words that hold one in both runs, by
           the diff's rule: docs/DIFF.md) left out
  inputs   the ranges hashed before the launch and their digests
  outputs  the ranges hashed after it and their digests
A launch whose kernel name (mangled or demangled) matches a --differ REGEX
must differ in exactly the ASPECTS given (comma-separated); one that
matches a --may-differ REGEX may differ in any of its ASPECTS and in no
other, and where `params` is allowed, only in bytes that are no pointer (its
pointers must point to the same places: bytes left unwritten in a struct
passed by value, say); every other launch must match in all four. Each
REGEX must match at least one launch (the first rule that matches a launch,
in the order given, --differ before --may-differ, applies).
With --graph-ranges N, trace A must hold a graph launch, and each of its
graph launches (not captured ones) must have been read node by node
(nodeCount > 0) and hash N ranges after it.
Exit status: 0 when the recordings are as expected, 1 when not, 2 on
usage errors or unreadable traces.
"""
import argparse
import json
import os
import re
import subprocess
import sys

ASPECTS = ("config", "params", "inputs", "outputs")


def events(gpurr, trace, kind):
    """The events of one kind of one trace, in order, as dicts from dump
    --json, each with its seq."""
    proc = subprocess.run([gpurr, "dump", "--json", trace], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"compare_traces: gpurr dump {trace} failed: {proc.stderr.strip()}")
    out = []
    for line in proc.stdout.splitlines():
        event = json.loads(line)
        if event["kind"] == kind:
            payload = event[kind]
            payload["seq"] = event["seq"]
            out.append(payload)
    return out


def launches(gpurr, trace):
    return events(gpurr, trace, "launch")


def graph_problems(gpurr, trace, ranges):
    """Why the graph launches of `trace` are not each read node by node and
    hashing `ranges` ranges after it."""
    graphs = [g for g in events(gpurr, trace, "graph") if not g.get("captured")]
    if not graphs:
        return [f"{trace}: no graph launch recorded"]
    problems = []
    for g in graphs:
        if g["nodeCount"] == 0:
            problems.append(f"graph launch (seq {g['seq']}): its nodes were not read (nodeCount 0), so it "
                            "hashed every allocation")
        elif len(g["outputs"]) != ranges:
            problems.append(f"graph launch (seq {g['seq']}, {g['nodeCount']} nodes): {len(g['outputs'])} "
                            f"ranges hashed after it, expected {ranges}")
    return problems


def host_regions(gpurr, trace):
    """The trace's readable host memory (`gpurr info --json`'s hostRegions)."""
    proc = subprocess.run([gpurr, "info", "--json", trace], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"compare_traces: gpurr info {trace} failed: {proc.stderr.strip()}")
    return [tuple(r) for r in json.loads(proc.stdout).get("hostRegions", [])]


def host_address(value, regions):
    """The diff's rule (docs/DIFF.md, params): from 4 GiB to 2^47, or in the
    process's readable host memory."""
    return (1 << 32) <= value < (1 << 47) or any(s <= value < e for s, e in regions)


def normalised_params(launch):
    """Parameter bytes with each pointer word replaced by (allocation, offset),
    which is what stays the same between runs."""
    raw = bytearray.fromhex(launch["params"])
    pointers = []
    for p in launch["pointers"]:
        start = p["byteOffset"]
        raw[start:start + 8] = bytes(8)
        pointers.append((start, p["allocation"], p["offset"]))
    return raw, tuple(pointers)


def normalised_pair(a, b):
    """Both launches' normalised parameters, with the aligned words that hold
    host addresses in both (launch["hostRegions"]: its trace's) zeroed."""
    (ra, pa), (rb, pb) = normalised_params(a), normalised_params(b)
    for w in range(0, min(len(ra), len(rb)) - 7, 8):
        va = int.from_bytes(ra[w:w + 8], "little")
        vb = int.from_bytes(rb[w:w + 8], "little")
        if va != vb and host_address(va, a["hostRegions"]) and host_address(vb, b["hostRegions"]):
            ra[w:w + 8] = rb[w:w + 8] = bytes(8)
    return (bytes(ra), pa), (bytes(rb), pb)


def ranges_by_place(rs):
    """Ranges keyed by where they are (the address only when outside any
    known allocation, where no better name exists)."""
    return tuple((r["allocation"], r["offset"] if r["allocation"] else r["address"], r["size"],
                  r["digest"]) for r in rs)


def differing_aspects(a, b):
    diff = set()
    config = lambda l: (l["grid"], l["block"], l["cluster"], l["sharedMemBytes"], l["attributes"])
    if config(a) != config(b):
        diff.add("config")
    pa, pb = normalised_pair(a, b)
    if pa != pb:
        diff.add("params")
    if ranges_by_place(a["inputs"]) != ranges_by_place(b["inputs"]):
        diff.add("inputs")
    if ranges_by_place(a["outputs"]) != ranges_by_place(b["outputs"]):
        diff.add("outputs")
    return diff


def explain(a, b, aspect):
    """A few words on how one aspect differs, for the failure report."""
    if aspect in ("inputs", "outputs"):
        ra, rb = a[aspect], b[aspect]
        if len(ra) != len(rb):
            return f"{aspect}: {len(ra)} ranges vs {len(rb)}"
        for x, y in zip(ra, rb):
            if (x["allocation"], x["offset"], x["size"]) != (y["allocation"], y["offset"], y["size"]):
                return (f"{aspect}: range alloc#{x['allocation']}+{x['offset']} ({x['size']} B) vs "
                        f"alloc#{y['allocation']}+{y['offset']} ({y['size']} B)")
            if x["digest"] != y["digest"]:
                return (f"{aspect}: alloc#{x['allocation']}+{x['offset']} ({x['size']} B) digest "
                        f"{x['digest']} vs {y['digest']}")
    if aspect == "params":
        pa, pb = normalised_pair(a, b)
        if pa[1] != pb[1]:
            return f"params: pointers {pa[1]} vs {pb[1]}"
        for i, (x, y) in enumerate(zip(pa[0], pb[0])):
            if x != y:
                return f"params: byte {i} differs ({x:#04x} vs {y:#04x}), sizes {len(pa[0])}/{len(pb[0])}"
        return f"params: sizes {len(pa[0])} vs {len(pb[0])}"
    return f"{aspect}: grid {a['grid']}/{b['grid']} block {a['block']}/{b['block']}"


def parse_rules(specs, option="--differ"):
    """(spec, regex, aspects, exact) for each REGEX=ASPECTS of `option`."""
    rules = []
    for spec in specs:
        regex, sep, aspects = spec.rpartition("=")
        if not sep or not regex:
            sys.exit(f"compare_traces: {option} expects REGEX=ASPECTS, got '{spec}'")
        wanted = set(a for a in aspects.split(",") if a)
        unknown = wanted - set(ASPECTS)
        if unknown:
            sys.exit(f"compare_traces: unknown aspects {sorted(unknown)} in '{spec}' "
                     f"(known: {', '.join(ASPECTS)})")
        try:
            rules.append((f"{option} {spec}", re.compile(regex), wanted, option == "--differ"))
        except re.error as e:
            sys.exit(f"compare_traces: bad regular expression in '{spec}': {e}")
    return rules


def compare(gpurr, trace_a, trace_b, rules, min_launches, used):
    """Returns a list of problems (empty when the pair is as expected)."""
    la, lb = launches(gpurr, trace_a), launches(gpurr, trace_b)
    for trace, ls in ((trace_a, la), (trace_b, lb)):
        regions = host_regions(gpurr, trace)
        for launch in ls:
            launch["hostRegions"] = regions
    problems = []
    if len(la) < min_launches:
        problems.append(f"{trace_a}: {len(la)} launches recorded, expected at least {min_launches}")
    for i, (a, b) in enumerate(zip(la, lb)):
        if a["function"] != b["function"]:
            problems.append(f"launch {i}: different kernels: {a['demangled']} (seq {a['seq']}) vs "
                            f"{b['demangled']} (seq {b['seq']}); the sequences diverge here")
            break
    else:
        if len(la) != len(lb):
            problems.append(f"{len(la)} launches in {trace_a}, {len(lb)} in {trace_b}")
    if problems:
        return problems, len(la)
    for i, (a, b) in enumerate(zip(la, lb)):
        expected, exact = set(), True
        for spec, regex, wanted, is_exact in rules:
            if regex.search(a["function"]) or regex.search(a["demangled"]):
                expected, exact = wanted, is_exact
                used.add(spec)
                break
        got = differing_aspects(a, b)
        if exact:
            wrong = got != expected
        else:
            # Parameters that may differ: in bytes, never where pointers point.
            (_, pointers_a), (_, pointers_b) = normalised_pair(a, b)
            wrong = not got <= expected or ("params" in got and pointers_a != pointers_b)
        if wrong:
            detail = "; ".join(explain(a, b, x) for x in sorted(got)) or "all aspects match"
            allowed = sorted(expected) if exact else f"at most {sorted(expected)}, pointers alike"
            problems.append(f"launch {i} {a['demangled']} (seq {a['seq']}/{b['seq']}): differs in "
                            f"{sorted(got) or 'nothing'}, expected {allowed or 'nothing'}: "
                            f"{detail}")
    return problems, len(la)


def trace_pairs(a, b):
    """(A trace, B trace) pairs: the two traces, or same-named traces of two
    directories of traces."""
    if os.path.exists(os.path.join(a, "version")) or os.path.exists(os.path.join(b, "version")):
        return [(a, b)]
    names_a = sorted(n for n in os.listdir(a) if n.endswith(".gpurr"))
    names_b = sorted(n for n in os.listdir(b) if n.endswith(".gpurr"))
    if names_a != names_b:
        sys.exit(f"compare_traces: {a} holds {names_a}, {b} holds {names_b}")
    return [(os.path.join(a, n), os.path.join(b, n)) for n in names_a]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpurr", required=True, help="the gpurr executable")
    parser.add_argument("--differ", action="append", default=[], metavar="REGEX=ASPECTS")
    parser.add_argument("--may-differ", action="append", default=[], metavar="REGEX=ASPECTS")
    parser.add_argument("--min-launches", type=int, default=1)
    parser.add_argument("--graph-ranges", type=int, default=None, metavar="N")
    parser.add_argument("a")
    parser.add_argument("b")
    args = parser.parse_args()
    rules = parse_rules(args.differ) + parse_rules(args.may_differ, "--may-differ")
    used = set()
    problems = []
    total = 0
    for ta, tb in trace_pairs(args.a, args.b):
        found, count = compare(args.gpurr, ta, tb, rules, args.min_launches, used)
        total += count
        problems += found
        if args.graph_ranges is not None:
            problems += graph_problems(args.gpurr, ta, args.graph_ranges)
    for spec, _, _, _ in rules:
        if spec not in used and not problems:
            problems.append(f"{spec}: no launch of a matching kernel was recorded")
    if problems:
        print(f"compare_traces: {len(problems)} problem(s) comparing {args.a} and {args.b}:")
        for p in problems[:20]:
            print("  " + p)
        if len(problems) > 20:
            print(f"  ... and {len(problems) - 20} more")
        return 1
    expected = ", ".join(s for s, _, _, _ in rules) or "none"
    print(f"compare_traces: {total} launches compared; differences exactly as expected "
          f"(allowed: {expected})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
