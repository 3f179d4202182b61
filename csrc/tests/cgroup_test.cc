// Unit tests of the cgroup reader (ipc/cgroup.h) through its two users: the CPU limit of
// backend/cores.h and the memory headroom of ipc/memory_headroom.h, on fake filesystem roots.
// Plain asserts with messages; run by ctest (cmake -DPYBACKEND_BUILD_TESTS=ON).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/cores.h"
#include "ipc/arena.h"
#include "ipc/memory_headroom.h"
#include "tests/expect.h"

using namespace pybackend;

int g_failures = 0;

using Files = std::vector<std::pair<std::string, std::string>>;

// A fake filesystem root: `cgroup` is the text of /proc/self/cgroup, each pair a file under
// sys/fs/cgroup and its text, `meminfo` (when not empty) the text of /proc/meminfo; the
// directories between are made.
static std::string FakeCgroupRoot(const std::string& cgroup, const Files& files,
                                  const std::string& meminfo = "") {
  char tmpl[] = "/tmp/pybackend_cgroup_XXXXXX";
  std::string root = mkdtemp(tmpl);
  auto write = [&](const std::string& rel, const std::string& text) {
    std::filesystem::path file = root + "/" + rel;
    std::filesystem::create_directories(file.parent_path());
    FILE* f = std::fopen(file.c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
  };
  write("proc/self/cgroup", cgroup);
  if (!meminfo.empty()) write("proc/meminfo", meminfo);
  for (const auto& [rel, text] : files) write("sys/fs/cgroup/" + rel, text);
  return root;
}

static int LimitOf(const std::string& cgroup, const Files& files) {
  std::string root = FakeCgroupRoot(cgroup, files);
  int limit = CgroupCpuLimit(root);
  std::filesystem::remove_all(root);
  return limit;
}

// Kubernetes and Docker CPU limits are CFS quotas: cgroup v2 cpu.max, v1 cpu.cfs_quota_us.
static void TestCgroupCpuLimit() {
  const std::string pod = "0::/kubepods/pod1/ctr\n";
  // v2, no quota anywhere; a missing /proc/self/cgroup; a cgroup without the cpu controller.
  EXPECT(LimitOf(pod, {{"kubepods/pod1/ctr/cpu.max", "max 100000\n"}}) == 0);
  EXPECT(CgroupCpuLimit("/nonexistent/pybackend") == 0);
  EXPECT(LimitOf(pod, {{"kubepods/pod1/ctr/cgroup.procs", "1\n"}}) == 0);
  // v2 quotas round up: 1.5 CPUs is 2 threads' worth, 0.5 CPU still 1.
  EXPECT(LimitOf(pod, {{"kubepods/pod1/ctr/cpu.max", "150000 100000\n"}}) == 2);
  EXPECT(LimitOf(pod, {{"kubepods/pod1/ctr/cpu.max", "200000 100000\n"}}) == 2);
  EXPECT(LimitOf(pod, {{"kubepods/pod1/ctr/cpu.max", "50000 100000\n"}}) == 1);
  // Nested: the pod's limit above an unlimited container applies; the smallest one wins.
  EXPECT(LimitOf(pod, {{"kubepods/pod1/cpu.max", "300000 100000\n"},
                       {"kubepods/pod1/ctr/cpu.max", "max 100000\n"}}) == 3);
  EXPECT(LimitOf(pod, {{"cpu.max", "max 100000\n"},
                       {"kubepods/cpu.max", "400000 100000\n"},
                       {"kubepods/pod1/cpu.max", "800000 100000\n"},
                       {"kubepods/pod1/ctr/cpu.max", "600000 100000\n"}}) == 4);
  // A cgroup namespace ("0::/"): the mount is our own cgroup.
  EXPECT(LimitOf("0::/\n", {{"cpu.max", "250000 100000\n"}}) == 3);
  // The path does not exist under the mount (the container's cgroup mounted at its root).
  EXPECT(LimitOf(pod, {{"cpu.max", "100000 100000\n"}}) == 1);
  // Nonsense is no limit.
  EXPECT(LimitOf(pod, {{"kubepods/pod1/ctr/cpu.max", "lots 100000\n"}}) == 0);
  EXPECT(LimitOf(pod, {{"kubepods/pod1/ctr/cpu.max", "100000 0\n"}}) == 0);
  // v1: the cpu controller's hierarchy, under its joined name; -1 is no quota.
  const std::string v1 = "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n";
  EXPECT(LimitOf(v1, {{"cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n"},
                      {"cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n"}}) == 0);
  EXPECT(LimitOf(v1, {{"cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "250000\n"},
                      {"cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n"}}) == 3);
  EXPECT(LimitOf(v1, {{"cpu,cpuacct/docker/cpu.cfs_quota_us", "100000\n"},
                      {"cpu,cpuacct/docker/cpu.cfs_period_us", "50000\n"},
                      {"cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n"},
                      {"cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n"}}) == 2);
  // v1 with the controller mounted alone as "cpu"; the memory controller's path is not used.
  EXPECT(LimitOf("3:memory:/m\n2:cpu:/c\n", {{"cpu/c/cpu.cfs_quota_us", "400000\n"},
                                             {"cpu/c/cpu.cfs_period_us", "100000\n"},
                                             {"memory/m/cpu.cfs_quota_us", "100000\n"},
                                             {"memory/m/cpu.cfs_period_us", "100000\n"}}) == 4);
  // The usable cores are at least 1 and never more than the affinity allows.
  int cores = UsableCores();
  EXPECT(cores >= 1 && cores <= static_cast<int>(std::thread::hardware_concurrency()));
}

constexpr uint64_t kMiB = 1ull << 20;
const char* const kOneGiBAvailable = "MemTotal: 4194304 kB\nMemAvailable: 1048576 kB\n";

// MemoryHeadroom under a fake root (PYBACKEND_CGROUP_ROOT, as the server is tested), and the
// figure it names.
static uint64_t HeadroomOf(const std::string& cgroup, const Files& files,
                           std::string* why = nullptr) {
  std::string root = FakeCgroupRoot(cgroup, files, kOneGiBAvailable);
  setenv("PYBACKEND_CGROUP_ROOT", root.c_str(), 1);
  uint64_t headroom = ipc::MemoryHeadroom(why);
  unsetenv("PYBACKEND_CGROUP_ROOT");
  std::filesystem::remove_all(root);
  return headroom;
}

// The memory limit is the smallest over our cgroup and its ancestors: a pod's limit sits on
// the pod, above an unlimited container, and a systemd slice's on the slice.
static void TestCgroupMemoryLimit() {
  const uint64_t gib = 1024 * kMiB;
  const std::string pod = "0::/kubepods/pod1/ctr\n";
  EXPECT(HeadroomOf(pod, {{"kubepods/pod1/ctr/memory.max", "max\n"}}) == gib);
  EXPECT(HeadroomOf(pod, {{"kubepods/pod1/ctr/memory.max", "16777216\n"}}) == 16 * kMiB);
  // v2: only the pod (an ancestor) sets a limit.
  std::string why;
  EXPECT(HeadroomOf(pod,
                    {{"kubepods/pod1/memory.max", "33554432\n"},
                     {"kubepods/pod1/ctr/memory.max", "max\n"}},
                    &why) == 32 * kMiB);
  EXPECT(why == "the memory limit of the container (cgroup) is 33554432 bytes");
  EXPECT(HeadroomOf(pod, {{"kubepods/memory.max", "67108864\n"},
                          {"kubepods/pod1/memory.max", "134217728\n"},
                          {"kubepods/pod1/ctr/memory.max", "100663296\n"}}) == 64 * kMiB);
  // The path not there under the mount: the mount is our cgroup.
  EXPECT(HeadroomOf(pod, {{"memory.max", "16777216\n"}}) == 16 * kMiB);
  // v1: the memory controller's hierarchy; the limit only on the parent (a systemd slice).
  const std::string v1 = "5:memory:/system.slice/app.service\n4:cpu,cpuacct:/x\n";
  EXPECT(HeadroomOf(v1, {{"memory/system.slice/memory.limit_in_bytes", "25165824\n"},
                         {"memory/system.slice/app.service/memory.limit_in_bytes",
                          "9223372036854771712\n"}}) == 24 * kMiB);
  // A segment beyond an ancestor's limit is refused with the figure; one within it is not.
  std::string root = FakeCgroupRoot(
      pod, {{"kubepods/pod1/memory.max", "33554432\n"}, {"kubepods/pod1/ctr/memory.max", "max\n"}},
      kOneGiBAvailable);
  setenv("PYBACKEND_CGROUP_ROOT", root.c_str(), 1);
  std::string refused;
  try {
    ipc::CheckHeadroom(48 * kMiB);
  } catch (const ipc::ArenaError& e) {
    refused = e.what();
  }
  EXPECT(refused.find("could not reserve 50331648 bytes of shared memory for tensors: the "
                      "memory limit of the container (cgroup) is 33554432 bytes") !=
         std::string::npos);
  bool within = true;
  try {
    ipc::CheckHeadroom(16 * kMiB);
  } catch (const ipc::ArenaError&) {
    within = false;
  }
  EXPECT(within);
  unsetenv("PYBACKEND_CGROUP_ROOT");
  std::filesystem::remove_all(root);
}

int main() {
  TestCgroupCpuLimit();
  TestCgroupMemoryLimit();
  if (g_failures == 0) std::printf("cgroup_test: all passed\n");
  return g_failures == 0 ? 0 : 1;
}
