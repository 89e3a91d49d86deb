/* Files hetero writes, read back by llama.cpp's own gguf package: for each
 * tensor type, the package's dequantization of the file equals hetero's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels_cpu/quant.h"
#include "quantize/synthetic.h"
#include "tests/hx_test.h"

static void dump_dequantized(const char *path, const char *dir)
{
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open(path, &g));
    for (uint64_t i = 0; i < hx_gguf_tensor_count(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        const hx_quant_ops *q = hx_quant_ops_get(t->type);
        ck_assert_ptr_nonnull(q);
        uint64_t n = t->size / hx_type_get(t->type)->type_size * hx_type_get(t->type)->block_size;
        float *f = malloc(sizeof *f * n);
        q->dequantize_row(t->data, f, (int64_t)n);
        char out[512];
        snprintf(out, sizeof out, "%s/%s.f32", dir, t->name);
        FILE *fp = fopen(out, "wb");
        ck_assert_ptr_nonnull(fp);
        ck_assert_uint_eq(fwrite(f, sizeof *f, n, fp), n);
        fclose(fp);
        free(f);
    }
    hx_gguf_close(g);
}

START_TEST(gguf_package_reads_what_hetero_writes)
{
    char dir[] = "/tmp/hx-roundtrip-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    /* Rows of 256 are whole blocks of every type. */
    const hx_synthetic_config c = {"rt", 256, 1, 4, 2, 256, 128, "llama", 0};
    const char *types[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_K", "q5_K", "q6_K"};
    char src[300];
    snprintf(src, sizeof src, "%s/f32.gguf", dir);
    HX_ASSERT_OK(hx_synthetic_write(src, &c, "f32", 9));
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char path[300], sub[300], cmd[1024];
        snprintf(path, sizeof path, "%s/%s.gguf", dir, types[i]);
        snprintf(sub, sizeof sub, "%s/%s", dir, types[i]);
        snprintf(cmd, sizeof cmd, "mkdir -p %s", sub);
        ck_assert_int_eq(system(cmd), 0);
        hx_status s = hx_model_quantize(src, path, types[i], NULL, NULL);
        ck_assert_msg(s == HX_OK, "quantize to %s: %s", types[i], hx_last_error());
        dump_dequantized(path, sub);
        snprintf(cmd, sizeof cmd, "python3 tests/gguf_file_check.py %s %s", path, sub);
        ck_assert_msg(system(cmd) == 0, "%s: the gguf package disagrees (or is missing: pip install -r "
                                        "tests/requirements.txt)", types[i]);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

Suite *suite_roundtrip(void)
{
    Suite *s = suite_create("roundtrip");
    TCase *tc = tcase_create("gguf-py");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, gguf_package_reads_what_hetero_writes);
    suite_add_tcase(s, tc);
    return s;
}
