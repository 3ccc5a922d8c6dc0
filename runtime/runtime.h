#pragma once
// Everything a generated training program needs from the runtime: the arena and
// host buffers, streams and events, the ops, and .npy files.

#include "runtime/arena.h"
#include "runtime/conv.h"
#include "runtime/npy.h"
#include "runtime/ops.h"
#include "runtime/streams.h"
