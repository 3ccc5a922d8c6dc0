#pragma once
// The output folder of `mplan compile` written as one unit: every
// file goes into a temporary folder beside the target, which is then swapped
// in with one atomic rename (renameat2 RENAME_EXCHANGE). A failure or a kill
// at any point leaves either the previous output exactly as it was or the
// complete new one, never a mix of two models.
//
// Layout beside DIR while it runs (hidden, named after DIR and the process):
//   .DIR.mplan-new-<pid>-<token>   the new output being written (its marker
//                                  file carries the same token)
//   .DIR.mplan-old-<pid>           the previous output, just swapped out
// A later run removes what a killed run left (a process that no longer
// exists): new folders are deleted; an old folder is put back where DIR is
// missing, else its entries that DIR lacks are moved into DIR, then it is
// deleted.

#include <string>
#include <vector>

#include "core/error.h"

namespace mplan::codegen {

// The file inside an output folder that marks it as written by mplan.
inline constexpr const char* kOutputMarkerFile = ".mplan-output";

struct OutputFile {
  std::string path;  // relative to the folder; may contain '/' (sub-folders are created)
  std::string text;
};

// Replaces the folder `dir` by one holding exactly `files` (plus the marker
// file), atomically. Entries of the previous output that the new one does not
// have (a build folder of `--build`, files the user put there) are moved into
// the new folder after the swap. Refuses (ErrorKind::usage) a `dir` that is
// not a folder, a non-empty folder that mplan did not write (no marker file
// and no plan.json), and the current folder or one above it; creates missing
// parent folders. I/O failures are ErrorKind::io; the previous output is then
// untouched.
Status replace_output_folder(const std::string& dir, const std::vector<OutputFile>& files);

// Writes `text` to `path`, which must not exist, and makes it durable (fsync);
// returns 0 or the errno of the failure (ENOSPC for a write that wrote nothing).
int write_new_file_durably(const std::string& path, const std::string& text);

// The staging and swapped-out folders a killed run left beside `dir` (for
// tests: after a completed run there are none).
std::vector<std::string> leftover_staging_folders(const std::string& dir);

}  // namespace mplan::codegen
