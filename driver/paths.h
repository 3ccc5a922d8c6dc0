#pragma once
// Where commands write: mplan never writes over what it reads.

#include <string>
#include <vector>

#include "core/error.h"

namespace mplan::driver {

// An Error of kind usage when `output` (what `flag` names) is one of
// `inputs` (the same file by another name included) or, for a folder
// output, holds one of them (the folder is replaced as a whole).
Status refuse_overwriting_inputs(const std::string& flag, const std::string& output,
                                 const std::vector<std::string>& inputs, bool output_is_folder = false);

}  // namespace mplan::driver
