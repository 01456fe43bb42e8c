// Text from a trace made safe to print: a kernel, op, module or file name, an
// environment variable or a command line comes from whoever recorded the
// trace, and its control characters would reach the reader's terminal
// (clearing the screen, retitling the window, hiding or reordering the rest
// of a report). Printed escaped instead, as \x1b or \u202e.
#pragma once

#include <mutex>
#include <streambuf>
#include <string>
#include <string_view>

namespace gpurr::report {

// `text` with every character a terminal would act on written as an
// escape: control characters but line feed and tab (\x1b, \x0d, \x7f),
// C1 controls and the bidirectional overrides and isolates (\u0085,
// \u202e), and bytes that are not UTF-8 (\xff). With `keepColours`, the
// colours the reports write themselves pass (SGR: ESC [ 1;91 m; reset,
// bold, faint, green, yellow, bright red); a trace could only recolour
// text with them, not hide it. JSON as gpurr writes it passes unchanged
// in meaning: it holds no raw control character or stray byte (jsonText),
// and \u202e is JSON's own escape.
std::string terminalText(std::string_view text, bool keepColours = false);

// Whether the filters let the reports' colours through: set by a command
// that colours its report (--color); off otherwise, so that no escape
// sequence at all reaches the terminal.
void keepTerminalColours(bool keep);

// A stream buffer that writes what it is given through terminalText() to
// `out` at once, holding back only a character or a colour cut between two
// writes until the next (or a flush). Threads may write through it at once
// (warnings from the workers that read and compare traces): each write
// goes out whole.
class TerminalFilter : public std::streambuf {
 public:
  explicit TerminalFilter(std::streambuf* out) : out_(out) {}

 protected:
  int overflow(int c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  std::streambuf* out_;
  std::mutex mu_;  // pending_ and out_'s writes
  std::string pending_;
};

// Puts a TerminalFilter in front of std::cout and std::cerr for the rest of
// the process.
void filterTerminalOutput();

}  // namespace gpurr::report
