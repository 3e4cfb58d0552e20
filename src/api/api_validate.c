/* api_validate.c -- input validation and canonical request hashing for the
 * payments API; see api_validate.h for exactly what is accepted.
 *
 * Amounts never pass through a double: the decimal text is checked and
 * normalized character by character, and PostgreSQL receives the normalized
 * text as a numeric.  JSON comes in through cJSON, whose number type is a
 * double, which is why amounts must arrive as JSON strings. */
#include "api_validate.h"
#include "ids.h"
#include "mutant.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define AMOUNT_MAX_INT_DIGITS 13           /* 1000000000000 */
#define AMOUNT_LIMIT_INT "1000000000000"

int api_check_idempotency_key(const char *value, struct api_reply *r)
{
    if (value == NULL || value[0] == '\0') {
        api_reply_problem(r, 400, "missing-idempotency-key", "Idempotency-Key required",
                          "every POST needs an Idempotency-Key header "
                          "(1-%d printable ASCII characters)", API_KEY_MAX);
        return -1;
    }
    size_t n = strlen(value);
    if (n > API_KEY_MAX) {
        api_reply_problem(r, 400, "invalid-idempotency-key", "Invalid Idempotency-Key",
                          "Idempotency-Key is %zu characters long; at most %d are allowed",
                          n, API_KEY_MAX);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)value[i];
        if (c < 0x20 || c > 0x7e) {
            api_reply_problem(r, 400, "invalid-idempotency-key", "Invalid Idempotency-Key",
                              "Idempotency-Key holds a character that is not printable "
                              "ASCII at position %zu", i + 1);
            return -1;
        }
    }
    return 0;
}

int api_check_client_id(const char *value, char *out, struct api_reply *r)
{
    if (value == NULL) {
        /* No shared default: idempotency keys are per client, and a
         * namespace every anonymous client shared would let one replay
         * another's response (and see its payment) by reusing a key. */
        api_reply_problem(r, 400, "missing-client-id", "Missing X-Client-Id",
                          "X-Client-Id is required: Idempotency-Keys are scoped per client");
        return -1;
    }
    size_t n = strlen(value);
    if (n == 0 || n > API_CLIENT_MAX) {
        api_reply_problem(r, 400, "invalid-client-id", "Invalid X-Client-Id",
                          "X-Client-Id must be 1-%d characters of [A-Za-z0-9._-]",
                          API_CLIENT_MAX);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        char c = value[i];
        if (!(isascii((unsigned char)c) && isalnum((unsigned char)c)) &&
            c != '.' && c != '_' && c != '-') {
            api_reply_problem(r, 400, "invalid-client-id", "Invalid X-Client-Id",
                              "X-Client-Id must be 1-%d characters of [A-Za-z0-9._-]",
                              API_CLIENT_MAX);
            return -1;
        }
    }
    memcpy(out, value, n + 1);
    return 0;
}

/* Skips optional whitespace (space and tab, as HTTP allows around ';'). */
static const char *skip_ows(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

int api_check_content_type(const char *value, struct api_reply *r)
{
    static const char media[] = "application/json";
    const char *p = value ? skip_ows(value) : NULL;
    if (p == NULL || strncasecmp(p, media, sizeof(media) - 1) != 0)
        goto bad;
    p = skip_ows(p + sizeof(media) - 1);
    while (*p == ';') {
        /* The only parameter that means anything for JSON is charset, and
         * JSON is UTF-8 (RFC 8259); anything else is refused rather than
         * silently ignored. */
        p = skip_ows(p + 1);
        if (strncasecmp(p, "charset=", 8) != 0)
            goto bad;
        p += 8;
        if (strncasecmp(p, "utf-8", 5) == 0)
            p += 5;
        else if (strncasecmp(p, "\"utf-8\"", 7) == 0)
            p += 7;
        else
            goto bad;
        p = skip_ows(p);
    }
    if (*p != '\0')
        goto bad;
    return 0;
bad:
    api_reply_problem(r, 415, "unsupported-media-type", "Unsupported media type",
                      "the request body must be sent as Content-Type: application/json");
    return -1;
}

int api_normalize_amount(const char *in, char *out, struct api_reply *r)
{
    const char *p = in;
    int negative = 0;
    if (*p == '-') {
        negative = 1;
        p++;
    }
    const char *int_start = p;
    while (*p >= '0' && *p <= '9')
        p++;
    size_t int_len = (size_t)(p - int_start);
    const char *frac = "";
    size_t frac_len = 0;
    if (*p == '.') {
        frac = ++p;
        while (*p >= '0' && *p <= '9')
            p++;
        frac_len = (size_t)(p - frac);
        if (frac_len == 0)
            int_len = 0; /* "12." is not a decimal */
    }
    if (int_len == 0 || *p != '\0') {
        api_reply_problem(r, 422, "invalid-amount", "Invalid amount",
                          "amount must be a decimal string such as \"12.50\" "
                          "(digits, optionally a point and at most 2 decimals)");
        return -1;
    }
    if (frac_len > 2) {
        api_reply_problem(r, 422, "invalid-amount", "Invalid amount",
                          "amount has %zu decimal places; at most 2 are allowed", frac_len);
        return -1;
    }
    /* Leading zeros carry no value: "012.50" and "12.5" are the same amount. */
    while (int_len > 1 && *int_start == '0') {
        int_start++;
        int_len--;
    }
    char f[3] = { '0', '0', '\0' };
    memcpy(f, frac, frac_len);
    int is_zero = (int_len == 1 && int_start[0] == '0' && f[0] == '0' && f[1] == '0');
    /* Mutant: "the amount must not be negative" -- zero slips through, and
     * a payment of nothing is created and published. */
    if (negative || (is_zero && !CW_MUTANT(zero_amount_accepted))) {
        api_reply_problem(r, 422, "invalid-amount", "Invalid amount",
                          "amount must be greater than zero");
        return -1;
    }
    int too_large = int_len > AMOUNT_MAX_INT_DIGITS;
    if (int_len == AMOUNT_MAX_INT_DIGITS) {
        int cmp = strncmp(int_start, AMOUNT_LIMIT_INT, AMOUNT_MAX_INT_DIGITS);
        too_large = cmp > 0 || (cmp == 0 && (f[0] != '0' || f[1] != '0'));
    }
    if (too_large) {
        api_reply_problem(r, 422, "invalid-amount", "Invalid amount",
                          "amount is larger than the maximum of %s.00", AMOUNT_LIMIT_INT);
        return -1;
    }
    snprintf(out, API_AMOUNT_MAX, "%.*s.%s", (int)int_len, int_start, f);
    return 0;
}

int api_check_currency(const char *in, struct api_reply *r)
{
    if (strlen(in) == 3 && isupper((unsigned char)in[0]) && isupper((unsigned char)in[1]) &&
        isupper((unsigned char)in[2]) && isascii((unsigned char)in[0]) &&
        isascii((unsigned char)in[1]) && isascii((unsigned char)in[2]))
        return 0;
    api_reply_problem(r, 422, "invalid-currency", "Invalid currency",
                      "currency must be three uppercase letters, such as \"EUR\"");
    return -1;
}

/* Parses body as one JSON value with nothing but whitespace after it.
 * Returns NULL (with r filled) when it is not JSON. */
static cJSON *parse_json(const char *body, size_t len, struct api_reply *r)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (root != NULL) {
        const char *stop = body + len;
        while (end < stop && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n'))
            end++;
        if (end == stop)
            return root;
        cJSON_Delete(root);
    }
    api_reply_problem(r, 400, "malformed-json", "Malformed JSON",
                      "the request body is not a single well-formed JSON value");
    return NULL;
}

int api_parse_create_body(const char *body, size_t len, struct api_create_body *out,
                          struct api_reply *r)
{
    int rc = -1;
    cJSON *root = parse_json(body, len, r);
    if (root == NULL)
        return -1;
    if (!cJSON_IsObject(root)) {
        api_reply_problem(r, 400, "invalid-body", "Invalid request body",
                          "the request body must be a JSON object "
                          "{\"amount\":\"12.50\",\"currency\":\"EUR\"}");
        goto out;
    }
    /* Walk the members ourselves: cJSON keeps repeated names, and a body
     * with two amounts has no single meaning. */
    const cJSON *amount = NULL, *currency = NULL;
    for (const cJSON *m = root->child; m != NULL; m = m->next) {
        const cJSON **slot;
        if (strcmp(m->string, "amount") == 0) {
            slot = &amount;
        } else if (strcmp(m->string, "currency") == 0) {
            slot = &currency;
        } else {
            api_reply_problem(r, 400, "invalid-body", "Invalid request body",
                              "unknown field \"%.64s\" (only amount and currency are accepted)",
                              m->string);
            goto out;
        }
        if (*slot != NULL) {
            api_reply_problem(r, 400, "invalid-body", "Invalid request body",
                              "field \"%s\" appears more than once", m->string);
            goto out;
        }
        *slot = m;
    }
    if (amount == NULL || currency == NULL) {
        api_reply_problem(r, 400, "invalid-body", "Invalid request body",
                          "missing field \"%s\"", amount == NULL ? "amount" : "currency");
        goto out;
    }
    if (!cJSON_IsString(amount)) {
        api_reply_problem(r, 400, "invalid-body", "Invalid request body",
                          "amount must be a JSON string holding an exact decimal, "
                          "such as \"12.50\" (JSON numbers are not accepted)");
        goto out;
    }
    if (!cJSON_IsString(currency)) {
        api_reply_problem(r, 400, "invalid-body", "Invalid request body",
                          "currency must be a JSON string, such as \"EUR\"");
        goto out;
    }
    if (api_normalize_amount(amount->valuestring, out->amount, r) < 0)
        goto out;
    if (api_check_currency(currency->valuestring, r) < 0)
        goto out;
    memcpy(out->currency, currency->valuestring, 4);
    rc = 0;
out:
    cJSON_Delete(root);
    return rc;
}

int api_parse_empty_body(const char *body, size_t len, struct api_reply *r)
{
    size_t i = 0;
    while (i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n'))
        i++;
    if (i == len)
        return 0;
    cJSON *root = parse_json(body, len, r);
    if (root == NULL)
        return -1;
    int ok = cJSON_IsObject(root) && root->child == NULL;
    cJSON_Delete(root);
    if (!ok) {
        api_reply_problem(r, 400, "invalid-body", "Invalid request body",
                          "this command takes no fields: send no body or {}");
        return -1;
    }
    return 0;
}

int api_canonical_request(const char *method, const char *path, const char *body_json,
                          char *out, size_t outlen)
{
    int n = snprintf(out, outlen, "%s %s\n%s", method, path, body_json);
    return (n < 0 || (size_t)n >= outlen) ? -1 : 0;
}

int api_canonical_create_body(const struct api_create_body *b, char *out, size_t outlen)
{
    /* Built by hand rather than with cJSON so that the member order is part
     * of this function's contract, not of a library's insertion order; both
     * values are validated ASCII and need no escaping. */
    int n = snprintf(out, outlen, "{\"amount\":\"%s\",\"currency\":\"%s\"}",
                     b->amount, b->currency);
    return (n < 0 || (size_t)n >= outlen) ? -1 : 0;
}

int api_sha256_hex(const char *data, size_t len, char *out)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
        return -1;
    static const char digits[] = "0123456789abcdef";
    for (unsigned int i = 0; i < mdlen; i++) {
        out[2 * i] = digits[md[i] >> 4];
        out[2 * i + 1] = digits[md[i] & 15];
    }
    out[2 * mdlen] = '\0';
    return 0;
}

void api_trace_for_request(const char *value, char *out)
{
    if (value != NULL && cw_traceparent_valid(value))
        snprintf(out, CW_TRACEPARENT_LEN + 1, "%s", value);
    else
        cw_traceparent_new(out);
}

int api_match_payment_path(const char *path, const char *suffix, char *id)
{
    static const char prefix[] = "/payments/";
    size_t plen = sizeof(prefix) - 1;
    if (strncmp(path, prefix, plen) != 0)
        return 0;
    const char *rest = path + plen;
    if (strlen(rest) != CW_UUID_LEN + strlen(suffix) || strcmp(rest + CW_UUID_LEN, suffix) != 0)
        return 0;
    char buf[CW_UUID_LEN + 1];
    memcpy(buf, rest, CW_UUID_LEN);
    buf[CW_UUID_LEN] = '\0';
    if (!cw_uuid_valid(buf))
        return 0;
    for (int i = 0; i < CW_UUID_LEN; i++)
        id[i] = (char)tolower((unsigned char)buf[i]);
    id[CW_UUID_LEN] = '\0';
    return 1;
}
