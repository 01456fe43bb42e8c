// Text from traces printed to a terminal: what a terminal would act on is
// escaped, the reports' own colours and valid UTF-8 pass, and a character or
// colour split between two writes to the stream arrives whole.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "report/event_json.h"
#include "report/terminal.h"
#include "report/text.h"

using gpurr::report::terminalText;

TEST_CASE("what a terminal would act on is escaped") {
  CHECK(terminalText("plain text\twith a tab\n") == "plain text\twith a tab\n");
  CHECK(terminalText("\x1b]0;title\x07") == "\\x1b]0;title\\x07");                // window title
  CHECK(terminalText("a\x1b[2Jb\x1b[Hc") == "a\\x1b[2Jb\\x1b[Hc");                // clear, move
  CHECK(terminalText("x\ry\bz\x7f\x01") == "x\\x0dy\\x08z\\x7f\\x01");
  // The reports' own colours pass where asked for; nothing else does.
  const std::string own = "\x1b[1m\x1b[91mred\x1b[0m\x1b[2mfaint\x1b[33m\x1b[32m";
  CHECK(terminalText(own, true) == own);
  CHECK(terminalText("\x1b[1mbold") == "\\x1b[1mbold");
  CHECK(terminalText("\x1b[8mhidden", true) == "\\x1b[8mhidden");    // conceal
  CHECK(terminalText("\x1b[7;91m", true) == "\\x1b[7;91m");          // reverse
  CHECK(terminalText("\x1b[30mblack", true) == "\\x1b[30mblack");    // as the background may be
  CHECK(terminalText("\u202eevil\u202c \u2067x\u2069") == "\\u202eevil\\u202c \\u2067x\\u2069");
  CHECK(terminalText("\u0085next") == "\\u0085next");                              // C1
  CHECK(terminalText("h\u00e9 \u4e2d \U0001f600") == "h\u00e9 \u4e2d \U0001f600");  // valid UTF-8
  // Not UTF-8: a stray continuation, an overlong form, a surrogate, a cut sequence.
  CHECK(terminalText("\x80") == "\\x80");
  CHECK(terminalText("\xc0\x80") == "\\xc0\\x80");
  CHECK(terminalText("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  CHECK(terminalText("\xe4\xb8") == "\\xe4\\xb8");
}

TEST_CASE("JSON through the filter is the same JSON") {
  // nlohmann writes DEL raw, which the filter would escape as no JSON escape.
  const std::string json = gpurr::report::jsonText(gpurr::report::Json("a\x7f\x1b\u202e\xff"), -1);
  CHECK(json == "\"a\\u007f\\u001b\u202e\ufffd\"");
  CHECK(terminalText(json) == "\"a\\u007f\\u001b\\u202e\ufffd\"");  // \u202e: JSON's escape too
}

TEST_CASE("the filter writes what it is given at once and holds back only a split character") {
  gpurr::report::keepTerminalColours(true);
  std::stringstream sink;
  gpurr::report::TerminalFilter filter(sink.rdbuf());
  std::ostream out(&filter);
  out << "a\x1b]0;t\x07 ";
  CHECK(sink.str() == "a\\x1b]0;t\\x07 ");
  out << "\xe4\xb8";  // the first two bytes of U+4E2D
  CHECK(sink.str() == "a\\x1b]0;t\\x07 ");
  out << "\xad and \x1b[9";  // its last byte; a colour cut short
  CHECK(sink.str() == "a\\x1b]0;t\\x07 \u4e2d and ");
  out << "1mred";
  CHECK(sink.str() == "a\\x1b]0;t\\x07 \u4e2d and \x1b[91mred");
  out << "\xe4" << std::flush;  // a flush writes what is held, escaped
  CHECK(sink.str() == "a\\x1b]0;t\\x07 \u4e2d and \x1b[91mred\\xe4");
  gpurr::report::keepTerminalColours(false);
  out << "\x1b[91m" << std::flush;  // no colours asked for: none pass
  CHECK(sink.str().ends_with("\\x1b[91m"));
}

namespace {

// A sink that counts the writes that reached it while another was under way.
class OverlapSink : public std::streambuf {
 public:
  std::atomic<int> inside{0}, overlaps{0};
  std::string text;  // written only by a write alone inside

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (inside.fetch_add(1) != 0) ++overlaps;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    if (overlaps == 0) text.append(s, static_cast<size_t>(n));
    inside.fetch_sub(1);
    return n;
  }
};

}  // namespace

TEST_CASE("threads that write through the filter at once each have their writes go out whole") {
  OverlapSink sink;
  gpurr::report::TerminalFilter filter(&sink);
  constexpr int kLines = 200;
  std::vector<std::thread> threads;
  for (char letter : {'a', 'b', 'c', 'd'}) {
    threads.emplace_back([&filter, letter] {
      std::ostream out(&filter);
      const std::string line = std::string(40, letter) + "\n";
      for (int i = 0; i < kLines; ++i) out << line;
    });
  }
  for (std::thread& t : threads) t.join();
  REQUIRE(sink.overlaps == 0);
  std::map<std::string, int> lines;
  std::istringstream in(sink.text);
  for (std::string line; std::getline(in, line);) ++lines[line];
  CHECK(lines.size() == 4);
  for (char letter : {'a', 'b', 'c', 'd'}) CHECK(lines[std::string(40, letter)] == kLines);
}

TEST_CASE("a name cut short stays valid UTF-8") {
  const std::string s = "a\u00e9\u4e2d";  // 1, 2 and 3 bytes
  CHECK(gpurr::report::characterStart(s, 0) == 0);
  CHECK(gpurr::report::characterStart(s, 2) == 1);
  CHECK(gpurr::report::characterStart(s, 3) == 3);
  CHECK(gpurr::report::characterStart(s, 5) == 3);
  CHECK(gpurr::report::characterStart(s, 6) == 6);
  CHECK(gpurr::report::characterStart(s, 9) == 6);
}
