/* test_harness_httpc.c -- unit tests of the runner's HTTP client: the
 * response parser (Content-Length, chunked, short and wrapping chunk sizes,
 * Retry-After)
 * and a request to a port where nothing listens. */
#include "httpc.h"
#include "check.h"

#include <string.h>

static void test_http_parse(void)
{
    struct http_resp r;
    memset(&r, 0, sizeof(r));
    const char *a = "HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello";
    CHECK(http_parse_response(a, strlen(a), &r) == 0 && r.status == 201);
    CHECK(r.body_len == 5 && strcmp(r.body, "hello") == 0);
    CHECK_EQ_INT(r.retry_after_s, -1);
    http_resp_free(&r);
    const char *ra = "HTTP/1.1 503 Service Unavailable\r\nretry-after: 2\r\n"
                     "Content-Length: 0\r\n\r\n";
    CHECK(http_parse_response(ra, strlen(ra), &r) == 0 && r.status == 503);
    CHECK_EQ_INT(r.retry_after_s, 2);
    http_resp_free(&r);
    const char *b = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    CHECK(http_parse_response(b, strlen(b), &r) == 0 && strcmp(r.body, "abcde") == 0);
    http_resp_free(&r);
    const char *c = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort";
    CHECK(http_parse_response(c, strlen(c), &r) < 0 && strstr(r.error, "5 of 10") != NULL);
    http_resp_free(&r);
    const char *d = "garbage";
    CHECK(http_parse_response(d, strlen(d), &r) < 0);
    http_resp_free(&r);
    /* A chunk size near SIZE_MAX: sz + 2 would wrap to 1 and pass a naive
     * bounds check, then memcpy far past the buffer. */
    const char *e = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "ffffffffffffffff\r\nabc\r\n0\r\n\r\n";
    CHECK(http_parse_response(e, strlen(e), &r) < 0 && strstr(r.error, "chunked") != NULL);
    http_resp_free(&r);
    const char *f = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "fffffffffffffffe\r\nabc\r\n0\r\n\r\n";
    CHECK(http_parse_response(f, strlen(f), &r) < 0);
    http_resp_free(&r);
    /* A chunk exactly as long as what is left, without its CRLF. */
    const char *g = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc";
    CHECK(http_parse_response(g, strlen(g), &r) < 0);
    http_resp_free(&r);
    /* Nothing listens on port 1: status 0 with a reason, not a crash. */
    CHECK(http_request(1, "GET", "/", NULL, NULL, 500, &r) < 0 && r.status == 0 && r.error[0]);
    http_resp_free(&r);
}

int main(void)
{
    test_http_parse();
    return check_report("test_harness_httpc");
}
