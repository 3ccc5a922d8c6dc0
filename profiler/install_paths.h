#pragma once
// Where this mplan finds the files it ships (installed use): the
// device files and the runtime's sources, which generated programs build
// against. Looked up, in order:
//   1. $MPLAN_HOME: an install prefix (share/mplan/...) or a source checkout
//      (examples/devices, runtime/);
//   2. beside the running executable: <bin>/../share/mplan (what
//      `cmake --install` lays out: bin/mplan, share/mplan/devices,
//      share/mplan/runtime, share/mplan/examples);
//   3. the source tree this mplan was built from (a build that is not installed).

#include <string>
#include <vector>

#include "core/error.h"

namespace mplan {

struct InstallPaths {
  std::string devices_dir;  // the shipped device files, <name>.yaml
  std::string runtime_dir;  // the runtime's sources (runtime.h, CMakeLists.txt, cpu/)
  std::string models_dir;   // the example models
  std::string found_by;     // "MPLAN_HOME", "the executable's folder" or "the source tree"; for messages
};

// The paths above, resolved once per process.
const InstallPaths& install_paths();

// The stems of the .yaml files in `dir`, sorted (the shipped device or machine names).
std::vector<std::string> yaml_names_in(const std::string& dir);

// `name_or_path` if it is a file, else the shipped <dir>/<name>.yaml; an
// error of kind usage, listing the names in dir, where it is neither.
// `kind` names the files in it: "device", "machine".
Result<std::string> shipped_file(const std::string& name_or_path, const std::string& dir, const std::string& kind);

}  // namespace mplan
