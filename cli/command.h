#pragma once
// Sub-commands of `mplan` register themselves here, one file per command
// (cli/cmd_<name>.cpp), so that adding a command touches no other file.
//
//   static mplan::cli::Registration reg("bounds", "Memory bounds of a model", setup_bounds);
//
// `setup` adds the command's options to its CLI11 sub-app and sets its
// callback. A callback returns the process exit code through cli::fail/ok.

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"

namespace mplan::cli {

// Exit codes of mplan (README, "Exit codes").
inline constexpr int kExitBadInput = 1;     // a file's content or a value is wrong; a plan fails verification
inline constexpr int kExitUsage = 2;        // a flag is missing, unknown or malformed
inline constexpr int kExitInfeasible = 3;   // no plan fits the budget
inline constexpr int kExitIo = 4;           // a file cannot be read or written
inline constexpr int kExitInternal = 70;    // a bug of mplan's (EX_SOFTWARE of sysexits.h)

int exit_code_of(ErrorKind kind);

// Thrown by a command to end with a message on stderr and a non-zero exit.
struct CommandFailed {
  std::string message;
  int exit_code = kExitBadInput;
};

// Prints "mplan: error: <e>" semantics: throws CommandFailed with e's text
// and the exit code of its kind.
[[noreturn]] void fail(const Error& error);
[[noreturn]] void fail(const std::string& message, ErrorKind kind = ErrorKind::bad_input);
// A flag's value is wrong: exit kExitUsage.
[[noreturn]] void fail_usage(const std::string& message);

// Unwraps a Result or fails with its error.
template <typename T>
T unwrap(Result<T> result) {
  if (!result.ok()) fail(result.error());
  return std::move(result).value();
}

using Setup = std::function<void(CLI::App& command)>;

struct Registration {
  Registration(std::string name, std::string description, Setup setup, int order = 100);
};

struct RegisteredCommand {
  std::string name;
  std::string description;
  Setup setup;
  int order = 100;
};
std::vector<RegisteredCommand>& registered_commands();

// Writes `text` to `path` atomically (temporary file then rename), so that a
// failed run never leaves a half-written file. Fails the command on error
// (kExitIo).
void write_file_atomically(const std::string& path, const std::string& text);

// Fails (kExitUsage) when `output` (what `flag` names) is one of `inputs` (the
// same file by another name included) or, for a folder output, holds one of
// them: mplan never writes over what it reads.
void refuse_overwriting_inputs(const std::string& flag, const std::string& output,
                               const std::vector<std::string>& inputs, bool output_is_folder = false);

}  // namespace mplan::cli
