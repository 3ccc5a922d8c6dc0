#pragma once
// Everything a generated training program needs from the runtime: the device
// API (memory, streams, events, copies), the ops, and the program's fixed code.

#include "runtime/device.h"
#include "runtime/ops.h"
#include "runtime/program.h"
