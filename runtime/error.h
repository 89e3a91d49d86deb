/* The runtime's name for the one error channel, which lives in ops/error.h
 * so that the kernels below the runtime report through it too; the rooms
 * above keep including it here. */
#ifndef HX_RUNTIME_ERROR_H
#define HX_RUNTIME_ERROR_H

#include "ops/error.h"

#endif
