/* hetero-perfmodel: the performance models measured on this host.
 *   hetero-perfmodel [-d DIR]                 one line per codelet and device
 *   hetero-perfmodel [-d DIR] show CODELET    every size bucket of a codelet
 * DIR defaults to the runtime's (HX_CACHE_DIR/perfmodels, else
 * $XDG_CACHE_HOME/hetero/perfmodels or ~/.cache/hetero/perfmodels). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetero.h"

static void usage(FILE *f)
{
    fputs("usage: hetero-perfmodel [-d DIR] [list | show CODELET]\n", f);
}

typedef struct {
    hx_perfmodel_entry cur; /* the (codelet, device) being summed up */
    int have;
    uint32_t buckets, calibrated;
    uint64_t samples;
    const char *only;       /* show: this codelet's buckets */
    int shown;
} listing;

static void flush(listing *l)
{
    if (!l->have)
        return;
    const hx_perfmodel_entry *e = &l->cur;
    printf("%-12s %-56.56s %7u %7llu %5u", e->codelet, e->device, l->buckets, (unsigned long long)l->samples,
           l->calibrated);
    if (e->reg_valid)
        printf("  %.3g us + %.3g ns/flop + %.3g ns/B", e->reg_a * 1e6, e->reg_b * 1e9, e->reg_c * 1e9);
    else
        printf("  -");
    putchar('\n');
    l->have = 0;
}

static int list_cb(void *user, const hx_perfmodel_entry *e)
{
    listing *l = user;
    if (l->have && (strcmp(l->cur.codelet, e->codelet) || strcmp(l->cur.device, e->device)))
        flush(l);
    if (!l->have) {
        l->cur = *e;
        l->have = 1;
        l->buckets = l->calibrated = 0;
        l->samples = 0;
    }
    l->buckets++;
    l->samples += e->samples;
    l->calibrated += e->window >= 3;
    return 0;
}

static int show_cb(void *user, const hx_perfmodel_entry *e)
{
    listing *l = user;
    if (strcmp(e->codelet, l->only))
        return 0;
    if (!l->have || strcmp(l->cur.device, e->device)) {
        l->cur = *e;
        l->have = 1;
        printf("%s on %s\n", e->codelet, e->device);
        if (e->reg_valid)
            printf("  regression: %.4g us + %.4g ns/flop + %.4g ns/byte\n", e->reg_a * 1e6, e->reg_b * 1e9,
                   e->reg_c * 1e9);
        printf("  %12s %12s %12s %8s %6s %10s %10s %10s %10s\n", "size from", "flops", "bytes", "samples", "window",
               "median us", "mean us", "min us", "max us");
    }
    printf("  %12.4g %12.4g %12.4g %8u %6u %10.2f %10.2f %10.2f %10.2f\n", e->size_lo, e->flops, e->bytes,
           e->samples, e->window, e->median_s * 1e6, e->mean_s * 1e6, e->min_s * 1e6, e->max_s * 1e6);
    l->shown++;
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *cmd = "list", *codelet = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-d") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "list"))
            cmd = "list";
        else if (!strcmp(argv[i], "show") && i + 1 < argc) {
            cmd = "show";
            codelet = argv[++i];
        } else {
            usage(stderr);
            return 2;
        }
    }
    listing l = {.only = codelet};
    hx_status s;
    if (!strcmp(cmd, "list")) {
        printf("%-12s %-56s %7s %7s %5s  %s\n", "codelet", "device", "buckets", "samples", "calib",
               "regression (time = a + b*flops + c*bytes)");
        s = hx_perfmodel_read(dir, list_cb, &l);
        flush(&l);
    } else {
        s = hx_perfmodel_read(dir, show_cb, &l);
        if (s == HX_OK && !l.shown) {
            fprintf(stderr, "hetero-perfmodel: no model of '%s'\n", codelet);
            return 1;
        }
    }
    if (s != HX_OK) {
        fprintf(stderr, "hetero-perfmodel: %s\n", hx_last_error());
        return 1;
    }
    return 0;
}
