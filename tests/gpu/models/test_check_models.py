#!/usr/bin/env python3
"""check_models.py's parsing and evaluation, on the CPU (no GPU, no gpurr
run): expectations.txt parses, the ground truth's first differing step, the
step times, and a default-mode bisect judged against the plain runs."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_models as m  # noqa: E402


def report(verdict="diverged", cause="rngState", origin=None, known=(), replay=None):
    fd = {"cause": cause, "known": [{"id": k} for k in known],
          "a": {"name": "k", "demangled": "void kernel<float>()", "origin": origin}}
    r = {"verdict": verdict, "runs": [{"exitCode": 0}] * 2,
         "diff": {"processes": [{"name": "p", "firstDivergence": fd}] if verdict != "identical" else []}}
    if replay:
        r["replay"] = {"verdict": replay}
    return r


ORIGIN = {"op": "aten::scatter_add_", "module": "GCN.conv1", "file": "/site-packages/x.py", "line": 7, "step": 0}


class BenignNotes(unittest.TestCase):
    def test_paired_and_renamed_are_named(self):
        r = report(verdict="identical")
        r["diff"]["processes"] = [{"name": "p", "allocationsRenamed": 2,
                                   "pairedDespite": {"staleWords": {"count": 3}, "launchConfiguration": {"count": 1}}}]
        self.assertEqual(m.benign_notes(r), ["2 of run B's allocations renamed",
                                             "1 launches paired despite launchConfiguration",
                                             "3 launches paired despite staleWords"])

    def test_nothing_to_say(self):
        self.assertEqual(m.benign_notes(report()), [])
        self.assertEqual(m.benign_notes(None), [])


class Expectations(unittest.TestCase):
    def test_the_suite_parses(self):
        with open(os.path.join(m.HERE, "expectations.txt")) as f:
            cases = m.parse_expectations(f.read())
        names = [c.name for c in cases]
        self.assertIn("llama", names)
        self.assertTrue(all(os.path.isfile(os.path.join(m.HERE, c.script)) for c in cases))
        bench = next(c for c in cases if c.name == "resnet50_bench")
        self.assertEqual(bench.args, ["--benchmark", "on"])
        self.assertEqual(bench.modes, ("default",))

    def test_malformed_lines_are_refused(self):
        for text in ("a", "a b.txt", "a a.py x=1", "a a.py cause=nope", "a a.py modes=fast",
                     "a a.py step=one", "a a.py module=X --arg", "a a.py\na b.py"):
            with self.assertRaises(ValueError, msg=text):
                m.parse_expectations(text)


class GroundTruth(unittest.TestCase):
    def test_first_differing_step(self):
        a = ["step 0 loss 0x1p+0 params aa", "step 1 loss 0x1p+0 params bb", "final loss 0x1p+0 params bb"]
        self.assertIsNone(m.first_differing_step(a, list(a)))
        b = a[:1] + ["step 1 loss 0x1p+0 params cc", "final loss 0x1p+0 params cc"]
        self.assertEqual(m.first_differing_step(a, b), 1)
        self.assertEqual(m.first_differing_step(a, a[:1]), 1)

    def test_step_lines_and_times(self):
        text = "noise\nstep 0 loss 0x1p+0 params aa\ngpurr-models: step 0 ms 9.5\ngpurr-models: step 1 ms 2.0\n" \
               "gpurr-models: step 2 ms 4.0\nfinal loss 0x1p+0 params aa\n"
        self.assertEqual(m.step_lines(text), ["step 0 loss 0x1p+0 params aa", "final loss 0x1p+0 params aa"])
        self.assertEqual(m.steady_ms(m.step_times(text)), 3.0)
        self.assertIsNone(m.steady_ms({}))


class DefaultMode(unittest.TestCase):
    case = m.parse_expectations("gcn gcn.py module=GCN cause=nondeterministicKernel")[0]
    case_any = m.parse_expectations("gcn gcn.py module=GCN")[0]

    def test_a_divergence_that_names_everything_passes(self):
        problems, finding = m.evaluate_default(self.case, report(cause="nondeterministicKernel", origin=ORIGIN), 1, 0)
        self.assertEqual(problems, [])
        self.assertIn("GCN.conv1", finding)

    def test_identical_where_the_plain_runs_differ_fails(self):
        problems, _ = m.evaluate_default(self.case, report("identical"), 0, 2)
        self.assertTrue(problems)
        self.assertEqual(m.evaluate_default(self.case, report("identical"), 0, None)[0], [])

    def test_a_divergence_after_the_ground_truth_fails(self):
        late = dict(ORIGIN, step=3)
        problems, _ = m.evaluate_default(self.case, report(cause="nondeterministicKernel", origin=late), 1, 1)
        self.assertTrue(any("after step 1" in p for p in problems))

    def test_outside_every_module(self):
        case = m.parse_expectations("e epochs.py module=-")[0]
        self.assertEqual(m.origin_problems(case, dict(ORIGIN, module=""), 0), [])
        self.assertTrue(m.origin_problems(case, ORIGIN, 0))

    def test_missing_attribution_and_wrong_root_fail(self):
        for origin, text in ((None, "no origin"), (dict(ORIGIN, module="Other.conv1"), "expected under GCN"),
                             (dict(ORIGIN, file=None), "no source line"), (dict(ORIGIN, op=None), "no op")):
            problems, _ = m.evaluate_default(self.case, report(cause="nondeterministicKernel", origin=origin), 1, 0)
            self.assertTrue(any(text in p for p in problems), (text, problems))

    def test_not_reproduced_needs_a_nondeterministic_replay(self):
        r = report("notReproduced", cause="nondeterministicKernel", origin=ORIGIN)
        self.assertTrue(m.evaluate_default(self.case, r, 1, 0)[0])
        r["replay"] = {"verdict": "nondeterministic"}
        self.assertEqual(m.evaluate_default(self.case, r, 1, 0)[0], [])

    def test_an_algorithm_chosen_anew_in_the_confirm_run_reproduces_its_cause(self):
        r = report("notReproduced", cause="algorithmChoice", origin=ORIGIN)
        self.assertTrue(m.evaluate_default(self.case_any, r, 1, 0)[0])
        r["confirmation"] = {"processes": [{"name": "", "firstDivergence": {"cause": "algorithmChoice"}}]}
        self.assertEqual(m.evaluate_default(self.case_any, r, 1, 0)[0], [])
        r["confirmation"]["processes"][0]["firstDivergence"]["cause"] = "hostInput"
        self.assertTrue(m.evaluate_default(self.case_any, r, 1, 0)[0])

    def test_cause_and_culprit_expectations(self):
        case = m.parse_expectations("e epochs.py cause=hostInput culprit=torch-host-data step=2")[0]
        origin = dict(ORIGIN, module="ResNet", step=2)
        ok = report(cause="hostInput", origin=origin, known=["torch-host-data"])
        self.assertEqual(m.evaluate_default(case, ok, 1, 2)[0], [])
        wrong = report(cause="rngState", origin=origin)
        problems = m.evaluate_default(case, wrong, 1, 2)[0]
        self.assertTrue(any("cause" in p for p in problems) and any("culprit" in p for p in problems))


if __name__ == "__main__":
    unittest.main()
