#include "backend/request_registry.h"

#include <atomic>

#include "backend/error.h"
#include "backend/logging.h"

namespace pybackend {
namespace {
// Unique across every instance of every model served by this library, so a token can never
// name another instance's request.
std::atomic<uint64_t> g_next_token{1};
}  // namespace

std::string RequestState::NewResponse(TRITONBACKEND_Response** resp) {
  if (factory != nullptr) return TakeMessage(TRITONBACKEND_ResponseNewFromFactory(resp, factory));
  if (released) return "the request was already released";
  return TakeMessage(TRITONBACKEND_ResponseNew(resp, request));
}

void RequestState::DeleteFactory() {
  if (factory == nullptr) return;
  std::string err = TakeMessage(TRITONBACKEND_ResponseFactoryDelete(factory));
  if (!err.empty()) PB_LOG_ERROR("failed to delete a response factory: " + err);
  factory = nullptr;
}

namespace {
std::string Identity(TRITONBACKEND_Request* request) {
  const char* id = nullptr;
  if (!TakeMessage(TRITONBACKEND_RequestId(request, &id)).empty() || id == nullptr) id = "";
  std::string out = id;
  uint64_t corr = 0;
  if (TakeMessage(TRITONBACKEND_RequestCorrelationId(request, &corr)).empty()) {
    out += "\n" + std::to_string(corr);
  } else {
    const char* text = nullptr;
    if (TakeMessage(TRITONBACKEND_RequestCorrelationIdString(request, &text)).empty() &&
        text != nullptr) {
      out += "\ns" + std::string(text);
    }
  }
  return out;
}
}  // namespace

void RescheduledRequests::Put(RequestState& st) {
  if (st.request_final == nullptr) st.request_final = std::make_shared<std::atomic<bool>>(false);
  Entry e{st.request_final, Identity(st.request)};
  std::lock_guard<std::mutex> lock(mu_);
  map_[st.request] = std::move(e);
  size_.store(map_.size(), std::memory_order_release);
}

std::shared_ptr<std::atomic<bool>> RescheduledRequests::Take(TRITONBACKEND_Request* request) {
  if (size_.load(std::memory_order_acquire) == 0) return nullptr;
  Entry e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(request);
    if (it == map_.end()) return nullptr;
    e = std::move(it->second);
    map_.erase(it);
    size_.store(map_.size(), std::memory_order_release);
  }
  return e.identity == Identity(request) ? e.final_flag : nullptr;
}

std::shared_ptr<RequestState> RequestRegistry::Create(TRITONBACKEND_Request* request,
                                                      const void* session) {
  auto st = std::make_shared<RequestState>();
  st->session = session;
  st->token = g_next_token.fetch_add(1, std::memory_order_relaxed);
  st->request = request;
  std::lock_guard<std::mutex> lock(mu_);
  map_[st->token] = st;
  return st;
}

std::shared_ptr<RequestState> RequestRegistry::Find(uint64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(token);
  return it == map_.end() ? nullptr : it->second;
}

void RequestRegistry::Remove(uint64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  map_.erase(token);
}

std::vector<std::shared_ptr<RequestState>> RequestRegistry::Snapshot() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<RequestState>> out;
  out.reserve(map_.size());
  for (auto& [token, st] : map_) out.push_back(st);
  return out;
}

size_t RequestRegistry::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

}  // namespace pybackend
