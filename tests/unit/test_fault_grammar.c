/* Unit tests for the CW_FAULTS grammar's one parser, fault_parse_items
 * (src/core/fault.h): what it yields, and its limits -- the ones where the
 * scenario files' own parser used to accept what a process refuses (more
 * than 32 items, an item of 160 characters or more, a point name of 96 or
 * more, a stall's MS written in 16 characters or more).  Nothing here
 * enables a point. */
#include "fault.h"
#include "check.h"

#include <stdio.h>
#include <string.h>

/* A value of n items "p<i>/w=crash" into out. */
static void items_of(int n, char *out, size_t outlen)
{
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t len = strlen(out);
        snprintf(out + len, outlen - len, "%sp%d/w=crash", i ? ";" : "", i);
    }
}

/* "NAME=fail" with a name of n characters into out. */
static void name_of(size_t n, char *out, size_t outlen)
{
    memset(out, 'n', n);
    snprintf(out + n, outlen - n, "=fail");
}

static void test_items(void)
{
    struct fault_item it[FAULT_MAX_ITEMS];
    char err[256];

    CHECK(fault_parse_items("", it, err, sizeof(err)) == 0);
    CHECK(fault_parse_items(";;", it, err, sizeof(err)) == 0);
    CHECK(fault_parse_items("relay/after_publish=crash@2;consumer/apply_fail=fail@1+;"
                            "api/after_commit=park;relay/before_mark=stall:250@3",
                            it, err, sizeof(err)) == 4);
    CHECK(strcmp(it[0].name, "relay/after_publish") == 0);
    CHECK(it[0].action == FAULT_CRASH && it[0].hit == 2 && !it[0].persistent);
    CHECK(strcmp(it[1].name, "consumer/apply_fail") == 0);
    CHECK(it[1].action == FAULT_FAIL && it[1].hit == 1 && it[1].persistent);
    CHECK(it[2].action == FAULT_PARK && it[2].hit == 1 && it[2].stall_ms == 0);
    CHECK(it[3].action == FAULT_STALL && it[3].stall_ms == 250 && it[3].hit == 3);

    CHECK(fault_parse_items("nonsense", it, err, sizeof(err)) == -1);
    CHECK(strstr(err, "NAME=ACTION") != NULL);
    CHECK(strncmp(err, "CW_FAULTS", 9) != 0); /* the caller adds its prefix */
    CHECK(fault_parse_items("=crash", it, err, sizeof(err)) == -1);
    CHECK(fault_parse_items("a/b=explode", it, err, sizeof(err)) == -1);
    CHECK(strstr(err, "bad action 'explode'") != NULL);
    CHECK(fault_parse_items("a/b=crash+@2", it, err, sizeof(err)) == -1);
}

static void test_limits(void)
{
    struct fault_item it[FAULT_MAX_ITEMS];
    char err[256], spec[8192];

    /* items: 32 at most */
    items_of(FAULT_MAX_ITEMS, spec, sizeof(spec));
    CHECK(fault_parse_items(spec, it, err, sizeof(err)) == FAULT_MAX_ITEMS);
    items_of(FAULT_MAX_ITEMS + 1, spec, sizeof(spec));
    CHECK(fault_parse_items(spec, it, err, sizeof(err)) == -1);
    CHECK(strstr(err, "more than 32 items") != NULL);

    /* a point name: 95 characters at most */
    name_of(FAULT_NAME_MAX - 1, spec, sizeof(spec));
    CHECK(fault_parse_items(spec, it, err, sizeof(err)) == 1);
    CHECK(strlen(it[0].name) == FAULT_NAME_MAX - 1);
    name_of(FAULT_NAME_MAX, spec, sizeof(spec));
    CHECK(fault_parse_items(spec, it, err, sizeof(err)) == -1);
    CHECK(strstr(err, "too long") != NULL);

    /* an item: 159 characters at most ("a/b=stall:5" padded with zeros is
     * refused by the stall's own limit first, so pad the hit instead) */
    char item[FAULT_ITEM_MAX + 8];
    snprintf(item, sizeof(item), "a/b=crash@");
    size_t len = strlen(item);
    memset(item + len, '0', FAULT_ITEM_MAX - 1 - len - 1);
    snprintf(item + FAULT_ITEM_MAX - 2, sizeof(item) - (FAULT_ITEM_MAX - 2), "1");
    CHECK(strlen(item) == FAULT_ITEM_MAX - 1);
    CHECK(fault_parse_items(item, it, err, sizeof(err)) == 1);
    CHECK(it[0].hit == 1);
    snprintf(item, sizeof(item), "a/b=crash@");
    memset(item + len, '0', FAULT_ITEM_MAX - len - 1);
    snprintf(item + FAULT_ITEM_MAX - 1, sizeof(item) - (FAULT_ITEM_MAX - 1), "1");
    CHECK(strlen(item) == FAULT_ITEM_MAX);
    CHECK(fault_parse_items(item, it, err, sizeof(err)) == -1);
    CHECK(strstr(err, "item too long") != NULL);

    /* hit: 1 to 1000000 */
    CHECK(fault_parse_items("a/b=crash@1000000", it, err, sizeof(err)) == 1);
    CHECK(it[0].hit == FAULT_HIT_MAX);
    CHECK(fault_parse_items("a/b=crash@1000001", it, err, sizeof(err)) == -1);
    CHECK(strstr(err, "bad hit number for a/b") != NULL);
    CHECK(fault_parse_items("a/b=crash@0", it, err, sizeof(err)) == -1);
    CHECK(fault_parse_items("a/b=crash@", it, err, sizeof(err)) == -1);
    CHECK(fault_parse_items("a/b=crash@x", it, err, sizeof(err)) == -1);
    CHECK(fault_parse_items("a/b=crash@99999999999999999999", it, err, sizeof(err)) == -1);

    /* stall: 3 to 3600000 ms, written in fewer than 16 characters */
    CHECK(fault_parse_items("a/b=stall:3", it, err, sizeof(err)) == 1);
    CHECK(fault_parse_items("a/b=stall:2", it, err, sizeof(err)) == -1);
    CHECK(fault_parse_items("a/b=stall:3600000", it, err, sizeof(err)) == 1);
    CHECK(it[0].stall_ms == FAULT_STALL_MAX_MS);
    CHECK(fault_parse_items("a/b=stall:3600001", it, err, sizeof(err)) == -1);
    CHECK(fault_parse_items("a/b=stall:", it, err, sizeof(err)) == -1);
    CHECK(fault_parse_items("a/b=stall:000000000000005", it, err, sizeof(err)) == 1);
    CHECK(it[0].stall_ms == 5);
    CHECK(fault_parse_items("a/b=stall:0000000000000005", it, err, sizeof(err)) == -1);
}

static void test_action(void)
{
    enum fault_action a;
    long ms = -1;
    CHECK(fault_parse_action("crash", &a, &ms) == 0 && a == FAULT_CRASH && ms == 0);
    CHECK(fault_parse_action("fail", &a, &ms) == 0 && a == FAULT_FAIL);
    CHECK(fault_parse_action("park", &a, &ms) == 0 && a == FAULT_PARK);
    CHECK(fault_parse_action("stall:40", &a, &ms) == 0 && a == FAULT_STALL && ms == 40);
    CHECK(fault_parse_action("stall:1", &a, &ms) == -1);
    CHECK(fault_parse_action("crash@2", &a, &ms) == -1);
    CHECK(fault_parse_action("Crash", &a, &ms) == -1);
    CHECK(fault_parse_action("", &a, &ms) == -1);
}

int main(void)
{
    test_items();
    test_limits();
    test_action();
    return check_report("test_fault_grammar");
}
