/* test_harness_runner_db.c -- unit tests of the runner's connection
 * strings: a database swapped in with quoting, fields read back, the
 * password hidden from what --keep prints, and the CW_DB variable. */
#include "runner_db.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

static void test_conninfo(void)
{
    char *c = conninfo_with_db("host=/tmp/x port=5433 user=postgres dbname=postgres", "it's");
    CHECK(c != NULL && strstr(c, "dbname='it\\'s'") != NULL && strstr(c, "port='5433'") != NULL);
    char v[64];
    conninfo_get(c, "dbname", v, sizeof(v));
    CHECK_EQ_STR(v, "it's");
    conninfo_get(c, "host", v, sizeof(v));
    CHECK_EQ_STR(v, "/tmp/x");
    free(c);
    CHECK(conninfo_with_db("host='unterminated", "x") == NULL);

    /* What --keep prints never holds the password, in either syntax. */
    int hidden = 0;
    c = conninfo_for_display("host=/tmp/x port=5433 user=u password=s3cr3t dbname=d", &hidden);
    CHECK(c != NULL && hidden && strstr(c, "s3cr3t") == NULL && strstr(c, "password") == NULL);
    CHECK(c != NULL && strstr(c, "dbname='d'") != NULL && strstr(c, "user='u'") != NULL);
    free(c);
    c = conninfo_for_display("postgresql://u:s3cr3t@localhost:5433/d", &hidden);
    CHECK(c != NULL && hidden && strstr(c, "s3cr3t") == NULL && strstr(c, "host='localhost'"));
    free(c);
    c = conninfo_for_display("host=/tmp/x dbname=d", &hidden);
    CHECK(c != NULL && !hidden);
    free(c);
    c = conninfo_env("host=/tmp/x dbname=d");
    CHECK(c != NULL && strcmp(c, "CW_DB=host=/tmp/x dbname=d") == 0);
    free(c);
}

int main(void)
{
    test_conninfo();
    return check_report("test_harness_runner_db");
}
