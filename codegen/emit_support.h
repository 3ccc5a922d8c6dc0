#pragma once
// The fixed parts of the generated train.cpp: the helpers every program has
// (context, pointers into the arena, initialisation, data, weights on disk)
// and main(). The plan-specific parts (constants, tables, train_step) come
// from emit_program.cpp and are placed between them:
//
//   header comment, support_types(), constants and tables, support_helpers(),
//   train_step(), support_main()

#include <string>

namespace mplan::codegen {

// Includes and the plain types the tables are made of (Region, Tensor).
std::string support_types();
// The Context and the helpers train_step() calls. Uses the constants.
std::string support_helpers();
// Initialisation, data, save/load, flags and main(). Uses train_step().
std::string support_main();

}  // namespace mplan::codegen
