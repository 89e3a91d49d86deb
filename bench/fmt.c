/* Numbers and labels as the tables and charts print them. */
#include <string.h>

#include "bench/bench.h"

void hxb_fmt_bytes(char *buf, size_t cap, uint64_t b)
{
    if (b >= (1ull << 30)) snprintf(buf, cap, "%.2f GiB", b / 1073741824.0);
    else if (b >= (1ull << 20)) snprintf(buf, cap, "%.2f MiB", b / 1048576.0);
    else if (b >= 1024) snprintf(buf, cap, "%.2f KiB", b / 1024.0);
    else snprintf(buf, cap, "%llu B", (unsigned long long)b);
}

void hxb_fmt_count(char *buf, size_t cap, uint64_t n)
{
    if (n >= 1000000000ull) snprintf(buf, cap, "%.2f B", n / 1e9);
    else if (n >= 1000000ull) snprintf(buf, cap, "%.2f M", n / 1e6);
    else if (n >= 1000ull) snprintf(buf, cap, "%.2f K", n / 1e3);
    else snprintf(buf, cap, "%llu", (unsigned long long)n);
}

/* Only the dimensions that take more than one value in this run tell the
 * rows of one model and test apart; devices and policy are always named. */
void hxb_fmt_config(char *buf, size_t cap, const hxb_results *r, const hxb_row *row)
{
    int threads = 0, batch = 0, inject = 0, partition = 0;
    for (int i = 0; i < r->nrows; i++) {
        threads |= r->rows[i].threads_i > 0;
        batch |= r->rows[i].batch_i > 0;
        partition |= r->rows[i].partition_i > 0;
        inject |= r->rows[i].inject_i > 0 || r->rows[i].inject[0];
    }
    size_t n = (size_t)snprintf(buf, cap, "devices %s, policy %s", row->devices, row->sched);
    if (inject && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, ", inject %s", row->inject[0] ? row->inject : "none");
    if (threads && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, ", %d thread%s", row->threads, row->threads == 1 ? "" : "s");
    if (partition && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, ", partition %s", row->partition);
    if (batch && n < cap)
        snprintf(buf + n, cap - n, ", batch %d", row->batch);
}
