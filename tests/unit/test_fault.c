/* Unit tests for fault.c: the CW_FAULTS grammar and hit counting. */
#include "fault.h"
#include "check.h"

#include <string.h>

#ifdef FIU_ENABLE
static int site(void)
{
    CW_FAULT("test/site", return -1);
    return 0;
}
#endif

int main(void)
{
    char err[256];
#ifdef FIU_ENABLE
    fiu_init(0);
#endif
    CHECK_EQ_INT(fault_parse_spec("", err, sizeof(err)), 0);
    CHECK_EQ_INT(fault_parse_spec("nonsense", err, sizeof(err)), -1);
    CHECK(strstr(err, "NAME=ACTION") != NULL);
    CHECK_EQ_INT(fault_parse_spec("a/b=explode", err, sizeof(err)), -1);
    CHECK(strstr(err, "explode") != NULL);
    CHECK_EQ_INT(fault_parse_spec("a/b=stall:1", err, sizeof(err)), -1);
    CHECK_EQ_INT(fault_parse_spec("a/b=crash@0", err, sizeof(err)), -1);
    CHECK_EQ_INT(fault_parse_spec("a/b=crash@x", err, sizeof(err)), -1);
    CHECK_EQ_INT(fault_parse_spec("a/b=stall:50;c/d=park@3", err, sizeof(err)), 2);
#ifdef FIU_ENABLE
    /* fail on the 3rd hit only */
    CHECK_EQ_INT(fault_parse_spec("test/site=fail@3", err, sizeof(err)), 1);
    CHECK_EQ_INT(site(), 0);
    CHECK_EQ_INT(site(), 0);
    CHECK_EQ_INT(site(), -1);
    CHECK_EQ_INT(site(), 0);
    /* persistent from the 2nd hit on */
    CHECK_EQ_INT(fault_parse_spec("test/other=fail@2+", err, sizeof(err)), 1);
    int fired = 0;
    for (int i = 0; i < 5; i++)
        fiu_do_on("test/other", fired += (fault_fire("test/other") < 0));
    CHECK_EQ_INT(fired, 4);
#endif
    return check_report("test_fault");
}
