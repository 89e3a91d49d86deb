/* Suite arrows: the include check (tools/check-arrows.sh) fails on a
 * wrong-way include of every form the compiler accepts, planted in a copy
 * of the tree by tests/arrows-plant.sh, and passes on the copy without
 * one, so each failure is the plant's. */
#include <string.h>
#include <sys/wait.h>

#include "tests/hx_test.h"

/* Runs the plant of `form`; its exit status, its output in out. */
static int plant(const char *form, char *out, size_t cap)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "sh tests/arrows-plant.sh %s 2>&1", form);
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
    const char *says; /* what the check's message must name */
} plants[] = {
    {"quoted", "runtime/task.c:"},
    {"angled", "includes <engine/session.h> (engine/): ops/ may include from: include"},
    {"relative", "includes \"../engine/session.h\" (engine/): model/"},
    {"bare", "includes \"hetero.h\" (include/): kernels_cl/ may include from: nothing"},
    {"macro", "gguf/gguf.c:"},
    {"stale", "lists \"text/unicode.c -> engine/session.h\", which no include needs"},
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
    ck_assert_msg(strstr(out, "1 wrong-way include(s) or stale exception(s)") != NULL,
                  "form %s: not exactly the plant: %s", plants[_i].form, out);
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
