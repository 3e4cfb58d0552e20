/* Unit tests for the payments API's input validation, canonical request
 * hashing, traceparent choice and reply bodies (api_validate.c,
 * api_reply.c). */
#include "api_reply.h"
#include "api_validate.h"
#include "ids.h"
#include "check.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* Parses a create body given as a C string; returns the status of the
 * problem (0 when accepted) and leaves the normalized body in *out. */
static int create_status(const char *body, struct api_create_body *out)
{
    struct api_reply r;
    api_reply_init(&r);
    int rc = api_parse_create_body(body, strlen(body), out, &r);
    int status = rc == 0 ? 0 : r.status;
    if (rc < 0) {
        /* Every refusal is a complete RFC 9457 problem document. */
        cJSON *p = cJSON_Parse(r.body);
        CHECK(p != NULL);
        CHECK(cJSON_IsString(cJSON_GetObjectItem(p, "type")));
        CHECK(cJSON_IsString(cJSON_GetObjectItem(p, "title")));
        CHECK(cJSON_IsString(cJSON_GetObjectItem(p, "detail")));
        CHECK(cJSON_GetObjectItem(p, "status") != NULL &&
              cJSON_GetObjectItem(p, "status")->valueint == r.status);
        CHECK_EQ_STR(r.content_type, "application/problem+json");
        cJSON_Delete(p);
    } else {
        CHECK(r.body == NULL);
    }
    api_reply_clear(&r);
    return status;
}

static const char *norm(const char *amount, int *status)
{
    static char out[API_AMOUNT_MAX];
    struct api_reply r;
    api_reply_init(&r);
    out[0] = '\0';
    *status = api_normalize_amount(amount, out, &r) == 0 ? 0 : r.status;
    api_reply_clear(&r);
    return out;
}

static void test_amounts(void)
{
    int st;
    CHECK(strcmp(norm("12.50", &st), "12.50") == 0 && st == 0);
    CHECK(strcmp(norm("12.5", &st), "12.50") == 0 && st == 0);
    CHECK(strcmp(norm("12", &st), "12.00") == 0 && st == 0);
    CHECK(strcmp(norm("012.50", &st), "12.50") == 0 && st == 0);
    CHECK(strcmp(norm("0.01", &st), "0.01") == 0 && st == 0);
    CHECK(strcmp(norm("000.1", &st), "0.10") == 0 && st == 0);
    CHECK(strcmp(norm("1000000000000", &st), "1000000000000.00") == 0 && st == 0);
    CHECK(strcmp(norm("999999999999.99", &st), "999999999999.99") == 0 && st == 0);

    norm("1000000000000.01", &st);
    CHECK_EQ_INT(st, 422);
    norm("10000000000000", &st);
    CHECK_EQ_INT(st, 422);
    norm("00000000000001000000000000.00", &st);  /* leading zeros do not count */
    CHECK_EQ_INT(st, 0);
    norm("99999999999999999999999999999999999999999", &st);
    CHECK_EQ_INT(st, 422);
    norm("0", &st);
    CHECK_EQ_INT(st, 422);
    norm("0.00", &st);
    CHECK_EQ_INT(st, 422);
    norm("-1", &st);
    CHECK_EQ_INT(st, 422);
    norm("-0.5", &st);
    CHECK_EQ_INT(st, 422);
    norm("1.234", &st);
    CHECK_EQ_INT(st, 422);
    norm("1.000", &st);  /* three decimals even when they are zeros */
    CHECK_EQ_INT(st, 422);
    const char *bad[] = { "", "abc", "1.", ".5", "+1", "1e3", " 1", "1 ", "1,00",
                          "1.2.3", "0x10", "NaN", "Infinity", "--1", "1-", NULL };
    for (int i = 0; bad[i] != NULL; i++) {
        norm(bad[i], &st);
        CHECK_EQ_INT(st, 422);
    }
}

static void test_create_bodies(void)
{
    struct api_create_body b;
    CHECK_EQ_INT(create_status("{\"amount\":\"12.50\",\"currency\":\"EUR\"}", &b), 0);
    CHECK(strcmp(b.amount, "12.50") == 0 && strcmp(b.currency, "EUR") == 0);
    CHECK_EQ_INT(create_status("  {\"currency\":\"USD\", \"amount\":\"7\"}\n", &b), 0);
    CHECK(strcmp(b.amount, "7.00") == 0 && strcmp(b.currency, "USD") == 0);

    /* 400: not readable as a payment request */
    CHECK_EQ_INT(create_status("", &b), 400);
    CHECK_EQ_INT(create_status("{", &b), 400);
    CHECK_EQ_INT(create_status("not json", &b), 400);
    CHECK_EQ_INT(create_status("{\"amount\":\"1\",\"currency\":\"EUR\"} trailing", &b), 400);
    CHECK_EQ_INT(create_status("{\"amount\":\"1\",\"currency\":\"EUR\"}{}", &b), 400);
    CHECK_EQ_INT(create_status("[1,2]", &b), 400);
    CHECK_EQ_INT(create_status("\"12.50\"", &b), 400);
    CHECK_EQ_INT(create_status("{\"currency\":\"EUR\"}", &b), 400);
    CHECK_EQ_INT(create_status("{\"amount\":\"1.00\"}", &b), 400);
    CHECK_EQ_INT(create_status("{\"amount\":12.50,\"currency\":\"EUR\"}", &b), 400);
    CHECK_EQ_INT(create_status("{\"amount\":null,\"currency\":\"EUR\"}", &b), 400);
    CHECK_EQ_INT(create_status("{\"amount\":\"1\",\"currency\":978}", &b), 400);
    CHECK_EQ_INT(create_status("{\"amount\":\"1\",\"currency\":\"EUR\",\"note\":\"x\"}", &b), 400);
    CHECK_EQ_INT(create_status("{\"amount\":\"1\",\"amount\":\"2\",\"currency\":\"EUR\"}", &b),
                 400);
    CHECK_EQ_INT(create_status("{\"Amount\":\"1\",\"currency\":\"EUR\"}", &b), 400);

    /* 422: readable, but the values are not acceptable */
    CHECK_EQ_INT(create_status("{\"amount\":\"-5\",\"currency\":\"EUR\"}", &b), 422);
    CHECK_EQ_INT(create_status("{\"amount\":\"0\",\"currency\":\"EUR\"}", &b), 422);
    CHECK_EQ_INT(create_status("{\"amount\":\"1.001\",\"currency\":\"EUR\"}", &b), 422);
    CHECK_EQ_INT(create_status("{\"amount\":\"2000000000000\",\"currency\":\"EUR\"}", &b), 422);
    CHECK_EQ_INT(create_status("{\"amount\":\"ten\",\"currency\":\"EUR\"}", &b), 422);
    CHECK_EQ_INT(create_status("{\"amount\":\"1\",\"currency\":\"eur\"}", &b), 422);
    CHECK_EQ_INT(create_status("{\"amount\":\"1\",\"currency\":\"EURO\"}", &b), 422);
    CHECK_EQ_INT(create_status("{\"amount\":\"1\",\"currency\":\"E1R\"}", &b), 422);
    CHECK_EQ_INT(create_status("{\"amount\":\"1\",\"currency\":\"\"}", &b), 422);
}

static void test_headers(void)
{
    struct api_reply r;
    api_reply_init(&r);
    char client[API_CLIENT_MAX + 1];

    CHECK_EQ_INT(api_check_idempotency_key("k-1", &r), 0);
    CHECK_EQ_INT(api_check_idempotency_key("a key with spaces ~!", &r), 0);
    CHECK(api_check_idempotency_key(NULL, &r) == -1 && r.status == 400);
    CHECK(api_check_idempotency_key("", &r) == -1 && r.status == 400);
    CHECK(api_check_idempotency_key("tab\there", &r) == -1 && r.status == 400);
    CHECK(api_check_idempotency_key("caf\xc3\xa9", &r) == -1 && r.status == 400);
    char key[API_KEY_MAX + 2];
    memset(key, 'k', API_KEY_MAX);
    key[API_KEY_MAX] = '\0';
    CHECK_EQ_INT(api_check_idempotency_key(key, &r), 0);
    key[API_KEY_MAX] = 'k';
    key[API_KEY_MAX + 1] = '\0';
    CHECK(api_check_idempotency_key(key, &r) == -1 && r.status == 400);

    /* No shared namespace for clients that do not say who they are. */
    CHECK(api_check_client_id(NULL, client, &r) == -1 && r.status == 400 &&
          strstr(r.body, "missing-client-id") != NULL);
    CHECK(api_check_client_id("shop-1.eu_west", client, &r) == 0 &&
          strcmp(client, "shop-1.eu_west") == 0);
    CHECK(api_check_client_id("", client, &r) == -1 && r.status == 400);
    CHECK(api_check_client_id("a b", client, &r) == -1 && r.status == 400);
    CHECK(api_check_client_id("a/b", client, &r) == -1 && r.status == 400);
    char longid[API_CLIENT_MAX + 2];
    memset(longid, 'c', API_CLIENT_MAX + 1);
    longid[API_CLIENT_MAX + 1] = '\0';
    CHECK(api_check_client_id(longid, client, &r) == -1 && r.status == 400);
    longid[API_CLIENT_MAX] = '\0';
    CHECK_EQ_INT(api_check_client_id(longid, client, &r), 0);

    CHECK_EQ_INT(api_check_content_type("application/json", &r), 0);
    CHECK_EQ_INT(api_check_content_type("Application/JSON; charset=UTF-8", &r), 0);
    CHECK_EQ_INT(api_check_content_type("application/json;charset=\"utf-8\"", &r), 0);
    CHECK(api_check_content_type(NULL, &r) == -1 && r.status == 415);
    CHECK(api_check_content_type("text/plain", &r) == -1 && r.status == 415);
    CHECK(api_check_content_type("application/jsonx", &r) == -1 && r.status == 415);
    CHECK_EQ_INT(api_check_content_type("application/json; charset=latin1", &r), -1);
    CHECK_EQ_INT(api_check_content_type("application/x-www-form-urlencoded", &r), -1);
    api_reply_clear(&r);
}

static void hash_of_create(const char *body, char *hash)
{
    struct api_create_body b;
    struct api_reply r;
    api_reply_init(&r);
    char canon_body[128], canon[512];
    CHECK_EQ_INT(api_parse_create_body(body, strlen(body), &b, &r), 0);
    CHECK_EQ_INT(api_canonical_create_body(&b, canon_body, sizeof(canon_body)), 0);
    CHECK_EQ_INT(api_canonical_request("POST", "/payments", canon_body, canon, sizeof(canon)), 0);
    CHECK_EQ_INT(api_sha256_hex(canon, strlen(canon), hash), 0);
    api_reply_clear(&r);
}

static void test_canonical_hash(void)
{
    char h[API_HASH_HEX + 1];
    /* FIPS 180-2 test vector. */
    CHECK_EQ_INT(api_sha256_hex("abc", 3, h), 0);
    CHECK_EQ_STR(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");

    struct api_create_body b = { "12.50", "EUR" };
    char canon_body[128], canon[512];
    CHECK_EQ_INT(api_canonical_create_body(&b, canon_body, sizeof(canon_body)), 0);
    CHECK_EQ_STR(canon_body, "{\"amount\":\"12.50\",\"currency\":\"EUR\"}");
    CHECK_EQ_INT(api_canonical_request("POST", "/payments", canon_body, canon, sizeof(canon)), 0);
    CHECK_EQ_STR(canon, "POST /payments\n{\"amount\":\"12.50\",\"currency\":\"EUR\"}");
    CHECK_EQ_INT(api_canonical_request("POST", "/payments", canon_body, canon, 10), -1);

    /* The same logical request hashes the same... */
    char a[API_HASH_HEX + 1], c[API_HASH_HEX + 1], d[API_HASH_HEX + 1];
    hash_of_create("{\"amount\":\"12.50\",\"currency\":\"EUR\"}", a);
    hash_of_create("{ \"currency\" : \"EUR\", \"amount\" : \"012.5\" }", c);
    CHECK_EQ_STR(a, c);
    CHECK_EQ_INT(strlen(a), API_HASH_HEX);
    /* ...and any change of amount or currency changes it. */
    hash_of_create("{\"amount\":\"12.51\",\"currency\":\"EUR\"}", d);
    CHECK(strcmp(a, d) != 0);
    hash_of_create("{\"amount\":\"12.50\",\"currency\":\"USD\"}", d);
    CHECK(strcmp(a, d) != 0);
    hash_of_create("{\"amount\":\"125.0\",\"currency\":\"EUR\"}", d);
    CHECK(strcmp(a, d) != 0);

    /* Method and path are part of the request: one key cannot be replayed
     * across commands. */
    char x[API_HASH_HEX + 1], y[API_HASH_HEX + 1];
    const char *id = "5516cc1d-b16d-4020-87d4-c9ddcee1f0c3";
    char p1[96], p2[96];
    snprintf(p1, sizeof(p1), "/payments/%s/authorize", id);
    snprintf(p2, sizeof(p2), "/payments/%s/capture", id);
    CHECK_EQ_INT(api_canonical_request("POST", p1, "{}", canon, sizeof(canon)), 0);
    CHECK_EQ_INT(api_sha256_hex(canon, strlen(canon), x), 0);
    CHECK_EQ_INT(api_canonical_request("POST", p2, "{}", canon, sizeof(canon)), 0);
    CHECK_EQ_INT(api_sha256_hex(canon, strlen(canon), y), 0);
    CHECK(strcmp(x, y) != 0);
}

static void test_empty_body(void)
{
    struct api_reply r;
    api_reply_init(&r);
    CHECK_EQ_INT(api_parse_empty_body("", 0, &r), 0);
    CHECK_EQ_INT(api_parse_empty_body(" \r\n", 3, &r), 0);
    CHECK_EQ_INT(api_parse_empty_body("{}", 2, &r), 0);
    CHECK_EQ_INT(api_parse_empty_body(" { } ", 5, &r), 0);
    CHECK(api_parse_empty_body("{\"a\":1}", 7, &r) == -1 && r.status == 400);
    CHECK(api_parse_empty_body("[]", 2, &r) == -1 && r.status == 400);
    CHECK(api_parse_empty_body("{", 1, &r) == -1 && r.status == 400);
    api_reply_clear(&r);
}

static void test_paths(void)
{
    char id[CW_UUID_LEN + 1];
    CHECK(api_match_payment_path("/payments/5516cc1d-b16d-4020-87d4-c9ddcee1f0c3", "", id));
    CHECK_EQ_STR(id, "5516cc1d-b16d-4020-87d4-c9ddcee1f0c3");
    CHECK(api_match_payment_path("/payments/5516CC1D-B16D-4020-87D4-C9DDCEE1F0C3/authorize",
                                 "/authorize", id));
    CHECK_EQ_STR(id, "5516cc1d-b16d-4020-87d4-c9ddcee1f0c3");
    CHECK(!api_match_payment_path("/payments/5516cc1d-b16d-4020-87d4-c9ddcee1f0c3/authorize",
                                  "", id));
    CHECK(!api_match_payment_path("/payments/5516cc1d-b16d-4020-87d4-c9ddcee1f0c3/", "", id));
    CHECK(!api_match_payment_path("/payments/not-a-uuid", "", id));
    CHECK(!api_match_payment_path("/payments/", "", id));
    CHECK(!api_match_payment_path("/payment/5516cc1d-b16d-4020-87d4-c9ddcee1f0c3", "", id));
    CHECK(!api_match_payment_path("/payments/5516cc1d-b16d-4020-87d4-c9ddcee1f0c3/capturex",
                                  "/capture", id));
}

static void test_trace(void)
{
    const char *good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    char out[CW_TRACEPARENT_LEN + 1], out2[CW_TRACEPARENT_LEN + 1];
    /* A valid incoming traceparent is kept as is. */
    api_trace_for_request(good, out);
    CHECK_EQ_STR(out, good);
    /* Absent or invalid: a new, valid, different trace each time. */
    api_trace_for_request(NULL, out);
    api_trace_for_request(NULL, out2);
    CHECK(cw_traceparent_valid(out) && cw_traceparent_valid(out2));
    CHECK(strcmp(out, out2) != 0);
    const char *bad[] = {
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "garbage", "", NULL,
    };
    for (int i = 0; bad[i] != NULL; i++) {
        api_trace_for_request(bad[i], out);
        CHECK(cw_traceparent_valid(out));
        CHECK(strcmp(out, bad[i]) != 0);
    }
}

static void test_replies(void)
{
    char *body = api_payment_body("5516cc1d-b16d-4020-87d4-c9ddcee1f0c3", "created");
    CHECK_EQ_STR(body, "{\"id\":\"5516cc1d-b16d-4020-87d4-c9ddcee1f0c3\",\"status\":\"created\"}");
    free(body);

    struct api_reply r;
    api_reply_init(&r);
    api_reply_problem(&r, 409, "key-in-flight", "Request in progress", "try %s", "later");
    r.retry_after = 1;
    cJSON *p = cJSON_Parse(r.body);
    CHECK(p != NULL);
    CHECK_EQ_STR(cJSON_GetObjectItem(p, "type")->valuestring,
                 API_PROBLEM_TYPE_PREFIX "key-in-flight");
    CHECK_EQ_STR(cJSON_GetObjectItem(p, "title")->valuestring, "Request in progress");
    CHECK_EQ_INT(cJSON_GetObjectItem(p, "status")->valueint, 409);
    CHECK_EQ_STR(cJSON_GetObjectItem(p, "detail")->valuestring, "try later");
    cJSON_Delete(p);
    /* Replacing the content resets the headers that belonged to the old one. */
    api_reply_text(&r, 201, "application/json", "{\"id\":\"x\"}");
    CHECK(r.status == 201 && r.retry_after == 0 && strcmp(r.body, "{\"id\":\"x\"}") == 0);
    api_reply_clear(&r);
    CHECK(r.body == NULL && r.status == 0);
}

int main(void)
{
    test_amounts();
    test_create_bodies();
    test_headers();
    test_canonical_hash();
    test_empty_body();
    test_paths();
    test_trace();
    test_replies();
    return check_report("test_api_validate");
}
