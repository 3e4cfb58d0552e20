/* test_fakebroker.c -- the fake broker's frame layer: line splitting, request
 * validation, fault switches, the JSON writer and the payload digest. */
#include "fakebroker.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

static int parse(const char *text, struct fb_frame *f)
{
    char err[256];
    return fb_parse_frame(text, strlen(text), f, err, sizeof(err));
}

static int parse_err(const char *text, char *err, size_t errlen)
{
    struct fb_frame f;
    int rc = fb_parse_frame(text, strlen(text), &f, err, errlen);
    fb_frame_free(&f);
    return rc;
}

static void test_linebuf(void)
{
    struct fb_linebuf lb;
    const char *line;
    size_t len;
    fb_linebuf_init(&lb);
    CHECK_EQ_INT(fb_linebuf_next(&lb, &line, &len), 0);
    CHECK_EQ_INT(fb_linebuf_append(&lb, "{\"op\":\"st", 9), 0);
    CHECK_EQ_INT(fb_linebuf_next(&lb, &line, &len), 0);
    CHECK_EQ_INT(fb_linebuf_pending(&lb), 9);
    CHECK_EQ_INT(fb_linebuf_append(&lb, "ats\"}\nab\n\ncd", 12), 0);
    CHECK_EQ_INT(fb_linebuf_next(&lb, &line, &len), 1);
    CHECK(len == 14 && memcmp(line, "{\"op\":\"stats\"}", 14) == 0);
    CHECK_EQ_INT(fb_linebuf_next(&lb, &line, &len), 1);
    CHECK(len == 2 && memcmp(line, "ab", 2) == 0);
    CHECK_EQ_INT(fb_linebuf_next(&lb, &line, &len), 1);
    CHECK_EQ_INT(len, 0);
    CHECK_EQ_INT(fb_linebuf_next(&lb, &line, &len), 0);
    CHECK_EQ_INT(fb_linebuf_pending(&lb), 2);
    CHECK_EQ_INT(fb_linebuf_append(&lb, "\n", 1), 0);
    CHECK_EQ_INT(fb_linebuf_next(&lb, &line, &len), 1);
    CHECK(len == 2 && memcmp(line, "cd", 2) == 0);
    fb_linebuf_free(&lb);

    /* A line may be exactly FB_MAX_FRAME bytes; one more is refused, with
     * or without its newline having arrived. */
    char *big = malloc(FB_MAX_FRAME + 2);
    memset(big, 'x', FB_MAX_FRAME + 1);
    fb_linebuf_init(&lb);
    CHECK_EQ_INT(fb_linebuf_append(&lb, big, FB_MAX_FRAME), 0);
    CHECK_EQ_INT(fb_linebuf_next(&lb, &line, &len), 0);
    CHECK_EQ_INT(fb_linebuf_append(&lb, "\n", 1), 0);
    CHECK(fb_linebuf_next(&lb, &line, &len) == 1 && len == FB_MAX_FRAME);
    fb_linebuf_free(&lb);

    fb_linebuf_init(&lb);
    CHECK_EQ_INT(fb_linebuf_append(&lb, big, FB_MAX_FRAME + 1), 0);
    CHECK_EQ_INT(fb_linebuf_next(&lb, &line, &len), -1);
    fb_linebuf_free(&lb);

    big[FB_MAX_FRAME + 1] = '\n';
    fb_linebuf_init(&lb);
    CHECK_EQ_INT(fb_linebuf_append(&lb, big, FB_MAX_FRAME + 2), 0);
    CHECK_EQ_INT(fb_linebuf_next(&lb, &line, &len), -1);
    fb_linebuf_free(&lb);
    free(big);
}

static void test_parse_ok(void)
{
    struct fb_frame f;
    CHECK_EQ_INT(parse("{\"op\":\"hello\",\"client\":\"relay-1\"}", &f), 0);
    CHECK(f.op == FB_OP_HELLO && strcmp(f.client, "relay-1") == 0);
    fb_frame_free(&f);

    CHECK_EQ_INT(parse("{\"op\":\"publish\",\"seq\":7,\"topic\":\"payments\",\"message_id\":\"m1\","
                       "\"type\":\"PaymentCreated\",\"partition_key\":\"agg\","
                       "\"headers\":{\"traceparent\":\"00-x-y-01\",\"aggregate_version\":3},"
                       "\"payload\":\"{\\\"a\\\":1}\",\"extra\":true}", &f), 0);
    CHECK(f.op == FB_OP_PUBLISH && f.has_seq && f.seq == 7);
    CHECK(strcmp(f.topic, "payments") == 0 && strcmp(f.message_id, "m1") == 0);
    CHECK(strcmp(f.partition_key, "agg") == 0 && f.aggregate_version == 3);
    CHECK(f.payload_len == 7 && strcmp(f.payload, "{\"a\":1}") == 0);
    CHECK(f.headers != NULL);
    fb_frame_free(&f);

    /* partition_key, headers and payload are optional; null counts as absent */
    CHECK_EQ_INT(parse("{\"op\":\"publish\",\"topic\":\"t\",\"message_id\":\"m\",\"type\":\"T\","
                       "\"partition_key\":null,\"payload\":null}", &f), 0);
    CHECK(!f.has_seq && f.partition_key == NULL && f.payload == NULL && f.headers == NULL);
    fb_frame_free(&f);

    CHECK_EQ_INT(parse("{\"op\":\"subscribe\",\"topic\":\"payments\",\"group\":\"g\"}", &f), 0);
    CHECK(f.prefetch == 1 && f.ordered == 1);
    fb_frame_free(&f);
    CHECK_EQ_INT(parse("{\"op\":\"subscribe\",\"topic\":\"p\",\"group\":\"g\",\"prefetch\":50,"
                       "\"ordered\":false}", &f), 0);
    CHECK(f.prefetch == 50 && f.ordered == 0);
    fb_frame_free(&f);

    CHECK_EQ_INT(parse("{\"op\":\"ack\",\"tag\":42}", &f), 0);
    CHECK(f.op == FB_OP_ACK && f.tag == 42);
    fb_frame_free(&f);
    CHECK_EQ_INT(parse("{\"op\":\"nack\",\"tag\":9,\"requeue\":false,\"delay_ms\":200}", &f), 0);
    CHECK(f.op == FB_OP_NACK && f.tag == 9 && f.requeue == 0 && f.delay_ms == 200);
    fb_frame_free(&f);
    CHECK_EQ_INT(parse("{\"op\":\"nack\",\"tag\":9}", &f), 0);
    CHECK(f.requeue == 1 && f.delay_ms == 0);
    fb_frame_free(&f);

    CHECK_EQ_INT(parse(" {\"op\":\"stats\"} \r", &f), 0);
    CHECK_EQ_INT(f.op, FB_OP_STATS);
    fb_frame_free(&f);
    CHECK(parse("{\"op\":\"dump_log\"}", &f) == 0 && f.op == FB_OP_DUMP_LOG);
    fb_frame_free(&f);
}

static void test_parse_bad(void)
{
    char err[256];
    struct fb_frame f;
    /* not JSON / not an object: close the connection */
    CHECK_EQ_INT(parse_err("hello", err, sizeof(err)), -1);
    CHECK_EQ_INT(parse_err("{\"op\":\"stats\"", err, sizeof(err)), -1);
    CHECK_EQ_INT(parse_err("[1,2]", err, sizeof(err)), -1);
    CHECK_EQ_INT(parse_err("42", err, sizeof(err)), -1);
    CHECK_EQ_INT(parse_err("{\"op\":\"stats\"} x", err, sizeof(err)), -1);
    CHECK_EQ_INT(parse_err("{\"op\":\"stats\"}{\"op\":\"stats\"}", err, sizeof(err)), -1);
    CHECK_EQ_INT(parse_err("", err, sizeof(err)), -1);

    /* well-formed but wrong: error frame, connection stays */
    CHECK_EQ_INT(parse_err("{}", err, sizeof(err)), -2);
    CHECK(strstr(err, "no op") != NULL);
    CHECK_EQ_INT(parse_err("{\"op\":7}", err, sizeof(err)), -2);
    CHECK_EQ_INT(parse_err("{\"op\":\"frobnicate\"}", err, sizeof(err)), -2);
    CHECK(strstr(err, "unknown op") != NULL);
    CHECK_EQ_INT(parse_err("{\"op\":\"ack\"}", err, sizeof(err)), -2);
    CHECK_EQ_INT(parse_err("{\"op\":\"ack\",\"tag\":0}", err, sizeof(err)), -2);
    CHECK_EQ_INT(parse_err("{\"op\":\"ack\",\"tag\":1.5}", err, sizeof(err)), -2);
    CHECK_EQ_INT(parse_err("{\"op\":\"ack\",\"tag\":\"1\"}", err, sizeof(err)), -2);
    CHECK_EQ_INT(parse_err("{\"op\":\"ack\",\"tag\":1e300}", err, sizeof(err)), -2);
    CHECK_EQ_INT(parse_err("{\"op\":\"nack\",\"tag\":1,\"delay_ms\":-1}", err, sizeof(err)), -2);
    CHECK_EQ_INT(parse_err("{\"op\":\"nack\",\"tag\":1,\"requeue\":1}", err, sizeof(err)), -2);
    CHECK_EQ_INT(parse_err("{\"op\":\"subscribe\",\"topic\":\"p\"}", err, sizeof(err)), -2);
    CHECK(strstr(err, "group") != NULL);
    CHECK(parse_err("{\"op\":\"subscribe\",\"topic\":\"p\",\"group\":\"g\",\"prefetch\":0}", err,
                    sizeof(err)) == -2);
    CHECK_EQ_INT(parse_err("{\"op\":\"subscribe\",\"topic\":\"\",\"group\":\"g\"}", err,
                           sizeof(err)), -2);
    CHECK_EQ_INT(parse_err("{\"op\":\"hello\",\"client\":5}", err, sizeof(err)), -2);

    /* a bad publish keeps its op and seq so that it can be refused in order */
    const char *bp = "{\"op\":\"publish\",\"seq\":3,\"topic\":\"t\",\"type\":\"T\"}";
    CHECK_EQ_INT(fb_parse_frame(bp, strlen(bp), &f, err, sizeof(err)), -2);
    CHECK(f.op == FB_OP_PUBLISH && f.has_seq && f.seq == 3);
    CHECK(strstr(err, "message_id") != NULL);
    fb_frame_free(&f);
    CHECK(parse_err("{\"op\":\"publish\",\"topic\":\"t\",\"message_id\":\"m\",\"type\":\"T\","
                    "\"payload\":{}}", err, sizeof(err)) == -2);
    CHECK(parse_err("{\"op\":\"publish\",\"topic\":\"t\",\"message_id\":\"m\",\"type\":\"T\","
                    "\"headers\":[]}", err, sizeof(err)) == -2);
    CHECK(parse_err("{\"op\":\"publish\",\"topic\":\"t\",\"message_id\":\"m\",\"type\":\"T\","
                    "\"headers\":{\"aggregate_version\":\"2\"}}", err, sizeof(err)) == -2);
    char longid[400];
    memset(longid, 'a', sizeof(longid));
    longid[sizeof(longid) - 1] = '\0';
    char frame[600];
    snprintf(frame, sizeof(frame),
             "{\"op\":\"publish\",\"topic\":\"t\",\"message_id\":\"%s\",\"type\":\"T\"}", longid);
    CHECK_EQ_INT(parse_err(frame, err, sizeof(err)), -2);
}

static void test_control(void)
{
    struct fb_frame f;
    struct fb_control c;
    fb_control_defaults(&c, 30000);
    CHECK(c.outage == FB_OUTAGE_OFF && c.visibility_timeout_ms == 30000);

    CHECK(parse("{\"op\":\"control\",\"outage\":\"hang\",\"duplicate\":true,\"delay_ms\":300,"
                "\"reorder\":true,\"drop_before_confirm\":2,\"visibility_timeout_ms\":5000,"
                "\"max_payload_bytes\":4096}", &f) == 0);
    fb_control_apply(&c, &f, 30000);
    fb_frame_free(&f);
    CHECK(c.outage == FB_OUTAGE_HANG && c.duplicate && c.delay_ms == 300 && c.reorder);
    CHECK(c.drop_before_confirm == 2 && c.visibility_timeout_ms == 5000);
    CHECK_EQ_INT(c.max_payload_bytes, 4096);

    /* only the switches named change */
    CHECK_EQ_INT(parse("{\"op\":\"control\",\"outage\":\"refuse\"}", &f), 0);
    fb_control_apply(&c, &f, 30000);
    fb_frame_free(&f);
    CHECK(c.outage == FB_OUTAGE_REFUSE && c.duplicate && c.delay_ms == 300);

    /* reset first, then the frame's own switches */
    CHECK_EQ_INT(parse("{\"op\":\"control\",\"reset\":true,\"duplicate\":true}", &f), 0);
    fb_control_apply(&c, &f, 30000);
    fb_frame_free(&f);
    CHECK(c.outage == FB_OUTAGE_OFF && c.duplicate && c.delay_ms == 0 && !c.reorder);
    CHECK(c.visibility_timeout_ms == 30000 && c.max_payload_bytes == 0);

    cJSON *j = fb_control_json(&c);
    CHECK_EQ_STR(cJSON_GetObjectItem(j, "outage")->valuestring, "off");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, "duplicate")));
    cJSON_Delete(j);

    char err[256];
    CHECK_EQ_INT(parse_err("{\"op\":\"control\",\"outage\":\"maybe\"}", err, sizeof(err)), -2);
    CHECK_EQ_INT(parse_err("{\"op\":\"control\",\"duplicat\":true}", err, sizeof(err)), -2);
    CHECK(strstr(err, "unknown control switch") != NULL);
    CHECK_EQ_INT(parse_err("{\"op\":\"control\",\"visibility_timeout_ms\":0}", err, sizeof(err)),
                 -2);
    CHECK_EQ_INT(parse_err("{\"op\":\"control\",\"max_payload_bytes\":2000000}", err,
                           sizeof(err)), -2);
    CHECK_EQ_INT(parse_err("{\"op\":\"control\",\"delay_ms\":\"5\"}", err, sizeof(err)), -2);
}

static void test_writer(void)
{
    struct fb_buf b = {0};
    fb_jw_begin(&b);
    fb_jw_str(&b, "s", "q\"b\\n\n\t\x01z\xc3\xa9");
    fb_jw_int(&b, "big", 1795988307359724LL);
    fb_jw_int(&b, "neg", -5);
    fb_jw_bool(&b, "t", 1);
    fb_jw_str(&b, "nul", NULL);
    fb_jw_raw(&b, "raw", "{\"x\":[1,2]}");
    fb_jw_strn(&b, "part", "abcdef", 3);
    fb_jw_end(&b);
    cJSON *j = cJSON_Parse(b.data);
    CHECK(j != NULL);
    if (j != NULL) {
        CHECK_EQ_STR(cJSON_GetObjectItem(j, "s")->valuestring, "q\"b\\n\n\t\x01z\xc3\xa9");
        CHECK(cJSON_GetObjectItem(j, "big")->valuedouble == 1795988307359724.0);
        CHECK(cJSON_GetObjectItem(j, "neg")->valuedouble == -5);
        CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, "t")));
        CHECK(cJSON_IsNull(cJSON_GetObjectItem(j, "nul")));
        CHECK(cJSON_IsArray(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "raw"), "x")));
        CHECK_EQ_STR(cJSON_GetObjectItem(j, "part")->valuestring, "abc");
        cJSON_Delete(j);
    }
    /* integers are printed as integers, never in exponent form */
    CHECK(strstr(b.data, "\"big\":1795988307359724") != NULL);
    fb_buf_free(&b);
    fb_jw_begin(&b);
    fb_jw_end(&b);
    CHECK_EQ_STR(b.data, "{}");
    fb_buf_free(&b);
}

static void test_sha(void)
{
    char hex[65];
    fb_sha256_hex("abc", 3, hex);
    CHECK_EQ_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    fb_sha256_hex("", 0, hex);
    CHECK_EQ_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

int main(void)
{
    test_linebuf();
    test_parse_ok();
    test_parse_bad();
    test_control();
    test_writer();
    test_sha();
    return check_report("test_fakebroker");
}
