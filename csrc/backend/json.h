// A small JSON value with a strict parser and a writer: enough for Triton's config messages,
// InitArgs/InitReply and request/response parameters, without pulling in a dependency.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pybackend::json {

class ParseError : public std::runtime_error {
 public:
  explicit ParseError(const std::string& what) : std::runtime_error(what) {}
};

class Value {
 public:
  enum class Type { kNull, kBool, kInt, kDouble, kString, kArray, kObject };
  using Members = std::vector<std::pair<std::string, Value>>;  // keeps document order

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : type_(Type::kBool), b_(b) {}
  Value(int v) : type_(Type::kInt), i_(v) {}
  Value(int64_t v) : type_(Type::kInt), i_(v) {}
  Value(uint64_t v) : type_(Type::kInt), i_(static_cast<int64_t>(v)) {}
  Value(double v) : type_(Type::kDouble), d_(v) {}
  Value(const char* s) : type_(Type::kString), s_(s) {}
  Value(std::string s) : type_(Type::kString), s_(std::move(s)) {}
  Value(std::string_view s) : type_(Type::kString), s_(s) {}

  static Value Object() {
    Value v;
    v.type_ = Type::kObject;
    return v;
  }
  static Value Array() {
    Value v;
    v.type_ = Type::kArray;
    return v;
  }
  static Value Parse(std::string_view text);

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_int() const { return type_ == Type::kInt; }
  bool is_number() const { return type_ == Type::kInt || type_ == Type::kDouble; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  bool AsBool() const { return b_; }
  int64_t AsInt() const { return type_ == Type::kDouble ? static_cast<int64_t>(d_) : i_; }
  double AsDouble() const { return type_ == Type::kInt ? static_cast<double>(i_) : d_; }
  const std::string& AsString() const { return s_; }
  const std::vector<Value>& items() const { return items_; }
  const Members& members() const { return members_; }

  // Object member lookup; nullptr when absent or when this is not an object.
  const Value* Find(std::string_view key) const;
  // Object member as a string (empty when absent or not a string).
  std::string GetString(std::string_view key, const std::string& fallback = "") const;
  Value& Set(std::string key, Value v);
  void Push(Value v) { items_.push_back(std::move(v)); }

  std::string Dump() const;

 private:
  void DumpTo(std::string* out) const;
  friend class Parser;

  Type type_ = Type::kNull;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
  std::vector<Value> items_;
  Members members_;
};

// Appends `s` to `out` as a quoted JSON string.
void AppendQuoted(std::string* out, std::string_view s);

// Valid JSON text laid out as rapidjson's PrettyWriter does (4-space indent, one member or
// item per line, `[]` and `{}` when empty), with every token kept as written: the layout of
// the original backend's `model configuration:` log line.
std::string Pretty(std::string_view text);

}  // namespace pybackend::json
