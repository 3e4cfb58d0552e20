/* Unit tests for cliutil.h: integer flags are whole decimal numbers in their
 * range, and every refusal names the flag, the value and the range. */
#include "cliutil.h"
#include "check.h"

#include <limits.h>
#include <string.h>

int main(void)
{
    char err[160];
    long v = -1;
    CHECK(cw_parse_long("--batch", "500", 1, 1000, &v, err, sizeof(err)) == 0 && v == 500);
    CHECK(cw_parse_long("--batch", "1", 1, 1000, &v, err, sizeof(err)) == 0 && v == 1);
    CHECK(cw_parse_long("--batch", "1000", 1, 1000, &v, err, sizeof(err)) == 0 && v == 1000);
    CHECK(cw_parse_long("--batch", "-3", -5, 5, &v, err, sizeof(err)) == 0 && v == -3);
    v = 42;
    CHECK(cw_parse_long("--batch", "0", 1, 1000, &v, err, sizeof(err)) == -1 && v == 42);
    CHECK_EQ_STR(err, "--batch: '0' is not an integer in 1..1000");
    CHECK_EQ_INT(cw_parse_long("--batch", "1001", 1, 1000, &v, err, sizeof(err)), -1);
    CHECK_EQ_INT(cw_parse_long("--batch", "12abc", 1, 1000, &v, err, sizeof(err)), -1);
    CHECK(strstr(err, "'12abc'") != NULL);
    CHECK_EQ_INT(cw_parse_long("--batch", "", 1, 1000, &v, err, sizeof(err)), -1);
    CHECK_EQ_INT(cw_parse_long("--batch", "1.5", 1, 1000, &v, err, sizeof(err)), -1);
    CHECK_EQ_INT(cw_parse_long("--batch", "99999999999999999999999", 1, LONG_MAX, &v, err,
                               sizeof(err)), -1);
    CHECK(cw_parse_long("--batch", NULL, 1, 1000, &v, err, sizeof(err)) == -1);
    CHECK_EQ_STR(err, "--batch: '' is not an integer in 1..1000");
    /* No message buffer, no flag name: still refused, nothing written. */
    CHECK(cw_parse_long(NULL, "x", 1, 2, &v, NULL, 0) == -1 && v == 42);
    CHECK(cw_parse_long(NULL, "x", 1, 2, &v, err, sizeof(err)) == -1);
    CHECK_EQ_STR(err, "value: 'x' is not an integer in 1..2");

    int i = -1;
    CHECK(cw_parse_int("--lease-ms", "86400000", 100, 86400000, &i, err, sizeof(err)) == 0 &&
          i == 86400000);
    i = 7;
    CHECK(cw_parse_int("--lease-ms", "99", 100, 86400000, &i, err, sizeof(err)) == -1 && i == 7);
    CHECK_EQ_STR(err, "--lease-ms: '99' is not an integer in 100..86400000");
    /* A value beyond int is refused by the range, never truncated. */
    CHECK(cw_parse_int("--n", "4294967297", INT_MIN, INT_MAX, &i, err, sizeof(err)) == -1 &&
          i == 7);
    return check_report("test_cliutil");
}
