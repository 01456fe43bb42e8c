"""Records a two-rank gloo job (collectives_gloo.py) through gpurr's PyTorch
layer and checks c10d's view of its collectives in each rank's trace (call,
process group, sequence numbers, rank and size, the program's line, the
digests of what each rank sent and received); then records it again with a
divergence planted on rank 1 and checks that `gpurr diff` across the ranks
names rank 1 the origin and rank 0 a receiver. Then the same for
DistributedDataParallel over gloo (ddp_gloo.py), whose gradient all-reduces
C++ issues asynchronously: they are recorded as c10d's ops, identical in two
runs, and a divergence planted in rank 1's backward is found to start on
rank 1 and reach rank 0 through that step's all-reduce."""
import argparse
import json
import os
import shutil
import subprocess
import sys

p = argparse.ArgumentParser()
for a in ("--gpurr", "--recorder", "--launcher", "--scripts", "--work"):
    p.add_argument(a, required=True)
args = p.parse_args()
shutil.rmtree(args.work, ignore_errors=True)
os.makedirs(args.work)
failures = []
script = os.path.join(args.scripts, "collectives_gloo.py")


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def record(name, program=script, fails=False, **extra):
    out = os.path.join(args.work, name)
    env = dict(os.environ, GPURR_RECORDER_LIB=args.recorder, **extra)
    r = subprocess.run([args.gpurr, "record", "-o", out, "--", sys.executable, program], env=env,
                       capture_output=True, text=True, timeout=300)
    print(r.stderr[-3000:], end="")
    check((r.returncode != 0) == fails, f"{name}: the job {'failed' if fails else 'ran'} (exit {r.returncode})")
    return out, r


def collectives(trace):
    r = subprocess.run([args.gpurr, "dump", "--json", trace], capture_output=True, text=True, check=True)
    return [e for e in map(json.loads, r.stdout.splitlines()) if e["kind"] == "collective"]


def marked(mark, program=script):
    with open(program) as f:
        for n, line in enumerate(f, 1):
            if f"# at:{mark}" in line:
                return n
    raise KeyError(mark)


a, ra = record("a")
check(sorted(os.listdir(a)) == ["rank0.gpurr", "rank1.gpurr"], f"one trace per rank: {os.listdir(a)}")
by_rank = {r: collectives(os.path.join(a, f"rank{r}.gpurr")) for r in (0, 1)}
for rank, events in by_rank.items():
    calls = [e["collective"]["call"] for e in events]
    check(calls == ["all_reduce", "broadcast", "all_gather", "all_gather", "all_gather", "barrier",
                    "monitored_barrier", "send" if rank == 0 else "recv"], f"rank {rank}: calls {calls}")
    if len(events) < 8:
        continue
    c = [e["collective"] for e in events]
    check(all(x["source"] == "framework" and x["processGroup"] == "0" for x in c), f"rank {rank}: c10d's view")
    check([x["sequence"] for x in c] == list(range(8)), f"rank {rank}: sequence {[x['sequence'] for x in c]}")
    check(c[6]["op"] == "barrier" and events[6]["origin"]["line"] == marked("monitored"),
          f"rank {rank}: gloo's monitored barrier, a barrier at its line: {c[6]} {events[6]['origin']}")
    check(all(x["rank"] == rank and x["size"] == 2 for x in c), f"rank {rank}: rank and size")
    check(c[0]["op"] == "allReduce" and c[0]["reduceOp"] == "sum" and c[0]["dataType"] == "float32" and
          c[0]["count"] == 256, f"rank {rank}: all_reduce described: {c[0]}")
    check(c[1]["op"] == "broadcast" and c[1]["peer"] == 0, f"rank {rank}: broadcast from 0")
    check(len(c[0]["inputs"]) == 1 and len(c[0]["outputs"]) == 1, f"rank {rank}: all_reduce digests")
    check(len(c[1]["inputs"]) == (1 if rank == 0 else 0), f"rank {rank}: only the root sends a broadcast")
    check(len(c[2]["outputs"]) == 2, f"rank {rank}: all_gather receives one tensor per rank")
    check(c[0]["frameworkSequence"] >= 0, f"rank {rank}: c10d's sequence number {c[0]['frameworkSequence']}")
    o = events[0]["origin"]
    check(o["file"] == script and o["line"] == marked("allreduce"), f"rank {rank}: line {o['file']}:{o['line']}")
    check(events[1]["origin"]["line"] == marked("broadcast"), f"rank {rank}: broadcast's line")
    # all_gather_object's two all_gathers move pickled bytes, whose tensor
    # keys are host addresses: listed, not hashed.
    check(all(int(r["digest"], 16) == 0 for x in c[3:5] for r in x["inputs"] + x["outputs"]) and
          all(len(x["inputs"]) == 1 and len(x["outputs"]) == 2 for x in c[3:5]),
          f"rank {rank}: the object call's collectives without digests: {c[3:5]}")
if all(len(by_rank[r]) >= 1 for r in (0, 1)):
    outs = [by_rank[r][0]["collective"]["outputs"][0]["digest"] for r in (0, 1)]
    ins = [by_rank[r][0]["collective"]["inputs"][0]["digest"] for r in (0, 1)]
    check(outs[0] == outs[1], "every rank received the same all_reduce result")
    check(ins[0] != ins[1], "the ranks sent different tensors")

# The same job again: identical (the pickled bytes differ, unhashed).
a2, _ = record("a2")
r = subprocess.run([args.gpurr, "diff", "--json", a, a2], capture_output=True, text=True)
check(r.returncode == 0, f"two runs of the same job: identical (exit {r.returncode}): {r.stdout[-2000:]}")

# A divergence planted on rank 1.
b, rb = record("b", COLLECTIVES_PLANT="1")
r = subprocess.run([args.gpurr, "diff", "--json", a, b], capture_output=True, text=True)
check(r.returncode == 1, f"planted: the runs differ (exit {r.returncode}) {r.stderr}")
job = json.loads(r.stdout).get("job") if r.stdout else None
check(job is not None, "the report has the job's view")
if job:
    roles = {x["rank"]: x["role"] for x in job["ranks"]}
    check(roles == {0: "receiver", 1: "origin"}, f"rank 1 the origin, rank 0 a receiver: {roles}")
    check(job["earliestOrigin"] is not None and job["earliestOrigin"]["rank"] == 1,
          f"earliest origin: {job['earliestOrigin']}")
    check(job["collectiveMismatches"] == [], f"no mismatch: {job['collectiveMismatches']}")
    spread = job.get("spread") or []
    check(len(spread) == 1 and spread[0]["from"] == [1] and spread[0]["to"] == [0] and
          spread[0]["collective"]["op"] == "allReduce" and spread[0]["collective"]["line"] == marked("allreduce"),
          f"the all_reduce carried it from rank 1 to rank 0: {spread}")
    check(job.get("cause") is None, f"no job cause at a collective: {job.get('cause')}")
text = subprocess.run([args.gpurr, "diff", a, b], capture_output=True, text=True).stdout
print(text)
check("earliest origin: rank 1" in text, "the text report names the earliest origin")
check("carried the divergence from rank 1 to rank 0" in text, "the text report says how it spread")

# A collective mismatch: rank 1 reduces one element fewer. gloo finds it:
# rank 0 aborts inside its all_reduce (the recorder writes the call it
# waits in as a signal ends it), rank 1's all_reduce raises (recorded all
# the same). The report names the mismatch first, with each rank's call and
# line; each rank's own call is a path divergence against the clean run.
ma, _ = record("mismatch-a", GPURR_TEST_LAUNCHER=args.launcher)
mb, _ = record("mismatch-b", fails=True, COLLECTIVES_PLANT="mismatch", GPURR_TEST_LAUNCHER=args.launcher)
r = subprocess.run([args.gpurr, "diff", "--json", ma, mb], capture_output=True, text=True)
job = json.loads(r.stdout).get("job") if r.stdout else None
mismatches = (job or {}).get("collectiveMismatches") or []
calls = {c["rank"]: (c["call"].split(" (")[0], c["line"]) for m in mismatches for c in m.get("calls", [])}
check(r.returncode == 1 and len(mismatches) == 1 and
      calls == {0: ("all_reduce sum 256 float32", marked("allreduce")),
                1: ("all_reduce sum 255 float32", marked("allreduce"))},
      f"the mismatch named with each rank's call and line: {mismatches} {r.stderr[-500:]}")
text = subprocess.run([args.gpurr, "diff", ma, mb], capture_output=True, text=True).stdout
check(text.find("collective mismatch") >= 0 and text.find("collective mismatch") < text.find("earliest origin"),
      f"the text report names the mismatch first: {text[:1500]}")
# Where that all-reduce is what gave a rank other data, it is not said to
# have simply carried the divergence: it may never have completed.
spread = [s for s in (job or {}).get("spread", []) if s["collective"]["sequence"] == mismatches[0]["sequence"]] \
    if mismatches else []
lines = [line for line in text.splitlines() if line.startswith("spread: ") and "all_reduce sum 256" in line]
check(spread and all(s["issuedDifferently"] for s in spread) and lines and
      all("its ranks issued it differently" in line for line in lines),
      f"the mismatched all-reduce's spread says it was issued differently: {spread}")

# DistributedDataParallel: its C++ Reducer's all-reduces, one per step.
ddp = os.path.join(args.scripts, "ddp_gloo.py")
d, _ = record("ddp", ddp)
for rank in (0, 1):
    events = collectives(os.path.join(d, f"rank{rank}.gpurr"))
    c = [e["collective"] for e in events]
    reduces = [e for e in events if e["collective"]["call"] == "c10d::allreduce_"]
    check(len(reduces) == 4, f"ddp rank {rank}: one gradient all-reduce per step: {[x['call'] for x in c]}")
    check(any(x["call"] == "c10d::broadcast_" and x["peer"] == 0 for x in c),
          f"ddp rank {rank}: the module's state broadcast from rank 0")
    check([x["sequence"] for x in c] == list(range(len(c))), f"ddp rank {rank}: sequence numbers")
    for e in reduces:
        x = e["collective"]
        check(x["source"] == "framework" and x["reduceOp"] == "sum" and x["rank"] == rank and x["size"] == 2 and
              x["dataType"] == "float32", f"ddp rank {rank}: all-reduce described: {x}")
        check(len(x["inputs"]) == 1 and x["inputs"][0]["digest"] != "0000000000000000",
              f"ddp rank {rank}: what it sent is hashed: {x['inputs']}")
        check(len(x["outputs"]) == 1 and x["outputs"][0]["digest"] == "0000000000000000",
              f"ddp rank {rank}: what it received has no digest (asynchronous): {x['outputs']}")
        check(e["origin"]["file"] == ddp and e["origin"]["line"] == marked("backward", ddp),
              f"ddp rank {rank}: the backward's line: {e['origin']}")
    check([e["origin"]["step"] for e in reduces] == [0, 1, 2, 3], f"ddp rank {rank}: steps {reduces}")
d2, _ = record("ddp2", ddp)
r = subprocess.run([args.gpurr, "diff", d, d2], capture_output=True, text=True)
check(r.returncode == 0, f"ddp: two runs identical (exit {r.returncode}): {r.stdout[-2000:]}")
db, _ = record("ddp-planted", ddp, DDP_PLANT="1")
r = subprocess.run([args.gpurr, "diff", "--json", d, db], capture_output=True, text=True)
check(r.returncode == 1, f"ddp planted: the runs differ (exit {r.returncode}) {r.stderr}")
job = json.loads(r.stdout).get("job") if r.stdout else None
# Rank 0's own report: what it read after the asynchronous all-reduce (no
# digest of what it received) came from rank 1: a collective, no kernel's.
own = [p["firstDivergence"] for p in json.loads(r.stdout or "{}").get("processes", []) if p["name"] == "rank0.gpurr"]
check(own and own[0] and own[0]["cause"] == "collective",
      f"ddp planted: rank 0's own cause is the collective it received through: {own and own[0] and own[0]['summary']}")
check(job is not None, "ddp planted: the report has the job's view")
if job:
    roles = {x["rank"]: x["role"] for x in job["ranks"]}
    check(roles == {0: "receiver", 1: "origin"}, f"ddp planted: rank 1 the origin, rank 0 a receiver: {roles}")
    spread = job.get("spread") or []
    check(len(spread) == 1 and spread[0]["from"] == [1] and spread[0]["to"] == [0] and spread[0]["step"] == 1 and
          spread[0]["collective"]["op"] == "allReduce", f"ddp planted: step 1's all-reduce carried it: {spread}")
    receiver = [x for x in job["ranks"] if x["rank"] == 0]
    check(receiver and receiver[0]["carrier"] is not None and receiver[0]["carrier"] < receiver[0]["seq"],
          f"ddp planted: rank 0 received it before its own first divergence (the next step's): {receiver}")
    # The text names the script by its name, as the processes' reports do.
    text = subprocess.run([args.gpurr, "diff", d, db], capture_output=True, text=True).stdout
    job_text = text[:text.find("== process")]
    line = f"at {os.path.basename(ddp)}:{marked('backward', ddp)}"
    check(line in job_text and os.path.dirname(ddp) not in job_text,
          f"ddp planted: the job's rows name the script's line as {line}: {job_text}")

# A rank's trace lost from the planted run (a node lost, a rank killed
# before its last second reached the disk): the other sent the
# asynchronous collectives before its first divergence identical data and
# received data not hashed, which the rank lost may have sent otherwise.
# It is no origin for sure: the job says where the divergence may have
# begun (with more ranks, one whose divergence came later through a known
# sender tells such a collective harmless: job_cases.py).
for lost in (1, 0):
    partial = os.path.join(args.work, f"ddp-planted-without-{lost}")
    shutil.copytree(db, partial)
    shutil.rmtree(os.path.join(partial, f"rank{lost}.gpurr"))
    r = subprocess.run([args.gpurr, "diff", "--json", d, partial], capture_output=True, text=True)
    job = json.loads(r.stdout).get("job") if r.stdout else None
    roles = {x["rank"]: x["role"] for x in (job or {}).get("ranks", [])}
    kept = 1 - lost
    check(r.returncode == 1 and roles == {kept: "unknown"} and (job or {}).get("earliestOrigin", 0) is None,
          f"ddp planted, rank {lost}'s trace lost: rank {kept} perhaps a receiver (exit {r.returncode}): {job}")
    text = subprocess.run([args.gpurr, "diff", d, partial], capture_output=True, text=True).stdout
    check("no origin among the ranks recorded" in text and
          f"may have begun on a rank not recorded in both runs: rank{lost}.gpurr (missing in run B)" in text,
          f"ddp planted, rank {lost}'s trace lost: the text says where it may have begun: {text[:2500]}")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all checks passed")
