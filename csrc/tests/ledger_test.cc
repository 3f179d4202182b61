// Unit tests of MemoryLedger (csrc/backend/memory_ledger.h): the state transitions of every
// piece of memory a session shares with its stub, as docs/protocol.md ("Memory lifetimes")
// draws them. Device memory runs on a fake libcuda.so.1 (csrc/tests/fake_cuda.cc), loaded
// first by path, which counts allocations, frees and IPC mappings.
// Plain asserts with messages; run by ctest and tests/ipc/test_native_units.py.
#include <dlfcn.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/memory_ledger.h"
#include "cuda/driver.h"
#include "ipc/channel.h"
#include "ipc/codec.h"
#include "ipc/protocol.h"
#include "tests/expect.h"

using namespace pybackend;

int g_failures = 0;

namespace {

std::vector<std::string> g_warnings;

MemoryLedger NewLedger() {
  return MemoryLedger("pybackend-ledger-test", 1 << 16, 1 << 16,
                      [](const std::string& w) { g_warnings.push_back(w); });
}

// A FREE's list (or a RESULT's freed trailer): u32 count, then (u32 segment, u64 offset).
uint32_t StubFrees(MemoryLedger& ledger, const std::vector<std::pair<uint32_t, uint64_t>>& refs) {
  ipc::Writer w;
  for (const auto& [seg, off] : refs) {
    w.U32(seg);
    w.U64(off);
  }
  return ledger.OnStubFree(ipc::BlockRefs(w.data(), static_cast<uint32_t>(refs.size())));
}

// The fake driver's counters and its allocator (standing for the stub's torch/cupy).
struct FakeCuda {
  int (*live)() = nullptr;
  int (*frees)() = nullptr;
  int (*open)() = nullptr;
  int (*alloc)(unsigned long long*, size_t) = nullptr;  // NOLINT(runtime/int): cuda.h's type
  int (*free)(unsigned long long) = nullptr;            // NOLINT(runtime/int)

  static FakeCuda Load() {
    FakeCuda f;
    // Loaded before the driver looks for libcuda.so.1, which then finds it by soname.
    void* lib = dlopen(PYBACKEND_FAKE_CUDA, RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) {
      std::fprintf(stderr, "cannot load the fake driver: %s\n", dlerror());
      return f;
    }
    f.live = reinterpret_cast<int (*)()>(dlsym(lib, "fake_cuda_live_allocations"));
    f.frees = reinterpret_cast<int (*)()>(dlsym(lib, "fake_cuda_frees"));
    f.open = reinterpret_cast<int (*)()>(dlsym(lib, "fake_cuda_open_mappings"));
    f.alloc = reinterpret_cast<int (*)(unsigned long long*, size_t)>(  // NOLINT(runtime/int)
        dlsym(lib, "cuMemAlloc_v2"));
    f.free = reinterpret_cast<int (*)(unsigned long long)>(  // NOLINT(runtime/int)
        dlsym(lib, "cuMemFree_v2"));
    f.calls = reinterpret_cast<void (*)(char*, size_t)>(dlsym(lib, "fake_cuda_calls"));
    return f;
  }
  void (*calls)(char*, size_t) = nullptr;
  bool ok() const { return live && frees && open && alloc && free && calls; }
  // The driver calls made since the last Calls() (context pushes and pops left out).
  std::string Calls() const {
    char buf[2048];
    calls(buf, sizeof(buf));
    return buf;
  }
};

}  // namespace

// Our block lent to the stub: pinned while a batch reads outputs that are views of it; the
// stub's FREE while pinned only marks it, the unpin completes it.
static void TestLentBlockPinnedFreedOnUnpin() {
  MemoryLedger ledger = NewLedger();
  Loan loan;
  loan.blocks.push_back(ledger.Lend(100));
  const uint64_t one = ledger.arena().used_bytes();
  ledger.Pin(loan);
  const ipc::Arena::Block& b = loan.blocks[0];
  EXPECT(StubFrees(ledger, {{b.seg, b.offset}}) == 0);
  EXPECT(ledger.arena().used_bytes() == one);  // still ours: we read it
  EXPECT(ledger.ResolveLent(b.seg, b.offset, 100) == b.ptr);
  ipc::Arena::Block other = ledger.Lend(100);
  EXPECT(other.offset != b.offset);  // not handed out again while pinned
  ledger.Unpin(loan);
  EXPECT(ledger.arena().used_bytes() == one);  // the free completed: only `other` is left
  // Unpinned and never freed stays lent; a free then returns it at once.
  Loan second;
  second.blocks.push_back(other);
  ledger.Pin(second);
  ledger.Unpin(second);
  EXPECT(ledger.arena().used_bytes() == one);
  EXPECT(StubFrees(ledger, {{other.seg, other.offset}}) == 0);
  EXPECT(ledger.arena().used_bytes() == 0);
  // A block the stub frees twice, or never had: refused and warned about, never fatal.
  g_warnings.clear();
  EXPECT(StubFrees(ledger, {{other.seg, other.offset}, {9, 64}}) == 2);
  EXPECT(g_warnings.size() == 2 && g_warnings[1].find("segment 9") != std::string::npos);
  // A batch that never went out: everything it lent comes back.
  Loan never;
  never.blocks.push_back(ledger.Lend(1000));
  never.blocks.push_back(ledger.Lend(1000));
  ledger.Reclaim(never);
  EXPECT(never.blocks.empty() && ledger.arena().used_bytes() == 0);
}

// The stub's blocks we hold: queued when we are done, then returned in EXECUTE's trailer or
// in one FREE (on failure they stay queued); the keepalive policy after a batch.
static void TestStubBlocksReturned() {
  MemoryLedger ledger = NewLedger();
  ipc::ResponseBody body;
  ipc::TensorDesc arena_out;
  arena_out.location = ipc::Location::STUB_ARENA;
  arena_out.seg = 4;
  arena_out.offset = 128;
  ipc::TensorDesc gpu_out;
  gpu_out.location = ipc::Location::GPU_IPC;
  gpu_out.gpu.hold = 77;
  ipc::TensorDesc inline_out;  // nothing to return
  body.outputs = {arena_out, gpu_out, inline_out};
  ledger.DoneWith(body);
  ledger.Done(5, 0);
  EXPECT(ledger.queued_returns() == 3 && ledger.HasWork());
  ipc::Writer tw;
  ipc::AppendFreed(tw, ledger.TakeReturns());
  ipc::Reader tr(tw.data(), tw.size());
  EXPECT(tr.U32() == 3 && tr.U32() == 4 && tr.U64() == 128);
  EXPECT(tr.U32() == ipc::GPU_HOLD_SEG && tr.U64() == 77);
  EXPECT(tr.U32() == 5 && tr.U64() == 0 && tr.remaining() == 0);
  EXPECT(ledger.queued_returns() == 0);
  ipc::Writer none;
  ipc::AppendFreed(none, ledger.TakeReturns());
  EXPECT(none.size() == 0);  // nothing queued: no trailer at all

  int sv[2];
  EXPECT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
  ipc::Channel ours(sv[0], "ours", nullptr, nullptr, nullptr);
  ipc::Channel stub(sv[1], "stub", nullptr, nullptr, nullptr);
  std::string err;
  ipc::Message m;
  EXPECT(ledger.SendReturns(ours, 1000, &err));  // nothing queued: no message
  EXPECT(stub.Recv(&m, &err) == ipc::Channel::RecvStatus::kWouldBlock);
  ledger.Done(6, 640);
  EXPECT(ledger.SendReturns(ours, 1000, &err));
  EXPECT(stub.Recv(&m, &err) == ipc::Channel::RecvStatus::kOk);
  EXPECT(m.kind == static_cast<uint16_t>(ipc::MessageKind::FREE));
  ipc::Reader fr(m.body.data(), m.body.size());
  EXPECT(fr.U8() == static_cast<uint8_t>(ipc::Owner::STUB) && fr.U32() == 1);
  EXPECT(fr.U32() == 6 && fr.U64() == 640 && fr.remaining() == 0);
  EXPECT(ledger.SendReturns(ours, 1000, &err, true));  // an empty FREE when asked for
  EXPECT(stub.Recv(&m, &err) == ipc::Channel::RecvStatus::kOk && m.body.size() == 5);

  // After a batch: big references go back at once, small ones wait for the next EXECUTE or
  // the monitor's idle FREE.
  EXPECT(ledger.ReturnAfterBatch(MemoryLedger::kEagerReturnBytes));
  EXPECT(!ledger.KeepaliveDue(std::chrono::milliseconds(0)));
  EXPECT(!ledger.ReturnAfterBatch(100));
  EXPECT(ledger.KeepaliveDue(std::chrono::milliseconds(0)) && ledger.HasWork());
  EXPECT(!ledger.KeepaliveDue(std::chrono::hours(1)));
  EXPECT(ledger.TakeKeepalive() && !ledger.TakeKeepalive());
  EXPECT(!ledger.ReturnAfterBatch(0) && !ledger.KeepaliveDue(std::chrono::milliseconds(0)));

  // The stub's end of the socket is gone: the send fails and the blocks stay queued.
  stub.Shutdown();
  ledger.Done(7, 0);
  ledger.Done(8, 64);
  EXPECT(!ledger.SendReturns(ours, 100, &err) && !err.empty());
  EXPECT(ledger.queued_returns() == 2);
}

// Device memory we lend: released once, on the stub's FREE or when never handed; an unknown
// hold is refused. The stub's allocations we map: opened once, closed when the stub is gone.
static void TestDeviceMemory(const FakeCuda& cuda) {
  MemoryLedger ledger = NewLedger();
  ledger.set_lend_pool(false);  // frees as they happen; the pool's side: TestLendPoolCalls
  const int live = cuda.live();
  const int frees = cuda.frees();
  ipc::GpuRef lent;
  cuda::CUdeviceptr p = ledger.LendDevice(0, 256, "test", &lent);
  EXPECT(p != 0 && lent.hold != 0 && lent.owner == ipc::Owner::BACKEND);
  EXPECT(ledger.device_holds() == 1 && cuda.live() == live + 1);
  cuda::IpcCache::Mapping m;
  EXPECT(ledger.FindLentDevice(lent, &m) && m.base == p && m.size == 256);
  g_warnings.clear();
  EXPECT(StubFrees(ledger, {{ipc::GPU_HOLD_SEG, lent.hold}}) == 0);
  EXPECT(cuda.live() == live && cuda.frees() == frees + 1 && ledger.device_holds() == 0);
  EXPECT(!ledger.FindLentDevice(lent, &m));
  // The same FREE again (or a made-up hold): refused, nothing freed twice.
  EXPECT(StubFrees(ledger, {{ipc::GPU_HOLD_SEG, lent.hold}}) == 1 && g_warnings.size() == 1);
  EXPECT(!ledger.ReleaseHold(lent.hold) && !ledger.ReleaseHold(12345));
  EXPECT(cuda.frees() == frees + 1);
  // Lent by a batch that never went out (or a BLS output never handed over).
  Loan loan;
  ledger.LendDevice(0, 64, "test", &lent);
  loan.gpu_holds.push_back(lent.hold);
  ledger.Reclaim(loan);
  EXPECT(loan.gpu_holds.empty() && ledger.device_holds() == 0 && cuda.live() == live);
  EXPECT(!ledger.ReleaseHold(lent.hold));

  // The stub's own allocation: mapped on first use, reused, closed when the stub is gone.
  unsigned long long stub_mem = 0;  // NOLINT(runtime/int): cuda.h's type
  EXPECT(cuda.alloc(&stub_mem, 512) == 0);
  ipc::GpuRef theirs;
  std::memcpy(theirs.handle.data(), &stub_mem, sizeof(stub_mem));
  int uses = 0;
  for (int i = 0; i < 2; ++i) {
    ledger.WithStubDevice(theirs, "test", [&](const cuda::IpcCache::Mapping& mm) {
      uses += mm.base == stub_mem && mm.size == 512;
    });
  }
  EXPECT(uses == 2 && ledger.ipc_mappings() == 1 && cuda.open() == 1);
  ledger.OnStubGone();
  EXPECT(ledger.ipc_mappings() == 0 && cuda.open() == 0);
  EXPECT(cuda.free(stub_mem) == 0);  // the stub's allocator frees its own memory
}

// What the backend does for one GPU input it cannot share (a client's CUDA shared memory:
// request_encoder.cc's EncodeGpuInput), then the stub's FREE of the hold once the request is
// done. Returns the hold's handle bytes (the stub maps by handle).
static std::string LendOneInput(MemoryLedger& ledger, const void* client, size_t size) {
  ipc::GpuRef ref;
  EXPECT(!ledger.ShareDevice(0, client, "test", &ref));
  cuda::CUdeviceptr copy = ledger.LendDevice(0, size, "test", &ref);
  cuda::Copy(cuda::Driver::Get("test"), 0, cuda::Direction::kDeviceToDevice,
             reinterpret_cast<void*>(copy), client, size, "test");
  EXPECT(std::memcmp(reinterpret_cast<const void*>(copy), client, size) == 0);
  EXPECT(StubFrees(ledger, {{ipc::GPU_HOLD_SEG, ref.hold}}) == 0);
  return std::string(reinterpret_cast<const char*>(ref.handle.data()), ref.handle.size());
}

// The driver calls of a GPU input copied into lent memory, request after request: without
// the lending pool (PYBACKEND_GPU_LEND_POOL=0) each request allocates, exports and frees its
// buffer; with it (the default) the second request reuses the first one's allocation and
// handle (so the stub's cached mapping is hit), does not try to share the client's memory
// again, and makes only the copy and its sync.
static void TestLendPoolCalls(const FakeCuda& cuda) {
  std::vector<char> client(4096, 7);  // not an allocation of the driver's: not shareable
  const std::string per_request =
      "cuMemGetAddressRange cuMemAlloc cuMemGetAddressRange cuIpcGetMemHandle "
      "cuMemcpyDtoDAsync cuStreamSynchronize cuMemFree";
  {
    MemoryLedger ledger = NewLedger();
    ledger.set_lend_pool(false);
    cuda.Calls();
    LendOneInput(ledger, client.data(), client.size());
    EXPECT(cuda.Calls() == per_request);
    LendOneInput(ledger, client.data(), client.size());
    EXPECT(cuda.Calls() == per_request);
    EXPECT(ledger.pooled_device() == 0);
  }
  const int live = cuda.live();
  {
    MemoryLedger ledger = NewLedger();
    ledger.set_lend_pool(true);
    cuda.Calls();
    std::string first = LendOneInput(ledger, client.data(), client.size());
    EXPECT(cuda.Calls() ==
           "cuMemGetAddressRange cuMemAlloc cuMemGetAddressRange cuIpcGetMemHandle "
           "cuMemcpyDtoDAsync cuStreamSynchronize");
    EXPECT(ledger.pooled_device() == 1 && cuda.live() == live + 1);
    std::string second = LendOneInput(ledger, client.data(), client.size());
    // Not even the share attempt: the client's pointer was refused before.
    EXPECT(cuda.Calls() == "cuMemcpyDtoDAsync cuStreamSynchronize");
    EXPECT(second == first);  // the same allocation and handle: the stub's mapping is reused
    // A smaller input (at least half the size) reuses it too; a much smaller one does not.
    EXPECT(LendOneInput(ledger, client.data(), 3000) == first);
    cuda.Calls();
    EXPECT(LendOneInput(ledger, client.data(), 100) != first);
    EXPECT(cuda.Calls().find("cuMemAlloc") != std::string::npos);
    EXPECT(ledger.pooled_device() == 2 && ledger.device_holds() == 0);
    // Bounded: past kPoolMaxBuffers idle buffers the oldest are freed.
    std::vector<ipc::GpuRef> refs(cuda::DeviceHolds::kPoolMaxBuffers + 3);
    for (auto& r : refs) ledger.LendDevice(0, 1 << 20, "test", &r);
    for (auto& r : refs) EXPECT(ledger.ReleaseHold(r.hold));
    EXPECT(ledger.pooled_device() == cuda::DeviceHolds::kPoolMaxBuffers);
    EXPECT(cuda.live() == live + static_cast<int>(cuda::DeviceHolds::kPoolMaxBuffers));
    // A hold comes back once only, pooled or not.
    EXPECT(!ledger.ReleaseHold(refs[0].hold));
    // Switched off: the idle buffers are freed at once.
    ledger.set_lend_pool(false);
    EXPECT(ledger.pooled_device() == 0 && cuda.live() == live);
    ledger.set_lend_pool(true);
    ipc::GpuRef kept;
    ledger.LendDevice(0, 4096, "test", &kept);
    EXPECT(ledger.ReleaseHold(kept.hold) && ledger.pooled_device() == 1);
  }
  EXPECT(cuda.live() == live);  // teardown frees the pool
}

// The session ends (stub exited, crashed or restarted): nothing of either side is left.
static void TestTeardown(const FakeCuda& cuda) {
  const int live = cuda.live();
  MemoryLedger ledger = NewLedger();
  int fd = ipc::CreateSegmentFd("pybackend-ledger-test", 4096);
  ledger.peers().Add(3, 4096, fd);
  std::string err;
  EXPECT(ledger.MapStub(3, 0, 16, &err) != nullptr);
  ledger.Done(3, 0);
  ipc::GpuRef lent;
  ledger.LendDevice(0, 64, "test", &lent);
  unsigned long long stub_mem = 0;  // NOLINT(runtime/int): cuda.h's type
  EXPECT(cuda.alloc(&stub_mem, 64) == 0);
  ipc::GpuRef theirs;
  std::memcpy(theirs.handle.data(), &stub_mem, sizeof(stub_mem));
  ledger.WithStubDevice(theirs, "test", [](const cuda::IpcCache::Mapping&) {});
  ledger.ReturnAfterBatch(100);
  EXPECT(ledger.queued_returns() == 1 && ledger.device_holds() == 1 && cuda.open() == 1);

  ledger.Teardown();
  EXPECT(ledger.queued_returns() == 0 && !ledger.HasWork());
  EXPECT(ledger.device_holds() == 0 && cuda.live() == live + 1);  // the stub's own is left
  EXPECT(ledger.ipc_mappings() == 0 && cuda.open() == 0);
  auto start = std::chrono::steady_clock::now();
  EXPECT(ledger.MapStub(3, 0, 16, &err) == nullptr);  // unmapped, and no wait for it
  EXPECT(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  ledger.Teardown();  // idempotent
  EXPECT(cuda.free(stub_mem) == 0);
}

int main() {
  FakeCuda cuda = FakeCuda::Load();  // before anything opens the driver
  EXPECT(cuda.ok());
  TestLentBlockPinnedFreedOnUnpin();
  TestStubBlocksReturned();
  if (cuda.ok()) {
    TestDeviceMemory(cuda);
    TestTeardown(cuda);
    TestLendPoolCalls(cuda);
  }
  if (g_failures == 0) std::printf("ledger_test: all passed\n");
  return g_failures == 0 ? 0 : 1;
}
