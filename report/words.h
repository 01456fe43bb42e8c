// The words every report of a diff uses for its facts, made in one place:
// an operation's title, a range's differing byte spans, and a first
// divergence's cause in one line and the evidence it rests on. The text and
// JSON reports and the HTML page take them from here.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "diff/report.h"

namespace gpurr::report {

// A kernel's demangled name, cut to `max` characters.
std::string shortName(const std::string& name, size_t max = 100);

// "launch #5", "memcpy (operation #3)", "graph launch (operation #9)".
std::string opTitle(const diff::OpInfo& o);
// The same with a copy's or a set's own name: "memcpy HtoD (operation #3)".
std::string opTitleNamed(const diff::OpInfo& o);

// The operation of run A (`a`) or run B that a first divergence shows: null
// for a path divergence that holds no operation on that side (a reordering
// holds them at its other end).
const diff::OpInfo* shownOp(const diff::FirstDivergence& d, bool a);
// The operation that shows the first divergence: run A's, or run B's where
// run A has none there (a stretch run B alone took).
const diff::OpInfo& firstShown(const diff::FirstDivergence& d);
// "run B " where that operation is run B's, else "": what names it so.
const char* shownSide(const diff::FirstDivergence& d);
// Whether the two runs issued a matched first divergence from other lines
// (the same op at the same place of the model: one branch of the program,
// or the other): a report then names both runs' operations.
bool issuedElsewhere(const diff::FirstDivergence& d);
// Where the first divergence is in run A's trace: its operation's event, or
// for a stretch run B alone took, the event it comes before in run A.
uint64_t seqInA(const diff::FirstDivergence& d);
// Whether the first divergence's operation has an origin that holds its
// step alone: one the PyTorch layer did not observe (where a step it
// followed stopped matching its template, docs/RECORDING.md). A launch no
// op issued (a Triton kernel of the program's, an extension's) has its line
// at least.
bool opUnobserved(const diff::FirstDivergence& d);
// What the reports say of such an operation: where the same stretch ran
// again later, observed (FirstDivergence::namedLater), what the layer saw
// there; else how to have it named.
std::string unobservedText(const diff::FirstDivergence& d);
// Where an independent divergence is: "run A #3, run B #4", or one run's
// alone for an operation the other run has not there ("run B #4").
std::string whereBoth(const diff::IndependentDivergence& i);
// "and 124 more like it (the same op, line and reason), the last in step 3
// (run A #90, run B #91)": those counted with a listed independent
// divergence (IndependentDivergence::more).
std::string moreLikeItText(const diff::IndependentDivergence& i);

// What an identical verdict adds where operations were not hashed (their
// outputs not compared): "", or ", but 40 of them were not hashed...".
std::string notHashed(const diff::ProcessDiff& p);

// "; 299 of them the first's stretch again, in later steps": the
// independent divergences that repeat the first (BlastRadius::repeatsFirst),
// or "".
std::string repeatsFirst(const diff::BlastRadius& b);

// "0x0-0x40, 0x80-0xc0 and 2 more": the first `shown` differing spans.
std::string spansText(const diff::RangeDifference& r, size_t shown = 3);

// The cause in one line ("nondeterministic kernel: same inputs and
// parameters, different outputs").
const std::string& causeSummary(const diff::FirstDivergence& d);

// What the verdict rests on, one sentence each (diff/wording.h makes them
// from the evidence's data).
std::vector<std::string> evidenceSentences(const diff::FirstDivergence& d);

// The launches a process's diff paired despite a benign difference, a line
// for each kind ("3 launches paired despite a stale word (...); the first:
// launch #12 ..."), so that the pairing can be audited.
std::vector<std::string> pairedDespiteLines(const diff::ProcessDiff& p);
// What the diff set aside, not compared: what each run launched while the
// framework timed candidates; empty when nothing was.
std::optional<std::string> setAsideLine(const diff::ProcessDiff& p);

}  // namespace gpurr::report
