#include "ipc/cgroup.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace pybackend::ipc {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The smallest limit of the cgroup `path` (as /proc/self/cgroup names it) and its ancestors,
// under the hierarchy mounted at `mount`. In a container with its own cgroup namespace the
// path is "/" already; where the container's cgroup is bind-mounted at the mount point instead
// (cgroup v1 Docker), the path names a directory that does not exist there, and the mount
// itself is the container's cgroup.
uint64_t SmallestUpward(const std::string& mount, std::string path,
                        uint64_t (*read)(const std::string&)) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path.empty() || path[0] != '/' || !IsDirectory(mount + path)) path = "/";
  uint64_t smallest = kNoCgroupLimit;
  for (;;) {
    uint64_t limit = read(path == "/" ? mount : mount + path);
    if (limit < smallest) smallest = limit;
    if (path == "/") return smallest;
    size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
}

bool Lists(const std::string& controllers, const std::string& wanted) {
  std::stringstream list(controllers);
  std::string name;
  while (std::getline(list, name, ',')) {
    if (name == wanted) return true;
  }
  return false;
}

}  // namespace

std::string CgroupRoot() {
  const char* root = std::getenv("PYBACKEND_CGROUP_ROOT");
  return root != nullptr ? root : "";
}

uint64_t ReadCgroupNumber(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return kNoCgroupLimit;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  return end != text.c_str() ? v : kNoCgroupLimit;
}

uint64_t SmallestCgroupLimit(const std::string& root, const CgroupController& controller) {
  std::ifstream self(root + "/proc/self/cgroup");
  const std::string mount = root + "/sys/fs/cgroup";
  uint64_t smallest = kNoCgroupLimit;
  std::string line;
  // Lines are "<id>:<controllers>:<path>".
  while (std::getline(self, line)) {
    size_t first = line.find(':');
    size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    uint64_t limit = kNoCgroupLimit;
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      limit = SmallestUpward(mount, path, controller.read_v2);
    } else if (Lists(controllers, controller.v1_name)) {
      // Mounted under the joined names ("cpu,cpuacct"), usually with a "cpu" link beside it.
      std::string dir = mount + "/" + controllers;
      limit = SmallestUpward(IsDirectory(dir) ? dir : mount + "/" + controller.v1_name, path,
                             controller.read_v1);
    }
    if (limit < smallest) smallest = limit;
  }
  return smallest;
}

}  // namespace pybackend::ipc
