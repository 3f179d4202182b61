#include "ipc/arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "ipc/memory_headroom.h"

namespace pybackend::ipc {
namespace {

// Set on the threads that must never wait for blocks (Arena::NeverWaitOnThisThread).
thread_local bool tl_never_wait = false;

uint64_t RoundUp(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// The original's text when its shared-memory pool cannot grow (spec 7, shared memory);
// NVIDIA's qa test_growth_error looks for it. Ours says why after it.
std::string GrowthFailed(uint64_t total) {
  return "Failed to increase the shared memory pool size to " + std::to_string(total) + " bytes: ";
}

// The growth beyond the bound: it may fit once blocks in use come back.
class OverBound : public ArenaError {
 public:
  using ArenaError::ArenaError;
};

uint64_t PageSize() {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return page;
}

int CreateAnonymousFd(const std::string& name) {
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd >= 0) return fd;
  // No memfd (very old kernel or a seccomp filter): a private, unguessable, immediately
  // unlinked POSIX shm object behaves the same for us.
  std::random_device rd;
  for (int attempt = 0; attempt < 8; ++attempt) {
    char path[64];
    snprintf(path, sizeof(path), "/pybackend-%08x%08x%08x", rd(), rd(), rd());
    fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      shm_unlink(path);
      return fd;
    }
    if (errno != EEXIST) break;
  }
  throw ArenaError(std::string("could not create a shared-memory segment: ") +
                   std::strerror(errno));
}

}  // namespace

int CreateSegmentFd(const std::string& name, uint64_t size) {
  CheckHeadroom(size);  // a memfd's fallocate beyond free memory OOM-kills instead of failing
  int fd = CreateAnonymousFd(name);
  int rc = fallocate(fd, 0, 0, static_cast<off_t>(size));
  if (rc != 0 && (errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL)) {
    // A filesystem without fallocate: size it the plain way (pages are then reserved lazily).
    rc = ftruncate(fd, static_cast<off_t>(size));
  }
  if (rc != 0) {
    int err = errno;
    close(fd);
    throw ArenaError("could not reserve " + std::to_string(size) +
                     " bytes of shared memory for tensors: " + std::strerror(err) +
                     " (the machine or container is out of memory: give it more, or bound "
                     "each instance's shared memory)");
  }
  return fd;
}

Mapping::~Mapping() {
  if (base != nullptr && size > 0) munmap(base, size);
}

// ------------------------------------------------------------------------------ Arena

Arena::Arena(std::string name, uint64_t default_size, uint64_t growth_size,
             std::chrono::milliseconds idle_release)
    : name_(std::move(name)),
      default_size_(std::max(RoundUp(default_size, PageSize()), PageSize())),
      growth_size_(std::max(RoundUp(growth_size, PageSize()), PageSize())),
      idle_release_(idle_release) {}

Arena::~Arena() {
  for (auto& [id, seg] : segments_) {
    if (seg->fd >= 0) close(seg->fd);
  }
}

void Arena::set_max_size(uint64_t max_size, std::string knob) {
  std::lock_guard<std::mutex> lock(mu_);
  max_size_ = max_size;
  knob_ = std::move(knob);
}

Arena::Segment* Arena::NewSegmentLocked(uint64_t need) {
  uint64_t size = next_id_ == 0 ? default_size_ : growth_size_;
  size = std::max(size, RoundUp(need, PageSize()));
  uint64_t reserved = 0, used = 0;
  for (auto& [id, seg] : segments_) {
    reserved += seg->size;
    used += seg->used_bytes;
  }
  auto state = [&] {
    return std::to_string(reserved) + " bytes already reserved in " +
           std::to_string(segments_.size()) + " segment(s), " + std::to_string(used) + " in use";
  };
  if (max_size_ > 0 && reserved + size > max_size_) {
    // Growth beyond the bound: a smaller segment still does if it holds this block.
    uint64_t room = max_size_ > reserved ? (max_size_ - reserved) / PageSize() * PageSize() : 0;
    if (room < RoundUp(need, PageSize())) {
      throw OverBound(GrowthFailed(reserved + size) + "a block of " + std::to_string(need) +
                      " bytes does not fit under the shared-memory limit of " +
                      std::to_string(max_size_) + " bytes (" + state() + "); raise " + knob_ +
                      " or send smaller tensors");
    }
    size = room;
  }
  int fd;
  try {
    fd = CreateSegmentFd(name_, size);
  } catch (const ArenaError& e) {
    std::string bound;
    if (!knob_.empty()) {
      bound = max_size_ > 0 ? "; " + knob_ + " bounds it to " + std::to_string(max_size_)
                            : "; " + knob_ + " can bound it";
    }
    throw ArenaError(GrowthFailed(reserved + size) + e.what() + "; this arena has " + state() +
                     bound);
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    int err = errno;
    close(fd);
    throw ArenaError("could not map a shared-memory segment of " + std::to_string(size) +
                     " bytes: " + std::strerror(err));
  }
  auto seg = std::make_unique<Segment>();
  seg->id = next_id_++;
  seg->size = size;
  seg->map = std::make_shared<Mapping>(static_cast<uint8_t*>(base), size);
  seg->fd = fd;
  seg->free[0] = size;
  seg->empty_since = std::chrono::steady_clock::now();
  Segment* raw = seg.get();
  segments_[raw->id] = std::move(seg);
  return raw;
}

bool Arena::TakeFrom(Segment& s, uint64_t size, uint64_t* offset) {
  for (auto it = s.free.begin(); it != s.free.end(); ++it) {
    if (it->second < size) continue;
    uint64_t off = it->first;
    uint64_t left = it->second - size;
    s.free.erase(it);
    if (left > 0) s.free[off + size] = left;
    s.used[off] = size;
    s.used_bytes += size;
    *offset = off;
    return true;
  }
  return false;
}

Arena::Block Arena::AllocateImpl(uint64_t size, const std::vector<Block>* held) {
  uint64_t need = RoundUp(std::max<uint64_t>(size, 1), kArenaAlign);
  std::unique_lock<std::mutex> lock(mu_);
  std::chrono::steady_clock::time_point deadline{};
  while (true) {
    uint64_t off = 0;
    for (auto& [id, seg] : segments_) {
      if (TakeFrom(*seg, need, &off)) return Block{id, off, seg->map->base + off, size};
    }
    try {
      Segment* seg = NewSegmentLocked(need);
      if (!TakeFrom(*seg, need, &off)) throw ArenaError("fresh segment too small (internal error)");
      return Block{seg->id, off, seg->map->base + off, size};
    } catch (const OverBound& e) {
      // Empty segments go now, whatever their idle time: their room may hold it.
      if (DropEmptyLocked(std::chrono::steady_clock::time_point::max())) continue;
      if (held == nullptr || !MayWaitLocked(need, *held)) throw ArenaError(e.what());
      auto now = std::chrono::steady_clock::now();
      if (deadline == std::chrono::steady_clock::time_point{}) deadline = now + kBoundWait;
      if (now >= deadline) {
        throw ArenaError(std::string(e.what()) + " (after waiting " +
                         std::to_string(kBoundWait.count()) + " s for blocks in use to come back)");
      }
      ++waiters_;
      freed_.wait_until(lock, deadline);  // releases mu_: Free and Unpin take it
      --waiters_;
    }
  }
}

bool Arena::MayWaitLocked(uint64_t need, const std::vector<Block>& held) const {
  if (tl_never_wait) return false;
  if (max_size_ == 0 || need > max_size_) return false;
  // Blocks that may come back: in use, not pinned (a running batch's inputs come back only
  // when it ends) and not the caller's own.
  auto block_size = [&](uint32_t seg, uint64_t offset) -> uint64_t {
    auto sit = segments_.find(seg);
    if (sit == segments_.end()) return 0;
    auto it = sit->second->used.find(offset);
    return it != sit->second->used.end() ? it->second : 0;
  };
  uint64_t own = 0;
  for (const Block& b : held) own += block_size(b.seg, b.offset);
  if (own > max_size_ - need) return false;  // even alone with the caller's it cannot fit
  uint64_t returnable = 0;
  for (const auto& [id, seg] : segments_) {
    returnable += seg->used_bytes;
    for (const auto& [offset, freed] : seg->pinned) returnable -= block_size(id, offset);
  }
  return returnable > own;
}

void Arena::NeverWaitOnThisThread() { tl_never_wait = true; }

void Arena::Reserve() {
  std::lock_guard<std::mutex> lock(mu_);
  if (segments_.empty()) NewSegmentLocked(default_size_);
}

bool Arena::Free(uint32_t seg_id, uint64_t offset) {
  std::lock_guard<std::mutex> lock(mu_);
  auto sit = segments_.find(seg_id);
  if (sit == segments_.end()) return false;
  Segment& s = *sit->second;
  // The peer may name any byte of the block (a view into it): find the block containing it.
  auto it = s.used.upper_bound(offset);
  if (it == s.used.begin()) return false;
  --it;
  if (offset >= it->first + it->second) return false;
  if (auto pin = s.pinned.find(it->first); pin != s.pinned.end()) {
    pin->second = true;  // Unpin completes it
    return true;
  }
  ReleaseLocked(s, it);
  return true;
}

void Arena::Pin(uint32_t seg_id, uint64_t offset) {
  std::lock_guard<std::mutex> lock(mu_);
  auto sit = segments_.find(seg_id);
  if (sit == segments_.end()) return;
  Segment& s = *sit->second;
  if (s.used.count(offset) != 0) s.pinned.emplace(offset, false);
}

void Arena::Unpin(uint32_t seg_id, uint64_t offset) {
  std::lock_guard<std::mutex> lock(mu_);
  auto sit = segments_.find(seg_id);
  if (sit == segments_.end()) return;
  Segment& s = *sit->second;
  auto pin = s.pinned.find(offset);
  if (pin == s.pinned.end()) return;
  bool freed = pin->second;
  s.pinned.erase(pin);
  if (!freed) return;
  auto it = s.used.find(offset);
  if (it != s.used.end()) ReleaseLocked(s, it);
}

void Arena::ReleaseLocked(Segment& s, std::map<uint64_t, uint64_t>::iterator it) {
  uint64_t off = it->first;
  uint64_t size = it->second;
  s.used.erase(it);
  s.used_bytes -= size;
  if (waiters_ > 0) freed_.notify_all();
  if (s.used_bytes == 0) s.empty_since = std::chrono::steady_clock::now();
  // Coalesce with the following and preceding free extents.
  auto next = s.free.lower_bound(off);
  if (next != s.free.end() && next->first == off + size) {
    size += next->second;
    next = s.free.erase(next);
  }
  if (next != s.free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      prev->second += size;
      return;
    }
  }
  s.free[off] = size;
}

uint8_t* Arena::Resolve(uint32_t seg_id, uint64_t offset, uint64_t length) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = segments_.find(seg_id);
  if (it == segments_.end()) return nullptr;
  const Segment& s = *it->second;
  if (offset > s.size || length > s.size - offset) return nullptr;
  return s.map->base + offset;
}

std::vector<NewSegment> Arena::TakeUnannounced() {
  std::vector<NewSegment> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, seg] : segments_) {
    if (seg->announced) continue;
    seg->announced = true;
    out.push_back(NewSegment{id, seg->size, seg->fd});
    seg->fd = -1;
  }
  return out;
}

bool Arena::IsFloor(const Segment& s) const {
  // The first segment stays as the arena's floor, unless a large first tensor made it
  // bigger than that floor.
  return s.id == 0 && s.size <= default_size_;
}

bool Arena::DropEmptyLocked(std::chrono::steady_clock::time_point empty_since) {
  bool any = false;
  for (auto it = segments_.begin(); it != segments_.end();) {
    Segment& s = *it->second;
    if (IsFloor(s) || s.used_bytes != 0 || s.empty_since > empty_since) {
      ++it;
      continue;
    }
    if (s.announced) dropped_.push_back(s.id);  // ReleaseIdle's caller tells the peer
    if (s.fd >= 0) close(s.fd);
    it = segments_.erase(it);
    any = true;
  }
  return any;
}

std::vector<uint32_t> Arena::ReleaseIdle() {
  std::lock_guard<std::mutex> lock(mu_);
  DropEmptyLocked(std::chrono::steady_clock::now() - idle_release_);
  std::vector<uint32_t> dropped;
  dropped.swap(dropped_);
  return dropped;
}

bool Arena::HasIdleCandidates() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dropped_.empty()) return true;
  for (auto& [id, seg] : segments_) {
    if (!IsFloor(*seg) && seg->used_bytes == 0) return true;
  }
  return false;
}

uint64_t Arena::total_size() {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (auto& [id, seg] : segments_) n += seg->size;
  return n;
}

uint64_t Arena::used_bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (auto& [id, seg] : segments_) n += seg->used_bytes;
  return n;
}

size_t Arena::segment_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return segments_.size();
}

// ------------------------------------------------------------------------ PeerSegments

PeerSegments::PeerSegments(std::chrono::milliseconds wait) : wait_(wait) {}

PeerSegments::~PeerSegments() { Clear(); }

void PeerSegments::Add(uint32_t id, uint64_t size, int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    throw std::runtime_error("segment " + std::to_string(id) +
                             ": fstat failed: " + std::strerror(err));
  }
  // Mapping past the end of the file would turn a later read into SIGBUS.
  if (static_cast<uint64_t>(st.st_size) < size) {
    close(fd);
    throw std::runtime_error("segment " + std::to_string(id) + " announced " +
                             std::to_string(size) + " bytes but its file holds " +
                             std::to_string(st.st_size));
  }
  uint8_t* base = nullptr;
  if (size > 0) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      close(fd);
      throw std::runtime_error("could not map segment " + std::to_string(id) + " of " +
                               std::to_string(size) + " bytes: " + std::strerror(err));
    }
    base = static_cast<uint8_t*>(p);
  }
  close(fd);
  auto map = std::make_shared<Mapping>(base, size);
  {
    std::lock_guard<std::mutex> lock(mu_);
    segments_[id] = std::move(map);
  }
  cv_.notify_all();
}

void PeerSegments::Drop(uint32_t id) {
  std::shared_ptr<Mapping> old;  // unmapped outside the lock, once no reader holds it
  std::lock_guard<std::mutex> lock(mu_);
  auto it = segments_.find(id);
  if (it == segments_.end()) return;
  old = std::move(it->second);
  segments_.erase(it);
}

std::shared_ptr<Mapping> PeerSegments::Get(uint32_t id, uint64_t offset, uint64_t length,
                                           std::string* error) {
  std::unique_lock<std::mutex> lock(mu_);
  auto deadline = std::chrono::steady_clock::now() + wait_;
  auto it = segments_.find(id);
  while (it == segments_.end()) {
    if (aborted_ || cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      it = segments_.find(id);
      if (it != segments_.end()) break;
      *error =
          "the stub referenced shared-memory segment " + std::to_string(id) +
          (aborted_ ? ", which it never announced before it went away"
                    : ", which was not announced within " + std::to_string(wait_.count()) + " ms");
      return nullptr;
    }
    it = segments_.find(id);
  }
  const auto& map = it->second;
  if (offset > map->size || length > map->size - offset) {
    *error = "the stub referenced bytes [" + std::to_string(offset) + ", " +
             std::to_string(offset + length) + ") outside its segment " + std::to_string(id) +
             " of " + std::to_string(map->size) + " bytes";
    return nullptr;
  }
  return map;
}

void PeerSegments::Abort() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
  }
  cv_.notify_all();
}

void PeerSegments::Clear() {
  std::unordered_map<uint32_t, std::shared_ptr<Mapping>> old;
  std::lock_guard<std::mutex> lock(mu_);
  old.swap(segments_);
}

}  // namespace pybackend::ipc
