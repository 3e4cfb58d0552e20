/* test_harness_checker.c -- unit tests of the checker's test that a stored
 * error was sanitized: what the sanitizer wrote passes, a secret, a quoted
 * payload or an error past the size cap fails with the reason; and of a
 * target's known findings: a violation is explained when its witness
 * carries the text of one of them. */
#include "checker.h"
#include "checker_internal.h"
#include "check.h"
#include "sanitize.h"

#include <string.h>

static void test_sanitized(void)
{
    char why[160];
    const char *payload = "{\"pw\": \"x\", \"Memo\": \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}";
    CHECK(checker_error_sanitized("broker refused publish: payload too large: [payload]",
                                  payload, why, sizeof(why)));
    CHECK(!checker_error_sanitized("could not connect: password=hunter2", payload, why, sizeof(why)));
    CHECK(strstr(why, "from byte 19 on") != NULL && strstr(why, "hunter2") == NULL);
    /* What libpq says is not a secret; what the sanitizer wrote passes. */
    CHECK(checker_error_sanitized("FATAL:  password authentication failed for user \"relay\"",
                                  payload, why, sizeof(why)));
    char stored[CW_ERROR_MAX + 1];
    cw_sanitize_error("refused: Authorization: Bearer abcdefghijklmnop token=xyz "
                      "https://u:p@h/ {\"pw\": 1}", stored, sizeof(stored));
    CHECK(checker_error_sanitized(stored, payload, why, sizeof(why)));
    char longer[CW_ERROR_MAX + 8];
    memset(longer, 'a', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    CHECK(!checker_error_sanitized(longer, payload, why, sizeof(why)));
    CHECK(!checker_error_sanitized("refused: {\"pw\": \"x\", \"Memo\": \"xxxx", payload, why,
                                   sizeof(why)));
    CHECK(strstr(why, "quotes the payload") != NULL);
    CHECK(strstr(why, "pw") == NULL && strstr(why, "Memo") == NULL); /* never quotes it again */
    CHECK(checker_error_sanitized(NULL, payload, why, sizeof(why)));
}

static void test_findings_explain_their_violations(void)
{
    struct chk_inv inv;
    memset(&inv, 0, sizeof(inv));
    inv.explains = "the target left it given_up\nthe target left it pending";
    chk_violation(&inv, "message %s was never applied: the target left it %s", "a", "given_up");
    chk_violation(&inv, "message %s was never applied: the target left it %s", "b", "pending");
    CHECK(inv.explained == 2);
    chk_violation(&inv, "message %s was never applied: the target left it %s", "c", "published");
    CHECK(inv.violations == 3 && inv.explained == 2);
    cJSON_Delete(inv.witnesses);
    /* A text that only begins a line of explains explains nothing. */
    memset(&inv, 0, sizeof(inv));
    inv.explains = "the target left it pending";
    chk_violation(&inv, "the target left it");
    CHECK(inv.violations == 1 && inv.explained == 0);
    cJSON_Delete(inv.witnesses);
}

int main(void)
{
    test_sanitized();
    test_findings_explain_their_violations();
    return check_report("test_harness_checker");
}
