// Shared memory for tensor data (docs/protocol.md, "Tensor data lives in memfd arenas").
//
// Arena: the memory this process owns and allocates from. A list of memfd segments, each
// fully reserved with fallocate when created, so running out of memory is an error here and
// never a SIGBUS later. First-fit allocation, 64-byte aligned, free extents coalesced.
// Segments other than the first are released once they stayed empty for a while. Under a
// bound (set_max_size), Allocate may wait a while for blocks in use to come back.
//
// PeerSegments: the segments the peer owns, mapped from the fds of its SEGMENT_ADD messages.
// A message may name a segment whose SEGMENT_ADD travels on the other channel, so a lookup
// of an unknown id waits (bounded) for it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace pybackend::ipc {

constexpr uint64_t kArenaAlign = 64;
// How long an allocation over the bound waits for blocks in use to come back before it fails
// (pybackend/ipc/arena.py BOUND_WAIT_S: the same figure and text on both sides).
constexpr std::chrono::seconds kBoundWait{2};

class ArenaError : public std::runtime_error {
 public:
  explicit ArenaError(const std::string& what) : std::runtime_error(what) {}
};

// Creates an anonymous shared-memory file of `size` bytes with its pages reserved: memfd
// first, else shm_open with a random name, O_EXCL, mode 0600, unlinked at once. Throws
// ArenaError. `name` only shows up in /proc/<pid>/fd and /proc/<pid>/maps.
int CreateSegmentFd(const std::string& name, uint64_t size);

// One mapping of a segment; unmapped when the last user lets go of it.
struct Mapping {
  Mapping(uint8_t* base, uint64_t size) : base(base), size(size) {}
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  uint8_t* const base;
  const uint64_t size;
};

struct NewSegment {
  uint32_t id;
  uint64_t size;
  int fd;  // owned by the receiver of NewSegment: close it after sending SEGMENT_ADD
};

class Arena {
 public:
  struct Block {
    uint32_t seg;
    uint64_t offset;
    uint8_t* ptr;
    uint64_t size;  // as asked for (the allocator may have rounded the block up)
  };

  Arena(std::string name, uint64_t default_size, uint64_t growth_size,
        std::chrono::milliseconds idle_release = std::chrono::milliseconds(1000));
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Bounds the bytes all segments together may reserve (0: no bound, the default). `knob`
  // names the setting in the error raised when an allocation would go beyond it.
  void set_max_size(uint64_t max_size, std::string knob);

  // Throws ArenaError when no segment can be created; the message says how many bytes
  // were needed, how many are reserved and in use, and which setting bounds them. Never
  // waits: over the bound it fails at once.
  Block Allocate(uint64_t size) { return AllocateImpl(size, nullptr); }
  // The same, but over the bound it waits up to kBoundWait for other blocks in use to come
  // back (the stub frees inputs once its arrays die), unless waiting cannot help: the block
  // and the blocks in `held` (the caller's own, such as the earlier inputs of the batch it
  // encodes, which cannot come back meanwhile) are over the bound together, every other
  // block in use is pinned (its batch runs), or this thread never waits (a monitor).
  // The error of a wait that ran out ends in "(after waiting 2 s for blocks in use to come
  // back)". The arena's lock is not held while waiting.
  Block AllocateOrWait(uint64_t size, const std::vector<Block>& held) {
    return AllocateImpl(size, &held);
  }
  // This thread never waits in AllocateOrWait, whichever the arena: a session's monitor,
  // which handles its stub's FREEs and returns its blocks; waiting there for its own memory
  // waits for itself, for another session's it stalls its own (whose stub then waits).
  static void NeverWaitOnThisThread();
  // Reserves the first segment now (shm-default-byte-size, at load) unless one exists.
  // Throws ArenaError as Allocate does.
  void Reserve();
  // Returns the block containing (seg, offset) to the free list; false if there is none.
  // A pinned block is only marked: it goes back when its pin is dropped.
  bool Free(uint32_t seg, uint64_t offset);
  // Pins the block that starts at (seg, offset) (a block of ours still in use), so that a
  // Free from the peer cannot hand it out again while we still read it. Unpin drops the
  // pin and completes a Free that came meanwhile. Pins do not nest.
  void Pin(uint32_t seg, uint64_t offset);
  void Unpin(uint32_t seg, uint64_t offset);
  // Address of [offset, offset+length) in our segment `seg`, or nullptr when out of range.
  uint8_t* Resolve(uint32_t seg, uint64_t offset, uint64_t length);

  // Segments created since the last call; the peer must get a SEGMENT_ADD for each.
  std::vector<NewSegment> TakeUnannounced();
  // Unmaps non-first segments that stayed empty for idle_release. Returns the ids the peer
  // had been told about (it needs SEGMENT_DROP for those), with those of the empty segments
  // an allocation over the bound dropped at once to make room.
  std::vector<uint32_t> ReleaseIdle();
  bool HasIdleCandidates();

  uint64_t total_size();
  uint64_t used_bytes();
  size_t segment_count();

 private:
  struct Segment {
    uint32_t id;
    uint64_t size;
    std::shared_ptr<Mapping> map;
    int fd;  // -1 once handed out for announcement
    bool announced = false;
    std::map<uint64_t, uint64_t> free;  // offset -> size, sorted for coalescing
    std::map<uint64_t, uint64_t> used;  // offset -> size
    std::map<uint64_t, bool> pinned;    // block offset -> freed while pinned
    uint64_t used_bytes = 0;
    std::chrono::steady_clock::time_point empty_since;
  };
  Block AllocateImpl(uint64_t size, const std::vector<Block>* held);
  Segment* NewSegmentLocked(uint64_t need);
  // Whether an allocation of `need` over the bound may wait for blocks to come back.
  bool MayWaitLocked(uint64_t need, const std::vector<Block>& held) const;
  bool IsFloor(const Segment& s) const;
  // Drops every empty segment but the floor that has been empty since `empty_since` or
  // before (ReleaseIdle: idle_release ago; an allocation over the bound: any, so their room
  // can serve the block). Ids the peer knows go to dropped_. False if none went.
  bool DropEmptyLocked(std::chrono::steady_clock::time_point empty_since);
  void ReleaseLocked(Segment& s, std::map<uint64_t, uint64_t>::iterator used);
  static bool TakeFrom(Segment& s, uint64_t size, uint64_t* offset);

  std::mutex mu_;
  std::string name_;
  uint64_t default_size_;
  uint64_t growth_size_;
  uint64_t max_size_ = 0;
  std::string knob_;
  std::chrono::milliseconds idle_release_;
  std::condition_variable freed_;  // a block came back while allocations wait (waiters_)
  int waiters_ = 0;
  std::vector<uint32_t> dropped_;  // announced segments dropped, for ReleaseIdle to return
  uint32_t next_id_ = 0;
  std::map<uint32_t, std::unique_ptr<Segment>> segments_;
};

class PeerSegments {
 public:
  explicit PeerSegments(std::chrono::milliseconds wait = std::chrono::milliseconds(5000));
  ~PeerSegments();

  // Maps the segment and takes ownership of fd (closed here in every case). Throws
  // std::runtime_error when the fd is smaller than announced or cannot be mapped.
  void Add(uint32_t id, uint64_t size, int fd);
  void Drop(uint32_t id);
  // The mapping holding [offset, offset+length) of segment `id`; waits up to the bound for
  // an unknown id. On failure returns nullptr and sets *error.
  std::shared_ptr<Mapping> Get(uint32_t id, uint64_t offset, uint64_t length, std::string* error);
  // Makes waiting and future lookups of unknown ids fail at once (the peer is gone).
  void Abort();
  void Clear();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::chrono::milliseconds wait_;
  bool aborted_ = false;
  std::unordered_map<uint32_t, std::shared_ptr<Mapping>> segments_;
};

}  // namespace pybackend::ipc
