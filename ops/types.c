/* The block layout table of every GGUF tensor type. */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "ops/error.h"
#include "ops/types.h"

static const hx_type_traits traits[HX_TYPE_COUNT] = {
    [HX_TYPE_F32] = {"f32", 1, 4, 1},
    [HX_TYPE_F16] = {"f16", 1, 2, 1},
    [HX_TYPE_Q4_0] = {"q4_0", 32, 18, 1},
    [HX_TYPE_Q4_1] = {"q4_1", 32, 20, 1},
    [HX_TYPE_Q5_0] = {"q5_0", 32, 22, 1},
    [HX_TYPE_Q5_1] = {"q5_1", 32, 24, 1},
    [HX_TYPE_Q8_0] = {"q8_0", 32, 34, 1},
    [HX_TYPE_Q8_1] = {"q8_1", 32, 36, 0},
    [HX_TYPE_Q2_K] = {"q2_K", 256, 84, 1},
    [HX_TYPE_Q3_K] = {"q3_K", 256, 110, 1},
    [HX_TYPE_Q4_K] = {"q4_K", 256, 144, 1},
    [HX_TYPE_Q5_K] = {"q5_K", 256, 176, 1},
    [HX_TYPE_Q6_K] = {"q6_K", 256, 210, 1},
    [HX_TYPE_Q8_K] = {"q8_K", 256, 292, 0},
    [HX_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66, 0},
    [HX_TYPE_IQ2_XS] = {"iq2_xs", 256, 74, 0},
    [HX_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98, 0},
    [HX_TYPE_IQ1_S] = {"iq1_s", 256, 50, 0},
    [HX_TYPE_IQ4_NL] = {"iq4_nl", 32, 18, 1},
    [HX_TYPE_IQ3_S] = {"iq3_s", 256, 110, 0},
    [HX_TYPE_IQ2_S] = {"iq2_s", 256, 82, 0},
    [HX_TYPE_IQ4_XS] = {"iq4_xs", 256, 136, 1},
    [HX_TYPE_I8] = {"i8", 1, 1, 0},
    [HX_TYPE_I16] = {"i16", 1, 2, 0},
    [HX_TYPE_I32] = {"i32", 1, 4, 0},
    [HX_TYPE_I64] = {"i64", 1, 8, 0},
    [HX_TYPE_F64] = {"f64", 1, 8, 0},
    [HX_TYPE_IQ1_M] = {"iq1_m", 256, 56, 0},
    [HX_TYPE_BF16] = {"bf16", 1, 2, 1},
    [HX_TYPE_TQ1_0] = {"tq1_0", 256, 54, 0},
    [HX_TYPE_TQ2_0] = {"tq2_0", 256, 66, 0},
    [HX_TYPE_MXFP4] = {"mxfp4", 32, 17, 0},
};

const hx_type_traits *hx_type_get(uint32_t type)
{
    if (type >= HX_TYPE_COUNT || !traits[type].name)
        return NULL;
    return &traits[type];
}

const char *hx_type_name(uint32_t type)
{
    const hx_type_traits *t = hx_type_get(type);
    return t ? t->name : "unknown";
}

int hx_type_from_name(const char *name, hx_type *out)
{
    for (int i = 0; i < HX_TYPE_COUNT; i++) {
        if (traits[i].name && strcasecmp(traits[i].name, name) == 0) {
            *out = (hx_type)i;
            return 1;
        }
    }
    return 0;
}

size_t hx_type_row_size(hx_type t, uint64_t n)
{
    const hx_type_traits *tr = hx_type_get(t);
    if (!tr || n % tr->block_size)
        return 0;
    return (size_t)(n / tr->block_size) * tr->type_size;
}

int hx_type_row_check(hx_type t, int64_t n)
{
    const hx_type_traits *tr = hx_type_get((uint32_t)t);
    if (!tr)
        return hx_error(HX_ERR_INVALID_ARG, "tensor type %d does not exist", (int)t);
    if (!tr->computable)
        return hx_error(HX_ERR_UNSUPPORTED, "no kernels for tensor type %s", tr->name);
    if (n <= 0 || n % tr->block_size)
        return hx_error(HX_ERR_INVALID_ARG, "a %s row of %lld elements is not whole blocks of %u", tr->name,
                        (long long)n, tr->block_size);
    return HX_OK;
}
