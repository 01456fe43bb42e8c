// Storage the launch path needs for every launch, kept for reuse instead of
// taken from the heap each time: Pooled<T> keeps a class's freed memory,
// Recycler<T> keeps whole objects with the capacity of their vectors. Either
// may be given back on another thread than the one that took it (a hash
// made on the program's thread is finished and freed by the trace thread):
// each thread keeps a hand of them in front of a shelf they all share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <utility>
#include <vector>

#include "recorder/thread_local_ref.h"

namespace gpurr::recorder {

// Up to kKeep things of one kind, shared by every thread. The default is the
// largest trace ring's slots (65536): a thing is only made while every one
// made before is in flight, so a shelf never holds more than were in flight
// at once, which the ring and its memory bound (--trace-queue) limit; once
// the trace thread's largest lag has been reached, none is made again.
template <typename Thing, std::size_t Keep = 65536>
class Shelf {
 public:
  static constexpr std::size_t kKeep = Keep;
  Shelf() { things_.reserve(kKeep); }
  // Up to `n` at once, into `out`, the last given back last; how many.
  size_t take(Thing* out, size_t n) {
    std::lock_guard lock(mu_);
    n = std::min(n, things_.size());
    for (size_t i = n; i-- > 0;) {
      out[i] = std::move(things_.back());
      things_.pop_back();
    }
    return n;
  }
  // As many of `things` as there is room for, from the front; how many
  // (the caller frees the rest).
  size_t put(std::span<Thing> things) {
    std::lock_guard lock(mu_);
    size_t i = 0;
    for (; i < things.size() && things_.size() < kKeep; ++i) things_.push_back(std::move(things[i]));
    return i;
  }

 private:
  std::mutex mu_;
  std::vector<Thing> things_;
};

// What a hand does with a thing that no shelf has room for: the memory of
// Pooled's (FreeMemory), an owning pointer's object (Drop: assigned empty).
struct Drop {
  template <typename T>
  void operator()(T& thing) const {
    thing = T{};
  }
};
struct FreeMemory {
  void operator()(void*& p) const {
    ::operator delete(p);
    p = nullptr;
  }
};

// A thread's own few things of one kind, in front of a shelf every thread
// shares: filled from it and emptied into it half a hand at a time. The
// shelf's lock, which the threads on the other side hold too (the trace
// thread gives back what the program's threads take), then changes cores
// once every Size / 2 things, not for each. What the hand holds goes back
// to the shelf when the thread ends.
template <typename Thing, typename Dispose = Drop, std::size_t Size = 16, std::size_t Keep = 65536>
class Hand {
 public:
  explicit Hand(Shelf<Thing, Keep>& shelf) : shelf_(shelf) {}
  ~Hand() { giveBack(count_); }
  Hand(const Hand&) = delete;
  Hand& operator=(const Hand&) = delete;

  bool take(Thing& out) {
    if (count_ == 0) count_ = shelf_.take(things_, Size / 2);
    if (count_ == 0) return false;
    out = std::move(things_[--count_]);
    return true;
  }
  // The thing the next take() gives, if the hand holds one.
  const Thing* next() const { return count_ == 0 ? nullptr : &things_[count_ - 1]; }
  void put(Thing& thing) {
    if (count_ == Size) giveBack(Size / 2);
    things_[count_++] = std::move(thing);
  }

 private:
  // The n given back longest ago to the shelf (what it has no room for
  // disposed of); the rest move down.
  void giveBack(size_t n) {
    const size_t kept = shelf_.put(std::span(things_, n));
    for (size_t i = kept; i < n; ++i) Dispose()(things_[i]);
    std::move(things_ + n, things_ + count_, things_);
    count_ -= n;
  }

  Shelf<Thing, Keep>& shelf_;
  Thing things_[Size] = {};
  std::size_t count_ = 0;
};

// A base that makes T's `new` and `delete` reuse the memory of freed Ts,
// through the thread's hand (a launch's state is made and freed on the
// program's thread; a hash's made there and freed on the trace thread).
template <typename T>
class Pooled {
 public:
  static void* operator new(std::size_t n) {
    void* p = nullptr;
    if (n == sizeof(T) && hand().take(p)) return p;
    return ::operator new(n);
  }
  static void operator delete(void* p, std::size_t n) {
    if (n == sizeof(T)) {
      hand().put(p);
      return;
    }
    ::operator delete(p);
  }

 private:
  static Hand<void*, FreeMemory>& hand() {
    static auto* shelf = new Shelf<void*>;  // never destroyed: frees may come at exit
    thread_local Hand<void*, FreeMemory> h(*shelf);
    return threadLocalRef(h);
  }
};

// Objects of T kept whole: take() gives one as it was given back (the
// caller clears what it reuses), or a new one.
template <typename T>
class Recycler {
 public:
  static std::unique_ptr<T> take() {
    std::unique_ptr<T> t;
    if (hand().take(t)) return t;
    return std::make_unique<T>();
  }
  static void give(std::unique_ptr<T> t) {
    if (t) hand().put(t);
  }

 private:
  static Hand<std::unique_ptr<T>>& hand() {
    static auto* shelf = new Shelf<std::unique_ptr<T>>;  // never destroyed
    thread_local Hand<std::unique_ptr<T>> h(*shelf);
    return threadLocalRef(h);
  }
};

}  // namespace gpurr::recorder
