#pragma once
// A small JSON reader and writer for the runtime's own files (the kernel
// profiler's job and result files): the runtime depends on nothing outside
// the C++ standard library, so it cannot use nlohmann-json. Numbers keep
// their text, so integers up to 2^63 read back exactly. Nesting is limited
// (kMaxDepth) and every error names the line and column.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mplan::rt::json {

inline constexpr int kMaxDepth = 64;

struct Value {
  enum class Type { null, boolean, number, string, array, object };
  Type type = Type::null;
  bool boolean = false;
  std::string text;  // a string's value, or a number's text
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object;

  // Declared here, defined where Value is complete: a vector of pairs holding
  // Value inside Value's own definition needs it with clang's libstdc++ mode.
  Value();
  Value(const Value&);
  Value(Value&&) noexcept;
  Value& operator=(const Value&);
  Value& operator=(Value&&) noexcept;
  ~Value();

  // The member `key` of an object, or nullptr.
  const Value* find(const std::string& key) const;
  bool is_number() const { return type == Type::number; }
  // A number as int64 (false if it is not an integer in range) or as double.
  bool as_int(int64_t* out) const;
  bool as_double(double* out) const;
};

// Parses a whole document; false with "line L, column C: what" on error.
bool parse(const std::string& text, Value* out, std::string* error);

// A JSON string literal of `text` (quotes included, control bytes escaped).
std::string quote(const std::string& text);

}  // namespace mplan::rt::json
