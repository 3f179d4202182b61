#include "backend/bls_cycles.h"

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pybackend::bls_cycles {

struct InstanceSlot {
  InstanceSlot(std::string m, std::string n) : model(std::move(m)), name(std::move(n)) {}
  const std::string model;
  const std::string name;
  // Initialized and not yet finalized under this name: 2 while a reload runs the new
  // instance beside the old one of the same name. Written under g_mu, read anywhere.
  std::atomic<int> loaded{0};
  // Inside execute. Counted without g_mu when no BLS call is in flight (Executing): Begin
  // and CanFree read it under g_mu, as a moment of the count, as they did under the lock.
  std::atomic<int> busy{0};
  // Under g_mu: the BLS callee requests of the latest batch in execute (its requests that
  // Triton handed us for calls we registered); has_requests: it is not empty.
  std::vector<const void*> requests;
  std::atomic<bool> has_requests{false};
  // Of the `loaded` generations, those whose queue expires requests (AddInstance). Counted,
  // not a flag: a reload that fails takes its generation's value away with it.
  std::atomic<int> expiring{0};
  // Triton's queue for the model expires requests: a call queued for it ends on its own.
  bool QueueExpires() const { return expiring > 0 && expiring == loaded; }
};

namespace {

using InstanceKey = std::pair<std::string, std::string>;  // (model, instance)

struct Call {
  InstanceKey caller;
  std::string callee;
  bool blocking = false;
  bool has_server = false;  // an instance of ours has taken its request
  InstanceKey server;
  bool detached = false;  // its server's execute ended without the FINAL: it answers later
  const void* request = nullptr;
  std::vector<std::string> chain;  // the models that led to the caller, the caller last
};

// Never destroyed (allocated once, on purpose leaked): when tritonserver exits with models
// loaded ("Exit timeout expired. Exiting immediately.", e.g. a client kept its connection),
// exit() runs static destructors while Triton's model-deleter threads still finalize
// instances, whose RemoveInstance then erased from a destroyed map (heap corruption: SIGSEGV
// or a malloc abort, and a server hung in its signal handler).
std::mutex g_mu;  // (trivially destructible)
auto& g_models = *new std::map<std::string, std::map<std::string, std::shared_ptr<InstanceSlot>>>();
auto& g_calls = *new std::unordered_map<const void*, Call>();
auto& g_by_request = *new std::unordered_map<const void*, const void*>();  // callee req -> call
// g_calls.size(), readable without g_mu: 0 means no request anywhere is a callee request.
std::atomic<size_t> g_in_flight{0};

// The instances that can still leave execute, as far as anyone can tell: the least fixpoint
// of "not inside execute, or not blocked in a call, or blocked in a call that something
// that can leave execute will answer". Everything outside it waits for good.
std::set<InstanceKey> CanFree() {
  std::map<InstanceKey, const Call*> blocked_on;
  for (const auto& [id, call] : g_calls) {
    if (call.blocking) blocked_on[call.caller] = &call;
  }
  std::set<InstanceKey> free;
  for (const auto& [model, instances] : g_models) {
    // A reload runs two generations under the same names: too little is known to refuse.
    bool reloading = false;
    for (const auto& [name, inst] : instances) reloading = reloading || inst->loaded > 1;
    for (const auto& [name, inst] : instances) {
      InstanceKey key{model, name};
      if (reloading || inst->busy == 0 || blocked_on.count(key) == 0) free.insert(key);
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& [key, call] : blocked_on) {
      if (free.count(key) != 0) continue;
      bool answerable = false;
      if (call->detached) {
        answerable = true;
      } else if (call->has_server) {
        answerable = free.count(call->server) != 0;
      } else {
        auto it = g_models.find(call->callee);
        if (it == g_models.end() || it->second.empty()) {
          answerable = true;  // not a model of ours: nothing is known about it
        } else {
          for (const auto& [name, inst] : it->second) {
            // Queued where the queue expires requests: the call ends, answered or not.
            if (free.count({call->callee, name}) != 0 || inst->QueueExpires()) answerable = true;
          }
        }
      }
      if (answerable) {
        free.insert(key);
        changed = true;
      }
    }
  }
  return free;
}

// Under g_mu, the common answer without CanFree's fixpoint: the callee has an instance that
// can leave execute on its own (idle, or busy but not blocked in a call of its own), or is a
// model that is not ours, or is being reloaded, or expires what waits in its queue. Each of these
// puts the new call's caller in CanFree's set (the call then has an instance that will take it), so
// the result is the same; only a callee whose every instance is blocked needs the whole registry
// walked.
bool CalleeHasFreeInstance(const Call& call) {
  auto model = g_models.find(call.callee);
  if (model == g_models.end() || model->second.empty()) return true;
  for (const auto& [name, inst] : model->second) {
    if (inst->busy == 0 || inst->loaded > 1 || inst->QueueExpires()) return true;
  }
  size_t blocked = 0;
  for (const auto& [id, other] : g_calls) {
    if (other.blocking && other.caller.first == call.callee) ++blocked;
  }
  // Each blocked instance has one blocking call at a time (its execute thread waits on it).
  return blocked < model->second.size();
}

std::string Join(const std::vector<std::string>& models) {
  std::string out;
  for (const std::string& m : models) out += (out.empty() ? "" : " -> ") + m;
  return out;
}

// The cycle as the models on it: from the caller's request chain when the callee is on it
// (a -> b -> a in the order the requests went), else by following who waits on whom.
std::vector<std::string> Cycle(const Call& call, const std::set<InstanceKey>& free) {
  for (size_t i = 0; i < call.chain.size(); ++i) {
    if (call.chain[i] == call.callee) {
      std::vector<std::string> cycle(call.chain.begin() + static_cast<std::ptrdiff_t>(i),
                                     call.chain.end());
      cycle.push_back(call.callee);
      return cycle;
    }
  }
  std::vector<std::string> path{call.caller.first};
  std::string next = call.callee;
  for (size_t steps = 0; steps <= g_models.size(); ++steps) {
    for (size_t i = 0; i < path.size(); ++i) {
      if (path[i] == next) {
        std::vector<std::string> cycle(path.begin() + static_cast<std::ptrdiff_t>(i), path.end());
        cycle.push_back(next);
        return cycle;
      }
    }
    path.push_back(next);
    const Call* waits = nullptr;
    for (const auto& [id, other] : g_calls) {
      if (other.blocking && other.caller.first == next && free.count(other.caller) == 0) {
        waits = &other;
        break;
      }
    }
    if (waits == nullptr) break;
    next = waits->has_server ? waits->server.first : waits->callee;
  }
  return path;
}

std::string Refusal(const Call& call, const std::vector<std::string>& cycle) {
  const std::string& m = call.callee;
  size_t count = g_models[m].size();
  std::string blocked = count == 1 ? "the only instance of '" + m + "' is blocked in a BLS call"
                                   : "all " + std::to_string(count) + " instances of '" + m +
                                         "' are blocked in BLS calls";
  return "the BLS call from model '" + call.caller.first + "' (instance '" + call.caller.second +
         "') to model '" + m + "' would wait forever: it closes the call cycle " + Join(cycle) +
         ", and " + blocked + " on this cycle. Give '" + m +
         "' more instances than the cycle can hold (instance_group [ { count: " +
         std::to_string(count + 1) + " } ] in its config.pbtxt), or call without a cycle.";
}

void Forget(const void* id) {
  auto it = g_calls.find(id);
  if (it == g_calls.end()) return;
  g_by_request.erase(it->second.request);
  g_calls.erase(it);
  g_in_flight = g_calls.size();
}

// Under g_mu, once the slot's instance may have left execute: an idle instance keeps no
// batch, and its slot leaves the registry once it is finalized too.
void Settle(InstanceSlot& slot) {
  if (slot.busy > 0) return;
  slot.requests.clear();
  slot.has_requests = false;
  if (slot.loaded > 0) return;
  auto model = g_models.find(slot.model);
  if (model == g_models.end()) return;
  auto inst = model->second.find(slot.name);
  if (inst != model->second.end() && inst->second.get() == &slot) model->second.erase(inst);
  if (model->second.empty()) g_models.erase(model);
}

// A uint64 of the configuration: protobuf's JSON writes it as a string, a hand-written
// config may hold a number.
uint64_t Uint(const json::Value* v) {
  if (v == nullptr) return 0;
  if (v->is_number()) return v->AsInt() > 0 ? static_cast<uint64_t>(v->AsInt()) : 0;
  if (!v->is_string()) return 0;
  try {
    return std::stoull(v->AsString());
  } catch (const std::exception&) {
    return 0;
  }
}

// A queue policy that fails a request waiting past its timeout (DELAY only moves it back).
bool PolicyExpires(const json::Value* policy) {
  if (policy == nullptr || Uint(policy->Find("default_timeout_microseconds")) == 0) return false;
  const json::Value* action = policy->Find("timeout_action");
  bool delays = action != nullptr && ((action->is_string() && action->AsString() == "DELAY") ||
                                      (action->is_number() && action->AsInt() == 1));
  return !delays;
}

}  // namespace

bool QueueExpires(const json::Value& config) {
  const json::Value* batching = config.Find("dynamic_batching");
  if (batching == nullptr || !batching->is_object()) return false;
  const json::Value* policy = batching->Find("default_queue_policy");
  // A BLS request has no priority of its own: with priority levels it waits at the default
  // level, under that level's policy where the map gives one.
  const json::Value* levels = batching->Find("priority_queue_policy");
  if (Uint(batching->Find("priority_levels")) > 0 && levels != nullptr && levels->is_object()) {
    std::string level = std::to_string(Uint(batching->Find("default_priority_level")));
    if (const json::Value* own = levels->Find(level); own != nullptr) policy = own;
  }
  return PolicyExpires(policy);
}

std::shared_ptr<InstanceSlot> AddInstance(const std::string& model, const std::string& instance,
                                          bool queue_expires) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::shared_ptr<InstanceSlot>& slot = g_models[model][instance];
  if (slot == nullptr) slot = std::make_shared<InstanceSlot>(model, instance);
  ++slot->loaded;
  if (queue_expires) ++slot->expiring;
  return slot;
}

void RemoveInstance(const std::string& model, const std::string& instance, bool queue_expires) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_models.find(model);
  if (it == g_models.end()) return;
  auto inst = it->second.find(instance);
  if (inst == it->second.end()) return;
  if (queue_expires && inst->second->expiring > 0) --inst->second->expiring;
  if (--inst->second->loaded <= 0 && inst->second->busy == 0) it->second.erase(inst);
  if (it->second.empty()) g_models.erase(it);
}

Executing::Executing(InstanceSlot& slot, TRITONBACKEND_Request** requests, uint32_t count)
    : slot_(slot) {
  // No BLS call in flight: none of these requests is a callee request (Begin registers one
  // before it is sent), and none can become one. With no batch of an earlier execute to
  // replace in the slot, counting this execute is all there is to do.
  if (g_in_flight == 0 && !slot.has_requests) {
    ++slot.busy;
    return;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  ++slot.busy;
  for (uint32_t i = 0; i < count; ++i) {
    auto by = g_by_request.find(requests[i]);
    if (by == g_by_request.end()) continue;
    served_.push_back(requests[i]);
    Call& call = g_calls[by->second];
    call.has_server = true;
    call.server = {slot.model, slot.name};
  }
  slot.requests = served_;
  slot.has_requests = !served_.empty();
}

Executing::~Executing() {
  if (served_.empty()) {
    if (--slot_.busy > 0) return;
    if (!slot_.has_requests && slot_.loaded > 0) return;  // nothing to settle
    std::lock_guard<std::mutex> lock(g_mu);
    Settle(slot_);
    return;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  for (const void* r : served_) {
    auto by = g_by_request.find(r);
    if (by != g_by_request.end()) g_calls[by->second].detached = true;
  }
  --slot_.busy;
  Settle(slot_);
}

std::string Begin(const CallInfo& info) {
  std::lock_guard<std::mutex> lock(g_mu);
  Call call;
  call.caller = {info.caller_model, info.caller_instance};
  call.callee = info.callee_model;
  call.blocking = info.blocking;
  call.request = info.callee_request;
  // The chain of the request the caller serves: the one the call names (a traced call), else
  // the first BLS request in the caller's batch (an execute thread's call serves its batch).
  auto model = g_models.find(info.caller_model);
  const InstanceSlot* caller = nullptr;
  if (model != g_models.end()) {
    auto inst = model->second.find(info.caller_instance);
    if (inst != model->second.end()) caller = inst->second.get();
  }
  std::vector<const void*> parents{info.parent_request};
  if (caller != nullptr) {
    parents.insert(parents.end(), caller->requests.begin(), caller->requests.end());
  }
  for (const void* r : parents) {
    auto parent = g_by_request.find(r);
    if (r != nullptr && parent != g_by_request.end()) {
      call.chain = g_calls[parent->second].chain;
      break;
    }
  }
  call.chain.push_back(info.caller_model);

  bool known_caller = caller != nullptr && caller->busy > 0;
  g_calls[info.call] = call;
  g_by_request[info.callee_request] = info.call;
  g_in_flight = g_calls.size();
  if (!info.blocking || !known_caller || CalleeHasFreeInstance(call)) return "";
  std::set<InstanceKey> free = CanFree();
  if (free.count(call.caller) != 0) return "";
  std::string refusal = Refusal(call, Cycle(call, free));
  Forget(info.call);
  return refusal;
}

const void* ParentRequest(RequestRegistry* registry, uint64_t token) {
  if (token == 0 || registry == nullptr) return nullptr;
  std::shared_ptr<RequestState> st = registry->Find(token);
  if (st == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(st->mu);
  return st->released ? nullptr : st->request;
}

void End(const void* call) {
  std::lock_guard<std::mutex> lock(g_mu);
  Forget(call);
}

}  // namespace pybackend::bls_cycles
