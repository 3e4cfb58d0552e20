/* sanitize.c -- error text made safe to store and to log; the rules are
 * listed in sanitize.h.
 *
 * One left-to-right pass over at most SCAN_MAX input bytes.  At each
 * position the scanner decides between copying one character and replacing
 * a whole construct (a key=value pair, a URL, a token, a JSON fragment) with
 * a placeholder; it never copies part of a construct it has recognised.
 * Words that are not recognised are copied whole, so a rule never fires in
 * the middle of an ordinary word.  Output goes to a fixed staging buffer and
 * is cut to the caller's bound at the end, on a UTF-8 character boundary. */
#include "sanitize.h"

#include <string.h>

#define SCAN_MAX 65536
#define STAGE_MAX (CW_ERROR_MAX * 2 + 64)

struct outbuf {
    char buf[STAGE_MAX];
    size_t len;
    int full; /* stopped adding: more than the bound was produced */
};

static void put(struct outbuf *o, const char *s, size_t n)
{
    if (o->full)
        return;
    if (o->len + n >= sizeof(o->buf)) {
        o->full = 1;
        return;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    if (o->len > CW_ERROR_MAX)
        o->full = 1;
}

static void put_str(struct outbuf *o, const char *s)
{
    put(o, s, strlen(s));
}

static int is_alpha(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static int is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Characters of opaque tokens (base64url, base64 without '/', hex, ...). */
static int is_token_char(unsigned char c)
{
    return is_alpha(c) || is_digit(c) || c == '_' || c == '-' || c == '+';
}

/* Characters of a key in key=value / key: value. */
static int is_key_char(unsigned char c)
{
    return is_alpha(c) || is_digit(c) || c == '_' || c == '-' || c == '.';
}

static unsigned char lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

/* Case-insensitive: does s[0..n) equal word? */
static int word_eq(const char *s, size_t n, const char *word)
{
    size_t wl = strlen(word);
    if (wl != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)s[i]) != (unsigned char)word[i])
            return 0;
    return 1;
}

/* Case-insensitive: does s[0..n) contain word? */
static int word_has(const char *s, size_t n, const char *word)
{
    size_t wl = strlen(word);
    for (size_t i = 0; i + wl <= n; i++) {
        size_t k = 0;
        while (k < wl && lower((unsigned char)s[i + k]) == (unsigned char)word[k])
            k++;
        if (k == wl)
            return 1;
    }
    return 0;
}

/* Keys whose value is a secret wherever they appear, with '=' or ':'. */
static int secret_key(const char *s, size_t n)
{
    static const char *const parts[] = {
        "pass", "pwd", "secret", "token", "apikey", "api_key", "api-key",
        "auth", "credential", "private", "sslkey", "session", "cookie", NULL
    };
    for (int i = 0; parts[i] != NULL; i++)
        if (word_has(s, n, parts[i]))
            return 1;
    return 0;
}

/* libpq connection keywords that locate or identify (key=value only). */
static int conninfo_key(const char *s, size_t n)
{
    static const char *const keys[] = {
        "user", "username", "host", "hostaddr", "port", "dbname", "service",
        "sslcert", "sslrootcert", "sslcrl", "options", "application_name", NULL
    };
    for (int i = 0; keys[i] != NULL; i++)
        if (word_eq(s, n, keys[i]))
            return 1;
    return 0;
}

/* Skips a quoted string starting at in[i] (the quote); returns the index after
 * the closing quote, or n when it is not closed. */
static size_t skip_quoted(const char *in, size_t i, size_t n)
{
    char q = in[i++];
    while (i < n) {
        if (in[i] == '\\' && i + 1 < n) {
            i += 2;
            continue;
        }
        if (in[i] == q)
            return i + 1;
        i++;
    }
    return n;
}

/* Skips one JSON value (object, array, string or scalar) at in[i]; an
 * unterminated object or array runs to the end of the input, which is what a
 * truncated echo of a payload looks like. */
static size_t skip_json_value(const char *in, size_t i, size_t n)
{
    if (i >= n)
        return n;
    if (in[i] == '"')
        return skip_quoted(in, i, n);
    if (in[i] == '{' || in[i] == '[') {
        int depth = 0;
        while (i < n) {
            char c = in[i];
            if (c == '"') {
                i = skip_quoted(in, i, n);
                continue;
            }
            if (c == '{' || c == '[')
                depth++;
            else if ((c == '}' || c == ']') && --depth == 0)
                return i + 1;
            i++;
        }
        return n;
    }
    while (i < n && !is_space((unsigned char)in[i]) && in[i] != ',' && in[i] != '}' &&
           in[i] != ']')
        i++;
    return i;
}

static size_t skip_spaces(const char *in, size_t i, size_t n)
{
    while (i < n && (in[i] == ' ' || in[i] == '\t'))
        i++;
    return i;
}

/* A bare or quoted value after '=' / ':'; bare values end at whitespace. */
static size_t skip_value(const char *in, size_t i, size_t n)
{
    if (i < n && (in[i] == '\'' || in[i] == '"'))
        return skip_quoted(in, i, n);
    while (i < n && !is_space((unsigned char)in[i]))
        i++;
    return i;
}

/* "key": value at in[i] (the opening quote)?  Returns the end of the member
 * or 0 when in[i] does not start a member. */
static size_t json_member(const char *in, size_t i, size_t n)
{
    size_t k = skip_quoted(in, i, n);
    if (k >= n)
        return 0;
    k = skip_spaces(in, k, n);
    if (k >= n || in[k] != ':')
        return 0;
    k = skip_spaces(in, k + 1, n);
    return skip_json_value(in, k, n);
}

/* scheme://... at in[i]?  On a URL that carries credentials (or any
 * postgres URL, which may carry them in its query), returns its end.
 * Otherwise returns 0 and sets *scheme_end to the index after "://" when
 * there is a URL at all (0 when not). */
static size_t url_secret(const char *in, size_t i, size_t n, size_t *scheme_end)
{
    size_t k = i;
    *scheme_end = 0;
    while (k < n && (is_alpha((unsigned char)in[k]) || is_digit((unsigned char)in[k]) ||
                     in[k] == '+' || in[k] == '.' || in[k] == '-'))
        k++;
    if (k == i || k + 3 > n || memcmp(in + k, "://", 3) != 0)
        return 0;
    size_t scheme_len = k - i;
    size_t start = k + 3;
    size_t end = start;
    while (end < n && !is_space((unsigned char)in[end]) && in[end] != '"' &&
           in[end] != '\'' && in[end] != '<' && in[end] != '>')
        end++;
    int cred = word_eq(in + i, scheme_len, "postgres") ||
               word_eq(in + i, scheme_len, "postgresql");
    for (size_t a = start; a < end && !cred; a++) {
        if (in[a] == '/' || in[a] == '?' || in[a] == '#')
            break;
        if (in[a] == '@')
            cred = 1;
    }
    if (cred)
        return end;
    *scheme_end = start;
    return 0;
}

/* key=value / key: value at in[i] (a word start) whose value must go?
 * Returns the end of the pair or 0. */
static size_t key_value(const char *in, size_t i, size_t n)
{
    size_t k = i;
    while (k < n && is_key_char((unsigned char)in[k]))
        k++;
    size_t klen = k - i;
    if (klen == 0)
        return 0;
    int secret = secret_key(in + i, klen);
    int conn = !secret && conninfo_key(in + i, klen);
    if (!secret && !conn)
        return 0;
    size_t s = skip_spaces(in, k, n);
    if (s >= n)
        return 0;
    if (!(in[s] == '=' || (secret && in[s] == ':')))
        return 0;
    s = skip_spaces(in, s + 1, n);
    if (s >= n)
        return s;
    /* "authorization: Bearer xyz": the scheme word and the credential. */
    size_t w = s;
    while (w < n && is_alpha((unsigned char)in[w]))
        w++;
    if (w > s && w < n && in[w] == ' ' &&
        (word_eq(in + s, w - s, "bearer") || word_eq(in + s, w - s, "basic") ||
         word_eq(in + s, w - s, "token") || word_eq(in + s, w - s, "digest")))
        s = skip_spaces(in, w, n);
    return skip_value(in, s, n);
}

/* "Bearer <credential>" at in[i]?  Returns its end or 0. */
static size_t bearer(const char *in, size_t i, size_t n)
{
    size_t w = i;
    while (w < n && is_alpha((unsigned char)in[w]))
        w++;
    if (!(word_eq(in + i, w - i, "bearer") || word_eq(in + i, w - i, "basic")))
        return 0;
    size_t s = skip_spaces(in, w, n);
    if (s == w)
        return 0;
    size_t e = skip_value(in, s, n);
    return e - s >= 8 ? e : 0;
}

static int is_uuid_text(const char *s, size_t n)
{
    if (n != 36)
        return 0;
    for (size_t i = 0; i < 36; i++) {
        int dash = (i == 8 || i == 13 || i == 18 || i == 23);
        unsigned char c = (unsigned char)s[i];
        if (dash ? c != '-' : !(is_digit(c) || (lower(c) >= 'a' && lower(c) <= 'f')))
            return 0;
    }
    return 1;
}

/* Length of the token run at in[i] ('=' padding included). */
static size_t token_run(const char *in, size_t i, size_t n)
{
    size_t k = i;
    while (k < n && is_token_char((unsigned char)in[k]))
        k++;
    while (k < n && in[k] == '=')
        k++;
    return k - i;
}

/* JWT: eyJ<base64url>.<base64url>[.<base64url>]; returns its end or 0. */
static size_t jwt(const char *in, size_t i, size_t n)
{
    if (i + 3 > n || memcmp(in + i, "eyJ", 3) != 0)
        return 0;
    size_t k = i;
    int dots = 0;
    while (k < n && (is_token_char((unsigned char)in[k]) || in[k] == '.' || in[k] == '=')) {
        if (in[k] == '.')
            dots++;
        k++;
    }
    return (dots >= 1 && k - i >= 20) ? k : 0;
}

/* 12 or more digits, single spaces or dashes allowed between them; returns
 * the end of the last digit or 0. */
static size_t long_number(const char *in, size_t i, size_t n)
{
    size_t k = i, end = i;
    int digits = 0;
    while (k < n) {
        if (is_digit((unsigned char)in[k])) {
            digits++;
            k++;
            end = k;
        } else if ((in[k] == ' ' || in[k] == '-') && k + 1 < n &&
                   is_digit((unsigned char)in[k + 1])) {
            k++;
        } else {
            break;
        }
    }
    return digits >= 12 ? end : 0;
}

/* Length of a valid UTF-8 sequence at in[i], or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t i, size_t n)
{
    unsigned char c = s[i];
    size_t len;
    unsigned int cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (i + len > n)
        return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[i + k] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

size_t cw_sanitize_error(const char *in, char *out, size_t outlen)
{
    struct outbuf o;
    if (outlen == 0)
        return 0;
    o.len = 0;
    o.full = 0;
    if (in == NULL)
        in = "";
    size_t n = strnlen(in, SCAN_MAX);
    size_t i = 0;

    while (i < n && !o.full) {
        unsigned char c = (unsigned char)in[i];
        int word_start = i == 0 || !is_token_char((unsigned char)in[i - 1]);
        size_t end, scheme_end;

        if (c < 0x20 || c == 0x7f) {
            put(&o, " ", 1);
            i++;
            continue;
        }
        if (c == '{' || (c == '[' && skip_spaces(in, i + 1, n) < n &&
                         (in[skip_spaces(in, i + 1, n)] == '{' ||
                          in[skip_spaces(in, i + 1, n)] == '"'))) {
            put_str(&o, "[payload]");
            i = skip_json_value(in, i, n);
            continue;
        }
        if (c == '"' && (end = json_member(in, i, n)) != 0) {
            put_str(&o, "[payload]");
            i = end;
            continue;
        }
        if (word_start && is_alpha(c)) {
            if ((end = url_secret(in, i, n, &scheme_end)) != 0) {
                put_str(&o, "[url]");
                i = end;
                continue;
            }
            if (scheme_end != 0) {
                /* A URL without credentials: keep its scheme, go on scanning
                 * the rest (its query may still hold key=value secrets). */
                put(&o, in + i, scheme_end - i);
                i = scheme_end;
                continue;
            }
            if ((end = key_value(in, i, n)) != 0) {
                put_str(&o, "[redacted]");
                i = end;
                continue;
            }
            if ((end = bearer(in, i, n)) != 0) {
                put_str(&o, "[redacted]");
                i = end;
                continue;
            }
            if ((end = jwt(in, i, n)) != 0) {
                put_str(&o, "[token]");
                i = end;
                continue;
            }
        }
        if (word_start && (is_alpha(c) || is_digit(c))) {
            size_t run = token_run(in, i, n);
            int has_alpha = 0, has_digit = 0;
            for (size_t k = i; k < i + run; k++) {
                has_alpha |= is_alpha((unsigned char)in[k]);
                has_digit |= is_digit((unsigned char)in[k]);
            }
            if (run >= 24 && has_alpha && has_digit && !is_uuid_text(in + i, run)) {
                put_str(&o, "[token]");
                i += run;
                continue;
            }
            if (is_digit(c) && (end = long_number(in, i, n)) != 0) {
                put_str(&o, "[number]");
                i = end;
                continue;
            }
            /* An ordinary word: copy it whole so no rule fires inside it. */
            put(&o, in + i, run);
            i += run;
            continue;
        }
        if (c >= 0x80) {
            size_t len = utf8_len((const unsigned char *)in, i, n);
            if (len == 0) {
                put(&o, "?", 1);
                i++;
            } else {
                put(&o, in + i, len);
                i += len;
            }
            continue;
        }
        put(&o, in + i, 1);
        i++;
    }

    size_t bound = outlen - 1 < CW_ERROR_MAX ? outlen - 1 : CW_ERROR_MAX;
    size_t len = o.len;
    int cut = o.full || i < n || in[n] != '\0' || len > bound;
    if (cut) {
        size_t keep = bound >= 3 ? bound - 3 : 0;
        if (keep > len)
            keep = len;
        /* Back up to the start of a character. */
        while (keep > 0 && ((unsigned char)o.buf[keep] & 0xc0) == 0x80)
            keep--;
        memcpy(out, o.buf, keep);
        size_t dots = bound - keep < 3 ? bound - keep : 3;
        memcpy(out + keep, "...", dots);
        len = keep + dots;
    } else {
        memcpy(out, o.buf, len);
    }
    out[len] = '\0';
    return len;
}
