// The wire format shared with pybackend/ipc/protocol.py. docs/protocol.md explains it;
// tests/ipc/test_protocol_agreement.py parses this file and compares every constant with
// the Python module, so keep the `NAME = value,` / `constexpr ... NAME = value;` shapes.
#pragma once

#include <cstdint>

namespace pybackend::ipc {

constexpr uint32_t PROTOCOL_VERSION = 5;
constexpr uint32_t HEADER_SIZE = 16;
constexpr uint32_t MAX_INLINE_BODY = 131072;
constexpr uint32_t MAX_DATAGRAM = 262144;
constexpr uint32_t DEFAULT_INLINE_THRESHOLD = 4096;
constexpr uint16_t FLAG_INDIRECT = 1;
constexpr int SYNC_FD = 3;
constexpr int ASYNC_FD = 4;
// The segment id of GPU holds: a FREE's BlockRef (GPU_HOLD_SEG, hold) releases the device
// memory its owner kept alive for a GPU_IPC tensor (docs/protocol.md, "GPU tensors").
constexpr uint32_t GPU_HOLD_SEG = 4294967295;
constexpr uint32_t GPU_IPC_HANDLE_SIZE = 64;

enum class MessageKind : uint16_t {
  HELLO = 1,
  INIT = 2,
  INIT_REPLY = 3,
  EXECUTE = 4,
  RESULT = 5,
  FINALIZE = 6,
  FINALIZE_REPLY = 7,
  SEGMENT_ADD = 16,
  SEGMENT_DROP = 17,
  FREE = 18,
  LOG = 32,
  SEND = 33,
  REPLY = 34,
  IS_CANCELLED = 35,
  SENDER_DROPPED = 36,
  BLS_EXEC = 40,
  BLS_RESPONSE = 41,
  BLS_CANCEL = 42,
  // Custom metrics (60-79); all but METRIC_FAMILY_DELETE get a REPLY.
  METRIC_FAMILY_NEW = 60,
  METRIC_FAMILY_DELETE = 61,
  METRIC_NEW = 62,
  METRIC_VALUE = 63,
  METRIC_INCREMENT = 64,
  METRIC_SET = 65,
  METRIC_OBSERVE = 66,
  MODEL_LOAD = 80,
  MODEL_UNLOAD = 81,
  MODEL_READY = 82,
  // backend -> stub on sync, with the fd of the sync lane's page (ipc/lane.h)
  LANE = 90,
  // backend -> a process serving models itself (attach mode), on the connection that becomes
  // sync, with the fd of the async channel; json {model_name, model_version, instance_name}
  ATTACH = 91,
};

// Who allocated a block; also the TensorDesc location of arena-backed tensors.
enum class Owner : uint8_t {
  BACKEND = 1,
  STUB = 2,
};

enum class Location : uint8_t {
  INLINE = 0,
  BACKEND_ARENA = 1,
  STUB_ARENA = 2,
  GPU_IPC = 3,
};

enum class ResultStatus : uint8_t {
  OK = 0,
  BATCH_ERROR = 1,
};

enum class ResultKind : uint8_t {
  NONE = 0,
  RESPONSE = 1,
};

#pragma pack(push, 1)
struct Header {
  uint16_t kind;
  uint16_t flags;
  uint32_t body_len;
  uint64_t id;
};
#pragma pack(pop)
static_assert(sizeof(Header) == HEADER_SIZE, "header layout is part of the protocol");

}  // namespace pybackend::ipc
