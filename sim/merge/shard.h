/* shard.h -- one share of a run's work, and how it is chosen.
 *
 * `--shard K/N` on run, mutants and sim says: of the whole work, do share K
 * of N (K counts from 1, as "shard 2 of 3" does).  The split is a pure
 * function of the work list and K/N, so N machines that each run one share
 * cover the whole work exactly once, with no coordinator:
 *
 *   scenarios and mutants   round robin over the sorted list: item i (from
 *                           0) belongs to share i % N + 1; or, for scenarios
 *                           with --shard-weights DIR, by the durations an
 *                           earlier run took: longest first, each to the
 *                           share with the least time so far, so that the
 *                           shares end close together (shard_plan);
 *   simulator runs          contiguous ranges of run indexes (a seed range),
 *                           share K taking runs (K-1)*R/N + 1 .. K*R/N.
 *
 * `--shard env` takes K/N from the environment a CI matrix or a Kubernetes
 * Indexed Job sets, first found wins:
 *   CW_SHARD=K/N                               (any CI: say it yourself)
 *   JOB_COMPLETION_INDEX=I with CW_SHARD_COUNT=N  (Kubernetes Indexed Job;
 *                                               I counts from 0, so K = I+1)
 *   CI_NODE_INDEX=K with CI_NODE_TOTAL=N       (GitLab CI `parallel:`)
 *
 * Every value is checked: a bad one is an error naming the flag or the
 * variable, its value and what was expected. */
#ifndef CW_SHARD_H
#define CW_SHARD_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#define SHARD_MAX 10000

struct shard {
    int index;               /* 1..count; 0 when the run is not sharded */
    int count;
};

/* Parses "K/N" (whole decimal numbers, 1 <= K <= N <= SHARD_MAX) into sh.
 * 0, or -1 with the reason in err (sh unchanged). */
int shard_parse(const char *text, struct shard *sh, char *err, size_t errlen);

/* The value of --shard: "K/N", or "env" for the environment (see above).
 * 0, or -1 with the reason in err. */
int shard_arg(const char *arg, struct shard *sh, char *err, size_t errlen);

/* 1 when item i (from 0) of a round-robin list is this share's; every item
 * is when sh is not sharded. */
int shard_mine(const struct shard *sh, long i);

/* The share (1..count) of each of n items into plan[]: round robin when
 * weights is NULL; otherwise the heaviest item first (ties: the lower
 * index), each to the share with the least weight so far (ties: the lower
 * share) -- the "longest processing time first" rule, within 4/3 of the
 * best split.  Equal weights give round robin.  A pure function of its
 * arguments: every shard computes the same plan. */
void shard_plan(const double *weights, int n, int count, int *plan);

/* This share of runs 1..total: [*first, *last], empty (first > last) when
 * total < count.  The whole range when sh is not sharded. */
void shard_range(const struct shard *sh, long total, long *first, long *last);

/* "K/N" into out. */
void shard_name(const struct shard *sh, char *out, size_t outlen);

/* FNV-1a, 64 bits: a digest of the work a shard was given (names and file
 * contents), so that shards of different scenario files do not merge.  Not
 * a defence against anyone: a check that two honest runs agree. */
#define SHARD_DIGEST_INIT 0xcbf29ce484222325ULL
uint64_t shard_digest(uint64_t h, const char *text);
/* The digest as 16 hex digits (out holds at least 17 bytes). */
void shard_digest_hex(uint64_t h, char *out, size_t outlen);

/* The "shard" object of result.json: {"index": K, "count": N}; the caller
 * adds what describes the work.  NULL when out of memory. */
cJSON *shard_json(const struct shard *sh);

#endif
