/* common_fs.c -- paths and whole files; see common_fs.h. */
#include "common_fs.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cw_fmt(char *out, size_t outlen, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(out, outlen, format, ap);
    va_end(ap);
    return n;
}

int cw_mkdir_p(const char *path)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(tmp, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* The file written whole: data, then a '\n' with newline, to tmp (path.tmp.PID)
 * renamed to path.  0, or -1 with *why and errno set (tmp removed). */
static int write_whole(const char *path, const void *data, size_t len, int newline,
                       char *tmp, size_t tmplen, enum cw_write_error *why)
{
    if (snprintf(tmp, tmplen, "%s.tmp.%ld", path, (long)getpid()) >= (int)tmplen) {
        *why = CW_WRITE_TOO_LONG;
        return -1;
    }
    FILE *f = fopen(tmp, "wb");
    if (f == NULL) {
        *why = CW_WRITE_CREATE;
        return -1;
    }
    int bad = fwrite(data, 1, len, f) != len || (newline && fputc('\n', f) == EOF);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        *why = CW_WRITE_WRITE;
        return -1;
    }
    return 0;
}

int cw_write_text(const char *path, const char *text, int newline, char *err, size_t errlen)
{
    char tmp[PATH_MAX + 32];
    enum cw_write_error why;
    if (write_whole(path, text, strlen(text), newline, tmp, sizeof(tmp), &why) == 0)
        return 0;
    if (why == CW_WRITE_TOO_LONG)
        snprintf(err, errlen, "%s: path too long", path);
    else
        snprintf(err, errlen, "cannot %s %s: %s", why == CW_WRITE_CREATE ? "create" : "write",
                 path, strerror(errno));
    return -1;
}

int cw_write_data(const char *path, const void *data, size_t len, char *tmp, size_t tmplen,
                  enum cw_write_error *why)
{
    return write_whole(path, data, len, 0, tmp, tmplen, why);
}

char *cw_slurp(const char *path, size_t max, size_t *len, enum cw_slurp_error *why)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        *why = CW_SLURP_OPEN;
        return NULL;
    }
    char *data = malloc(max + 1);
    size_t n = data != NULL ? fread(data, 1, max + 1, f) : 0;
    int bad = data == NULL || ferror(f);
    fclose(f);
    if (bad || n > max) {
        *why = data == NULL ? CW_SLURP_NOMEM : bad ? CW_SLURP_READ : CW_SLURP_TOO_LARGE;
        free(data);
        return NULL;
    }
    data[n] = '\0';
    *len = n;
    return data;
}
