/* fuzz_sanitize.c -- libFuzzer target for the error sanitizer
 * (src/core/sanitize.c), judged by the secrets corpus (tests/data/secrets.json,
 * path in CW_SECRETS_CORPUS) with the unit test's rule (secrets_corpus.h).
 *
 * Each input is used twice:
 *   1. as it is, into a buffer of a size the input picks: the output stays
 *      within min(size - 1, CW_ERROR_MAX) bytes, is valid UTF-8 and holds no
 *      control character (ASan sees any write past the buffer), and
 *      sanitizing it again changes nothing (the checker relies on that: a
 *      stored error is sanitized when sanitizing it is a no-op);
 *   2. as the text around a planted secret: byte 0 picks a format of the
 *      corpus, byte 1 where the rest splits into a prefix and a suffix, and
 *      the text is prefix " " form " " suffix.  No secret of the format may
 *      survive, unless the fuzzer wrote the same window itself.  The claim
 *      is made for prefixes that end what they start: one that leaves a
 *      construct open (a quote, a brace, "token=") takes in what follows,
 *      form or not, and is told apart by a probe word planted after it
 *      instead, which must come out as it went in.
 * Any violation aborts, which libFuzzer reports as a crash with the input.
 * Built and run by scripts/fuzz-sanitize. */
#include "sanitize.h"
#include "secrets_corpus.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct secrets_corpus corpus;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *path = getenv("CW_SECRETS_CORPUS");
    char err[256];
    if (path == NULL || secrets_corpus_load(path, &corpus, err, sizeof(err)) < 0 ||
        corpus.n == 0) {
        fprintf(stderr, "fuzz_sanitize: set CW_SECRETS_CORPUS to the secrets corpus (%s)\n",
                path ? err : "unset");
        exit(2);
    }
    return 0;
}

static void check_output(const char *out, size_t len, size_t outlen)
{
    size_t bound = outlen - 1 < CW_ERROR_MAX ? outlen - 1 : CW_ERROR_MAX;
    if (len > bound || strlen(out) != len)
        abort(); /* longer than promised */
    const unsigned char *s = (const unsigned char *)out;
    while (*s) {
        if (*s < 0x20 || *s == 0x7f)
            abort(); /* a control character came through */
        int n = *s < 0x80 ? 1 : (*s & 0xe0) == 0xc0 ? 2 : (*s & 0xf0) == 0xe0 ? 3
              : (*s & 0xf8) == 0xf0 ? 4 : 0;
        if (n == 0)
            abort(); /* not UTF-8 */
        for (int k = 1; k < n; k++)
            if ((s[k] & 0xc0) != 0x80)
                abort();
        s += n;
    }
}

/* A C string of n bytes of data, NUL bytes made control characters (which
 * the sanitizer turns into spaces) so that nothing of the input is lost. */
static char *as_text(const uint8_t *data, size_t n)
{
    char *t = malloc(n + 1);
    if (t == NULL)
        abort();
    for (size_t i = 0; i < n; i++)
        t[i] = data[i] == 0 ? 0x01 : (char)data[i];
    t[n] = '\0';
    return t;
}

static void fuzz_raw(const uint8_t *data, size_t size)
{
    char *text = as_text(data, size);
    size_t outlen = size > 0 ? (size_t)data[0] * 4 + 1 : 1; /* 1 .. 1021 bytes */
    char *out = malloc(outlen);
    if (out == NULL)
        abort();
    size_t len = cw_sanitize_error(text, out, outlen);
    check_output(out, len, outlen);
    char *again = malloc(outlen);
    if (again == NULL)
        abort();
    if (cw_sanitize_error(out, again, outlen) != len || memcmp(out, again, len) != 0) {
        fprintf(stderr, "fuzz_sanitize: not idempotent:\n  once:  %s\n  twice: %s\n", out, again);
        abort();
    }
    free(again);
    free(out);
    free(text);
}

static void fuzz_planted(const uint8_t *data, size_t size)
{
    if (size < 2)
        return;
    const struct secret_format *f = &corpus.v[data[0] % corpus.n];
    size_t rest = size - 2;
    size_t split = rest == 0 ? 0 : (size_t)data[1] * rest / 255;
    char *prefix = as_text(data + 2, split);
    char *suffix = as_text(data + 2 + split, rest - split);
    size_t len = strlen(prefix) + strlen(f->form) + strlen(suffix) + 16;
    char *text = malloc(len);
    if (text == NULL)
        abort();
    snprintf(text, len, "%s zzprobezz", prefix);
    char probe[CW_ERROR_MAX + 1];
    size_t plen = cw_sanitize_error(text, probe, sizeof(probe));
    int closed = plen >= 10 && strcmp(probe + plen - 10, " zzprobezz") == 0;
    snprintf(text, len, "%s %s %s", prefix, f->form, suffix);
    char out[CW_ERROR_MAX + 1];
    check_output(out, cw_sanitize_error(text, out, sizeof(out)), sizeof(out));
    const char *exclude[2] = { prefix, suffix };
    char win[16];
    if (closed && secrets_leak(f, out, exclude, 2, win, sizeof(win))) {
        fprintf(stderr, "fuzz_sanitize: %s: \"%s\" survives in: %s\n", f->name, win, out);
        abort();
    }
    free(text);
    free(prefix);
    free(suffix);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_raw(data, size);
    fuzz_planted(data, size);
    return 0;
}
