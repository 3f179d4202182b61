#include "backend/json.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace pybackend::json {

namespace {

// A double as the original writes it (TritonJson, i.e. rapidjson's Writer): its shortest
// round-trip digits placed by rapidjson's Prettify rules: 0.1, 2.0, 1e-7, 1e21,
// 100000000000000000000.0, 1.5e22. pybackend/utils/triton_json.py's double_text is the
// same rule for the offline harness.
void AppendDouble(std::string* out, double d) {
  if (d == 0) {
    out->append(std::signbit(d) ? "-0.0" : "0.0");
    return;
  }
  if (d < 0) out->push_back('-');
  char buf[40];
  auto res = std::to_chars(buf, buf + sizeof(buf), std::fabs(d), std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));  // "d.ddde+XX"
  size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = std::atoi(std::string(sci.substr(e + 1)).c_str());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int length = static_cast<int>(digits.size());
  const int k = exponent - (length - 1);  // value = digits x 10^k
  const int kk = length + k;              // 10^(kk-1) <= value < 10^kk
  if (k >= 0 && kk <= 21) {
    out->append(digits).append(static_cast<size_t>(k), '0').append(".0");
  } else if (kk > 0 && kk <= 21) {
    out->append(digits, 0, kk).append(".").append(digits, kk, std::string::npos);
  } else if (kk > -6 && kk <= 0) {
    out->append("0.").append(static_cast<size_t>(-kk), '0').append(digits);
  } else if (length == 1) {
    out->append(digits).append("e").append(std::to_string(kk - 1));
  } else {
    out->append(digits, 0, 1).append(".").append(digits, 1, std::string::npos);
    out->append("e").append(std::to_string(kk - 1));
  }
}

}  // namespace

class Parser {
 public:
  explicit Parser(std::string_view t) : t_(t) {}

  Value ParseDocument() {
    Value v = ParseValue(0);
    SkipSpace();
    if (pos_ != t_.size()) Fail("unexpected trailing characters");
    return v;
  }

 private:
  [[noreturn]] void Fail(const std::string& why) {
    throw ParseError("invalid JSON at offset " + std::to_string(pos_) + ": " + why);
  }

  void SkipSpace() {
    while (pos_ < t_.size() &&
           (t_[pos_] == ' ' || t_[pos_] == '\n' || t_[pos_] == '\r' || t_[pos_] == '\t')) {
      ++pos_;
    }
  }

  bool Consume(std::string_view word) {
    if (t_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }

  Value ParseValue(int depth) {
    if (depth > 128) Fail("nesting too deep");
    SkipSpace();
    if (pos_ >= t_.size()) Fail("unexpected end");
    char c = t_[pos_];
    if (c == '{') return ParseObject(depth);
    if (c == '[') return ParseArray(depth);
    if (c == '"') return Value(ParseString());
    if (Consume("true")) return Value(true);
    if (Consume("false")) return Value(false);
    if (Consume("null")) return Value();
    return ParseNumber();
  }

  Value ParseObject(int depth) {
    Value v = Value::Object();
    ++pos_;
    SkipSpace();
    if (pos_ < t_.size() && t_[pos_] == '}') {
      ++pos_;
      return v;
    }
    while (true) {
      SkipSpace();
      if (pos_ >= t_.size() || t_[pos_] != '"') Fail("expected a member name");
      std::string key = ParseString();
      SkipSpace();
      if (pos_ >= t_.size() || t_[pos_] != ':') Fail("expected ':'");
      ++pos_;
      v.members_.emplace_back(std::move(key), ParseValue(depth + 1));
      SkipSpace();
      if (pos_ < t_.size() && t_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < t_.size() && t_[pos_] == '}') {
        ++pos_;
        return v;
      }
      Fail("expected ',' or '}'");
    }
  }

  Value ParseArray(int depth) {
    Value v = Value::Array();
    ++pos_;
    SkipSpace();
    if (pos_ < t_.size() && t_[pos_] == ']') {
      ++pos_;
      return v;
    }
    while (true) {
      v.items_.push_back(ParseValue(depth + 1));
      SkipSpace();
      if (pos_ < t_.size() && t_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < t_.size() && t_[pos_] == ']') {
        ++pos_;
        return v;
      }
      Fail("expected ',' or ']'");
    }
  }

  unsigned Hex4() {
    if (pos_ + 4 > t_.size()) Fail("short \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = t_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        Fail("bad \\u escape");
    }
    return v;
  }

  static void AppendUtf8(std::string* out, unsigned cp) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  std::string ParseString() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= t_.size()) Fail("unterminated string");
      char c = t_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= t_.size()) Fail("unterminated escape");
      char e = t_[pos_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          unsigned cp = Hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && t_.substr(pos_, 2) == "\\u") {
            size_t save = pos_;
            pos_ += 2;
            unsigned lo = Hex4();
            if (lo >= 0xDC00 && lo < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              pos_ = save;
            }
          }
          AppendUtf8(&out, cp);
          break;
        }
        default:
          Fail("bad escape");
      }
    }
  }

  Value ParseNumber() {
    size_t start = pos_;
    bool is_float = false;
    if (pos_ < t_.size() && (t_[pos_] == '-' || t_[pos_] == '+')) ++pos_;
    while (pos_ < t_.size()) {
      char c = t_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+') {
        is_float = true;
        ++pos_;
      } else {
        break;
      }
    }
    if (pos_ == start) Fail("unexpected character");
    std::string num(t_.substr(start, pos_ - start));
    char* end = nullptr;
    if (!is_float) {
      errno = 0;
      long long v = std::strtoll(num.c_str(), &end, 10);
      if (errno == 0 && end && *end == '\0') return Value(static_cast<int64_t>(v));
    }
    errno = 0;
    double d = std::strtod(num.c_str(), &end);
    if (!end || *end != '\0') Fail("bad number '" + num + "'");
    return Value(d);
  }

  std::string_view t_;
  size_t pos_ = 0;
};

Value Value::Parse(std::string_view text) { return Parser(text).ParseDocument(); }

const Value* Value::Find(std::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (const auto& [k, v] : members_) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string Value::GetString(std::string_view key, const std::string& fallback) const {
  const Value* v = Find(key);
  return (v != nullptr && v->is_string()) ? v->s_ : fallback;
}

Value& Value::Set(std::string key, Value v) {
  for (auto& [k, existing] : members_) {
    if (k == key) {
      existing = std::move(v);
      return existing;
    }
  }
  members_.emplace_back(std::move(key), std::move(v));
  return members_.back().second;
}

void AppendQuoted(std::string* out, std::string_view s) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

void Value::DumpTo(std::string* out) const {
  switch (type_) {
    case Type::kNull:
      out->append("null");
      break;
    case Type::kBool:
      out->append(b_ ? "true" : "false");
      break;
    case Type::kInt:
      out->append(std::to_string(i_));
      break;
    case Type::kDouble: {
      if (!std::isfinite(d_)) {
        out->append("null");  // JSON has no NaN/Inf
        break;
      }
      AppendDouble(out, d_);
      break;
    }
    case Type::kString:
      AppendQuoted(out, s_);
      break;
    case Type::kArray: {
      out->push_back('[');
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i) out->push_back(',');
        items_[i].DumpTo(out);
      }
      out->push_back(']');
      break;
    }
    case Type::kObject: {
      out->push_back('{');
      for (size_t i = 0; i < members_.size(); ++i) {
        if (i) out->push_back(',');
        AppendQuoted(out, members_[i].first);
        out->push_back(':');
        members_[i].second.DumpTo(out);
      }
      out->push_back('}');
      break;
    }
  }
}

std::string Value::Dump() const {
  std::string out;
  DumpTo(&out);
  return out;
}

std::string Pretty(std::string_view text) {
  std::string out;
  out.reserve(text.size() * 2);
  int depth = 0;
  auto newline = [&] {
    out.push_back('\n');
    out.append(static_cast<size_t>(depth) * 4, ' ');
  };
  auto next_token = [&](size_t i) {
    while (i < text.size() &&
           (text[i] == ' ' || text[i] == '\n' || text[i] == '\r' || text[i] == '\t')) {
      ++i;
    }
    return i;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {  // copied whole, escapes included
      size_t end = i + 1;
      while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      out.append(text.substr(i, end + 1 - i));
      i = end;
    } else if (c == '{' || c == '[') {
      size_t n = next_token(i + 1);
      if (n < text.size() && text[n] == (c == '{' ? '}' : ']')) {
        out.push_back(c);
        out.push_back(text[n]);
        i = n;
      } else {
        out.push_back(c);
        ++depth;
        newline();
      }
    } else if (c == '}' || c == ']') {
      --depth;
      newline();
      out.push_back(c);
    } else if (c == ',') {
      out.push_back(',');
      newline();
    } else if (c == ':') {
      out.append(": ");
    } else if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace pybackend::json
