/* Suite arrows: the include check (tools/check-arrows.sh) fails on a
 * wrong-way include of every form the compiler accepts, and on a call by a
 * local prototype (through the build's objects, HX_BUILD), planted in a
 * copy of the tree by tests/arrows-plant.sh, and passes on the copy
 * without one, so each failure is the plant's. */
#include <string.h>
#include <sys/wait.h>

#include "tests/hx_test.h"

/* Runs the plant of `form`; its exit status, its output in out. */
static int plant(const char *form, char *out, size_t cap)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "HX_BUILD='%s' sh tests/arrows-plant.sh %s 2>&1", hx_test_build_dir(), form);
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "popen %s", cmd);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    ck_assert_msg(WIFEXITED(st), "%s did not exit", cmd);
    return WEXITSTATUS(st);
}

static const struct {
    const char *form;
    const char *says;  /* what the check's message must name */
    const char *count; /* and that it found the plant alone */
} plants[] = {
    {"quoted", "runtime/task.c:", "1 wrong-way include(s)"},
    {"angled", "includes <engine/session.h> (engine/): ops/ may include from: include", "1 wrong-way include(s)"},
    {"relative", "includes \"../engine/session.h\" (engine/): model/", "1 wrong-way include(s)"},
    {"bare", "includes \"hetero.h\" (include/): kernels_cl/ may include from: nothing", "1 wrong-way include(s)"},
    {"macro", "gguf/gguf.c:", "1 wrong-way include(s)"},
    {"stale", "lists \"text/unicode.c -> engine/session.h\", which no include needs", "1 wrong-way include(s)"},
    /* a call through a local prototype: no include to see, the link shows it */
    {"prototype", "kernels_cpu/planted.c calls hx_session_open, defined in engine/: kernels_cpu/ may reach",
     "1 wrong-way call(s)"},
};

START_TEST(clean_copy_passes)
{
    char out[8192];
    int rc = plant("none", out, sizeof out);
    ck_assert_msg(rc == 0, "the unplanted copy fails (%d): %s", rc, out);
    ck_assert_msg(strstr(out, "every include follows the arrows") != NULL, "%s", out);
}
END_TEST

START_TEST(planted_form_fails)
{
    char out[8192];
    int rc = plant(plants[_i].form, out, sizeof out);
    ck_assert_msg(rc == 1, "form %s: exit %d, want 1: %s", plants[_i].form, rc, out);
    ck_assert_msg(strstr(out, plants[_i].says) != NULL, "form %s: no \"%s\" in: %s", plants[_i].form,
                  plants[_i].says, out);
    ck_assert_msg(strstr(out, plants[_i].count) != NULL, "form %s: not exactly the plant: %s", plants[_i].form,
                  out);
}
END_TEST

Suite *suite_arrows(void)
{
    Suite *s = suite_create("arrows");
    TCase *tc = tcase_create("plants");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, clean_copy_passes);
    tcase_add_loop_test(tc, planted_form_fails, 0, (int)(sizeof plants / sizeof plants[0]));
    suite_add_tcase(s, tc);
    return s;
}
