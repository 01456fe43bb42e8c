#!/usr/bin/env python3
"""CPU tests of check_bisect.py (no GPU, no PyTorch needed): its checks, fed
hand-written report.json objects whose `diff` members are the golden
`gpurr diff --json` outputs of tests/diff/cases, must pass a correct report
and fail every wrong one; expectations.txt must parse and name only scripts,
causes and culprits that exist; every script must exit 77 at once without
PyTorch or without a GPU; check_bisect.py itself must skip (77) without
nvidia-smi. Run: python3 tests/gpu/bisect/test_check_bisect.py
"""
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, HERE)
import check_bisect as cb  # noqa: E402

ALL_FILES = {"report.json", "report.txt", "report.html", "run1.gpurr", "run2.gpurr"}


def golden_diff(case):
    with open(os.path.join(SOURCE, "tests", "diff", "cases", case, "expected.json")) as f:
        return json.load(f)


def expectations():
    with open(os.path.join(HERE, "expectations.txt")) as f:
        return {e.script: e for e in cb.parse_expectations(f.read())}


def report(verdict, diff=None, replay=None, replay_error=None, exit_codes=(0, 0)):
    """A report.json object as gpurr bisect documents it."""
    runs = [{"trace": f"out/run{i}.gpurr", "log": f"out/run{i}.log", "exitCode": code,
             "seconds": 3.5, "launches": 812} for i, code in enumerate(exit_codes, 1)]
    diverged = verdict in ("diverged", "notReproduced")
    return {
        "verdict": verdict,
        "command": ["python3", "script.py"],
        "runs": runs,
        "diff": diff,
        "confirmation": copy.deepcopy(diff) if diverged else None,
        "reproduced": (verdict == "diverged") if diverged else None,
        "replay": replay,
        "replayError": replay_error,
        "timeline": [],
        "seconds": 12.0,
    }


def replay(verdict="nondeterministic", distinct=31, runs=50):
    return {"trace": "out/confirm.gpurr", "seq": 13, "function": "indexFuncLargeIndex", "verdict": verdict,
            "summary": f"{distinct} distinct results in {runs} runs", "runs": runs,
            "distinctResults": distinct, "warnings": []}


def with_cause(diff, cause):
    diff = copy.deepcopy(diff)
    for p in diff["processes"]:
        if p.get("firstDivergence"):
            p["firstDivergence"]["cause"] = cause
    return diff


def without_known(diff):
    diff = copy.deepcopy(diff)
    for p in diff["processes"]:
        if p.get("firstDivergence"):
            p["firstDivergence"]["known"] = []
    return diff


def script_lines(script):
    with open(os.path.join(os.path.dirname(os.path.abspath(cb.__file__)), script)) as f:
        return f.read().splitlines()


def line_of(script, text):
    return next(n for n, line in enumerate(script_lines(script), 1) if text in line)


# What the recorder's PyTorch layer gives the first divergence of each script.
ORIGINS = {
    "index_add.py": {"op": "aten::index_add_", "opStack": ["aten::index_add_"], "phase": "forward",
                     "forwardOp": "", "module": "MessagePassing", "file": "/w/index_add.py",
                     "line": line_of("index_add.py", "zeros_like(x).index_add_"), "step": 0, "stepLaunch": 40},
    "dropout_unseeded.py": {"op": "aten::native_dropout", "opStack": ["aten::dropout", "aten::native_dropout"],
                            "phase": "forward", "forwardOp": "", "module": "Sequential.2",
                            "file": "/w/dropout_unseeded.py",
                            "line": line_of("dropout_unseeded.py", "cross_entropy(model(inputs)"), "step": 0,
                            "stepLaunch": 4},
}


def with_origin(diff, origin):
    diff = copy.deepcopy(diff)
    for p in diff["processes"]:
        if p.get("firstDivergence"):
            for side in ("a", "b"):
                if isinstance(p["firstDivergence"].get(side), dict):
                    p["firstDivergence"][side]["origin"] = copy.deepcopy(origin)
    return diff


def golden_with_origin(case, script):
    return with_origin(golden_diff(case), ORIGINS[script])


class Evaluate(unittest.TestCase):
    def setUp(self):
        self.expect = expectations()

    def check(self, script, rep, status, files=ALL_FILES):
        return cb.evaluate(self.expect[script], rep, status, set(files), script_lines(script))

    def assertPasses(self, script, rep, status, files=ALL_FILES):
        problems, summary = self.check(script, rep, status, files)
        self.assertEqual(problems, [], f"{script} should pass")
        self.assertTrue(summary)
        return summary

    def assertFails(self, script, rep, status, needle, files=ALL_FILES):
        problems, _ = self.check(script, rep, status, files)
        self.assertTrue(problems, f"{script} should fail")
        self.assertTrue(any(needle in p for p in problems), f"no problem mentions {needle!r}: {problems}")

    # index_add.py: diverged, nondeterministic kernel, torch-index-add, replay nondeterministic.
    def test_index_add_correct_report_passes(self):
        summary = self.assertPasses("index_add.py", report("diverged", golden_with_origin("nondeterministic_kernel",
                                                                                          "index_add.py"),
                                                           replay()), 1)
        self.assertIn("nondeterministicKernel", summary)
        self.assertIn("torch-index-add", summary)
        self.assertIn("31 distinct", summary)
        self.assertIn("op aten::index_add_ in MessagePassing at index_add.py:", summary)

    def test_origin_is_checked(self):
        good = ORIGINS["dropout_unseeded.py"]
        self.assertPasses("dropout_unseeded.py", report("diverged", golden_with_origin("rng_state",
                                                                                         "dropout_unseeded.py")), 1)
        for key, value, needle in (("module", "Sequential.5", "module 'Sequential.5'"),
                                   ("op", "aten::relu", "op 'aten::relu'"),
                                   ("step", 2, "step 2"),
                                   ("line", 3, "source dropout_unseeded.py:3"),
                                   ("file", "/w/other.py", "source other.py:")):
            bad = dict(good, **{key: value})
            if key == "op":
                bad["opStack"] = ["aten::relu"]
            rep = report("diverged", with_origin(golden_diff("rng_state"), bad))
            self.assertFails("dropout_unseeded.py", rep, 1, needle)
        rep = report("diverged", with_origin(golden_diff("rng_state"), None))
        self.assertFails("dropout_unseeded.py", rep, 1, "has no origin")

    def test_wrong_cause_fails(self):
        diff = with_cause(golden_diff("nondeterministic_kernel"), "scalarParameters")
        self.assertFails("index_add.py", report("diverged", diff, replay()), 1, "cause 'scalarParameters'")
        self.assertFails("dropout_unseeded.py", report("diverged", golden_diff("host_input")), 1, "cause 'hostInput'")
        self.assertFails("dataloader_shuffle.py", report("diverged", golden_diff("rng_state")), 1, "cause 'rngState'")
        self.assertFails("empty_read.py", report("diverged", golden_diff("environment")), 1, "cause 'environment'")
        self.assertFails("cudnn_benchmark.py", report("diverged", golden_diff("nondeterministic_kernel")), 1,
                         "cause 'nondeterministicKernel'")

    def test_wrong_verdict_fails(self):
        self.assertFails("index_add.py", report("identical", None, None), 0, "verdict 'identical'")
        self.assertFails("index_add.py", report("notReproduced", golden_diff("nondeterministic_kernel"), replay()), 1,
                         "verdict 'notReproduced'")
        self.assertFails("dropout_unseeded.py", report("failed", None), 2, "verdict 'failed'")

    def test_missing_culprit_fails(self):
        diff = without_known(golden_diff("nondeterministic_kernel"))
        self.assertFails("index_add.py", report("diverged", diff, replay()), 1, "'torch-index-add' not named")
        diff = golden_diff("nondeterministic_kernel")
        diff["processes"][0]["firstDivergence"]["known"] = [{"id": "torch-scatter-add", "matchedBy": "kernel"}]
        self.assertFails("index_add.py", report("diverged", diff, replay()), 1, "named: torch-scatter-add")

    def test_false_positive_on_deterministic_fails(self):
        for case in ("nondeterministic_kernel", "rng_state", "uninitialised_memory"):
            self.assertFails("deterministic.py", report("diverged", golden_diff(case)), 1, "verdict 'diverged'")
        self.assertFails("deterministic.py", report("notReproduced", golden_diff("rng_state")), 1,
                         "verdict 'notReproduced'")

    def test_deterministic_identical_passes(self):
        self.assertPasses("deterministic.py", report("identical", None), 0)
        self.assertPasses("deterministic.py", report("identical", golden_diff("identical")), 0)

    def test_identical_verdict_with_a_divergence_fails(self):
        self.assertFails("deterministic.py", report("identical", golden_diff("rng_state")), 0,
                         "but the diff has a first divergence")

    def test_replay_error_fails(self):
        rep = report("diverged", golden_diff("nondeterministic_kernel"), None,
                     "gpurr replay: launch #13 has no snapshot of input 1")
        self.assertFails("index_add.py", rep, 1, "no snapshot of input 1")
        rep = report("diverged", golden_diff("nondeterministic_kernel"), None, None)
        self.assertFails("index_add.py", rep, 1, "neither replay nor replayError")

    def test_deterministic_replay_fails_where_nondeterministic_is_expected(self):
        rep = report("diverged", golden_diff("nondeterministic_kernel"), replay("equal", 1))
        self.assertFails("index_add.py", rep, 1, "replay verdict 'equal'")

    def test_the_other_scripts_pass_their_causes(self):
        self.assertPasses("cudnn_benchmark.py", report("identical", None), 0)
        self.assertPasses("cudnn_benchmark.py", report("diverged", golden_diff("algorithm_choice")), 1)
        self.assertPasses("dropout_unseeded.py", report("diverged", golden_with_origin("rng_state",
                                                                                         "dropout_unseeded.py")), 1)
        self.assertPasses("dataloader_shuffle.py", report("diverged", golden_diff("host_input")), 1)
        self.assertPasses("empty_read.py", report("diverged", golden_diff("uninitialised_memory")), 1)
        self.assertPasses("empty_read.py", report("notReproduced", golden_diff("uninitialised_memory")), 1)

    def test_first_divergence_is_found_in_a_later_process(self):
        diff = with_origin(golden_diff("processes"), ORIGINS["index_add.py"])
        summary = self.assertPasses("index_add.py", report("diverged", diff, replay()), 1)
        self.assertIn("rank1.gpurr", summary)

    def test_divergent_verdict_without_first_divergence_fails(self):
        self.assertFails("dropout_unseeded.py", report("diverged", None), 1, "without a first divergence")
        self.assertFails("dropout_unseeded.py", report("diverged", golden_diff("identical")), 1,
                         "without a first divergence")

    def test_exit_status_must_match_the_verdict(self):
        self.assertFails("deterministic.py", report("identical", None), 1, "exit status 1 with verdict identical")
        self.assertFails("dropout_unseeded.py", report("diverged", golden_diff("rng_state")), 0,
                         "exit status 0 with verdict diverged")
        self.assertFails("dropout_unseeded.py", report("diverged", golden_diff("rng_state")), None, "exit status None")

    def test_missing_report_files_fail(self):
        rep = report("diverged", golden_diff("rng_state"))
        self.assertFails("dropout_unseeded.py", rep, 1, "report.html missing", ALL_FILES - {"report.html"})
        self.assertFails("dropout_unseeded.py", rep, 1, "report.txt missing", ALL_FILES - {"report.txt"})
        self.assertFails("dropout_unseeded.py", None, 1, "no readable report.json", ALL_FILES - {"report.json"})

    def test_a_failing_run_of_the_command_fails(self):
        rep = report("identical", None, exit_codes=(0, 1))
        self.assertFails("deterministic.py", rep, 0, "run 2 of the command exited with 1")
        rep = report("identical", None, exit_codes=(0,))
        self.assertFails("deterministic.py", rep, 0, "1 runs, expected 2 or more")


class Expectations(unittest.TestCase):
    def test_every_script_is_listed_and_exists(self):
        listed = set(expectations())
        scripts = {n for n in os.listdir(HERE) if n.endswith(".py")} - {"check_bisect.py", "test_check_bisect.py"}
        self.assertEqual(listed, scripts)
        self.assertEqual(listed, {"index_add.py", "cudnn_benchmark.py", "dropout_unseeded.py", "attention_dropout.py",
                                  "dataloader_shuffle.py", "empty_read.py", "deterministic.py"})

    def test_the_contract(self):
        e = expectations()
        self.assertEqual(e["index_add.py"].verdicts, {"diverged"})
        self.assertEqual(e["index_add.py"].causes, {"nondeterministicKernel"})
        self.assertEqual(e["index_add.py"].replay, {"nondeterministic"})
        self.assertEqual(e["cudnn_benchmark.py"].verdicts, {"identical", "diverged"})
        self.assertEqual(e["cudnn_benchmark.py"].causes, {"algorithmChoice"})
        self.assertEqual(e["dropout_unseeded.py"].causes, {"rngState"})
        self.assertEqual(e["attention_dropout.py"].causes, {"rngState"})
        self.assertEqual(e["dataloader_shuffle.py"].causes, {"hostInput"})
        self.assertEqual(e["empty_read.py"].causes, {"uninitialisedMemory"})
        self.assertEqual(e["deterministic.py"].verdicts, {"identical"})

    def test_culprits_exist_and_explain_the_cause(self):
        with open(os.path.join(SOURCE, "data", "known_culprits.json")) as f:
            entries = {x["id"]: x for x in json.load(f)["entries"]}
        for e in expectations().values():
            if e.culprit:
                self.assertIn(e.culprit, entries, e.script)
                causes = set(entries[e.culprit].get("causes") or [])
                self.assertTrue(not causes or e.causes <= causes, f"{e.script}: {e.culprit} explains {causes}")
        self.assertEqual(expectations()["index_add.py"].culprit, "torch-index-add")

    def test_names_match_the_documentation(self):
        with open(os.path.join(SOURCE, "docs", "DIFF.md")) as f:
            diff_doc = f.read()
        for cause in cb.CAUSES:
            self.assertIn(f"(`{cause}`)", diff_doc)
        for key in ("`processes`", "`firstDivergence`", "`cause`", "`known`"):
            self.assertIn(key, diff_doc)
        with open(os.path.join(SOURCE, "replayer", "README.md")) as f:
            replay_doc = f.read()
        for verdict in cb.REPLAY_VERDICTS:
            self.assertIn(f"`{verdict}`", replay_doc)
        self.assertIn("`distinctResults`", replay_doc)

    def test_malformed_lines_are_refused(self):
        bad = {
            "a.py verdict=diverged cause=nondeterministic": "unknown cause",
            "a.py verdict=diverged": "needs cause=",
            "a.py cause=hostInput": "verdict= is required",
            "a.py verdict=same": "unknown verdict",
            "a.py verdict=identical colour=red": "unknown key",
            "a.py verdict=identical replay=flaky": "unknown replay verdict",
            "a.py verdict": "expected key=value",
            "a verdict=identical": "ending in .py",
            "a.py verdict=identical\na.py verdict=identical": "listed twice",
        }
        for text, needle in bad.items():
            with self.assertRaises(ValueError, msg=text) as ctx:
                cb.parse_expectations(text)
            self.assertIn(needle, str(ctx.exception))
        parsed = cb.parse_expectations("# comment\n\nb.py verdict=identical|diverged cause=rngState|hostInput # why\n")
        self.assertEqual(len(parsed), 1)
        self.assertEqual(parsed[0].causes, {"rngState", "hostInput"})


class Skips(unittest.TestCase):
    """Everything exits 77 (skipped) at once where it cannot run."""

    def fake_torch(self, body):
        root = tempfile.mkdtemp(prefix="gpurr-fake-torch-")
        self.addCleanup(shutil.rmtree, root, True)
        os.makedirs(os.path.join(root, "torch"))
        with open(os.path.join(root, "torch", "__init__.py"), "w") as f:
            f.write(body)
        return root

    def run_scripts(self, pythonpath):
        env = dict(os.environ, PYTHONPATH=pythonpath)
        for script in expectations():
            start = time.monotonic()
            done = subprocess.run([sys.executable, os.path.join(HERE, script)], env=env,
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 77, f"{script}: {done.stdout}{done.stderr}")
            self.assertIn("skipped", done.stdout, script)
            self.assertLess(time.monotonic() - start, 30, script)

    def test_scripts_skip_without_pytorch(self):
        self.run_scripts(self.fake_torch('raise ImportError("no torch in this test")\n'))

    def test_scripts_skip_without_a_gpu(self):
        self.run_scripts(self.fake_torch(
            "class cuda:\n    @staticmethod\n    def is_available():\n        return False\n"))

    def test_scripts_compile(self):
        for script in list(expectations()) + ["check_bisect.py"]:
            with open(os.path.join(HERE, script)) as f:
                compile(f.read(), script, "exec")

    def test_checker_skips_without_nvidia_smi(self):
        empty = tempfile.mkdtemp(prefix="gpurr-no-path-")
        self.addCleanup(shutil.rmtree, empty, True)
        done = subprocess.run([sys.executable, os.path.join(HERE, "check_bisect.py"), empty],
                              env=dict(os.environ, PATH=empty), capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 77, done.stdout + done.stderr)
        self.assertIn("no nvidia-smi", done.stdout)
        self.assertIsNone(re.search(r"^(PASS|FAIL) ", done.stdout, re.M))


if __name__ == "__main__":
    unittest.main(verbosity=2)
