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

#include "frontend/error.h"

namespace mplan::cli {

// Thrown by a command to end with a message on stderr and a non-zero exit.
struct CommandFailed {
  std::string message;
  int exit_code = 1;
};

// Prints "mplan: error: <e>" semantics: throws CommandFailed with e's text.
[[noreturn]] void fail(const Error& error);
[[noreturn]] void fail(const std::string& message);

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
// failed run never leaves a half-written file. Fails the command on error.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace mplan::cli
