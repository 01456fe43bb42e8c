// Where the blocks of a trace's events file are: listed by its index where
// that fits the file, else found by walking their headers; and where damage
// (a corrupt block, a cut-short file, an index that does not fit) ends the
// blocks that can be read. Private to trace_format: the reader is built on it.
#pragma once

#include <capnp/message.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trace_format/trace.h"

namespace gpurr::trace {

// Reads exactly `n` bytes at `offset` of the open file `fd` (`path`) into
// `out`; a TraceError when it cannot.
void preadAll(int fd, void* out, size_t n, uint64_t offset, const std::filesystem::path& path);

// An open file read with pread; closes itself.
class File {
 public:
  File() = default;
  explicit File(const std::filesystem::path& path) : path_(path) {
    // O_NONBLOCK: opening a fifo planted in a trace would otherwise wait
    // forever for a writer; it changes nothing for regular files.
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) {
      throw TraceError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      fd_ = -1;
      throw TraceError(fmt::format("{}: not a regular file", path.string()));
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  File(File&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_), size_(o.size_) { o.fd_ = -1; }
  File& operator=(File&& o) noexcept {
    std::swap(path_, o.path_);
    std::swap(fd_, o.fd_);
    std::swap(size_, o.size_);
    return *this;
  }
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }

  uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

  // Reads exactly `n` bytes at `offset` into `out`.
  void read(uint64_t offset, void* out, size_t n) const {
    if (offset > size_ || n > size_ - offset) {
      throw TraceError(fmt::format("{}: truncated: needs {} bytes at offset {}, file has {}",
                                   path_.string(), n, offset, size_));
    }
    preadAll(fd_, out, n, offset, path_);
  }

  // The whole file as words (zero-padded to a multiple of 8), if it is at
  // most `limit` bytes.
  std::vector<capnp::word> readWords(uint64_t limit) const {
    if (size_ > limit) {
      throw TraceError(fmt::format("{}: {} bytes, more than the {} a valid file can have",
                                   path_.string(), size_, limit));
    }
    std::vector<capnp::word> words((size_ + 7) / 8);
    read(0, words.data(), size_);
    return words;
  }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Cap'n Proto's limits for reading a message of `words` words.
capnp::ReaderOptions readerOptions(size_t words);

// The blocks of an events file and what damage cut from them.
struct Framing {
  File events;
  std::vector<BlockInfo> blocks;
  Damage damage;
  // Where an index that `checksums` vouches for stops fitting the events
  // file: the events are read up to there.
  ReadLimit indexCut;
  // The entries of that index left out, past what the events file can
  // hold (they are past indexCut).
  struct {
    uint64_t blocks = 0, events = 0;
  } pastEnd;
  uint64_t eventCount = 0;
  uint64_t launchCount = 0;
  uint64_t uncompressedBytes = 0;

  // The block header at `offset`, or nothing, with what is wrong with it
  // (absent, invalid) in `problem`.
  std::optional<BlockInfo> blockHeaderAt(uint64_t offset, std::string& problem) const;
  // Checks the entries of the index at `path` against the block headers,
  // and sets their frames' offsets. One that does not fit is a TraceError,
  // unless the index is `vouched` for (by `checksums`): then it is as its
  // writer wrote it, and the events were damaged since. A block whose
  // header alone is damaged is read by its entry; indexCut is where the
  // events stop fitting it otherwise.
  void fitIndex(std::vector<BlockInfo>& entries, bool vouched, const std::filesystem::path& path);
  // Without an index (the writer did not close the trace), walks the block
  // headers; stops at the first incomplete block and records what was lost,
  // or at a corrupt header, keeping the blocks before it.
  void scanBlocks();
  // Keeps the blocks before `limit`'s, as those of a trace cut short there.
  void cutAt(const ReadLimit& limit);
  // Counts the blocks' events, keeping the blocks up to the first whose
  // header does not fit the ones before it.
  void checkSequence();

 private:
  std::string entryProblem(BlockInfo& b, uint64_t& offset) const;
  bool frameAt(uint64_t offset) const;
  uint64_t frameSizeAt(uint64_t offset) const;
  void endBefore(size_t kept, uint64_t offset, const std::string& problem);
};

}  // namespace gpurr::trace
