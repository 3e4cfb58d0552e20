/* test_harness_sim.c -- the simulator's generator, renderer and shrinker.
 *
 * Generation must be a pure function of (seed, run): the same pair renders
 * byte-identical JSON every time, different pairs differ.  Every generated
 * or shrunk plan must render to a scenario the runner accepts (validated by
 * the runner's own parser against the real catalogue), within the layout
 * the simulator promises, and every shrinking edit must make the plan
 * strictly smaller.  The renderer must leave out the actions the runner
 * could not perform. */
#include "check.h"
#include "runner.h"
#include "scenario.h"
#include "simulator.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *render_text(const struct sim_plan *p)
{
    char name[64];
    sim_scenario_name(p->seed, p->run, name, sizeof(name));
    cJSON *sc = sim_render(p, name, NULL);
    char *text = sc ? cJSON_PrintUnformatted(sc) : NULL;
    cJSON_Delete(sc);
    return text;
}

/* Renders p and validates it with the runner's parser; 1 when accepted. */
static int parses(const struct sim_plan *p, char **points)
{
    char *text = render_text(p);
    char err[512];
    struct scenario *sc = text ? scenario_parse(text, "generated", (const char *const *)points,
                                                err, sizeof(err)) : NULL;
    if (sc == NULL)
        fprintf(stderr, "rejected: %s\n%s\n", text ? err : "no text", text ? text : "");
    int ok = sc != NULL;
    scenario_free(sc);
    free(text);
    return ok;
}

static void test_rng(void)
{
    struct sim_rng a, b, c;
    sim_rng_init(&a, 7, 1);
    sim_rng_init(&b, 7, 1);
    sim_rng_init(&c, 7, 2);
    int same = 1, differ = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = sim_rng_next(&a), y = sim_rng_next(&b), z = sim_rng_next(&c);
        same &= x == y;
        differ |= x != z;
    }
    CHECK(same);
    CHECK(differ);
    int seen[5] = { 0 }, in_range = 1;
    for (int i = 0; i < 5000; i++) {
        int v = sim_rng_range(&a, 3, 7);
        in_range &= v >= 3 && v <= 7;
        if (v >= 3 && v <= 7)
            seen[v - 3]++;
    }
    CHECK(in_range);
    for (int i = 0; i < 5; i++)
        CHECK(seen[i] > 700); /* roughly uniform: 1000 expected each */
    CHECK_EQ_INT(sim_rng_below(&a, 0), 0);
    CHECK_EQ_INT(sim_rng_range(&a, 5, 4), 5);
}

static void test_catalogue(const struct sim_catalogue *cat)
{
    struct sim_catalogue bad;
    char err[256];
    CHECK(sim_catalogue_parse(&bad, "{\"points\": 3}", err, sizeof(err)) < 0);
    CHECK(strstr(err, "points") != NULL);
    CHECK(sim_catalogue_parse(&bad, "{\"points\": [{\"name\": \"nocomponent\", "
                              "\"actions\": [\"crash\"]}]}", err, sizeof(err)) < 0);
    CHECK_EQ_INT(sim_catalogue_parse(&bad, "{\"points\": [{\"name\": \"relay/x\", "
                                     "\"actions\": [\"crash\", \"stall\"]}]}", err, sizeof(err)),
                 0);
    CHECK(bad.n == 1 && bad.p[0].actions == ((1u << SIM_CRASH) | (1u << SIM_STALL)));
    /* The real catalogue: sorted, every point with an action. */
    CHECK(cat->n >= 10);
    for (int i = 1; i < cat->n; i++)
        CHECK(strcmp(cat->p[i - 1].name, cat->p[i].name) < 0);
}

static void test_generate(const struct sim_catalogue *cat, char **points)
{
    const uint64_t seeds[] = { 1, 42, 9007199254740993ULL, 18446744073709551615ULL };
    long faults = 0, kills = 0, pauses = 0, restarts = 0, brokers = 0, settles = 0;
    int two_groups = 0, three_relays = 0;
    for (size_t si = 0; si < sizeof(seeds) / sizeof(seeds[0]); si++) {
        for (uint64_t run = 1; run <= 150; run++) {
            struct sim_plan p1, p2;
            sim_generate(cat, seeds[si], run, &p1);
            sim_generate(cat, seeds[si], run, &p2);
            char *t1 = render_text(&p1), *t2 = render_text(&p2);
            CHECK(t1 != NULL && t2 != NULL && strcmp(t1, t2) == 0);
            struct sim_plan p3;
            sim_generate(cat, seeds[si], run + 1, &p3);
            char *t3 = render_text(&p3);
            CHECK(t3 != NULL && t1 != NULL && strcmp(t1, t3) != 0);
            /* No generated expectation excuses parking. */
            CHECK(t1 != NULL && strstr(t1, "\"check\":\"parked\"") == NULL);
            CHECK(t1 != NULL && strstr(t1, "\"faults_optional\":true") != NULL);
            free(t1);
            free(t2);
            free(t3);
            CHECK(parses(&p1, points));

            int relays = 0, groups[2] = { 0, 0 }, pays = 0;
            CHECK_EQ_INT(p1.procs[0].kind, SIM_API);
            for (int i = 0; i < p1.nprocs; i++) {
                relays += p1.procs[i].kind == SIM_RELAY;
                if (p1.procs[i].kind == SIM_CONSUMER)
                    groups[p1.procs[i].group]++;
                if (p1.procs[i].kind == SIM_RELAY)
                    CHECK(p1.procs[i].lease_ms <= 1500);
            }
            CHECK(relays >= 1 && relays <= 3);
            /* Dead letters (attempt limit 3) only with fifo relays, and
             * poison windows only with them. */
            for (int i = 1; i <= relays; i++)
                CHECK_EQ_INT(p1.procs[i].max_attempts, (p1.procs[i].per_aggregate ? 12
                                                          : p1.procs[1].max_attempts));
            for (int k = 0; k < p1.nacts; k++)
                if (p1.acts[k].kind == SIM_BROKER && p1.acts[k].max_payload > 0)
                    CHECK_EQ_INT(p1.procs[1].max_attempts, 3);
            CHECK(groups[0] >= 1 && groups[0] <= 2 && groups[1] <= 2);
            CHECK(p1.procs[1].kind == SIM_RELAY && p1.procs[1].autostart);
            two_groups |= groups[1] > 0;
            three_relays |= relays == 3;
            for (int i = 0; i < p1.nfaults; i++) {
                const struct sim_fault *f = &p1.faults[i];
                CHECK(f->hit >= 1);
                CHECK(f->proc >= 0 && f->proc < p1.nprocs);
                CHECK(!(p1.procs[f->proc].kind == SIM_API && f->action == SIM_PARK));
                /* First-start faults only on a process that autostarts: the
                 * loader refuses faults the runner would never arm. */
                CHECK(f->incarnation != -1 || p1.procs[f->proc].autostart);
                CHECK(f->incarnation == -1 ||
                      (f->incarnation < p1.nacts && p1.acts[f->incarnation].kind == SIM_RESTART &&
                       p1.acts[f->incarnation].proc == f->proc));
            }
            int windows = 0;
            for (int k = 0; k < p1.nacts; k++) {
                const struct sim_act *a = &p1.acts[k];
                pays += a->kind == SIM_PAY;
                /* No kernel partition outside a namespace of the run's own. */
                CHECK(!(a->kind == SIM_NET && a->net == SIM_NET_PARTITION));
                kills += a->kind == SIM_KILL;
                pauses += a->kind == SIM_PAUSE;
                restarts += a->kind == SIM_RESTART;
                brokers += a->kind == SIM_BROKER;
                settles += a->kind == SIM_SETTLE;
                /* A poison window or a broker outage holds a payments
                 * batch before it closes (or before the end). */
                int poison = a->kind == SIM_BROKER && a->max_payload > 0;
                int outage = a->kind == SIM_BROKER && a->outage > 0;
                if (!poison && !outage)
                    continue;
                windows++;
                int paid = 0;
                for (int j = k + 1; j < p1.nacts && !paid; j++) {
                    const struct sim_act *b = &p1.acts[j];
                    if (b->kind == SIM_BROKER &&
                        ((poison && b->max_payload == 0) || (outage && b->outage >= 0)))
                        break;
                    paid = b->kind == SIM_PAY;
                }
                CHECK(paid);
                /* A creations-only window is followed by a requeue after
                 * its close, which brings the creations back. */
                if (a->max_payload != 200) /* SIM_POISON_CREATED_BYTES */
                    continue;
                int close = -1, requeued = 0;
                for (int j = k + 1; j < p1.nacts && close < 0; j++)
                    if (p1.acts[j].kind == SIM_BROKER && p1.acts[j].max_payload == 0)
                        close = j;
                for (int j = close + 1; close >= 0 && j < p1.nacts; j++)
                    requeued |= p1.acts[j].kind == SIM_REQUEUE;
                CHECK(close < 0 || requeued);
            }
            /* 2-4 batches, at most one more per window, and one for each
             * drawn ending (a stale mark, silent consumer links, dead
             * broker links). */
            CHECK(pays >= 2 && pays <= 4 + windows + 3);
            faults += p1.nfaults;
        }
    }
    /* Swarm: over 600 runs every kind of nemesis shows up. */
    CHECK(two_groups && three_relays);
    CHECK(faults > 600 && kills > 50 && pauses > 50 && restarts > 50 && brokers > 50 &&
          settles > 300);
}

/* With the runs in a network namespace of their own: kernel partitions,
 * only on PostgreSQL links and outlasting the process's deadline when
 * aimed at a consumer parked inside its transaction (scenario 34's window:
 * park, partition, resume), and the other link faults. */
static void test_links(const struct sim_catalogue *base, char **points)
{
    struct sim_catalogue cat = *base;
    cat.infra = cat.partitions = 1;
    int partitions = 0, aimed = 0, downs = 0, limits = 0, runs = 0;
    const uint64_t seeds[] = { 3, 77, 123456789 };
    for (size_t si = 0; si < sizeof(seeds) / sizeof(seeds[0]); si++) {
        for (uint64_t run = 1; run <= 200; run++, runs++) {
            struct sim_plan p;
            sim_generate(&cat, seeds[si], run, &p);
            CHECK(parses(&p, points));
            for (int k = 0; k < p.nacts; k++) {
                const struct sim_act *a = &p.acts[k];
                if (a->kind != SIM_NET)
                    continue;
                downs += a->net == SIM_NET_DOWN;
                limits += a->net == SIM_NET_LIMIT_DATA;
                if (a->net != SIM_NET_PARTITION)
                    continue;
                partitions++;
                const struct sim_proc *x = &p.procs[a->proc];
                CHECK(!a->net_broker);
                CHECK(x->db_deadline_ms >= 800 && x->db_deadline_ms <= 1500);
                if (!a->after_park)
                    continue;
                aimed++;
                CHECK(x->kind == SIM_CONSUMER && a->ms > x->db_deadline_ms);
                CHECK(k + 1 < p.nacts && p.acts[k + 1].kind == SIM_RESUME &&
                      p.acts[k + 1].proc == a->proc && p.acts[k + 1].after_park);
                int own = 0, parked = 0;
                for (int i = 0; i < p.nfaults; i++) {
                    own += p.faults[i].proc == a->proc;
                    parked += p.faults[i].proc == a->proc && p.faults[i].incarnation == -1 &&
                              p.faults[i].action == SIM_PARK && p.faults[i].hit == 1 &&
                              strcmp(p.faults[i].point, "consumer/before_commit") == 0;
                }
                CHECK(own == 1 && parked == 1);
            }
        }
    }
    /* Aimed in about one run in ten: within reach of a 50-run budget. */
    CHECK(aimed * 100 >= runs * 6);
    CHECK(partitions > aimed && downs > 10 && limits > 10);
}

/* The silent consumer links ending: when drawn, the broker takes every
 * publish again (a switch left on is switched off), every relay and then every consumer is restarted with no
 * fault (each consumer awaited until subscribed), each consumer's broker
 * link is cut at its first ACK and then silent, a batch gives every
 * consumer of a group a delivery, and the run waits until the pipeline
 * caught up (not until its newest event looks old: a clock behind would
 * end that at once) before the heal clears the cuts. */
static void test_silent_consumers(const struct sim_catalogue *cat, char **points)
{
    int drawn = 0, runs = 0;
    const uint64_t seeds[] = { 5, 31, 9020 };
    for (size_t si = 0; si < sizeof(seeds) / sizeof(seeds[0]); si++) {
        for (uint64_t run = 1; run <= 200; run++, runs++) {
            struct sim_plan p;
            sim_generate(cat, seeds[si], run, &p);
            int at = -1;
            for (int k = 0; k < p.nacts && at < 0; k++)
                if (p.acts[k].kind == SIM_RESTART && p.acts[k].await_start)
                    at = k;
            int consumers = 0, per_group[2] = { 0, 0 }, relays = 0, timeouts = 0;
            for (int i = 0; i < p.nprocs; i++) {
                relays += p.procs[i].kind == SIM_RELAY;
                timeouts += p.procs[i].bus_timeout_ms != 0;
                if (p.procs[i].kind == SIM_CONSUMER) {
                    consumers++;
                    per_group[p.procs[i].group]++;
                }
            }
            if (at < 0) {
                CHECK_EQ_INT(timeouts, 0);
                continue;
            }
            drawn++;
            CHECK(parses(&p, points));
            CHECK_EQ_INT(timeouts, consumers);
            /* The broker's switches off, when the schedule left one on. */
            int outage = SIM_OUTAGE_OFF, max_payload = 0, k = at - relays - 1;
            for (int j = 0; j < k; j++) {
                if (p.acts[j].kind == SIM_BROKER && p.acts[j].outage >= 0)
                    outage = p.acts[j].outage;
                if (p.acts[j].kind == SIM_BROKER && p.acts[j].max_payload >= 0)
                    max_payload = p.acts[j].max_payload;
            }
            if (outage != SIM_OUTAGE_OFF || max_payload > 0)
                CHECK(p.acts[k].kind == SIM_BROKER &&
                      p.acts[k].outage == (outage != SIM_OUTAGE_OFF ? SIM_OUTAGE_OFF : -1) &&
                      p.acts[k].max_payload == (max_payload > 0 ? 0 : -1));
            for (k++; k < at; k++)
                CHECK(p.acts[k].kind == SIM_RESTART && p.procs[p.acts[k].proc].kind == SIM_RELAY &&
                      !p.acts[k].await_start);
            for (int i = 0; i < consumers; i++, k++)
                CHECK(k < p.nacts && p.acts[k].kind == SIM_RESTART && p.acts[k].await_start &&
                      p.procs[p.acts[k].proc].kind == SIM_CONSUMER);
            for (int i = 0; i < consumers; i++, k++)
                CHECK(k < p.nacts && p.acts[k].kind == SIM_NET && p.acts[k].net == SIM_NET_CUT &&
                      p.acts[k].net_broker && p.acts[k].net_a == 0 &&
                      p.procs[p.acts[k].proc].kind == SIM_CONSUMER);
            int most = per_group[0] > per_group[1] ? per_group[0] : per_group[1];
            CHECK(k < p.nacts && p.acts[k].kind == SIM_PAY && p.acts[k].authorize &&
                  p.acts[k].count >= most && p.acts[k].count >= 2);
            k++;
            CHECK(k < p.nacts && p.acts[k].kind == SIM_SETTLE && p.acts[k].caught_up &&
                  p.acts[k].ms == 5000);
            /* No fault armed in the restarted consumers. */
            for (int f = 0; f < p.nfaults; f++)
                CHECK(p.faults[f].incarnation < at - relays);
            char *text = render_text(&p);
            CHECK(text != NULL && strstr(text, "\"bus-timeout-ms\":2000") != NULL &&
                  strstr(text, "\"event\":\"start\",\"count\":") != NULL &&
                  strstr(text, "\"cut_after\":\"ack\",\"then\":\"blackhole\"") != NULL &&
                  strstr(text, "until the pipeline caught up") != NULL);
            free(text);
        }
    }
    /* One run in five, give or take. */
    CHECK(drawn * 100 >= runs * 12 && drawn * 100 <= runs * 28);
}

static void test_shrink(const struct sim_catalogue *cat, char **points)
{
    for (uint64_t run = 1; run <= 30; run++) {
        struct sim_plan p, v;
        sim_generate(cat, 5, run, &p);
        long size = sim_plan_size(&p);
        char what[160];
        int k = 0;
        for (; sim_shrink_variant(&p, k, &v, what, sizeof(what)); k++) {
            CHECK(sim_plan_size(&v) < size);
            CHECK(what[0] != '\0');
            CHECK(v.nprocs >= 3 && v.procs[0].kind == SIM_API);
            int pays = 0;
            for (int a = 0; a < v.nacts; a++)
                pays += v.acts[a].kind == SIM_PAY;
            CHECK(pays >= 1);
            for (int i = 0; i < v.nfaults; i++)
                CHECK(v.faults[i].proc < v.nprocs &&
                      (v.faults[i].incarnation < 0 ||
                       v.acts[v.faults[i].incarnation].kind == SIM_RESTART));
            if (k % 3 == 0)
                CHECK(parses(&v, points));
        }
        CHECK(k > 5);
        /* Shrinking all the way (every first variant) ends, parseable. */
        struct sim_plan cur = p;
        int steps = 0;
        while (sim_shrink_variant(&cur, 0, &v, what, sizeof(what)) && steps < 1000) {
            cur = v;
            steps++;
        }
        CHECK(steps < 1000);
        CHECK(parses(&cur, points));
        CHECK(sim_plan_size(&cur) <= 5); /* api, relay, consumer, one batch of one */
    }
}

/* A kill of a process that may have crashed on its own, a resume of one
 * never paused, a pause of the API: left out.  A batch after an API with
 * faults gets a fresh API. */
/* The processes of a hand-made plan, every one started with the run; the
 * relay at index 1 dead-letters at 12 attempts. */
static void set_procs(struct sim_plan *p, const enum sim_kind *kinds, int n)
{
    memset(p, 0, sizeof(*p));
    p->nprocs = n;
    for (int i = 0; i < n; i++) {
        p->procs[i].kind = kinds[i];
        p->procs[i].autostart = 1;
    }
    p->procs[1].max_attempts = 12;
}

/* The acts of a hand-made plan: kinds[k] aimed at procs[k], count each,
 * no broker switch. */
static void set_acts(struct sim_plan *p, const enum sim_act_kind *kinds, const int *procs, int n,
                     int count)
{
    p->nacts = n;
    for (int k = 0; k < n; k++) {
        p->acts[k].kind = kinds[k];
        p->acts[k].proc = procs[k];
        p->acts[k].count = count;
        p->acts[k].outage = p->acts[k].duplicate = p->acts[k].max_payload = -1;
    }
}

static void test_render_rules(void)
{
    struct sim_plan p;
    memset(&p, 0, sizeof(p));
    p.seed = 3;
    p.run = 4;
    p.nprocs = 3;
    p.procs[0].kind = SIM_API;
    p.procs[0].autostart = 1;
    p.procs[1].kind = SIM_RELAY;
    p.procs[1].autostart = 1;
    p.procs[1].lease_ms = 800;
    p.procs[1].idle_ms = 50;
    p.procs[1].batch = 1;
    p.procs[1].backoff_base_ms = 20;
    p.procs[1].backoff_cap_ms = 500;
    p.procs[1].max_attempts = 12;
    p.procs[2].kind = SIM_CONSUMER;
    p.procs[2].autostart = 1;
    p.procs[2].prefetch = 1;
    p.procs[2].cbatch = 1;
    p.visibility_ms = 1000;
    p.nfaults = 2;
    snprintf(p.faults[0].point, SIM_POINT_MAX, "relay/after_publish");
    p.faults[0].proc = 1;
    p.faults[0].incarnation = -1;
    p.faults[0].action = SIM_CRASH;
    p.faults[0].hit = 2;
    snprintf(p.faults[1].point, SIM_POINT_MAX, "api/before_commit");
    p.faults[1].proc = 0;
    p.faults[1].incarnation = -1;
    p.faults[1].action = SIM_FAIL;
    p.faults[1].hit = 1;
    enum sim_act_kind kinds[] = { SIM_PAY, SIM_KILL, SIM_RESUME, SIM_PAUSE, SIM_REUSE, SIM_PAY,
                                  SIM_REUSE, SIM_RESTART, SIM_KILL, SIM_BROKER };
    int procs[] = { 0, 1, 2, 0, 0, 0, 0, 1, 1, -1 };
    set_acts(&p, kinds, procs, 10, 2);
    p.acts[9].max_payload = 64;
    cJSON *sc = sim_render(&p, "sim-3-4", NULL);
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(sc, "steps");
    char seq[256] = "";
    const cJSON *st;
    cJSON_ArrayForEach(st, steps) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(st, "do");
        const cJSON *pr = cJSON_GetObjectItemCaseSensitive(st, "proc");
        size_t n = strlen(seq);
        snprintf(seq + n, sizeof(seq) - n, "%s%s%s%s", n ? " " : "", d->valuestring,
                 pr ? ":" : "", pr ? pr->valuestring : "");
    }
    /* kill:relay-1 (crash armed) dropped, resume:acct-1 (nothing to resume)
     * dropped, pause:api dropped, the key reuse after the faulty API's batch
     * dropped; the second batch gets a fresh API and its key reuse stays;
     * after the restart relay-1 holds no fault, so the kill stays; the
     * poison window opens after a wait for the earlier events' publishes. */
    const char *want = "payments restart:api payments http restart:relay-1 kill:relay-1 wait "
                       "broker";
    CHECK_EQ_STR(seq, want);
    if (strcmp(seq, want) != 0)
        fprintf(stderr, "steps: %s\n", seq);
    const cJSON *reuse = cJSON_GetArrayItem(steps, 3);
    CHECK_EQ_STR(cJSON_GetObjectItemCaseSensitive(reuse, "key")->valuestring, "b2-1");
    CHECK_EQ_INT(cJSON_GetObjectItemCaseSensitive(reuse, "expect_status")->valueint, 422);
    const cJSON *ctl = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(steps, 7), "control");
    CHECK_EQ_INT(cJSON_GetObjectItemCaseSensitive(ctl, "max_payload_bytes")->valueint, 64);
    const cJSON *api = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(sc, "processes"), "api");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(api, "faults");
    CHECK(cJSON_IsString(f) && strcmp(f->valuestring, "api/before_commit=fail@1") == 0);
    cJSON_Delete(sc);
}

/* Steps of plan p as "verb:proc ..." into out. */
static void step_seq(const struct sim_plan *p, char *out, size_t outlen)
{
    cJSON *sc = sim_render(p, "sim-3-5", NULL);
    const cJSON *st;
    out[0] = '\0';
    cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(sc, "steps")) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(st, "do");
        const cJSON *pr = cJSON_GetObjectItemCaseSensitive(st, "proc");
        size_t n = strlen(out);
        snprintf(out + n, outlen - n, "%s%s%s%s", n ? " " : "", d->valuestring, pr ? ":" : "",
                 pr ? pr->valuestring : "");
    }
    cJSON_Delete(sc);
}

/* p's rendered steps are want ("verb" or "verb:proc", space-separated). */
static void check_steps(const struct sim_plan *p, const char *want)
{
    char seq[256];
    step_seq(p, seq, sizeof(seq));
    CHECK_EQ_STR(seq, want);
    if (strcmp(seq, want) != 0)
        fprintf(stderr, "steps: %s\n  want: %s\n", seq, want);
}

/* A resume must not meet a process that stops itself again at once: our
 * own pause is resumed only without park faults armed, a park only when it
 * is the only one. */
static void test_resume_rules(void)
{
    struct sim_plan p;
    const enum sim_kind layout[] = { SIM_API, SIM_RELAY, SIM_CONSUMER, SIM_CONSUMER };
    set_procs(&p, layout, 4);
    const char *points[] = { "consumer/after_commit", "consumer/after_ack", "relay/after_claim" };
    int owner[] = { 2, 2, 1 };
    p.nfaults = 3;
    for (int i = 0; i < 3; i++) {
        snprintf(p.faults[i].point, SIM_POINT_MAX, "%s", points[i]);
        p.faults[i].proc = owner[i];
        p.faults[i].incarnation = -1;
        p.faults[i].action = SIM_PARK;
        p.faults[i].hit = 1;
    }
    enum sim_act_kind kinds[] = { SIM_PAY, SIM_RESUME, SIM_RESUME, SIM_PAUSE, SIM_RESUME,
                                  SIM_PAUSE, SIM_RESUME };
    int procs[] = { 0, 2, 1, 1, 1, 3, 3 };
    set_acts(&p, kinds, procs, 7, 1);
    /* acct-1 holds two parks: no resume; relay-1 holds one: held past its
     * lease (a relay parked in its loop holds a claim) and until nothing is
     * pending (the others took its rows over), resumed, then paused by us
     * and not resumed (its park may be unfired); acct-2 holds none: paused
     * and resumed. */
    check_steps(&p, "payments sleep wait resume:relay-1 pause:relay-1 pause:acct-2 "
                    "resume:acct-2");
}

/* A fault that makes the API answer errors on its database link: the
 * batch that meets it is not clean (no key reuse after it, nor while the
 * fault may be on), and the next batch gets the link back first. */
static void test_api_link_rules(void)
{
    struct sim_plan p;
    const enum sim_kind layout[] = { SIM_API, SIM_RELAY, SIM_CONSUMER };
    set_procs(&p, layout, 3);
    enum sim_act_kind kinds[] = { SIM_PAY, SIM_NET, SIM_REUSE, SIM_PAY, SIM_REUSE, SIM_PAY,
                                  SIM_REUSE };
    const int procs[] = { 0, 0, 0, 0, 0, 0, 0 };
    set_acts(&p, kinds, procs, 7, 1);
    p.acts[1].net = SIM_NET_DOWN;
    p.acts[1].ms = 2000;
    check_steps(&p, "payments net payments net payments http");
    /* A link that swallows bytes holds the request that meets it until the
     * API's deadline: nothing may be stored for that key, so no reuse of
     * it either (seed 9023, run 384: the reuse of a key whose request had
     * timed out created a payment, 201 where 422 was expected). */
    p.acts[1].net = SIM_NET_BLACKHOLE;
    check_steps(&p, "payments net payments net payments http");
    /* A latency on the same link answers no errors: nothing changes. */
    p.acts[1].net = SIM_NET_LATENCY;
    p.acts[1].net_a = 50;
    check_steps(&p, "payments net http payments http payments http");
}

int main(void)
{
    char path[4096], err[256];
    snprintf(path, sizeof(path), "%s/fault-points/catalogue.json", runner_source_dir());
    struct sim_catalogue cat;
    CHECK_EQ_INT(sim_catalogue_load(&cat, path, err, sizeof(err)), 0);
    char **points = runner_load_points();
    CHECK(points != NULL);
    test_rng();
    test_catalogue(&cat);
    test_generate(&cat, points);
    test_links(&cat, points);
    test_silent_consumers(&cat, points);
    test_shrink(&cat, points);
    test_render_rules();
    test_resume_rules();
    test_api_link_rules();
    runner_free_points(points);
    return check_report("test_harness_sim");
}
