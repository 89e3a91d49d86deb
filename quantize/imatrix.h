/* Importance matrices (llama.cpp's "imatrix"): for each weight matrix, the
 * mean over calibration tokens of the square of each input column of its
 * activations.  The quantizer weighs each column's rounding error by them.
 * This is the reading side, for hetero-quantize --imatrix; it reads
 * llama-imatrix's GGUF form (<tensor>.in_sum2 / <tensor>.counts) and its
 * legacy binary .dat form, telling them apart by the GGUF magic.
 * Internal. */
#ifndef HX_QUANTIZE_IMATRIX_H
#define HX_QUANTIZE_IMATRIX_H

#include <stdint.h>

#include "hetero.h"

typedef struct hx_imatrix hx_imatrix;

/* Reads a GGUF or legacy .dat imatrix file.  An unreadable file is
 * HX_ERR_IO; one that is neither form, or is
 * truncated or inconsistent, is HX_ERR_FORMAT with the detail in
 * hx_last_error(); *out is then NULL. */
hx_status hx_imatrix_load(const char *path, hx_imatrix **out);

/* The values for a weight tensor (its GGUF name, e.g. "blk.0.attn_q.weight"):
 * per input column, the sum of squares divided by the number of rows seen
 * (as llama-quantize uses them), n_out columns; NULL (and *n_out = 0) when
 * the file has no entry for it.  Valid until hx_imatrix_free.  A 3-D
 * (expert) tensor's values are n_out = columns * experts, expert-major. */
const float *hx_imatrix_find(const hx_imatrix *im, const char *tensor, int64_t *n_out);

/* NULL is allowed. */
void hx_imatrix_free(hx_imatrix *im);

#endif
