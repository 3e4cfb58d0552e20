/* fstree.c -- copying and removing directory trees; see fstree.h. */
#include "fstree.h"
#include "common_fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fstree_copy_file(const char *src, const char *dst, int link_ok, char *err, size_t errlen)
{
    if (link_ok && link(src, dst) == 0)
        return 0;
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (in < 0) {
        snprintf(err, errlen, "cannot open %s: %s", src, strerror(errno));
        return -1;
    }
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        snprintf(err, errlen, "cannot create %s: %s", dst, strerror(errno));
        close(in);
        return -1;
    }
    char buf[65536];
    int rc = 0;
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n == 0)
            break;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errlen, "cannot read %s: %s", src, strerror(errno));
            rc = -1;
            break;
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                snprintf(err, errlen, "cannot write %s: %s", dst, strerror(errno));
                rc = -1;
                break;
            }
            off += w;
        }
        if (rc < 0)
            break;
    }
    close(in);
    if (close(out) < 0 && rc == 0) {
        snprintf(err, errlen, "cannot write %s: %s", dst, strerror(errno));
        rc = -1;
    }
    return rc;
}

/* src/name and dst/name into a and b; -1 when a path is too long. */
static int join2(const char *src, const char *dst, const char *name, char *a, char *b)
{
    return snprintf(a, PATH_MAX, "%s/%s", src, name) >= PATH_MAX ||
           snprintf(b, PATH_MAX, "%s/%s", dst, name) >= PATH_MAX ? -1 : 0;
}

static int copy_dir_at(const char *src, const char *dst, int link_ok, const char *skip,
                       int depth, int recurse, int *count, char *err, size_t errlen)
{
    if (depth > FSTREE_MAX_DEPTH) {
        snprintf(err, errlen, "%s: directories nested deeper than %d", src, FSTREE_MAX_DEPTH);
        return -1;
    }
    DIR *d = opendir(src);
    if (d == NULL) {
        snprintf(err, errlen, "cannot open directory %s: %s", src, strerror(errno));
        return -1;
    }
    if (cw_mkdir_p(dst) < 0) {
        snprintf(err, errlen, "cannot create %s: %s", dst, strerror(errno));
        closedir(d);
        return -1;
    }
    int rc = 0;
    char *a = malloc(PATH_MAX), *b = malloc(PATH_MAX);
    struct dirent *de;
    for (de = readdir(d); rc == 0 && a != NULL && b != NULL && de != NULL; de = readdir(d)) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
            (skip != NULL && depth == 0 && strcmp(de->d_name, skip) == 0))
            continue;
        if (join2(src, dst, de->d_name, a, b) < 0) {
            snprintf(err, errlen, "%s/%s: path too long", src, de->d_name);
            rc = -1;
            break;
        }
        struct stat st;
        if (lstat(a, &st) < 0) {
            snprintf(err, errlen, "cannot stat %s: %s", a, strerror(errno));
            rc = -1;
        } else if (S_ISREG(st.st_mode)) {
            rc = fstree_copy_file(a, b, link_ok, err, errlen);
            *count += rc == 0;
        } else if (S_ISDIR(st.st_mode) && recurse) {
            rc = copy_dir_at(a, b, link_ok, skip, depth + 1, 1, count, err, errlen);
        }
        /* Links, sockets, FIFOs: not part of a run's record. */
    }
    if (a == NULL || b == NULL) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    free(a);
    free(b);
    closedir(d);
    return rc;
}

int fstree_copy_dir(const char *src, const char *dst, int link_ok, const char *skip,
                    char *err, size_t errlen)
{
    int count = 0;
    return copy_dir_at(src, dst, link_ok, skip, 0, 1, &count, err, errlen);
}

int fstree_copy_files(const char *src, const char *dst, char *err, size_t errlen)
{
    int count = 0;
    if (copy_dir_at(src, dst, 0, NULL, 0, 0, &count, err, errlen) < 0)
        return -1;
    return count;
}

static int remove_at(const char *path, int depth)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlink(path);
    if (depth > FSTREE_MAX_DEPTH + 2)
        return -1;
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    int rc = 0;
    char *p = malloc(PATH_MAX);
    struct dirent *de;
    for (de = readdir(d); p != NULL && de != NULL; de = readdir(d)) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (snprintf(p, PATH_MAX, "%s/%s", path, de->d_name) >= PATH_MAX ||
            remove_at(p, depth + 1) < 0)
            rc = -1;
    }
    free(p);
    closedir(d);
    if (rmdir(path) < 0)
        rc = -1;
    return rc;
}

int fstree_remove(const char *path)
{
    return remove_at(path, 0);
}
