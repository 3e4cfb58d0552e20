/* fstree.h -- the file operations a merge and a failure bundle need: copy a
 * file or a directory tree (hard links when allowed and possible), make a
 * directory path, remove a tree this program made.
 *
 * Symbolic links are never followed nor copied: a run directory holds none,
 * and one planted in a shard must not make the merge read or write outside
 * it.  Depth is bounded (FSTREE_MAX_DEPTH). */
#ifndef CW_FSTREE_H
#define CW_FSTREE_H

#include <stddef.h>

#define FSTREE_MAX_DEPTH 8

/* Copies regular file src to dst (created or truncated, mode 0644).  With
 * link_ok a hard link is tried first: a shard's files never change once
 * its run ended, so sharing them costs nothing.  0, or -1 with err. */
int fstree_copy_file(const char *src, const char *dst, int link_ok, char *err, size_t errlen);

/* Copies directory src into dst (made when missing): regular files and
 * subdirectories, recursively.  A top-level entry named skip (NULL: none)
 * is left out.  0, or -1 with err. */
int fstree_copy_dir(const char *src, const char *dst, int link_ok, const char *skip,
                    char *err, size_t errlen);

/* Copies the regular files directly inside src (no subdirectories) into
 * dst, made when missing.  Returns the number copied, or -1 with err. */
int fstree_copy_files(const char *src, const char *dst, char *err, size_t errlen);

/* snprintf for paths and messages built from paths: the same result.
 * Callers compare it with the buffer's size where a cut path matters
 * (where it only shortens a message, a cut is harmless). */
int fstree_fmt(char *out, size_t outlen, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* mkdir -p.  0, or -1 (errno set). */
int fstree_mkdir_p(const char *path);

/* Removes path and everything under it (never following a link).  0 or -1. */
int fstree_remove(const char *path);

/* Writes text to path whole: to a temporary name first, then renamed, so a
 * reader never sees half a file.  0, or -1 with err. */
int fstree_write_text(const char *path, const char *text, char *err, size_t errlen);

#endif
