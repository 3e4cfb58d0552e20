/* Unit tests for ids.c: UUID and traceparent validation and generation. */
#include "ids.h"
#include "check.h"

#include <string.h>

int main(void)
{
    char u[CW_UUID_LEN + 1], v[CW_UUID_LEN + 1];
    cw_uuid_new(u);
    cw_uuid_new(v);
    CHECK(cw_uuid_valid(u));
    CHECK(strcmp(u, v) != 0);
    CHECK(!cw_uuid_valid("not-a-uuid"));
    CHECK(!cw_uuid_valid("0123456789abcdef0123456789abcdef0123"));
    CHECK(cw_uuid_valid("0123abcd-0123-4567-89ab-0123456789AB"));

    const char *good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    CHECK(cw_traceparent_valid(good));
    CHECK(!cw_traceparent_valid("00-00000000000000000000000000000000-00f067aa0ba902b7-01"));
    CHECK(!cw_traceparent_valid("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"));
    CHECK(!cw_traceparent_valid("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"));
    CHECK(!cw_traceparent_valid("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
    CHECK(!cw_traceparent_valid("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-"));
    CHECK(!cw_traceparent_valid(""));
    CHECK(!cw_traceparent_valid(NULL));

    char t[CW_TRACEPARENT_LEN + 1], c[CW_TRACEPARENT_LEN + 1], parent_span[17];
    cw_traceparent_new(t);
    CHECK(cw_traceparent_valid(t));
    CHECK_EQ_INT(cw_traceparent_child(good, c, parent_span), 0);
    CHECK(cw_traceparent_valid(c));
    CHECK(strncmp(c, good, 35) == 0);                 /* same trace id */
    CHECK(strncmp(c + 36, good + 36, 16) != 0);        /* new span id */
    CHECK_EQ_STR(parent_span, "00f067aa0ba902b7");
    CHECK_EQ_INT(cw_traceparent_child("garbage", c, parent_span), -1);
    CHECK(cw_traceparent_valid(c));
    return check_report("test_ids");
}
