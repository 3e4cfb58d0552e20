/* merge_internal.h -- what the files of `crashwindow merge` share: the
 * shards as read, and the checks (merge_check.c) that must all pass before
 * merge.c writes anything.  Private to sim/merge. */
#ifndef CW_MERGE_INTERNAL_H
#define CW_MERGE_INTERNAL_H

#include <cjson/cJSON.h>
#include <limits.h>
#include <stddef.h>

/* One shard directory, as given on the command line. */
struct mshard {
    const char *dir;            /* as given */
    char real[PATH_MAX];        /* its real path */
    cJSON *res;                 /* result.json (owned) */
    const cJSON *shard;         /* its "shard" object */
    int index, count;
    char label[PATH_MAX + 32];  /* "shard K/N (DIR)", or DIR before it is known */
};

/* Every shard, and the work they split (taken from the first, checked
 * equal in all). */
struct merge {
    struct mshard *sh;
    int n;
    const char *kind;           /* "run", "mutants" or "sim" */
    int count;                  /* N */
    struct mshard **by_index;   /* [1..count] */
    const cJSON *work;          /* run, mutants: the scenario names */
    const cJSON *mwork;         /* mutants: the mutant names */
    const cJSON *plan;          /* run, mutants: the share of each scenario (NULL:
                                   round robin) */
    int repeat;                 /* run: each scenario this many times */
    long runs;                  /* sim: runs 1..runs of the seed */
};

/* Loads every shard's result.json and runs every check (see merge.h).
 * 0, or -1 with one message naming the shard and the problem in err. */
int merge_check(struct merge *m, char *err, size_t errlen);

/* Position of name in the string array arr, or -1. */
int merge_find(const cJSON *arr, const char *name);

/* The run index of a simulator scenario named "sim-S-I" (with S's text in
 * seed, when not NULL), or -1. */
long merge_sim_index(const char *name, char *seed, size_t seedlen);


#endif
