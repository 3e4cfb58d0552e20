/* Unit tests for cw_sanitize_error(): every kind of secret is removed, the
 * shape of the message stays, the result is bounded, cut on a character
 * boundary, and valid UTF-8 without control characters. */
#include "sanitize.h"
#include "check.h"
#include "secrets_corpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char out[CW_ERROR_MAX + 64];

static const char *san(const char *in)
{
    cw_sanitize_error(in, out, sizeof(out));
    return out;
}

/* 1 when s holds none of the needles. */
static int clean(const char *s, const char *n1, const char *n2)
{
    return strstr(s, n1) == NULL && (n2 == NULL || strstr(s, n2) == NULL);
}

static int valid_utf8(const unsigned char *s)
{
    while (*s) {
        int len = *s < 0x80 ? 1 : (*s & 0xe0) == 0xc0 ? 2 : (*s & 0xf0) == 0xe0 ? 3
                : (*s & 0xf8) == 0xf0 ? 4 : 0;
        if (len == 0)
            return 0;
        for (int k = 1; k < len; k++)
            if ((s[k] & 0xc0) != 0x80)
                return 0;
        s += len;
    }
    return 1;
}

/* Sanitizes in, checks the output is whole (not cut: a cut could hide a
 * secret that was not removed) and that no window of f's secrets survives.
 * Prints what leaked. */
static int corpus_clean(const struct secret_format *f, const char *where, const char *in)
{
    size_t len = cw_sanitize_error(in, out, sizeof(out));
    char win[16];
    if (len >= CW_ERROR_MAX - 3) {
        fprintf(stderr, "%s (%s): output cut at the bound, cannot judge: %s\n", f->name,
                where, out);
        return 0;
    }
    if (secrets_leak(f, out, NULL, 0, win, sizeof(win))) {
        fprintf(stderr, "%s (%s): \"%s\" survives in: %s\n", f->name, where, win, out);
        return 0;
    }
    return valid_utf8((const unsigned char *)out);
}

/* Every format of the corpus, alone, in its own message, and planted into
 * a libpq, a broker and an HTTP error: none survives, and the part of the
 * message before it keeps its shape. */
static void check_corpus(void)
{
    struct secrets_corpus c;
    char err[256];
    int rc = secrets_corpus_load(CW_TEST_DATA_DIR "/secrets.json", &c, err, sizeof(err));
    CHECK_EQ_INT(rc, 0);
    if (rc != 0) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    CHECK(c.n >= 25);
    for (int i = 0; i < c.n; i++) {
        const struct secret_format *f = &c.v[i];
        CHECK(corpus_clean(f, "alone", f->form));
        CHECK(corpus_clean(f, "text", f->text));
        for (int k = 0; k < SECRETS_CONTEXTS; k++) {
            char *planted = secrets_plant(c.context[k], f->form);
            CHECK(corpus_clean(f, c.context_name[k], planted));
            size_t pre = (size_t)(strstr(c.context[k], "%s") - c.context[k]);
            if (strncmp(out, c.context[k], pre) != 0)
                fprintf(stderr, "%s (%s): the message lost its shape: %s\n", f->name,
                        c.context_name[k], out);
            CHECK(strncmp(out, c.context[k], pre) == 0);
            free(planted);
        }
    }
    for (int i = 0; i < c.nordinary; i++) {
        san(c.ordinary[i]);
        if (strcmp(out, c.ordinary[i]) != 0)
            fprintf(stderr, "ordinary message changed: %s -> %s\n", c.ordinary[i], out);
        CHECK_EQ_STR(out, c.ordinary[i]);
    }
    printf("test_sanitize: %d formats x %d messages each, %d ordinary messages\n", c.n,
           2 + SECRETS_CONTEXTS + 1, c.nordinary);
    secrets_corpus_free(&c);
}

/* Long input is cut to the bound, after a space, never inside a word or a
 * secret, and the cut result is what sanitizing it again gives. */
static void check_bounds(void)
{
    /* Bounded: long input is cut to CW_ERROR_MAX with "...". */
    char big[4000];
    memset(big, 'a', sizeof(big) - 1);
    for (size_t i = 0; i < sizeof(big) - 1; i += 10)
        big[i] = ' ';
    big[sizeof(big) - 1] = '\0';
    size_t n = cw_sanitize_error(big, out, sizeof(out));
    CHECK(n <= CW_ERROR_MAX && n > CW_ERROR_MAX - 14 && strlen(out) == n);
    CHECK_EQ_STR(out + n - 4, " ...");   /* cut after a space, not inside a word */
    /* A small caller buffer bounds it further. */
    char small[16];
    n = cw_sanitize_error("a fairly long message text", small, sizeof(small));
    CHECK(n == 12 && strcmp(small, "a fairly ...") == 0);
    /* A cut never leaves half a word behind: half a UUID would be a token,
     * and sanitizing the result again must change nothing. */
    char again[CW_ERROR_MAX + 64];
    n = cw_sanitize_error("message 5f0c2a8e-1b9d-4c3e-8f7a-0123456789ab refused", small,
                          sizeof(small));
    CHECK_EQ_STR(small, "message ...");
    cw_sanitize_error(small, again, sizeof(small));
    CHECK_EQ_STR(again, small);
    CHECK_EQ_INT(cw_sanitize_error("x", small, 0), 0);
    /* The cut never splits a multi-byte character. */
    char wide[2000] = "";
    for (int i = 0; i < 400; i++)
        strcat(wide, "\xc3\xa9 ");
    cw_sanitize_error(wide, out, sizeof(out));
    CHECK(strlen(out) <= CW_ERROR_MAX && valid_utf8((const unsigned char *)out));
    /* A secret straddling the bound is never partly emitted. */
    char edge[1200];
    memset(edge, 'b', 490);
    edge[490] = ' ';
    snprintf(edge + 491, sizeof(edge) - 491, "password=hunter2hunter2hunter2");
    for (int i = 0; i < 490; i += 7)
        edge[i] = ' ';
    cw_sanitize_error(edge, out, sizeof(out));
    CHECK(clean(out, "hunter", "password"));
}

int main(void)
{
    check_corpus();

    /* Ordinary messages pass unchanged. */
    CHECK_EQ_STR(san("broker outage"), "broker outage");
    CHECK_EQ_STR(san("could not connect to broker: No such file or directory"),
                 "could not connect to broker: No such file or directory");
    CHECK_EQ_STR(san(NULL), "");
    CHECK_EQ_STR(san("message 5f0c2a8e-1b9d-4c3e-8f7a-0123456789ab refused"),
                 "message 5f0c2a8e-1b9d-4c3e-8f7a-0123456789ab refused");

    /* The fake broker's poison refusal: the shape stays, the payload goes. */
    san("payload too large (5000 > 4096 bytes): {\"pw\": \"hunter2-secret\", \"card\": \"4111 1111");
    CHECK(strstr(out, "payload too large (5000 > 4096 bytes): [payload]") == out);
    CHECK(clean(out, "hunter2", "4111"));
    /* A JSON object in the middle: removed up to its end only. */
    CHECK_EQ_STR(san("bad {\"a\": {\"b\": \"}\"}} here"), "bad [payload] here");
    /* Members without braces, and arrays. */
    CHECK(clean(san("field \"password\": \"s3cr3t\" rejected"), "s3cr3t", "password"));
    CHECK(clean(san("got [{\"card\":\"4111111111111111\"}]"), "4111", "card"));
    CHECK(clean(san("got [\"top-secret-value\", 2]"), "top-secret", NULL));

    /* Conninfo pairs, quoted or not, any case; the key goes too. */
    san("connection to server failed: host=db.internal port=5432 user=app password=hunter2 dbname=payments");
    CHECK(clean(out, "hunter2", "password="));
    CHECK(clean(out, "db.internal", "user=app"));
    CHECK(clean(out, "dbname=", "5432"));
    CHECK(clean(san("PASSWORD = 'with spaces \\' quote' rest"), "with spaces", "quote'"));
    CHECK(strstr(out, "rest") != NULL);
    CHECK(clean(san("export PGPASSWORD=hunter2"), "hunter2", NULL));
    CHECK(clean(san("db_password: hunter2"), "hunter2", NULL));
    CHECK(clean(san("api_key=AKIAABCDEFGH token: abc secret=xyz"), "AKIA", "abc"));
    CHECK(clean(out, "xyz", NULL));
    /* "user" alone (not a pair) is an ordinary word. */
    CHECK_EQ_STR(san("password authentication failed for user \"app\""),
                 "password authentication failed for user \"app\"");

    /* URLs: credentials or a postgres URL go whole; others keep their shape. */
    CHECK(clean(san("cannot reach postgres://app:hunter2@db:5432/pay?sslmode=require now"),
                "hunter2", "postgres://"));
    CHECK(strstr(out, "[url]") != NULL && strstr(out, "now") != NULL);
    CHECK(clean(san("amqp://guest:guest@rabbit:5672/ closed"), "guest", NULL));
    CHECK_EQ_STR(san("GET https://example.org/health failed"),
                 "GET https://example.org/health failed");
    CHECK(clean(san("https://api.example.org/v1?token=abc123&x=1"), "abc123", NULL));

    /* Bearer and basic credentials, authorization headers. */
    CHECK(clean(san("Authorization: Bearer abcdefghijklmnop"), "abcdefghijklmnop", NULL));
    CHECK(clean(san("sent bearer abcdefghijklmnop upstream"), "abcdefghijklmnop", NULL));
    CHECK(strstr(out, "upstream") != NULL);
    CHECK(clean(san("basic dXNlcjpwYXNzd29yZA=="), "dXNlcjpw", NULL));

    /* JWTs and opaque keys. */
    CHECK(clean(san("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl expired"),
                "eyJ", "c2lnbmF0dXJl"));
    CHECK(clean(san("key sk_live_51HxYzAbCdEfGhIjKlMnOpQr rejected"), "sk_live", NULL));
    CHECK(clean(san("ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 denied"), "ghp_", NULL));
    /* Long words without digits are words, not keys. */
    CHECK_EQ_STR(san("payload_too_large_for_this_broker_instance"),
                 "payload_too_large_for_this_broker_instance");

    /* Card and account numbers. */
    CHECK(clean(san("card 4111111111111111 declined"), "4111", NULL));
    CHECK(clean(san("card 4111 1111 1111 1111 declined"), "4111", "1111"));
    CHECK(clean(san("iban 5105-1051-0510-5100 declined"), "5105", NULL));
    CHECK_EQ_STR(san("at 2026-11-29 21:00:00 after 12 attempts"),
                 "at 2026-11-29 21:00:00 after 12 attempts");

    /* Control characters become spaces; invalid UTF-8 becomes '?'. */
    CHECK_EQ_STR(san("line1\nline2\ttab\r"), "line1 line2 tab ");
    CHECK_EQ_STR(san("bad \xff\xfe byte"), "bad ?? byte");
    CHECK_EQ_STR(san("caf\xc3\xa9 ok"), "caf\xc3\xa9 ok");
    CHECK_EQ_STR(san("cut \xe2\x82"), "cut ??");

    check_bounds();

    /* Everything out is valid UTF-8 without control characters. */
    const char *nasty[] = { "\x01\x02{\"a\":", "postgres://", "{", "\"", "[", "password=",
                            "Bearer", "eyJ", "\xf4\x90\x80\x80", "\xed\xa0\x80", NULL };
    for (int i = 0; nasty[i] != NULL; i++) {
        cw_sanitize_error(nasty[i], out, sizeof(out));
        CHECK(valid_utf8((const unsigned char *)out));
        for (const char *p = out; *p; p++)
            CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
    }
    return check_report("test_sanitize");
}
