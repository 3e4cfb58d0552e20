/* Unit tests for the pgx helpers that need no server: the uuid[] array
 * literal accepts canonical UUIDs only, so nothing else can become an extra
 * element of the array a statement receives. */
#include "pgx.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

int main(void)
{
    const char *ids[] = { "aaaaaaaa-0000-4000-8000-000000000000",
                          "BBBBBBBB-0000-4000-8000-00000000000F" };
    char *s = pgx_uuid_array(ids, 2);
    CHECK(s != NULL && strcmp(s, "{aaaaaaaa-0000-4000-8000-000000000000,"
                                 "BBBBBBBB-0000-4000-8000-00000000000F}") == 0);
    free(s);
    s = pgx_uuid_array(ids, 1);
    CHECK(s != NULL && strcmp(s, "{aaaaaaaa-0000-4000-8000-000000000000}") == 0);
    free(s);
    s = pgx_uuid_array(NULL, 0);
    CHECK(s != NULL && strcmp(s, "{}") == 0);
    free(s);

    /* Anything but a UUID is refused, the whole array with it. */
    const char *bad[][2] = {
        { "aaaaaaaa-0000-4000-8000-000000000000", "x,y" },
        { "aaaaaaaa-0000-4000-8000-000000000000", "aaaaaaaa-0000-4000-8000-00000000000}" },
        { "{aaaaaaaa-0000-4000-8000-000000000000", "aaaaaaaa-0000-4000-8000-000000000000" },
        { "aaaaaaaa-0000-4000-8000-000000000000", "" },
        { "aaaaaaaa-0000-4000-8000-000000000000", NULL },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(pgx_uuid_array(bad[i], 2) == NULL);
    return check_report("test_pgx");
}
