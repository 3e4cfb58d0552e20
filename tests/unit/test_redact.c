/* Unit tests for cw_redact_json(): keys and structure stay, values go,
 * except ids, booleans, null and the enum-like status/type/title values;
 * text that is not JSON goes whole; the result is bounded. */
#include "redact.h"
#include "check.h"

#include <string.h>

static char out[512];

static const char *red(const char *in)
{
    cw_redact_json(in, out, sizeof(out));
    return out;
}

int main(void)
{
    /* An outbox payload: ids stay, amount and currency go. */
    CHECK_EQ_STR(red("{\"EventId\":\"0ed8b250-819b-48ad-a5fb-9e10a8ede167\","
                     "\"PaymentId\":\"5516cc1d-b16d-4020-87d4-c9ddcee1f0c3\","
                     "\"Amount\":\"12.50\",\"Currency\":\"EUR\",\"AggregateVersion\":1}"),
                 "{\"EventId\":\"0ed8b250-819b-48ad-a5fb-9e10a8ede167\","
                 "\"PaymentId\":\"5516cc1d-b16d-4020-87d4-c9ddcee1f0c3\","
                 "\"Amount\":\"[redacted]\",\"Currency\":\"[redacted]\","
                 "\"AggregateVersion\":\"[redacted]\"}");
    /* A response body: the payment id and its status stay. */
    CHECK_EQ_STR(red("{\"id\":\"5516cc1d-b16d-4020-87d4-c9ddcee1f0c3\",\"status\":\"created\"}"),
                 "{\"id\":\"5516cc1d-b16d-4020-87d4-c9ddcee1f0c3\",\"status\":\"created\"}");
    /* A problem: type and title stay, detail (which may quote input) goes. */
    CHECK_EQ_STR(red("{\"type\":\"urn:crashwindow:problem:invalid-amount\",\"title\":\"Invalid "
                     "amount\",\"status\":422,\"detail\":\"amount 12.345 has 3 decimals\"}"),
                 "{\"type\":\"urn:crashwindow:problem:invalid-amount\",\"title\":\"Invalid "
                 "amount\",\"status\":\"[redacted]\",\"detail\":\"[redacted]\"}");
    /* Sensitive fields, nested and in arrays; a long "status" goes too. */
    red("{\"card\":{\"number\":\"4111111111111111\",\"cvc\":\"123\"},\"tags\":[\"vip\",7],"
        "\"ok\":true,\"note\":null,\"status\":\"password=hunter2 and a long long status\"}");
    CHECK(strstr(out, "4111") == NULL && strstr(out, "123") == NULL && strstr(out, "vip") == NULL);
    CHECK(strstr(out, "hunter2") == NULL);
    CHECK(strstr(out, "\"card\":{\"number\":\"[redacted]\",\"cvc\":\"[redacted]\"}") != NULL);
    CHECK(strstr(out, "\"tags\":[\"[redacted]\",\"[redacted]\"]") != NULL);
    CHECK(strstr(out, "\"ok\":true,\"note\":null") != NULL);
    /* Scalars and text that is not JSON. */
    CHECK_EQ_STR(red("\"my secret\""), "\"[redacted]\"");
    CHECK_EQ_STR(red("42"), "\"[redacted]\"");
    CHECK_EQ_STR(red("password=hunter2"), "[redacted: 16 bytes, not JSON]");
    CHECK_EQ_STR(red("{\"pw\":\"x\""), "[redacted: 9 bytes, not JSON]");
    CHECK_EQ_STR(red(NULL), "[redacted: 0 bytes, not JSON]");
    /* Bounded, cut on a character boundary. */
    char small[24];
    size_t n = cw_redact_json("{\"cl\xc3\xa9s\":1,\"more\":2,\"and\":3}", small, sizeof(small));
    CHECK(n == strlen(small) && n <= sizeof(small) - 1 && strcmp(small + n - 3, "...") == 0);
    CHECK_EQ_INT(cw_redact_json("{}", small, 0), 0);
    n = cw_redact_json("{\"a\":\"\xc3\xa9\xc3\xa9\xc3\xa9\"}", small, 6);
    CHECK(n <= 5 && strcmp(small + n - 3, "...") == 0);
    return check_report("test_redact");
}
