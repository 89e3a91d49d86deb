/* hetero-server under attack (tests/server_attack.py): another API key's
 * prompts unseen in cached_tokens, idle and trickling connections bounded,
 * a key's queue outside the server's slots, key files parsed whole, tokens
 * per minute counted as generated, a bounded drain, request framing,
 * /metrics behind the keys, and the smaller cases.  The script starts its
 * own servers on 127.0.0.1 and free ports (attack traffic from 127.0.0.2
 * and up). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "tests/hx_test.h"

START_TEST(hetero_server_holds_against_hostile_clients)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "python3 tests/server_attack.py %s", hx_test_build_dir());
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st), "%s did not exit", cmd);
    ck_assert_msg(WEXITSTATUS(st) == 0, "%s failed (its FAIL lines above say which checks)", cmd);
}
END_TEST

Suite *suite_server_security(void)
{
    Suite *s = suite_create("server_security");
    TCase *tc = tcase_create("attack");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, hetero_server_holds_against_hostile_clients);
    suite_add_tcase(s, tc);
    return s;
}
