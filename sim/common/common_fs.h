/* fstree.h -- the file operations a merge and a failure bundle need: copy a
 * file or a directory tree (hard links when allowed and possible), make a
 * directory path, remove a tree this program made.
 *
 * Symbolic links are never followed nor copied: a run directory holds none,
 * and one planted in a shard must not make the merge read or write outside
 * it.  Depth is bounded (FSTREE_MAX_DEPTH). */
#ifndef CW_COMMON_FS_H
#define CW_COMMON_FS_H

#include <stddef.h>

/* snprintf for paths and messages built from paths: the same result.
 * Callers compare it with the buffer's size where a cut path matters
 * (where it only shortens a message, a cut is harmless). */
int fstree_fmt(char *out, size_t outlen, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* mkdir -p.  0, or -1 (errno set). */
int fstree_mkdir_p(const char *path);

/* Writes text to path whole: to a temporary name first, then renamed, so a
 * reader never sees half a file.  0, or -1 with err. */
int fstree_write_text(const char *path, const char *text, char *err, size_t errlen);

#endif
