// Escaping what a terminal would act on in text from traces (terminal.h).
#include "report/terminal.h"

#include <fmt/format.h>

#include <atomic>
#include <iostream>

namespace gpurr::report {
namespace {

std::atomic<bool> coloursKept{false};

// Whether an SGR parameter is one the reports write (report/diff_report.cpp):
// reset, bold, faint, green, yellow, bright red. Not conceal, reverse or a
// colour the terminal's background may have, which would hide what follows.
bool reportColour(unsigned p) { return p == 0 || p == 1 || p == 2 || p == 32 || p == 33 || p == 91; }

// The length of the colour escape (ESC [ parameters m, every parameter one
// reportColour() allows) at the start of `s`; 0 when there is none. `*cut`
// says whether `s` ends inside one that may still be completed.
size_t colourLength(std::string_view s, bool* cut = nullptr) {
  if (cut) *cut = false;
  if (s.size() < 2 || s[1] != '[') {
    if (cut) *cut = s.size() == 1;
    return 0;
  }
  unsigned parameter = 0;
  for (size_t i = 2; i < s.size() && i < 32; ++i) {
    if (s[i] == 'm' || s[i] == ';') {
      if (!reportColour(parameter)) return 0;
      if (s[i] == 'm') return i + 1;
      parameter = 0;
    } else if (s[i] >= '0' && s[i] <= '9' && parameter < 100) {
      parameter = parameter * 10 + static_cast<unsigned>(s[i] - '0');
    } else {
      return 0;
    }
  }
  if (cut) *cut = s.size() < 32;
  return 0;
}

// The code point of the UTF-8 sequence at the start of `s` and its length;
// length 0 for a byte that starts no valid sequence (RFC 3629: no overlong
// forms, no surrogates, nothing past U+10FFFF); `*cut` when `s` ends inside
// a sequence that may still be completed.
std::pair<char32_t, size_t> decode(std::string_view s, bool* cut = nullptr) {
  if (cut) *cut = false;
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = b(0);
  size_t n;
  char32_t cp;
  if (lead < 0x80) return {lead, 1};
  if (lead >= 0xc2 && lead <= 0xdf) {
    n = 2, cp = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    n = 3, cp = lead & 0x0f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    n = 4, cp = lead & 0x07;
  } else {
    return {0, 0};
  }
  for (size_t i = 1; i < n; ++i) {
    if (i >= s.size()) {
      if (cut) *cut = true;
      return {0, 0};
    }
    if ((b(i) & 0xc0) != 0x80) return {0, 0};
    cp = (cp << 6) | (b(i) & 0x3f);
  }
  const char32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return {0, 0};
  return {cp, n};
}

bool acted(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

// How much of `s` can be written now: all but a colour or a character that
// its end cuts short.
size_t complete(std::string_view s) {
  const size_t from = s.size() > 32 ? s.size() - 32 : 0;
  for (size_t i = s.size(); i-- > from;) {
    bool cut = false;
    if (s[i] == '\x1b') colourLength(s.substr(i), &cut);
    else if (static_cast<unsigned char>(s[i]) >= 0xc0) decode(s.substr(i), &cut);
    if (cut) return i;
    if (s[i] == '\x1b' || static_cast<unsigned char>(s[i]) >= 0xc0) break;
  }
  return s.size();
}

}  // namespace

std::string terminalText(std::string_view text, bool keepColours) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\x1b' && keepColours) {
      if (const size_t n = colourLength(text.substr(i)); n > 0) {
        out.append(text.substr(i, n));
        i += n;
        continue;
      }
    }
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
        out += fmt::format("\\x{:02x}", c);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    const auto [cp, n] = decode(text.substr(i));
    if (n == 0) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else {
      if (acted(cp)) {
        out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
      } else {
        out.append(text.substr(i, n));
      }
      i += n;
    }
  }
  return out;
}

int TerminalFilter::overflow(int c) {
  if (c == traits_type::eof()) return sync() == 0 ? 0 : traits_type::eof();
  const char ch = static_cast<char>(c);
  xsputn(&ch, 1);
  return c;
}

std::streamsize TerminalFilter::xsputn(const char* s, std::streamsize n) {
  std::lock_guard lock(mu_);
  pending_.append(s, static_cast<size_t>(n));
  const size_t ready = complete(pending_);
  const std::string safe = terminalText(std::string_view(pending_).substr(0, ready), coloursKept);
  out_->sputn(safe.data(), static_cast<std::streamsize>(safe.size()));
  pending_.erase(0, ready);
  return n;
}

int TerminalFilter::sync() {
  std::lock_guard lock(mu_);
  if (!pending_.empty()) {
    const std::string safe = terminalText(pending_, coloursKept);
    out_->sputn(safe.data(), static_cast<std::streamsize>(safe.size()));
    pending_.clear();
  }
  return out_->pubsync();
}

void keepTerminalColours(bool keep) { coloursKept = keep; }

void filterTerminalOutput() {
  // Never destroyed: the streams are flushed after static destructors run.
  std::cout.rdbuf(new TerminalFilter(std::cout.rdbuf()));
  std::cerr.rdbuf(new TerminalFilter(std::cerr.rdbuf()));
}

}  // namespace gpurr::report
