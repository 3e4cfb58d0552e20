/* common_fs.h -- paths and whole files, as several harness folders need them:
 * a path built with printf, a directory path made, a file read whole or
 * written whole.
 *
 * sim/common holds code that two or more harness components share and
 * nothing program-specific: a helper used by one folder stays in that
 * folder, and what src/ may need too belongs in src/core (src/ never
 * includes sim/).  It is a leaf: it includes nothing of the harness. */
#ifndef CW_COMMON_FS_H
#define CW_COMMON_FS_H

#include <stddef.h>

/* snprintf for paths and messages built from paths: the same result.
 * Callers compare it with the buffer's size where a cut path matters
 * (where it only shortens a message, a cut is harmless). */
int cw_fmt(char *out, size_t outlen, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* mkdir -p.  0, or -1 (errno set). */
int cw_mkdir_p(const char *path);

/* Writes text to path whole: to a temporary name first (path.tmp.PID), then
 * renamed, so a reader never sees half a file; with newline a '\n' follows
 * the text (how the JSON writers end their files).  0, or -1 with err. */
int cw_write_text(const char *path, const char *text, int newline, char *err, size_t errlen);

/* Why cw_write_data failed: callers word the message their own way. */
enum cw_write_error {
    CW_WRITE_TOO_LONG, /* the temporary name does not fit in tmp */
    CW_WRITE_CREATE,   /* the temporary file cannot be created; errno says why */
    CW_WRITE_WRITE,    /* writing, closing or renaming it failed; errno says why */
};

/* cw_write_text for len bytes of data, as they are, for a caller that words
 * its own messages: the temporary name is built in tmp (tmplen bytes; a name
 * that does not fit is CW_WRITE_TOO_LONG) so that a message can show it.
 * 0, or -1 with *why and errno set; the temporary file is gone. */
int cw_write_data(const char *path, const void *data, size_t len, char *tmp, size_t tmplen,
                  enum cw_write_error *why);

/* Why cw_slurp failed: callers word the message their own way. */
enum cw_slurp_error {
    CW_SLURP_OPEN,      /* fopen failed; errno says why (ENOENT: missing) */
    CW_SLURP_NOMEM,     /* no memory for max + 1 bytes */
    CW_SLURP_READ,      /* a read error */
    CW_SLURP_TOO_LARGE, /* more than max bytes */
};

/* The whole file at path, NUL-terminated (the caller frees it), and its
 * length in *len; at most max bytes.  NULL with *why set (errno kept for
 * CW_SLURP_OPEN). */
char *cw_slurp(const char *path, size_t max, size_t *len, enum cw_slurp_error *why);

#endif
