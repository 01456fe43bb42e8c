// Storage the launch path needs for every launch, kept for reuse instead of
// taken from the heap each time: Pooled<T> keeps a class's freed memory,
// Recycler<T> keeps whole objects with the capacity of their vectors. Either
// may be given back on another thread than the one that took it (a hash
// made on the program's thread is finished and freed by the trace thread).
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
  bool take(Thing& out) {
    std::lock_guard lock(mu_);
    if (things_.empty()) return false;
    out = std::move(things_.back());
    things_.pop_back();
    return true;
  }
  // False when the shelf is full: the caller frees `thing`.
  bool put(Thing& thing) {
    std::lock_guard lock(mu_);
    if (things_.size() >= kKeep) return false;
    things_.push_back(std::move(thing));
    return true;
  }
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
  // As many of `things` as there is room for, from the front (the caller
  // frees the rest).
  void put(std::span<Thing> things) {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < things.size() && things_.size() < kKeep; ++i) things_.push_back(std::move(things[i]));
  }

 private:
  std::mutex mu_;
  std::vector<Thing> things_;
};

// A base that makes T's `new` and `delete` reuse the memory of freed Ts:
// first a few kept by the thread (no lock: a launch's state is made and
// freed on the program's thread), then those of every thread.
template <typename T>
class Pooled {
 public:
  static void* operator new(std::size_t n) {
    if (n == sizeof(T)) {
      if (void* p = local().take()) return p;
      void* p = nullptr;
      if (shelf().take(p)) return p;
    }
    return ::operator new(n);
  }
  static void operator delete(void* p, std::size_t n) {
    if (n == sizeof(T) && (local().put(p) || shelf().put(p))) return;
    ::operator delete(p);
  }

 private:
  static Shelf<void*>& shelf() {
    static auto* s = new Shelf<void*>;  // never destroyed: frees may come at exit
    return *s;
  }
  // A thread's own few, handed to the shelf (or freed) when it ends.
  struct Local {
    static constexpr std::size_t kKeep = 16;
    void* kept[kKeep];
    std::size_t count = 0;
    void* take() { return count == 0 ? nullptr : kept[--count]; }
    bool put(void* p) {
      if (count == kKeep) return false;
      kept[count++] = p;
      return true;
    }
    ~Local() {
      while (count > 0) {
        void* p = kept[--count];
        if (!shelf().put(p)) ::operator delete(p);
      }
    }
  };
  static Local& local() {
    thread_local Local l;
    return threadLocalRef(l);
  }
};

// Objects of T kept whole: take() gives one as it was given back (the
// caller clears what it reuses), or a new one.
template <typename T>
class Recycler {
 public:
  static std::unique_ptr<T> take() {
    std::unique_ptr<T> t;
    if (shelf().take(t)) return t;
    return std::make_unique<T>();
  }
  static void give(std::unique_ptr<T> t) {
    if (t) shelf().put(t);  // a full shelf leaves `t` to be freed here
  }

 private:
  static Shelf<std::unique_ptr<T>>& shelf() {
    static auto* s = new Shelf<std::unique_ptr<T>>;
    return *s;
  }
};

}  // namespace gpurr::recorder
