/* sanitize.c -- error text made safe to store and to log; the rules are
 * listed in sanitize.h.
 *
 * One left-to-right pass over at most SCAN_MAX input bytes.  At each
 * position the scanner decides between copying one character and replacing
 * a whole construct (a key=value pair, a URL, a token, a JSON fragment) with
 * a placeholder; it never copies part of a construct it has recognised.
 * Words that are not recognised are copied whole, so a rule never fires in
 * the middle of an ordinary word.  Output goes to a fixed staging buffer and
 * is cut to the caller's bound at the end, after a space, so that what is
 * left holds whole words and placeholders only.  Passes repeat over the
 * result until one changes nothing (cw_sanitize_error). */
#include "sanitize.h"

#include <string.h>

#define SCAN_MAX 65536
#define MAX_PASSES 8
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

static int is_upper(unsigned char c)
{
    return c >= 'A' && c <= 'Z';
}

static int is_lower(unsigned char c)
{
    return c >= 'a' && c <= 'z';
}

/* Whitespace: every control character counts, because the output turns
 * each into a space, and the scan must read the input as it will read its
 * own output (sanitizing a result again changes nothing). */
static int is_space(unsigned char c)
{
    return c <= ' ' || c == 0x7f;
}

/* Characters of opaque tokens (base64url, base64 without '/', hex, ...). */
static int is_token_char(unsigned char c)
{
    return is_alpha(c) || is_digit(c) || c == '_' || c == '-' || c == '+';
}

/* Characters of standard base64 (padding apart). */
static int is_b64_char(unsigned char c)
{
    return is_alpha(c) || is_digit(c) || c == '+' || c == '/';
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

/* Keys whose value is a secret wherever they appear, with '=' or ':': any
 * key containing one of parts, or equal to one of words. */
static int secret_key(const char *s, size_t n)
{
    static const char *const parts[] = {
        "pass", "pwd", "secret", "token", "apikey", "api_key", "api-key", "auth",
        "credential", "private", "sslkey", "session", "cookie", "signature",
        "accountkey", "account_key", "accesskey", "access_key", NULL
    };
    static const char *const words[] = { "key", "sig", "pw", NULL };
    for (int i = 0; parts[i] != NULL; i++)
        if (word_has(s, n, parts[i]))
            return 1;
    for (int i = 0; words[i] != NULL; i++)
        if (word_eq(s, n, words[i]))
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

/* The length of phrase when in[i..] reads phrase, 0 when not.  A space in
 * phrase stands for any one whitespace character. */
static size_t phrase_at(const char *in, size_t i, size_t n, const char *phrase)
{
    size_t k = 0;
    for (; phrase[k] != '\0'; k++) {
        if (i + k >= n)
            return 0;
        unsigned char c = (unsigned char)in[i + k];
        if (phrase[k] == ' ' ? !is_space(c) : c != (unsigned char)phrase[k])
            return 0;
    }
    return k;
}

/* The first index from i on where phrase starts (phrase_at), or n. */
static size_t phrase_find(const char *in, size_t i, size_t n, const char *phrase)
{
    for (; i < n; i++)
        if (phrase_at(in, i, n, phrase) != 0)
            return i;
    return n;
}

/* Skips a quoted string starting at in[i] (the quote); returns the index after
 * the closing quote (n when it is not closed) and sets *closed. */
static size_t skip_quoted(const char *in, size_t i, size_t n, int *closed)
{
    char q = in[i++];
    *closed = 0;
    while (i < n) {
        if (in[i] == '\\' && i + 1 < n) {
            i += 2;
            continue;
        }
        if (in[i] == q) {
            *closed = 1;
            return i + 1;
        }
        i++;
    }
    return i;
}

/* Skips one JSON value (object, array, string or scalar) at in[i]; an
 * unterminated object or array runs to the end of the input, which is what a
 * truncated echo of a payload looks like. */
static size_t skip_json_value(const char *in, size_t i, size_t n)
{
    int closed;
    if (i >= n)
        return n;
    if (in[i] == '"')
        return skip_quoted(in, i, n, &closed);
    if (in[i] == '{' || in[i] == '[') {
        int depth = 0;
        while (i < n) {
            char c = in[i];
            if (c == '"') {
                i = skip_quoted(in, i, n, &closed);
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
    while (i < n && is_space((unsigned char)in[i]))
        i++;
    return i;
}

/* A bare or quoted value after '=' / ':'.  A bare value ends at whitespace,
 * but a quoted part inside it (name="a b") is taken whole. */
static size_t skip_value(const char *in, size_t i, size_t n)
{
    int closed;
    if (i < n && (in[i] == '\'' || in[i] == '"'))
        return skip_quoted(in, i, n, &closed);
    while (i < n && !is_space((unsigned char)in[i])) {
        if (in[i] == '\'' || in[i] == '"')
            i = skip_quoted(in, i, n, &closed);
        else
            i++;
    }
    return i;
}

/* After a secret value that ends in ',' or ';', further name=value
 * parameters belong to the same credential (a Cookie header's pairs, a
 * Digest header's fields): returns the end of the last one. */
static size_t skip_params(const char *in, size_t e, size_t n)
{
    while (e > 0 && e <= n && (in[e - 1] == ',' || in[e - 1] == ';')) {
        size_t k = skip_spaces(in, e, n);
        size_t key = k;
        while (k < n && is_key_char((unsigned char)in[k]))
            k++;
        if (k == key || k >= n || in[k] != '=')
            break;
        e = skip_value(in, k + 1, n);
    }
    return e;
}

/* "key": value at in[i] (the opening quote)?  Returns the end of the member
 * or 0 when in[i] does not start a member. */
static size_t json_member(const char *in, size_t i, size_t n)
{
    int closed;
    size_t k = skip_quoted(in, i, n, &closed);
    if (!closed || k >= n)
        return 0;
    k = skip_spaces(in, k, n);
    if (k >= n || in[k] != ':')
        return 0;
    k = skip_spaces(in, k + 1, n);
    return skip_json_value(in, k, n);
}

/* Hosts whose URLs are credentials in themselves (incoming webhooks). */
static int webhook_host(const char *host, size_t n)
{
    static const char *const hosts[] = {
        "hooks.slack.com", "discord.com", "discordapp.com", "hooks.zapier.com", NULL
    };
    for (int i = 0; hosts[i] != NULL; i++)
        if (word_eq(host, n, hosts[i]))
            return 1;
    return 0;
}

/* scheme://... at in[i]?  On a URL that carries credentials (userinfo, a
 * webhook host, or any postgres URL, which may carry them in its query),
 * returns its end.  Otherwise returns 0 and sets *scheme_end to the index
 * after "://" when there is a URL at all (0 when not). */
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
    size_t a = start;
    for (; a < end && !cred; a++) {
        /* A byte past ASCII ends the authority as the '?' it may become. */
        if (in[a] == '/' || in[a] == '?' || in[a] == '#' || (unsigned char)in[a] >= 0x80)
            break;
        if (in[a] == '@')
            cred = 1;
    }
    if (cred || webhook_host(in + start, a - start))
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
    /* 'password': 'x' -- a quoted key, as in a Python or YAML dump. */
    if (secret && k < n && i > 0 && (in[k] == '\'' || in[k] == '"') && in[i - 1] == in[k])
        k++;
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
    if (w > s && w < n && is_space((unsigned char)in[w]) &&
        (word_eq(in + s, w - s, "bearer") || word_eq(in + s, w - s, "basic") ||
         word_eq(in + s, w - s, "token") || word_eq(in + s, w - s, "digest")))
        s = skip_spaces(in, w, n);
    return skip_params(in, skip_value(in, s, n), n);
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

/* Tokens whose issuer marks them with a prefix, and how many characters at
 * least follow it: a prefix alone, or with a short word after it, is just a
 * word. */
static const struct {
    const char *prefix;
    size_t min_rest;
} token_prefixes[] = {
    { "ghp_", 20 }, { "gho_", 20 }, { "ghu_", 20 }, { "ghs_", 20 }, { "ghr_", 20 },
    { "github_pat_", 20 }, { "glpat-", 16 }, { "gldt-", 16 }, { "glrt-", 16 },
    { "glptt-", 16 }, { "xoxb-", 10 }, { "xoxp-", 10 }, { "xoxa-", 10 }, { "xoxr-", 10 },
    { "xoxs-", 10 }, { "xoxe-", 10 }, { "xapp-", 10 }, { "sk_live_", 16 },
    { "sk_test_", 16 }, { "rk_live_", 16 }, { "rk_test_", 16 }, { "whsec_", 16 },
    { "AIza", 30 }, { "npm_", 30 }, { "pypi-", 30 }, { "SG.", 16 }, { "sk-", 20 },
    { "hf_", 20 }, { "shpat_", 20 }, { "dop_v1_", 20 },
};

/* A prefixed token at in[i]?  Returns its end or 0.  The run takes dots
 * too: some tokens are dotted (SendGrid's SG.<id>.<secret>). */
static size_t prefixed_token(const char *in, size_t i, size_t n)
{
    for (size_t p = 0; p < sizeof(token_prefixes) / sizeof(token_prefixes[0]); p++) {
        size_t pl = strlen(token_prefixes[p].prefix);
        if (i + pl > n || memcmp(in + i, token_prefixes[p].prefix, pl) != 0)
            continue;
        size_t k = i + pl;
        while (k < n && (is_token_char((unsigned char)in[k]) || in[k] == '.'))
            k++;
        while (k > i + pl && in[k - 1] == '.')
            k--; /* a sentence's full stop is not part of it */
        if (k - (i + pl) >= token_prefixes[p].min_rest)
            return k;
    }
    return 0;
}

/* An AWS access key id: a four-letter kind (AKIA long-term, ASIA temporary,
 * ...) and 16 capitals or digits.  Returns its end or 0. */
static size_t aws_key_id(const char *in, size_t i, size_t n)
{
    static const char *const kinds[] = { "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "AIPA",
                                         "ANPA", "ANVA", "ABIA", "ACCA", NULL };
    if (i + 20 > n)
        return 0;
    int kind = 0;
    for (int k = 0; kinds[k] != NULL && !kind; k++)
        kind = memcmp(in + i, kinds[k], 4) == 0;
    if (!kind)
        return 0;
    for (size_t k = i + 4; k < i + 20; k++)
        if (!(is_upper((unsigned char)in[k]) || is_digit((unsigned char)in[k])))
            return 0;
    if (i + 20 < n && is_token_char((unsigned char)in[i + 20]))
        return 0;
    return i + 20;
}

/* Standard base64 with '/' or '+' (keys, secrets, ciphertexts) at in[i]?
 * The token rule stops at '/', which paths are full of, so this one asks
 * more: 20+ characters with capitals, small letters and digits, and the
 * letters and digits changing class at least 4 times in 10 as random text
 * does (about 6.5 in 10) and paths and words do not (a path's segments are
 * words: /home/Alice/Docs2024 changes 3 times in 17).  Returns its end or 0. */
static size_t base64_blob(const char *in, size_t i, size_t n)
{
    size_t k = i;
    int slash = 0, up = 0, low = 0, dig = 0, changes = 0, pairs = 0, prev = 0;
    while (k < n && is_b64_char((unsigned char)in[k])) {
        unsigned char c = (unsigned char)in[k];
        int cls = is_upper(c) ? 1 : is_lower(c) ? 2 : is_digit(c) ? 3 : 0;
        slash |= cls == 0;
        up |= cls == 1;
        low |= cls == 2;
        dig |= cls == 3;
        if (cls != 0 && prev != 0) {
            pairs++;
            changes += cls != prev;
        }
        prev = cls;
        k++;
    }
    while (k < n && in[k] == '=')
        k++;
    if (!slash || k - i < 20 || !(up && low && dig) || changes * 10 < pairs * 4)
        return 0;
    return k;
}

/* -----BEGIN ...----- to its -----END ...----- (or the end of the input:
 * a key cut off by a length limit is still a key) at in[i]?  Returns the
 * end or 0.  Certificates go too: telling them apart is not worth a rule. */
static size_t pem_block(const char *in, size_t i, size_t n)
{
    size_t k = phrase_at(in, i, n, "-----BEGIN ");
    if (k == 0)
        return 0;
    k = phrase_find(in, i + k, n, "-----END ");
    if (k == n)
        return n;
    k = phrase_find(in, k + 9, n, "-----");
    return k == n ? n : k + 5;
}

/* 12 or more digits in groups, single spaces or dashes allowed between
 * them; returns the end of the last digit or 0.  A later group glued to
 * letters is the start of a word (a hex token, say), never part of the
 * number: taking it would leave the rest of that word behind, unjudged. */
static size_t long_number(const char *in, size_t i, size_t n)
{
    size_t k = i, end = i;
    int digits = 0, groups = 0;
    for (;;) {
        size_t g = k;
        while (k < n && is_digit((unsigned char)in[k]))
            k++;
        int sep = k + 1 < n && (is_space((unsigned char)in[k]) || in[k] == '-') &&
                  is_digit((unsigned char)in[k + 1]);
        int glued = !sep && k < n && is_token_char((unsigned char)in[k]);
        if (groups > 0 && glued)
            break;
        digits += (int)(k - g);
        end = k;
        groups++;
        if (!sep)
            break;
        k++;
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

/* libpq's parse errors quote a fragment of the connection string, which may
 * be (part of) a password and may itself hold quotes: the phrase stays, the
 * fragment goes, up to the words libpq puts after it (or, without them, the
 * last quote, or the end).  Returns the end of the fragment and the
 * replacement in *with, or 0. */
static size_t libpq_fragment(const char *in, size_t i, size_t n, const char **with)
{
    static const struct {
        const char *phrase, *after, *replacement;
    } phrases[] = {
        { "missing \"=\" after \"", "\" in connection info string",
          "missing \"=\" after \"[redacted]\"" },
        { "invalid percent-encoded token: \"", NULL,
          "invalid percent-encoded token: \"[redacted]\"" },
        { "in URI query parameter: \"", NULL, "in URI query parameter: \"[redacted]\"" },
    };
    for (size_t p = 0; p < sizeof(phrases) / sizeof(phrases[0]); p++) {
        size_t pl = phrase_at(in, i, n, phrases[p].phrase);
        if (pl == 0)
            continue;
        *with = phrases[p].replacement;
        if (phrases[p].after != NULL) {
            size_t at = phrase_find(in, i + pl, n, phrases[p].after);
            return at < n ? at + 1 : n;
        }
        for (size_t k = n; k > i + pl; k--)
            if (in[k - 1] == '"')
                return k;
        return n;
    }
    return 0;
}

/* An opaque token (24+ token characters mixing letters and digits, not a
 * UUID), a long number, or an ordinary word at in[i], a word start with a
 * letter or digit.  Returns the end; *with is the placeholder, or NULL for a
 * word, which is copied whole so that no rule fires inside it. */
static size_t word(const char *in, size_t i, size_t n, const char **with)
{
    size_t run = token_run(in, i, n), end;
    int has_alpha = 0, has_digit = 0;
    for (size_t k = i; k < i + run; k++) {
        has_alpha |= is_alpha((unsigned char)in[k]);
        has_digit |= is_digit((unsigned char)in[k]);
    }
    if (run >= 24 && has_alpha && has_digit && !is_uuid_text(in + i, run)) {
        *with = "[token]";
        return i + run;
    }
    if (is_digit((unsigned char)in[i]) && (end = long_number(in, i, n)) != 0) {
        *with = "[number]";
        return end;
    }
    /* A PEM header glued to the word ("key-----BEGIN ...") starts its own
     * construct. */
    for (size_t k = i + 1; k < i + run; k++)
        if (in[k] == '-' && pem_block(in, k, n) != 0)
            return k;
    return i + run;
}

/* The construct that starts at in[i], if any: returns its end (0 when none)
 * and sets *with to its placeholder, or to NULL when it is copied as it is
 * (an ordinary word, the scheme of a URL without credentials, whose rest is
 * scanned on: its query may hold key=value secrets). */
static size_t construct(const char *in, size_t i, size_t n, const char **with)
{
    unsigned char c = (unsigned char)in[i];
    unsigned char before = i > 0 ? (unsigned char)in[i - 1] : ' ';
    size_t k, end, scheme_end;
    *with = NULL;
    if (c == '-' && (end = pem_block(in, i, n)) != 0) {
        *with = "[pem]";
        return end;
    }
    k = skip_spaces(in, i + 1, n);
    if (c == '{' || (c == '[' && k < n && (in[k] == '{' || in[k] == '"'))) {
        *with = "[payload]";
        return skip_json_value(in, i, n);
    }
    if (c == '"' && (end = json_member(in, i, n)) != 0) {
        *with = "[payload]";
        return end;
    }
    if (is_token_char(before))
        return 0; /* inside a word: rules apply to whole words only */
    if (is_alpha(c)) {
        if ((end = libpq_fragment(in, i, n, with)) != 0)
            return end;
        if ((end = url_secret(in, i, n, &scheme_end)) != 0) {
            *with = "[url]";
            return end;
        }
        if (scheme_end != 0)
            return scheme_end;
        *with = "[redacted]";
        if ((end = key_value(in, i, n)) != 0 || (end = bearer(in, i, n)) != 0)
            return end;
        *with = "[token]";
        if ((end = jwt(in, i, n)) != 0 || (end = prefixed_token(in, i, n)) != 0 ||
            (end = aws_key_id(in, i, n)) != 0)
            return end;
        *with = NULL;
    }
    if (is_b64_char(c) && before != '/' && (end = base64_blob(in, i, n)) != 0) {
        *with = "[token]";
        return end;
    }
    if (is_alpha(c) || is_digit(c))
        return word(in, i, n, with);
    return 0;
}

/* One pass over in; see the top of the file. */
static size_t sanitize_once(const char *in, char *out, size_t outlen)
{
    struct outbuf o;
    o.len = 0;
    o.full = 0;
    if (in == NULL)
        in = "";
    size_t n = strnlen(in, SCAN_MAX);
    size_t i = 0;

    while (i < n && !o.full) {
        unsigned char c = (unsigned char)in[i];
        const char *with;
        size_t end;

        if (c < 0x20 || c == 0x7f) {
            put(&o, " ", 1);
            i++;
            continue;
        }
        if ((end = construct(in, i, n, &with)) > i) {
            if (with != NULL)
                put_str(&o, with);
            else
                put(&o, in + i, end - i);
            i = end;
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
        /* Cut after a space: half a word could be what a whole one is not
         * (a cut UUID is a token), and sanitizing the result again must
         * change nothing.  That also keeps the cut on a character boundary. */
        if (keep < len)
            while (keep > 0 && o.buf[keep - 1] != ' ')
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

size_t cw_sanitize_error(const char *in, char *out, size_t outlen)
{
    if (outlen == 0)
        return 0;
    size_t len = sanitize_once(in, out, outlen);
    /* A pass decides on what lies ahead as it is, and a later part may be
     * replaced (a quote inside a payload is gone once the payload is
     * "[payload]"), so a second pass over the result can see a construct
     * the first could not.  Passes repeat until one changes nothing: the
     * result is what sanitizing it again gives (texts take two passes,
     * rarely three; the bound is there for safety, each pass only removes). */
    char again[CW_ERROR_MAX + 1];
    size_t againlen = outlen < sizeof(again) ? outlen : sizeof(again);
    for (int pass = 0; pass < MAX_PASSES; pass++) {
        size_t n = sanitize_once(out, again, againlen);
        if (n == len && memcmp(again, out, len) == 0)
            break;
        memcpy(out, again, n + 1);
        len = n;
    }
    return len;
}
