/* Tensor element types, numbered as GGUF numbers them (ggml_type). */
#ifndef HX_OPS_TYPES_H
#define HX_OPS_TYPES_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    HX_TYPE_F32 = 0,
    HX_TYPE_F16 = 1,
    HX_TYPE_Q4_0 = 2,
    HX_TYPE_Q4_1 = 3,
    HX_TYPE_Q5_0 = 6,
    HX_TYPE_Q5_1 = 7,
    HX_TYPE_Q8_0 = 8,
    HX_TYPE_Q8_1 = 9,
    HX_TYPE_Q2_K = 10,
    HX_TYPE_Q3_K = 11,
    HX_TYPE_Q4_K = 12,
    HX_TYPE_Q5_K = 13,
    HX_TYPE_Q6_K = 14,
    HX_TYPE_Q8_K = 15,
    HX_TYPE_IQ2_XXS = 16,
    HX_TYPE_IQ2_XS = 17,
    HX_TYPE_IQ3_XXS = 18,
    HX_TYPE_IQ1_S = 19,
    HX_TYPE_IQ4_NL = 20,
    HX_TYPE_IQ3_S = 21,
    HX_TYPE_IQ2_S = 22,
    HX_TYPE_IQ4_XS = 23,
    HX_TYPE_I8 = 24,
    HX_TYPE_I16 = 25,
    HX_TYPE_I32 = 26,
    HX_TYPE_I64 = 27,
    HX_TYPE_F64 = 28,
    HX_TYPE_IQ1_M = 29,
    HX_TYPE_BF16 = 30,
    HX_TYPE_TQ1_0 = 34,
    HX_TYPE_TQ2_0 = 35,
    HX_TYPE_MXFP4 = 39,
    HX_TYPE_COUNT = 40
} hx_type;

typedef struct {
    const char *name;    /* as llama.cpp prints it: "q4_K", "f16" ...     */
    uint32_t block_size; /* elements per block (1 for plain types)       */
    uint32_t type_size;  /* bytes per block                              */
    int computable;      /* hetero can dequantize and compute with it     */
} hx_type_traits;

/* Traits of a type, or NULL for numbers GGUF does not define. Every type a
 * GGUF file may hold has traits (so sizes can be checked); `computable`
 * says whether hetero's kernels handle it. */
const hx_type_traits *hx_type_get(uint32_t type);
const char *hx_type_name(uint32_t type); /* "unknown" when undefined */
/* Parses a name as llama-quantize takes it ("Q4_K", "q8_0", "F16"). */
int hx_type_from_name(const char *name, hx_type *out);
/* Bytes of a row of `n` elements; 0 if n is not a multiple of the block. */
size_t hx_type_row_size(hx_type t, uint64_t n);
/* HX_OK if rows of n elements of t can be computed: t exists, is
 * `computable` and n is whole blocks; else an error naming the type
 * (HX_ERR_UNSUPPORTED / HX_ERR_INVALID_ARG) in hx_last_error().  What the
 * model asks of each tensor at load, without seeing any kernel. */
int hx_type_row_check(hx_type t, int64_t n);

#endif
