/* Tables of built-in codelets, searched by hx_codelet_builtin. */
#ifndef HX_DEVICES_CODELETS_OPS_H
#define HX_DEVICES_CODELETS_OPS_H

#include "hetero.h"

/* Ends with an entry whose name is NULL. */
extern const hx_codelet hx_codelets_ops[];

#endif
