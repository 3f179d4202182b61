// bls_cycles: which blocking BLS calls are refused (docs/reliability.md, "BLS call cycles").
// The registry is process-wide; each test uses its own model names and ends every call.
#include "backend/bls_cycles.h"

#include <cstdio>
#include <string>

#include "tests/expect.h"

int g_failures = 0;

// request_registry.cc (linked for ParentRequest) refers to these; no test here reaches them.
extern "C" {
TRITONSERVER_Error* TRITONBACKEND_ResponseNew(TRITONBACKEND_Response**, TRITONBACKEND_Request*) {
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ResponseNewFromFactory(TRITONBACKEND_Response**,
                                                         TRITONBACKEND_ResponseFactory*) {
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryDelete(TRITONBACKEND_ResponseFactory*) {
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_RequestId(TRITONBACKEND_Request*, const char**) {
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_RequestCorrelationId(TRITONBACKEND_Request*, uint64_t*) {
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_RequestCorrelationIdString(TRITONBACKEND_Request*, const char**) {
  return nullptr;
}
}

namespace {

using pybackend::bls_cycles::AddInstance;
using pybackend::bls_cycles::Begin;
using pybackend::bls_cycles::CallInfo;
using pybackend::bls_cycles::End;
using pybackend::bls_cycles::Executing;
using pybackend::bls_cycles::QueueExpires;
using pybackend::bls_cycles::RemoveInstance;

// Distinct addresses that stand for calls and requests.
char g_ids[128];
const void* Id(int i) { return &g_ids[i]; }
TRITONBACKEND_Request* Req(int i) {
  return reinterpret_cast<TRITONBACKEND_Request*>(const_cast<char*>(&g_ids[i]));
}

CallInfo Call(int id, int request, const std::string& caller, const std::string& instance,
              const std::string& callee, bool blocking = true) {
  return CallInfo{Id(id), Id(request), nullptr, caller, instance, callee, blocking};
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void TestSelfCallWithOneInstanceIsRefused() {
  auto slot_self_0 = AddInstance("self", "self_0");
  TRITONBACKEND_Request* client[] = {Req(1)};
  {
    Executing running(*slot_self_0, client, 1);
    std::string refusal = Begin(Call(2, 3, "self", "self_0", "self"));
    EXPECT(Contains(refusal, "closes the call cycle self -> self,"));
    EXPECT(Contains(refusal, "the only instance of 'self' is blocked"));
    EXPECT(Contains(refusal, "instance_group [ { count: 2 } ]"));
    // Not blocking (async_exec, a thread): it may be abandoned, so it runs.
    EXPECT(Begin(Call(4, 5, "self", "self_0", "self", false)).empty());
    End(Id(4));
  }
  RemoveInstance("self", "self_0");
}

void TestAFreeInstanceServes() {
  auto slot_two_0 = AddInstance("two", "two_0");
  auto slot_two_1 = AddInstance("two", "two_1");
  TRITONBACKEND_Request* client[] = {Req(10)};
  TRITONBACKEND_Request* nested[] = {Req(12)};
  {
    Executing first(*slot_two_0, client, 1);
    EXPECT(Begin(Call(11, 12, "two", "two_0", "two")).empty());  // two_1 is idle
    Executing second(*slot_two_1, nested, 1);                    // and serves it
    std::string refusal = Begin(Call(13, 14, "two", "two_1", "two"));
    EXPECT(Contains(refusal, "closes the call cycle two -> two -> two,"));
    EXPECT(Contains(refusal, "all 2 instances of 'two' are blocked in BLS calls"));
    End(Id(11));
  }
  RemoveInstance("two", "two_0");
  RemoveInstance("two", "two_1");
}

void TestBusyButNotBlockedMayFree() {
  auto slot_busy_0 = AddInstance("busy", "busy_0");
  auto slot_loop_0 = AddInstance("loop", "loop_0");
  TRITONBACKEND_Request* a[] = {Req(20)};
  TRITONBACKEND_Request* b[] = {Req(21)};
  {
    Executing working(*slot_busy_0, a, 1);  // computing, no call: it will finish
    Executing caller(*slot_loop_0, b, 1);
    EXPECT(Begin(Call(22, 23, "loop", "loop_0", "busy")).empty());
    End(Id(22));
  }
  RemoveInstance("busy", "busy_0");
  RemoveInstance("loop", "loop_0");
}

void TestTwoModelCycleNamesTheChain() {
  auto slot_a_0 = AddInstance("a", "a_0");
  auto slot_b_0 = AddInstance("b", "b_0");
  TRITONBACKEND_Request* client[] = {Req(30)};
  {
    Executing in_a(*slot_a_0, client, 1);
    EXPECT(Begin(Call(31, 32, "a", "a_0", "b")).empty());
    TRITONBACKEND_Request* from_a[] = {Req(32)};
    Executing in_b(*slot_b_0, from_a, 1);
    std::string refusal = Begin(Call(33, 34, "b", "b_0", "a"));
    EXPECT(Contains(refusal, "from model 'b' (instance 'b_0') to model 'a'"));
    EXPECT(Contains(refusal, "closes the call cycle a -> b -> a,"));
    End(Id(31));
  }
  RemoveInstance("a", "a_0");
  RemoveInstance("b", "b_0");
}

void TestIndependentRequestsThatBlockEachOther() {
  // c_0 serves a client and waits on d; d_0 serves another client and calls c: no request
  // chain holds both, the wait-for walk names the cycle.
  auto slot_c_0 = AddInstance("c", "c_0");
  auto slot_d_0 = AddInstance("d", "d_0");
  TRITONBACKEND_Request* one[] = {Req(40)};
  TRITONBACKEND_Request* other[] = {Req(41)};
  {
    Executing in_c(*slot_c_0, one, 1);
    Executing in_d(*slot_d_0, other, 1);
    EXPECT(Begin(Call(42, 43, "c", "c_0", "d")).empty());  // queued: d_0 may finish
    std::string refusal = Begin(Call(44, 45, "d", "d_0", "c"));
    EXPECT(Contains(refusal, "closes the call cycle d -> c -> d,"));
    End(Id(42));
  }
  RemoveInstance("c", "c_0");
  RemoveInstance("d", "d_0");
}

void TestUnknownTargetAndDetachedCallsMayAnswer() {
  auto slot_e_0 = AddInstance("e", "e_0");
  TRITONBACKEND_Request* client[] = {Req(50)};
  {
    Executing in_e(*slot_e_0, client, 1);
    // Not a model of ours (an ensemble, another backend): nothing is known of it.
    EXPECT(Begin(Call(51, 52, "e", "e_0", "onnx_model")).empty());
    End(Id(51));
  }
  // A call whose serving execute returned without its FINAL (a decoupled callee answering
  // from a thread) may still be answered.
  auto slot_f_0 = AddInstance("f", "f_0");
  TRITONBACKEND_Request* client2[] = {Req(53)};
  {
    Executing in_e(*slot_e_0, client2, 1);
    EXPECT(Begin(Call(54, 55, "e", "e_0", "f")).empty());
    TRITONBACKEND_Request* served[] = {Req(55)};
    { Executing in_f(*slot_f_0, served, 1); }
    TRITONBACKEND_Request* next[] = {Req(56)};
    Executing again(*slot_f_0, next, 1);
    EXPECT(Begin(Call(57, 58, "f", "f_0", "e")).empty());
    End(Id(57));
    End(Id(54));
  }
  RemoveInstance("e", "e_0");
  RemoveInstance("f", "f_0");
}

void TestReloadCountsAsFree() {
  auto slot_r_0 = AddInstance("r", "r_0");
  AddInstance("r", "r_0");  // the new generation beside the old, same name
  TRITONBACKEND_Request* client[] = {Req(60)};
  {
    Executing in_r(*slot_r_0, client, 1);
    EXPECT(Begin(Call(61, 62, "r", "r_0", "r")).empty());
    End(Id(61));
  }
  RemoveInstance("r", "r_0");  // the old one goes: refused again
  {
    Executing in_r(*slot_r_0, client, 1);
    EXPECT(!Begin(Call(63, 64, "r", "r_0", "r")).empty());
  }
  RemoveInstance("r", "r_0");
}

void TestEndedCallsLeaveNothing() {
  auto slot_g_0 = AddInstance("g", "g_0");
  TRITONBACKEND_Request* client[] = {Req(1)};
  {
    Executing in_g(*slot_g_0, client, 1);
    EXPECT(!Begin(Call(2, 3, "g", "g_0", "g")).empty());
  }
  {
    Executing in_g(*slot_g_0, client, 1);
    EXPECT(!Begin(Call(2, 3, "g", "g_0", "g")).empty());  // refused calls are not kept
  }
  RemoveInstance("g", "g_0");
}

void TestAChainThroughThreeModelsIsFollowed() {
  // The chain passes through the batches that serve each call (an execute that begins while
  // a call is in flight); a batch begun with none in flight starts a chain of its own.
  auto slot_h_0 = AddInstance("h", "h_0");
  auto slot_i_0 = AddInstance("i", "i_0");
  auto slot_j_0 = AddInstance("j", "j_0");
  TRITONBACKEND_Request* client[] = {Req(70)};
  {
    Executing in_h(*slot_h_0, client, 1);
    EXPECT(Begin(Call(71, 72, "h", "h_0", "i")).empty());
    TRITONBACKEND_Request* from_h[] = {Req(80), Req(72)};  // batched with a client's
    Executing in_i(*slot_i_0, from_h, 2);
    EXPECT(Begin(Call(73, 74, "i", "i_0", "j")).empty());
    TRITONBACKEND_Request* from_i[] = {Req(74)};
    Executing in_j(*slot_j_0, from_i, 1);
    std::string refusal = Begin(Call(75, 76, "j", "j_0", "h"));
    EXPECT(Contains(refusal, "closes the call cycle h -> i -> j -> h,"));
    End(Id(73));
    End(Id(71));
  }
  {
    Executing in_i(*slot_i_0, client, 1);  // nothing in flight: a chain of its own
    Executing in_h(*slot_h_0, client, 1);
    EXPECT(Begin(Call(77, 78, "i", "i_0", "h")).empty());  // h_0 computes, not blocked
    std::string refusal = Begin(Call(79, 81, "h", "h_0", "i"));
    EXPECT(Contains(refusal, "closes the call cycle h -> i -> h,"));
    End(Id(77));
  }
  RemoveInstance("h", "h_0");
  RemoveInstance("i", "i_0");
  RemoveInstance("j", "j_0");
}

// Queued where Triton's queue expires requests, a call ends on its own ("Request timeout
// expired"): it is left to wait, while the same cycle on a queue without a timeout is refused.
void TestAQueueThatExpiresEndsTheWait() {
  auto slot_exp_0 = AddInstance("expiring", "expiring_0", /*queue_expires=*/true);
  auto slot_keep_0 = AddInstance("keeping", "keeping_0", /*queue_expires=*/false);
  TRITONBACKEND_Request* a[] = {Req(90)};
  TRITONBACKEND_Request* b[] = {Req(91)};
  {
    Executing running(*slot_exp_0, a, 1);
    EXPECT(Begin(Call(92, 93, "expiring", "expiring_0", "expiring")).empty());
    Executing other(*slot_keep_0, b, 1);
    // keeping -> expiring: queued behind the blocked instance, but it expires.
    EXPECT(Begin(Call(94, 95, "keeping", "keeping_0", "expiring")).empty());
    End(Id(94));
    EXPECT(Contains(Begin(Call(96, 97, "keeping", "keeping_0", "keeping")),
                    "closes the call cycle keeping -> keeping,"));
    End(Id(92));
  }
  RemoveInstance("expiring", "expiring_0", /*queue_expires=*/true);
  RemoveInstance("keeping", "keeping_0");
}

// A reload whose new generation fails takes its queue policy away with it.
void TestAFailedReloadKeepsTheQueuePolicyOfTheModelThatServes() {
  auto slot = AddInstance("reloaded", "reloaded_0", /*queue_expires=*/false);
  AddInstance("reloaded", "reloaded_0", /*queue_expires=*/true);     // the new config's
  RemoveInstance("reloaded", "reloaded_0", /*queue_expires=*/true);  // its load failed
  TRITONBACKEND_Request* a[] = {Req(100)};
  {
    Executing running(*slot, a, 1);
    EXPECT(Contains(Begin(Call(101, 102, "reloaded", "reloaded_0", "reloaded")),
                    "closes the call cycle reloaded -> reloaded,"));
  }
  RemoveInstance("reloaded", "reloaded_0");
}

// Which configurations expire queued requests (tritonserver 2.51 observed through BLS
// self calls, tests/reliability/test_bls_cycles.py).
void TestQueueExpiresReadsTheQueuePolicies() {
  auto expires = [](const char* text) { return QueueExpires(pybackend::json::Value::Parse(text)); };
  EXPECT(!expires(R"({"max_batch_size": 0})"));
  EXPECT(!expires(R"({"dynamic_batching": {}})"));
  EXPECT(!expires(
      R"({"dynamic_batching": {"default_queue_policy": {"allow_timeout_override": true}}})"));
  EXPECT(!expires(
      R"({"dynamic_batching": {"default_queue_policy": {"default_timeout_microseconds": "0"}}})"));
  EXPECT(expires(R"({"dynamic_batching": {"default_queue_policy":
                       {"default_timeout_microseconds": "1000000"}}})"));
  EXPECT(expires(
      R"({"dynamic_batching": {"default_queue_policy": {"default_timeout_microseconds": 5}}})"));
  // DELAY moves an expired request back into the queue: it never fails.
  EXPECT(!expires(R"({"dynamic_batching": {"default_queue_policy":
                        {"default_timeout_microseconds": "9", "timeout_action": "DELAY"}}})"));
  EXPECT(expires(R"({"dynamic_batching": {"default_queue_policy":
                       {"default_timeout_microseconds": "9", "timeout_action": "REJECT"}}})"));
  // With priority levels, a BLS request waits at the default level, under its own policy.
  EXPECT(expires(R"({"dynamic_batching": {"priority_levels": "2", "default_priority_level": "2",
                       "priority_queue_policy": {"2": {"default_timeout_microseconds": "100"}}}})"));
  EXPECT(!expires(R"({"dynamic_batching": {"priority_levels": "2", "default_priority_level": "1",
                        "priority_queue_policy": {"2": {"default_timeout_microseconds": "100"}}}})"));
  EXPECT(!expires(R"({"dynamic_batching": {"priority_levels": "2", "default_priority_level": "2",
                        "default_queue_policy": {"default_timeout_microseconds": "100"},
                        "priority_queue_policy": {"2": {"max_queue_size": 4}}}})"));
  EXPECT(expires(R"({"dynamic_batching": {"priority_levels": "2", "default_priority_level": "1",
                       "default_queue_policy": {"default_timeout_microseconds": "100"},
                       "priority_queue_policy": {"2": {"max_queue_size": 4}}}})"));
  // Levels in the map without priority_levels are not used.
  EXPECT(!expires(R"({"dynamic_batching": {"priority_queue_policy":
                        {"2": {"default_timeout_microseconds": "100"}}}})"));
  EXPECT(!expires(R"({"sequence_batching": {"max_sequence_idle_microseconds": "1000"}})"));
}

}  // namespace

int main() {
  TestSelfCallWithOneInstanceIsRefused();
  TestAFreeInstanceServes();
  TestBusyButNotBlockedMayFree();
  TestTwoModelCycleNamesTheChain();
  TestIndependentRequestsThatBlockEachOther();
  TestUnknownTargetAndDetachedCallsMayAnswer();
  TestReloadCountsAsFree();
  TestEndedCallsLeaveNothing();
  TestAChainThroughThreeModelsIsFollowed();
  TestAQueueThatExpiresEndsTheWait();
  TestAFailedReloadKeepsTheQueuePolicyOfTheModelThatServes();
  TestQueueExpiresReadsTheQueuePolicies();
  if (g_failures == 0) std::printf("bls_cycles_test: all passed\n");
  return g_failures == 0 ? 0 : 1;
}
