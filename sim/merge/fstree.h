/* fstree.h -- the file operations a merge and a failure bundle need: copy a
 * file or a directory tree (hard links when allowed and possible), remove a
 * tree this program made.  Making a directory path and writing a file whole
 * are common_fs.h's, shared with the rest of the harness.
 *
 * Symbolic links are never followed nor copied: a run directory holds none,
 * and one planted in a shard must not make the merge read or write outside
 * it.  Depth is bounded (FSTREE_MAX_DEPTH). */
#ifndef CW_FSTREE_H
#define CW_FSTREE_H

#include "common_fs.h"

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

/* Removes path and everything under it (never following a link).  0 or -1. */
int fstree_remove(const char *path);

#endif
