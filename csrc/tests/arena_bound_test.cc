// Unit tests of the arena under a bound (shm-max-byte-size): AllocateOrWait waits for blocks
// in use to come back, and fails at once where waiting cannot help (a block larger than the
// bound, blocks the caller holds itself, pinned blocks, the thread that returns blocks);
// Reserve makes the first segment. Run by ctest and tests/ipc/test_native_units.py.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "ipc/arena.h"
#include "tests/expect.h"

using namespace pybackend;

int g_failures = 0;

namespace {

constexpr uint64_t kSeg = 1 << 16;  // default and growth size of the arenas below
const std::string kWaited = "(after waiting 2 s for blocks in use to come back)";

// The error of AllocateOrWait(size, held), or "" when it succeeded.
std::string Refusal(ipc::Arena& arena, uint64_t size, const std::vector<ipc::Arena::Block>& held) {
  try {
    arena.AllocateOrWait(size, held);
  } catch (const ipc::ArenaError& e) {
    return e.what();
  }
  return "";
}

void TestWaitsForABlockToComeBack() {
  ipc::Arena arena("pybackend-test", kSeg, kSeg, std::chrono::hours(1));
  arena.set_max_size(3 * kSeg, "the backend config shm-max-byte-size");
  auto a = arena.Allocate(kSeg);
  auto b = arena.Allocate(kSeg);
  auto c = arena.Allocate(kSeg);
  bool refused = false;
  try {
    arena.Allocate(kSeg);  // without waiting: over the bound at once
  } catch (const ipc::ArenaError&) {
    refused = true;
  }
  EXPECT(refused);
  std::thread peer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    arena.Free(b.seg, b.offset);  // the stub's FREE, on another thread
  });
  auto d = arena.AllocateOrWait(kSeg, {});
  peer.join();
  EXPECT(d.seg == b.seg && d.offset == b.offset);
  (void)a;
  (void)c;
}

void TestRefusesAtOnceWhereWaitingCannotHelp() {
  ipc::Arena arena("pybackend-test", kSeg, kSeg, std::chrono::hours(1));
  arena.set_max_size(3 * kSeg, "the backend config shm-max-byte-size");
  auto a = arena.Allocate(kSeg);
  auto b = arena.Allocate(kSeg);
  auto c = arena.Allocate(kSeg);
  // Larger than the bound: it never fits.
  std::string e = Refusal(arena, 4 * kSeg, {});
  EXPECT(e.find("does not fit under the shared-memory limit of 196608 bytes") != std::string::npos);
  EXPECT(e.find("after waiting") == std::string::npos);
  // Every block in use is the caller's own (its batch's earlier inputs).
  e = Refusal(arena, kSeg, {a, b, c});
  EXPECT(!e.empty() && e.find("after waiting") == std::string::npos);
  // With its own blocks, this one could never fit, whatever comes back.
  e = Refusal(arena, 2 * kSeg, {a, b});
  EXPECT(!e.empty() && e.find("after waiting") == std::string::npos);
  // The others are pinned: their batch runs, they come back only when it ends.
  arena.Pin(b.seg, b.offset);
  arena.Pin(c.seg, c.offset);
  e = Refusal(arena, kSeg, {a});
  EXPECT(!e.empty() && e.find("after waiting") == std::string::npos);
  arena.Unpin(b.seg, b.offset);
  arena.Unpin(c.seg, c.offset);
  // Nothing comes back: it fails after the wait, saying so.
  e = Refusal(arena, kSeg, {a});
  EXPECT(e.find("does not fit under the shared-memory limit") != std::string::npos);
  EXPECT(e.size() >= kWaited.size() &&
         e.compare(e.size() - kWaited.size(), kWaited.size(), kWaited) == 0);
  // A monitor thread (it handles the FREEs waited for) never waits.
  std::thread monitor([&] {
    ipc::Arena::NeverWaitOnThisThread();
    e = Refusal(arena, kSeg, {});
  });
  monitor.join();
  EXPECT(!e.empty() && e.find("after waiting") == std::string::npos);
}

void TestEmptySegmentsGoAtOnceAtTheBound() {
  // The block needs two segments' room: a segment's own free space is too small, so empty
  // segments go at once (not after their idle time, 1 h here) to make room.
  ipc::Arena arena("pybackend-test", kSeg, kSeg, std::chrono::hours(1));
  arena.set_max_size(3 * kSeg, "the backend config shm-max-byte-size");
  auto a = arena.Allocate(kSeg);
  auto b = arena.Allocate(kSeg);
  auto c = arena.Allocate(kSeg);
  for (auto& n : arena.TakeUnannounced()) close(n.fd);  // the peer knows all three
  arena.Free(c.seg, c.offset);
  EXPECT(arena.ReleaseIdle().empty());  // below the bound, empty segments keep their time
  std::thread peer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    arena.Free(b.seg, b.offset);
  });
  auto d = arena.AllocateOrWait(2 * kSeg, {});
  peer.join();
  EXPECT(d.size == 2 * kSeg && arena.segment_count() == 2);
  // The peer still maps the two dropped segments: the next ReleaseIdle names them.
  auto dropped = arena.ReleaseIdle();
  EXPECT(dropped.size() == 2 && dropped[0] == c.seg && dropped[1] == b.seg);
  EXPECT(arena.ReleaseIdle().empty());
  (void)a;
}

void TestReserve() {
  ipc::Arena arena("pybackend-test", 3 * kSeg, kSeg, std::chrono::hours(1));
  arena.Reserve();
  EXPECT(arena.segment_count() == 1 && arena.total_size() == 3 * kSeg);
  arena.Reserve();  // once
  EXPECT(arena.segment_count() == 1);
  auto a = arena.Allocate(kSeg);  // from the reserved segment
  EXPECT(a.seg == 0 && arena.segment_count() == 1);
}

}  // namespace

int main() {
  TestWaitsForABlockToComeBack();
  TestRefusesAtOnceWhereWaitingCannotHelp();
  TestEmptySegmentsGoAtOnceAtTheBound();
  TestReserve();
  if (g_failures == 0) std::printf("arena_bound_test: all passed\n");
  return g_failures == 0 ? 0 : 1;
}
