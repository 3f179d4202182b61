// Unit tests for the parts of the backend that do not need a Triton server: the codec, the
// arena allocator, peer segments, the channel (SCM_RIGHTS, FLAG_INDIRECT), the JSON value, the
// parallel copy and the sync spin (its decision and the lane's poll); the cgroup limits are
// in cgroup_test.cc.
// Plain asserts with messages; run by ctest (cmake -DPYBACKEND_BUILD_TESTS=ON).
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/json.h"
#include "backend/lane_spin.h"
#include "backend/parallel_copy.h"
#include "ipc/arena.h"
#include "ipc/channel.h"
#include "ipc/codec.h"
#include "ipc/lane.h"
#include "tests/expect.h"

using namespace pybackend;

int g_failures = 0;

template <typename F>
bool Throws(F f) {
  try {
    f();
  } catch (const std::exception&) {
    return true;
  }
  return false;
}

static void TestCodec() {
  ipc::Writer w;
  int64_t dims[2] = {2, 3};
  float data[6] = {1, 2, 3, 4, 5, 6};
  ipc::ResponseBody body;
  body.parameters = "{\"a\":1}";
  ipc::TensorDesc t;
  t.name = "OUT";
  t.dtype = 11;
  t.dims.assign(dims, dims + 2);
  t.byte_size = sizeof(data);
  t.inline_data = reinterpret_cast<const uint8_t*>(data);
  body.outputs.push_back(t);
  ipc::TensorDesc a = t;
  a.location = ipc::Location::STUB_ARENA;
  a.seg = 7;
  a.offset = 128;
  body.outputs.push_back(a);
  ipc::WriteResponseBody(w, body);

  ipc::Reader r(w.data(), w.size());
  ipc::ResponseBody got = ipc::ReadResponseBody(r);
  EXPECT(r.remaining() == 0);
  EXPECT(!got.has_error);
  EXPECT(got.parameters == body.parameters);
  EXPECT(got.outputs.size() == 2);
  EXPECT(got.outputs[0].name == "OUT" && got.outputs[0].dims == t.dims);
  EXPECT(std::memcmp(got.outputs[0].inline_data, data, sizeof(data)) == 0);
  EXPECT(got.outputs[1].seg == 7 && got.outputs[1].offset == 128);

  // Every truncation is a DecodeError, never a read past the end.
  for (size_t cut = 0; cut < w.size(); ++cut) {
    ipc::Reader rr(w.data(), cut);
    EXPECT(Throws([&] { ipc::ReadResponseBody(rr); }));
  }
  // An absurd dim count is refused before allocating.
  ipc::Writer bad;
  bad.Str("x");
  bad.U8(11);
  bad.U8(0);
  bad.U32(0xffffffff);
  ipc::Reader br(bad.data(), bad.size());
  EXPECT(Throws([&] { ipc::ReadTensorDesc(br); }));

  // A GPU_IPC tensor: owner, device, hold, the 64-byte handle and the offset round-trip.
  ipc::TensorDesc g = t;
  g.location = ipc::Location::GPU_IPC;
  g.gpu.owner = ipc::Owner::STUB;
  g.gpu.device = 3;
  g.gpu.hold = 0x1122334455ULL;
  for (size_t i = 0; i < g.gpu.handle.size(); ++i) g.gpu.handle[i] = static_cast<uint8_t>(i);
  g.gpu.offset = 4096;
  ipc::Writer gw;
  ipc::WriteTensorDesc(gw, g);
  ipc::Reader gr(gw.data(), gw.size());
  ipc::TensorDesc gg = ipc::ReadTensorDesc(gr);
  EXPECT(gr.remaining() == 0);
  EXPECT(gg.location == ipc::Location::GPU_IPC && gg.gpu.owner == ipc::Owner::STUB);
  EXPECT(gg.gpu.device == 3 && gg.gpu.hold == 0x1122334455ULL && gg.gpu.offset == 4096);
  EXPECT(gg.gpu.handle == g.gpu.handle);
  std::vector<uint8_t> wrong(gw.data(), gw.data() + gw.size());
  wrong[wrong.size() - 8 - 64 - 8 - 4 - 1] = 9;  // the owner byte
  ipc::Reader wr(wrong.data(), wrong.size());
  EXPECT(Throws([&] { ipc::ReadTensorDesc(wr); }));
}

static void TestArena() {
  ipc::Arena arena("pybackend-test", 1 << 16, 1 << 16, std::chrono::milliseconds(0));
  auto a = arena.Allocate(100);
  auto b = arena.Allocate(100);
  auto c = arena.Allocate(100);
  EXPECT(a.offset % ipc::kArenaAlign == 0 && b.offset % ipc::kArenaAlign == 0);
  EXPECT(a.seg == 0 && b.offset == a.offset + 128 && c.offset == b.offset + 128);
  std::memset(a.ptr, 0xab, 100);
  EXPECT(arena.Resolve(0, a.offset, 100) == a.ptr);
  EXPECT(arena.Resolve(0, (1 << 16) - 10, 11) == nullptr);
  EXPECT(arena.Resolve(0, UINT64_MAX, 2) == nullptr);
  EXPECT(arena.Resolve(9, 0, 1) == nullptr);
  // Interior offsets free the containing block; unknown blocks are refused.
  EXPECT(arena.Free(0, b.offset + 5));
  EXPECT(!arena.Free(0, b.offset));
  EXPECT(arena.Free(0, a.offset));
  auto d = arena.Allocate(200);  // fits in the coalesced a+b hole
  EXPECT(d.seg == 0 && d.offset == a.offset);
  EXPECT(arena.Free(0, c.offset) && arena.Free(0, d.offset));
  EXPECT(arena.used_bytes() == 0);
  // A pinned block freed by the peer stays allocated until the pin goes; an unfreed one
  // stays allocated after it.
  auto p = arena.Allocate(100);
  const uint64_t one = arena.used_bytes();  // a block's size, rounded up by the allocator
  arena.Pin(p.seg, p.offset);
  EXPECT(arena.Free(p.seg, p.offset + 1));
  EXPECT(arena.used_bytes() == one);
  auto q = arena.Allocate(100);
  EXPECT(q.offset != p.offset);
  arena.Unpin(p.seg, p.offset);
  EXPECT(arena.used_bytes() == one);  // q
  arena.Pin(q.seg, q.offset);
  arena.Unpin(q.seg, q.offset);
  EXPECT(arena.used_bytes() == one);
  EXPECT(arena.Free(q.seg, q.offset) && arena.used_bytes() == 0);
  auto big = arena.Allocate(1 << 20);  // needs a new segment
  EXPECT(big.seg == 1);
  auto news = arena.TakeUnannounced();
  EXPECT(news.size() == 2);
  for (auto& n : news) close(n.fd);
  EXPECT(arena.TakeUnannounced().empty());
  EXPECT(arena.ReleaseIdle().empty());  // segment 1 still in use
  EXPECT(arena.Free(1, big.offset));
  auto dropped = arena.ReleaseIdle();
  EXPECT(dropped.size() == 1 && dropped[0] == 1);
  EXPECT(arena.segment_count() == 1);
  // Segment ids are never reused.
  EXPECT(arena.Allocate(1 << 20).seg == 2);
}

static void TestPeerSegments() {
  ipc::PeerSegments peers(std::chrono::milliseconds(100));
  int fd = ipc::CreateSegmentFd("pybackend-test", 4096);
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  std::memcpy(p, "hello", 5);
  peers.Add(3, 4096, dup(fd));
  std::string err;
  auto m = peers.Get(3, 0, 5, &err);
  EXPECT(m != nullptr && std::memcmp(m->base, "hello", 5) == 0);
  EXPECT(peers.Get(3, 4000, 97, &err) == nullptr && !err.empty());
  EXPECT(peers.Get(4, 0, 1, &err) == nullptr);  // waits 100 ms, then gives up
  // Announced larger than the file: refused (it would SIGBUS later).
  EXPECT(Throws([&] { peers.Add(5, 8192, dup(fd)); }));
  // An unknown id that arrives while someone waits for it.
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    peers.Add(6, 4096, dup(fd));
  });
  ipc::PeerSegments patient(std::chrono::milliseconds(2000));
  std::thread late2([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    patient.Add(6, 4096, dup(fd));
  });
  EXPECT(patient.Get(6, 0, 5, &err) != nullptr);
  late.join();
  late2.join();
  peers.Drop(3);
  EXPECT(std::memcmp(m->base, "hello", 5) == 0);  // still mapped while held
  m.reset();
  patient.Abort();
  EXPECT(patient.Get(99, 0, 1, &err) == nullptr);
  munmap(p, 4096);
  close(fd);
}

static void TestChannel() {
  int sv[2];
  EXPECT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
  ipc::Arena arena_a("pybackend-test-a", 1 << 20, 1 << 20);
  ipc::PeerSegments peers_b;
  ipc::PendingFrees frees_b;
  ipc::Channel a(sv[0], "a", &arena_a, nullptr, nullptr);
  ipc::Channel b(sv[1], "b", nullptr, &peers_b, &frees_b);
  std::string err;
  std::vector<uint8_t> small{1, 2, 3};
  EXPECT(a.Send(ipc::MessageKind::LOG, 42, small, 1000, &err));
  ipc::Message m;
  EXPECT(b.Recv(&m, &err) == ipc::Channel::RecvStatus::kOk);
  EXPECT(m.kind == static_cast<uint16_t>(ipc::MessageKind::LOG) && m.id == 42 && m.body == small);
  EXPECT(b.Recv(&m, &err) == ipc::Channel::RecvStatus::kWouldBlock);

  // A body over MAX_INLINE_BODY goes through the sender's arena; the SEGMENT_ADD comes
  // first, with its fd, and the receiver queues the block for FREE.
  std::vector<uint8_t> large(ipc::MAX_INLINE_BODY + 1000);
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<uint8_t>(i * 7);
  EXPECT(a.Send(ipc::MessageKind::RESULT, 5, large, 1000, &err));
  EXPECT(b.Recv(&m, &err) == ipc::Channel::RecvStatus::kOk);
  EXPECT(m.kind == static_cast<uint16_t>(ipc::MessageKind::SEGMENT_ADD) && m.fd);
  ipc::Reader r(m.body.data(), m.body.size());
  r.U8();
  uint32_t seg = r.U32();
  uint64_t size = r.U64();
  peers_b.Add(seg, size, m.fd.Release());
  EXPECT(b.Recv(&m, &err) == ipc::Channel::RecvStatus::kOk);
  EXPECT(m.kind == static_cast<uint16_t>(ipc::MessageKind::RESULT) && m.body == large);
  EXPECT(!frees_b.empty());
  auto free_body = frees_b.TakeBody(ipc::Owner::BACKEND);
  ipc::Reader fr(free_body.data(), free_body.size());
  EXPECT(fr.U8() == 1 && fr.U32() == 1);
  EXPECT(arena_a.Free(fr.U32(), fr.U64()));
  EXPECT(frees_b.TakeBody(ipc::Owner::BACKEND).empty());  // nothing queued: no FREE at all

  // The same list as an EXECUTE's freed trailer: u32 count, then the pairs, nothing before.
  frees_b.Add(3, 4096);
  frees_b.Add(7, uint64_t{1} << 40);
  ipc::Writer tw;
  frees_b.TakeTrailer(tw);
  ipc::Reader tr(tw.data(), tw.size());
  EXPECT(tr.U32() == 2 && tr.U32() == 3 && tr.U64() == 4096);
  EXPECT(tr.U32() == 7 && tr.U64() == uint64_t{1} << 40 && tr.remaining() == 0);
  ipc::Writer none;
  frees_b.TakeTrailer(none);
  EXPECT(none.size() == 0 && frees_b.empty());

  // A lying body_len is a protocol error.
  ipc::Header h{1, 0, 99, 0};
  EXPECT(send(sv[0], &h, sizeof(h), 0) == sizeof(h));
  EXPECT(b.Recv(&m, &err) == ipc::Channel::RecvStatus::kError);
  a.Shutdown();
  EXPECT(b.Recv(&m, &err) == ipc::Channel::RecvStatus::kClosed);
}

static void TestJson() {
  auto v = json::Value::Parse(
      R"({"a": 1, "b": [true, false, null], "c": "x\"\u00e9\ud83d\ude00", "d": -2.5e3,
          "e": {"f": 9223372036854775807}})");
  EXPECT(v.Find("a")->AsInt() == 1);
  EXPECT(v.Find("b")->items().size() == 3 && v.Find("b")->items()[0].AsBool());
  EXPECT(v.Find("c")->AsString() == "x\"\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT(v.Find("d")->AsDouble() == -2500.0);
  EXPECT(v.Find("e")->Find("f")->AsInt() == INT64_MAX);
  auto again = json::Value::Parse(v.Dump());
  EXPECT(again.Dump() == v.Dump());
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "tru", "\"abc", "1 2", "{\"a\":1,}"}) {
    EXPECT(Throws([&] { json::Value::Parse(bad); }));
  }
  json::Value o = json::Value::Object();
  o.Set("k", "line\nbreak\x01");
  o.Set("d", 1.0);
  EXPECT(o.Dump() == R"({"k":"line\nbreak\u0001","d":1.0})");
}

// Every size around the pool's threshold and chunking, from several threads at once (they share
// the helper pool), must copy exactly, without touching a byte past the end.
static void TestParallelCopy() {
  const size_t sizes[] = {0,
                          1,
                          4095,
                          kParallelCopyMinBytes - 1,
                          kParallelCopyMinBytes,
                          kParallelCopyMinBytes + 4097,
                          (5u << 20) + 3,
                          9u << 20};
  auto run = [&](unsigned seed, int* bad) {
    for (size_t n : sizes) {
      std::vector<unsigned char> src(n), dst(n + 64, 0xAB);
      for (size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>((i * 31 + seed) >> 3);
      CopyBytes(dst.data(), src.data(), n);
      if (std::memcmp(dst.data(), src.data(), n) != 0) ++*bad;
      for (size_t i = n; i < n + 64; ++i) {
        if (dst[i] != 0xAB) ++*bad;
      }
    }
  };
  int bad[4] = {0, 0, 0, 0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) threads.emplace_back(run, t, &bad[t]);
  for (auto& t : threads) t.join();
  for (int b : bad) EXPECT(b == 0);
}

// Cores x instances -> spin or not, and the ipc-spin-us knob over both.
static void TestLaneSpinDecision() {
  // Auto: at least kLaneSpinMinCores (4) usable cores per instance.
  EXPECT(DecideLaneSpin(kLaneSpinAuto, 2, 1).micros == 0);  // the 2-vCPU machines
  EXPECT(DecideLaneSpin(kLaneSpinAuto, 1, 1).micros == 0);
  EXPECT(DecideLaneSpin(kLaneSpinAuto, 3, 1).micros == 0);
  EXPECT(DecideLaneSpin(kLaneSpinAuto, 4, 1).micros == kLaneSpinAutoMicros);
  EXPECT(DecideLaneSpin(kLaneSpinAuto, 16, 1).micros == kLaneSpinAutoMicros);  // the GPU machine
  EXPECT(DecideLaneSpin(kLaneSpinAuto, 16, 2).micros == kLaneSpinAutoMicros);
  EXPECT(DecideLaneSpin(kLaneSpinAuto, 16, 4).micros == kLaneSpinAutoMicros);
  EXPECT(DecideLaneSpin(kLaneSpinAuto, 16, 5).micros == 0);
  EXPECT(DecideLaneSpin(kLaneSpinAuto, 16, 16).micros == 0);
  EXPECT(DecideLaneSpin(kLaneSpinAuto, 16, 0).micros == kLaneSpinAutoMicros);  // counted as 1
  EXPECT(DecideLaneSpin(kLaneSpinAuto, 2, 1).reason.find("fewer than 4") != std::string::npos);
  EXPECT(DecideLaneSpin(kLaneSpinAuto, 16, 1).reason.find("16 usable cores, 1 instance") !=
         std::string::npos);
  // Set: applies whatever the cores; 0 is off even with cores to spare.
  EXPECT(DecideLaneSpin(50, 2, 1).micros == 50);
  EXPECT(DecideLaneSpin(0, 16, 1).micros == 0);
  EXPECT(DecideLaneSpin(0, 16, 1).reason.find("ipc-spin-us") != std::string::npos);
}

// The BLS answer's poll: auto follows the sync spin (off with it); a set value applies as is.
static void TestBlsSpinDecision() {
  EXPECT(DecideBlsSpin(kLaneSpinAuto, 0).micros == 0);  // the 2-vCPU machines
  EXPECT(DecideBlsSpin(kLaneSpinAuto, kLaneSpinAutoMicros).micros ==
         kLaneSpinAutoMicros * kBlsSpinAutoFactor);
  EXPECT(DecideBlsSpin(kLaneSpinAuto, 50).micros == 50 * kBlsSpinAutoFactor);
  EXPECT(DecideBlsSpin(kLaneSpinAuto, 100).reason.find("auto") != std::string::npos);
  EXPECT(DecideBlsSpin(kLaneSpinAuto, 300000).micros == kSpinMaxMicros);  // capped at 1 s
  EXPECT(DecideBlsSpin(0, 100).micros == 0);
  EXPECT(DecideBlsSpin(300, 0).micros == 300);
  EXPECT(DecideBlsSpin(300, 0).reason.find("ipc-bls-spin-us") != std::string::npos);
}

// Lane::Spin returns as soon as the bell moves, and gives up when the time is over (no timing
// asserted: only which of the two happened).
static void TestLaneSpin() {
  if (!ipc::Lane::Supported()) return;
  ipc::Lane lane("pybackend-ipc-test-lane");
  uint32_t seen = lane.UpBell();
  EXPECT(!lane.Spin(seen, std::chrono::microseconds(200)));
  EXPECT(!lane.Spin(seen, std::chrono::microseconds(0)));
  std::thread ringer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    lane.WakeWaiter();  // rings the up bell
  });
  EXPECT(lane.Spin(seen, std::chrono::seconds(30)));  // bounded: a broken ring fails, not hangs
  ringer.join();
  EXPECT(lane.UpBell() != seen);
  EXPECT(lane.Spin(seen, std::chrono::microseconds(0)));  // already moved: true at once
}

// Lane::Nudge wakes a thread asleep in Wait without moving the up bell (the stub's word): the
// waiter returns long before its timeout, the bell as it was. A nudge before the waiter
// sleeps is lost by design, so the nudger repeats until the waiter is back.
static void TestLaneNudge() {
  if (!ipc::Lane::Supported()) return;
  ipc::Lane lane("pybackend-ipc-test-nudge");
  uint32_t seen = lane.UpBell();
  std::atomic<bool> back{false};
  auto t0 = std::chrono::steady_clock::now();
  std::thread waiter([&] {
    lane.Wait(seen, std::chrono::milliseconds(30000));
    back = true;
  });
  for (int i = 0; i < 20000 && !back; ++i) {
    lane.Nudge();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  waiter.join();
  EXPECT(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
  EXPECT(lane.UpBell() == seen);
}

int main() {
  TestCodec();
  TestArena();
  TestPeerSegments();
  TestChannel();
  TestJson();
  TestParallelCopy();
  TestLaneSpinDecision();
  TestBlsSpinDecision();
  TestLaneSpin();
  TestLaneNudge();
  if (g_failures == 0) std::printf("ipc_test: all passed\n");
  return g_failures == 0 ? 0 : 1;
}
