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

int cw_write_text(const char *path, const char *text, int newline, char *err, size_t errlen)
{
    char tmp[PATH_MAX + 32];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp)) {
        snprintf(err, errlen, "%s: path too long", path);
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    int bad = fputs(text, f) < 0 || (newline && fputc('\n', f) == EOF);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
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
