#include "backend/host_output.h"

#include "backend/json.h"
#include "backend/logging.h"

namespace pybackend {

namespace {

constexpr char kRecord = '\x1e';

void LogText(const std::string& prefix, const std::string& text, bool is_stderr) {
  if (is_stderr) {
    PB_LOG_ERROR(prefix + text);
  } else {
    PB_LOG_INFO(prefix + text);
  }
}

}  // namespace

std::string LogHostLine(const std::string& model, const std::string& line, bool is_stderr) {
  const std::string shared = model + " (shared process): ";
  if (line.empty() || line[0] != kRecord) {
    LogText(shared, line, is_stderr);
    return line;
  }
  json::Value record;
  try {
    record = json::Value::Parse(std::string_view(line).substr(1));
  } catch (const json::ParseError&) {
    record = json::Value();
  }
  const json::Value* log = record.Find("log");
  if (log != nullptr && log->is_array() && log->items().size() == 4) {
    const auto& f = log->items();
    LogFromModel(static_cast<uint32_t>(f[0].AsInt()), f[1].AsString(),
                 static_cast<uint32_t>(f[2].AsInt()), f[3].AsString());
    return f[3].AsString();
  }
  const json::Value* text = record.Find("text");
  std::string instance = record.GetString("instance");
  if (text != nullptr && text->is_string() && !instance.empty()) {
    LogText(InstanceLogPrefix(model, instance), text->AsString(), is_stderr);
    return text->AsString();
  }
  LogText(shared, line.substr(1), is_stderr);  // not ours after all: keep it readable
  return line.substr(1);
}

}  // namespace pybackend
