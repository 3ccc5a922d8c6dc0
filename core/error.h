#pragma once
// Errors that bad input produces, and the value type that carries them up to
// the CLI. Broken invariants are not errors: they abort (MPLAN_CHECK).

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace mplan {

// Where in an input file something is; line and column count from 1, 0 means
// "not known" (for example a whole-file problem such as an empty file).
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
};

// What kind of failure an Error is; the CLI turns it into its exit code
// (README, "Exit codes").
enum class ErrorKind {
  bad_input,   // a file's content or a value is wrong (the default)
  usage,       // a flag is missing, unknown or malformed
  infeasible,  // the input is fine but no plan fits the budget
  io,          // a file cannot be read or written (missing, permissions, disk full)
  internal,    // a bug of mplan's, not the user's
};

// One problem with the user's input, said so that the user can fix it:
// "model.yaml:12:5: layer 'conv3': kernel 7x7 is larger than its padded input 5x5".
struct Error {
  SourceLocation where;
  std::string message;
  ErrorKind kind = ErrorKind::bad_input;

  // "file:line:column: message", leaving out what is not known.
  std::string to_string() const;
};

// Either a value or the Error that prevented it.
template <typename T>
class Result {
 public:
  Result(T value) : state_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Error error) : state_(std::move(error)) {}    // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<Error>(state_); }

 private:
  std::variant<T, Error> state_;
};

// Result<void>: success or an Error.
struct Ok {};
using Status = Result<Ok>;

[[noreturn]] void check_failed(const char* condition, const char* file, int line,
                               const std::string& message);

}  // namespace mplan

// Aborts with file and line in every build type when an invariant is broken.
#define MPLAN_CHECK(condition, message)                                     \
  do {                                                                      \
    if (!(condition)) ::mplan::check_failed(#condition, __FILE__, __LINE__, \
                                            (message));                     \
  } while (0)
