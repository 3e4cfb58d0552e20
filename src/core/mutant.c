/* mutant.c -- the reach build's record of the mutant hooks a run evaluated
 * (mutant.h). */
#include "mutant.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Names already written, by the address of their literal: a name spelt in
 * two files may be written twice, which the reader folds. */
#define REACH_SLOTS 256
static _Atomic(const char *) reach_seen[REACH_SLOTS];

int cw_mutant_reached(const char *name)
{
    int slot = -1;
    for (int i = 0; i < REACH_SLOTS && slot < 0; i++) {
        const char *cur = atomic_load(&reach_seen[i]);
        if (cur == name)
            return 0;
        if (cur == NULL) {
            const char *expected = NULL;
            if (atomic_compare_exchange_strong(&reach_seen[i], &expected, name))
                slot = i;
            else if (expected == name)
                return 0;
        }
    }
    const char *path = getenv(CW_MUTANT_REACH_ENV);
    if (path == NULL || path[0] == '\0')
        return 0;
    char line[128];
    int len = snprintf(line, sizeof(line), "%s\n", name);
    if (len <= 0 || len >= (int)sizeof(line))
        return 0;
    /* One write under O_APPEND: every process of a scenario shares the
     * file, and a line under PIPE_BUF is never torn by another's. */
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return 0;
    ssize_t w = write(fd, line, (size_t)len);
    (void)w;
    close(fd);
    return 0;
}
