#include "backend/parallel_copy.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/cores.h"
#include "backend/thread_name.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace pybackend {
namespace {

// Chunks are at least this big: smaller pieces cost more in hand-offs than they save.
constexpr size_t kMinChunk = 1u << 20;

// memcpy with non-temporal stores: a big destination is not read back soon by this core, so
// writing around the cache skips the read-for-ownership of every line (4 MiB into cold memory:
// 216 -> 171 us here) and leaves the caches to the code that runs next (the stub's Python).
void StreamCopy(char* dst, const char* src, size_t n) {
#if defined(__SSE2__)
  size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
  if (head > n) head = n;
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  size_t body = n & ~static_cast<size_t>(63);
  for (size_t i = 0; i < body; i += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  _mm_sfence();  // the stores are weakly ordered: make them visible before the peer is told
  std::memcpy(dst + body, src + body, n - body);
#else
  std::memcpy(dst, src, n);
#endif
}

// One copy, cut into chunks that whoever is free (caller or helper) claims in order.
struct Job {
  char* dst;
  const char* src;
  size_t n;
  size_t chunk;
  size_t chunks;
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::mutex mu;
  std::condition_variable cv;

  // Copies chunks until none is left unclaimed.
  void Work() {
    size_t finished = 0;
    for (size_t i = next.fetch_add(1); i < chunks; i = next.fetch_add(1)) {
      size_t off = i * chunk;
      StreamCopy(dst + off, src + off, std::min(chunk, n - off));
      ++finished;
    }
    if (finished == 0) return;
    if (done.fetch_add(finished) + finished == chunks) {
      std::lock_guard<std::mutex> lock(mu);  // pairs with the caller's wait
      cv.notify_all();
    }
  }
};

class CopyPool {
 public:
  CopyPool() {
    // Cores we may run on, not the host's: a container limited to one core gets no helpers.
    int cores = UsableCores();
    helpers_ = cores > 1 ? static_cast<unsigned>(std::min(cores - 1, 3)) : 0u;
  }
  ~CopyPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

  void Copy(char* dst, const char* src, size_t n) {
    if (helpers_ == 0) {
      StreamCopy(dst, src, n);
      return;
    }
    auto job = std::make_shared<Job>();
    job->dst = dst;
    job->src = src;
    job->n = n;
    size_t ways = std::min<size_t>(helpers_ + 1, n / kMinChunk);
    job->chunk = (n / ways + 4095) & ~static_cast<size_t>(4095);  // whole pages per thread
    job->chunks = (n + job->chunk - 1) / job->chunk;
    {
      std::lock_guard<std::mutex> lock(mu_);
      StartThreadsLocked();
      for (size_t i = 1; i < job->chunks; ++i) queue_.push_back(job);
    }
    cv_.notify_all();
    job->Work();
    std::unique_lock<std::mutex> lock(job->mu);
    job->cv.wait(lock, [&] { return job->done.load() == job->chunks; });
  }

 private:
  // Helpers start on the first big copy: most models never make one.
  void StartThreadsLocked() {
    if (!threads_.empty()) return;
    for (unsigned i = 0; i < helpers_; ++i)
      threads_.emplace_back([this] {
        NameThisThread("pb_copy");
        Loop();
      });
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      std::shared_ptr<Job> job = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      job->Work();
      lock.lock();
    }
  }

  unsigned helpers_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::deque<std::shared_ptr<Job>> queue_;  // one entry per helper a job asks for
  std::vector<std::thread> threads_;
};

CopyPool& Pool() {
  static CopyPool pool;  // joined when the library is unloaded or the server exits
  return pool;
}

}  // namespace

void CopyBytes(void* dst, const void* src, size_t n) {
  if (n < kParallelCopyMinBytes) {
    std::memcpy(dst, src, n);
    return;
  }
  Pool().Copy(static_cast<char*>(dst), static_cast<const char*>(src), n);
}

void CopyBytesToFresh(void* dst, const void* src, size_t n) {
#if defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = 2u << 20;
  if (n >= 2 * kHuge) {
    uintptr_t lo = (reinterpret_cast<uintptr_t>(dst) + kHuge - 1) & ~(kHuge - 1);
    uintptr_t hi = (reinterpret_cast<uintptr_t>(dst) + n) & ~(kHuge - 1);
    // Only advice: where THP is off (or the range is already populated) nothing changes.
    if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
  }
#endif
  CopyBytes(dst, src, n);
}

}  // namespace pybackend
