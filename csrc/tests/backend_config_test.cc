// ParseBackendConfig: every --backend-config=python,<key>=<value> setting, its value in
// BackendConfig, and the original's texts for values it refuses (spec §7).
#include "backend/backend_config.h"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "backend/error.h"
#include "tests/expect.h"

int g_failures = 0;

namespace {

using pybackend::BackendConfig;
using pybackend::BackendError;
using pybackend::ParseBackendConfig;

BackendConfig Parse(const std::vector<std::pair<std::string, std::string>>& cmdline) {
  std::string json = "{\"cmdline\":{";
  for (size_t i = 0; i < cmdline.size(); ++i) {
    json +=
        (i ? "," : "") + std::string("\"") + cmdline[i].first + "\":\"" + cmdline[i].second + "\"";
  }
  BackendConfig c;
  ParseBackendConfig(json + "}}", &c);
  return c;
}

// The message ParseBackendConfig throws for one setting, or "" when it takes it.
std::string Refusal(const std::string& key, const std::string& value) {
  try {
    Parse({{key, value}});
  } catch (const BackendError& e) {
    EXPECT(e.code() == TRITONSERVER_ERROR_INVALID_ARG);
    return e.message();
  }
  return "";
}

void TestDefaults() {
  BackendConfig c;
  ParseBackendConfig("{}", &c);
  ParseBackendConfig("{\"cmdline\":{}}", &c);
  EXPECT(c.shm_default_byte_size == 1 << 20 && c.shm_growth_byte_size == 1 << 20);
  EXPECT(c.shm_max_byte_size == 0 && c.stub_timeout_seconds == 30);
  EXPECT(c.initialize_timeout_seconds == 0 && c.execute_timeout_seconds == 0);
  EXPECT(c.finalize_timeout_seconds == 0);
  EXPECT(c.thread_pool_size == 32 && c.inline_threshold == 4096);
  EXPECT(c.stub_restart && c.ipc_lane && c.thread_budget && c.instance_metrics);
  EXPECT(c.shm_region_prefix == "triton_python_backend_shm_region_");
}

void TestEverySettingTakesItsValue() {
  BackendConfig c = Parse({{"shm-default-byte-size", "2097152"},
                           {"shm-growth-byte-size", "65536"},
                           {"shm-max-byte-size", "8388608"},
                           {"stub-timeout-seconds", "9"},
                           {"shm_message_queue_size", "5"},
                           {"thread-pool-size", "3"},
                           {"shm-region-prefix-name", "p_"},
                           {"python-executable", "/usr/bin/python3.12"},
                           {"inline-threshold", "0"},
                           {"ipc-spin-us", "25"},
                           {"execute-timeout-seconds", "4"},
                           {"initialize-timeout-seconds", "8"},
                           {"finalize-timeout-seconds", "11"},
                           {"stub-restart", "off"},
                           {"ipc-lane", "no"},
                           {"instance-metrics", "0"},
                           {"stub-restart-max-backoff-seconds", "6"},
                           {"thread-budget", "false"},
                           {"backend-directory", "/opt/tritonserver/backends"},
                           {"default-max-batch-size", "4"}});
  EXPECT(c.shm_default_byte_size == 2097152 && c.shm_growth_byte_size == 65536);
  EXPECT(c.shm_max_byte_size == 8388608 && c.stub_timeout_seconds == 9);
  EXPECT(c.shm_message_queue_size == 5 && c.thread_pool_size == 3);
  EXPECT(c.shm_region_prefix == "p_" && c.python_executable == "/usr/bin/python3.12");
  EXPECT(c.inline_threshold == 0 && c.ipc_spin_us == 25 && c.execute_timeout_seconds == 4);
  EXPECT(!c.stub_restart && !c.ipc_lane && !c.instance_metrics && !c.thread_budget);
  EXPECT(c.stub_restart_max_backoff_ms == 6000 && c.initialize_timeout_seconds == 8);
  EXPECT(c.finalize_timeout_seconds == 11);
  EXPECT(c.backend_directory == "/opt/tritonserver/backends");
  // The earlier name of ipc-spin-us, and "auto".
  EXPECT(Parse({{"execute-spin-us", "7"}}).ipc_spin_us == 7);
  EXPECT(Parse({{"ipc-spin-us", "auto"}}).ipc_spin_us == pybackend::kLaneSpinAuto);
  // The BLS answer's poll: its own key, "auto" by default, the sync spin untouched.
  EXPECT(Parse({}).ipc_bls_spin_us == pybackend::kLaneSpinAuto);
  BackendConfig b = Parse({{"ipc-bls-spin-us", "300"}});
  EXPECT(b.ipc_bls_spin_us == 300 && b.ipc_spin_us == pybackend::kLaneSpinAuto);
  EXPECT(Parse({{"ipc-bls-spin-us", "auto"}}).ipc_bls_spin_us == pybackend::kLaneSpinAuto);
  // A JSON number where Triton would give a string is read by its text.
  BackendConfig n;
  ParseBackendConfig("{\"cmdline\":{\"thread-pool-size\":5}}", &n);
  EXPECT(n.thread_pool_size == 5);
  // An operator's "never": clamped to the longest wait kept (with a warning in the log).
  EXPECT(Parse({{"stub-timeout-seconds", "9999999999"}}).stub_timeout_seconds == 2147483);
  EXPECT(Parse({{"stub-restart-max-backoff-seconds", "9999999999"}}).stub_restart_max_backoff_ms ==
         2147483000LL);
}

void TestTheOriginalsTexts() {
  EXPECT(Refusal("shm-default-byte-size", "1048575") ==
         "shm-default-byte-size can't be smaller than 4 MiBs");
  EXPECT(Refusal("shm-default-byte-size", "1048576").empty());
  EXPECT(Refusal("shm-growth-byte-size", "0") ==
         "shm-growth-byte-size can't be smaller than or equal to zero.");
  EXPECT(Refusal("stub-timeout-seconds", "0") ==
         "stub-timeout-seconds can't be smaller than or equal to zero.");
  EXPECT(Refusal("thread-pool-size", "0") == "thread-pool-size can't be less than 1.");
  EXPECT(Refusal("shm-region-prefix-name", "") ==
         "shm-region-prefix-name must at least contain one character.");
}

void TestOurSettingsTexts() {
  EXPECT(Refusal("shm-max-byte-size", "-1") == "shm-max-byte-size can't be negative.");
  EXPECT(Refusal("inline-threshold", "-1") == "inline-threshold can't be negative.");
  EXPECT(Refusal("execute-timeout-seconds", "-1") == "execute-timeout-seconds can't be negative.");
  EXPECT(Refusal("initialize-timeout-seconds", "-1") ==
         "initialize-timeout-seconds can't be negative.");
  EXPECT(Refusal("finalize-timeout-seconds", "-1") ==
         "finalize-timeout-seconds can't be negative.");
  EXPECT(Refusal("stub-restart-max-backoff-seconds", "0") ==
         "stub-restart-max-backoff-seconds can't be smaller than or equal to zero.");
  EXPECT(Refusal("ipc-spin-us", "1000001") ==
         "ipc-spin-us must be \"auto\" or between 0 and 1000000 (microseconds, 0 = off).");
  EXPECT(Refusal("ipc-bls-spin-us", "-1") ==
         "ipc-bls-spin-us must be \"auto\" or between 0 and 1000000 (microseconds, 0 = off).");
  EXPECT(Refusal("execute-spin-us", "-1") ==
         "execute-spin-us must be \"auto\" or between 0 and 1000000 (microseconds, 0 = off).");
  for (const char* key : {"stub-restart", "ipc-lane", "instance-metrics", "thread-budget"}) {
    EXPECT(Refusal(key, "maybe") ==
           std::string("backend config '") + key + "' must be true or false, got 'maybe'");
  }
  EXPECT(Refusal("thread-pool-size", "4x") ==
         "backend config 'thread-pool-size' must be an integer, got '4x'");
  std::string bound;
  try {
    Parse({{"shm-default-byte-size", "4194304"}, {"shm-max-byte-size", "2097152"}});
  } catch (const BackendError& e) {
    bound = e.message();
  }
  EXPECT(bound ==
         "shm-max-byte-size (2097152) must be 0 (no limit) or at least shm-default-byte-size "
         "(4194304)");
}

void TestUnknownKeysAreIgnored() {
  // A near miss and a key of nobody's: ignored as by the original (a warning is logged).
  BackendConfig c = Parse({{"shm-message-queue-size", "7"}, {"no-such-setting", "1"}});
  EXPECT(c.shm_message_queue_size == 1000);
}

}  // namespace

int main() {
  TestDefaults();
  TestEverySettingTakesItsValue();
  TestTheOriginalsTexts();
  TestOurSettingsTexts();
  TestUnknownKeysAreIgnored();
  if (g_failures == 0) std::printf("backend_config_test: all passed\n");
  return g_failures == 0 ? 0 : 1;
}
