/* bundle.c -- failure bundles from a run directory; see bundle.h.
 *
 * Every path a bundle reads comes from result.json ("dir", "shrunk"), so
 * each is checked to be relative and free of ".." before use: a bundle never
 * reads outside its run directory.  Names that go into replay.sh must be
 * plain ([A-Za-z0-9._:-]); anything else is left out of the script, never
 * quoted into it. */
#include "bundle.h"
#include "common_fs.h"
#include "fstree.h"
#include "report_html.h"
#include "rundir.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define SUMMARY_MAX (1024u * 1024)

/* Only these characters go into replay.sh unquoted. */
static int shell_plain(const char *s)
{
    if (s == NULL || s[0] == '\0' || strlen(s) > 200)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '.' || *s == '_' || *s == ':' || *s == '-'))
            return 0;
    return 1;
}

/* Text from the run into Markdown: one line, no backticks, no controls. */
static void md_put(struct rbuf *b, const char *s, size_t max)
{
    size_t n = 0;
    for (; s != NULL && *s && n < max; s++, n++) {
        unsigned char c = (unsigned char)*s;
        char ch = c == '`' ? '\'' : c < 0x20 || c == 0x7f ? ' ' : (char)c;
        rbuf_put(b, &ch, 1);
    }
    if (s != NULL && *s)
        rbuf_puts(b, "...");
}

/* The name of a scenario's bundle: its name, ".rN" for a repetition. */
static void scenario_label(const cJSON *sc, char *out, size_t outlen)
{
    const char *name = rd_str(sc, "name");
    const cJSON *rep = rd_get(sc, "repeat");
    if (!shell_plain(name))
        name = "unnamed";
    if (cJSON_IsNumber(rep))
        cw_fmt(out, outlen, "%s.r%d", name, rep->valueint);
    else
        cw_fmt(out, outlen, "%s", name);
}

/* The simulator's record of a failing run named "sim-S-I": its "failing"
 * entry, or NULL. */
static const cJSON *sim_failing(const cJSON *result, const char *name)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, rd_get(rd_get(result, "simulator"), "failing")) {
        const char *run = rd_str(f, "run");
        char want[96];
        if (run == NULL)
            continue;
        cw_fmt(want, sizeof(want), "sim-%s", run);
        char *colon = strchr(want, ':');
        if (colon != NULL)
            *colon = '-';
        if (name != NULL && strcmp(want, name) == 0)
            return f;
    }
    return NULL;
}

static int write_buf(const char *dir, const char *name, struct rbuf *b, char *err,
                     size_t errlen)
{
    char path[PATH_MAX];
    if (b->overflow) {
        cw_fmt(err, errlen, "%s/%s would be too large", dir, name);
        return -1;
    }
    cw_fmt(path, sizeof(path), "%s/%s", dir, name);
    int rc = cw_write_text(path, b->len ? b->data : "", 0, err, errlen);
    if (rc == 0 && strcmp(name, "replay.sh") == 0)
        chmod(path, 0755);
    return rc;
}

/* replay.sh: the header every script shares, then cmd's lines. */
static void replay_head(struct rbuf *b, const cJSON *result, const char *what)
{
    const char *commit = rd_str(result, "commit");
    rbuf_puts(b, "#!/bin/sh\n# Replays ");
    md_put(b, what, 200);
    rbuf_puts(b, ".\n# Run it from a checkout of the commit the failure was found at,\n"
                 "# built with: cmake -S . -B build && cmake --build build\n");
    if (shell_plain(commit))
        rbuf_printf(b, "#   git checkout %s\n", commit);
    rbuf_puts(b, "# CW_BUILD names another build tree; extra arguments go to crashwindow\n"
                 "# (--keep leaves the system up to poke at).\nset -e\n"
                 "here=$(cd \"$(dirname \"$0\")\" && pwd)\n"
                 "cw=\"${CW_BUILD:-build}/sim/crashwindow\"\n");
}

/* The common rows of a summary: commit, run, shard. */
static void summary_facts(struct rbuf *b, const cJSON *result)
{
    rbuf_puts(b, "| | |\n|---|---|\n| commit | `");
    md_put(b, rd_str(result, "commit") ? rd_str(result, "commit") : "unknown", 80);
    rbuf_puts(b, "` |\n| run | `crashwindow ");
    md_put(b, rd_str(result, "kind"), 20);
    rbuf_puts(b, "`, started ");
    md_put(b, rd_str(result, "started_at"), 40);
    rbuf_puts(b, " on ");
    md_put(b, rd_str(rd_get(result, "machine"), "hostname"), 100);
    rbuf_puts(b, " |\n");
    const cJSON *sh = rd_get(result, "shard");
    if (cJSON_IsObject(sh))
        rbuf_printf(b, "| shard | %d/%d |\n", rd_get(sh, "index") ? rd_get(sh, "index")->valueint : 0,
                    rd_get(sh, "count") ? rd_get(sh, "count")->valueint : 0);
    if (cJSON_IsObject(rd_get(result, "merged")))
        rbuf_printf(b, "| merged | from %d shards |\n",
                    rd_get(rd_get(result, "merged"), "count")
                        ? rd_get(rd_get(result, "merged"), "count")->valueint : 0);
}

/* Every failed check of a scenario as a Markdown list. */
static void summary_checks(struct rbuf *b, const cJSON *sc)
{
    rbuf_puts(b, "\n## What failed\n\n");
    const cJSON *it;
    cJSON_ArrayForEach(it, rd_get(sc, "invariants")) {
        if (!rundir_check_failed(it))
            continue;
        rbuf_puts(b, "- invariant `");
        md_put(b, rd_str(it, "name"), 100);
        const cJSON *vio = rd_get(it, "violations");
        rbuf_printf(b, "` (%d violations)", cJSON_IsNumber(vio) ? vio->valueint : 0);
        const cJSON *w;
        int n = 0;
        cJSON_ArrayForEach(w, rd_get(it, "witnesses")) {
            if (!cJSON_IsString(w) || n++ >= 3)
                continue;
            rbuf_puts(b, "\n  - `");
            md_put(b, w->valuestring, 600);
            rbuf_puts(b, "`");
        }
        rbuf_puts(b, "\n");
    }
    cJSON_ArrayForEach(it, rd_get(sc, "expect")) {
        if (!rundir_check_failed(it))
            continue;
        rbuf_puts(b, "- expectation `");
        md_put(b, rd_str(it, "check"), 100);
        rbuf_puts(b, "`: ");
        md_put(b, rd_str(it, "detail"), 600);
        rbuf_puts(b, "\n");
    }
    if (rd_str(sc, "error") != NULL) {
        rbuf_puts(b, "- error: ");
        md_put(b, rd_str(sc, "error"), 1000);
        rbuf_puts(b, "\n");
    }
}

/* scenario.json, shrunk.json, verdict.json and logs/ of one failing
 * scenario into bdir.  *has_logs tells whether its run files were found. */
static int scenario_files(const char *dir, const cJSON *sc, const cJSON *failing,
                          const char *bdir, int *has_logs, int *has_shrunk, char *err,
                          size_t errlen)
{
    char src[PATH_MAX], dst[PATH_MAX];
    const char *rel = rd_str(sc, "dir");
    struct stat st;
    *has_logs = *has_shrunk = 0;
    if (rundir_safe_rel(rel) && cw_fmt(src, sizeof(src), "%s/%s", dir, rel) < (int)sizeof(src) &&
        stat(src, &st) == 0 && S_ISDIR(st.st_mode)) {
        cw_fmt(dst, sizeof(dst), "%s/logs", bdir);
        if (fstree_copy_files(src, dst, err, errlen) < 0)
            return -1;
        *has_logs = 1;
        cw_fmt(src, sizeof(src), "%s/%s/scenario.json", dir, rel);
        cw_fmt(dst, sizeof(dst), "%s/scenario.json", bdir);
        if (stat(src, &st) == 0 && fstree_copy_file(src, dst, 0, err, errlen) < 0)
            return -1;
    }
    const char *shrunk = rd_str(failing, "shrunk");
    if (rundir_safe_rel(shrunk) && cw_fmt(src, sizeof(src), "%s/%s", dir, shrunk) < (int)sizeof(src) &&
        stat(src, &st) == 0) {
        cw_fmt(dst, sizeof(dst), "%s/shrunk.json", bdir);
        if (fstree_copy_file(src, dst, 0, err, errlen) < 0)
            return -1;
        *has_shrunk = 1;
    }
    char *text = cJSON_Print(sc);
    cw_fmt(dst, sizeof(dst), "%s/verdict.json", bdir);
    int rc = text != NULL ? cw_write_text(dst, text, 0, err, errlen) : -1;
    if (text == NULL)
        cw_fmt(err, errlen, "out of memory");
    cJSON_free(text);
    return rc;
}

/* replay.sh and the replay section of summary.md for a failing scenario. */
static void scenario_replay(struct rbuf *sh, struct rbuf *md, const cJSON *result,
                            const cJSON *sc, const cJSON *failing, const char *label,
                            int has_shrunk)
{
    replay_head(sh, result, label);
    rbuf_puts(md, "\n## Replay\n\nFrom the top of a checkout of the commit above, built "
                  "(`cmake -S . -B build && cmake --build build`):\n\n");
    const char *run = rd_str(failing, "run");
    if (failing != NULL && shell_plain(run)) {
        rbuf_printf(sh, "exec \"$cw\" sim --replay %s \"$@\"\n", run);
        rbuf_printf(md, "    build/sim/crashwindow sim --replay %s    # the same seed and "
                        "run: the same schedule\n", run);
        if (has_shrunk)
            rbuf_puts(md, "    build/sim/crashwindow run BUNDLE/shrunk.json  # the smallest "
                          "schedule that still fails\n");
    } else {
        rbuf_puts(sh, "exec \"$cw\" run \"$here/scenario.json\" \"$@\"\n");
        rbuf_puts(md, "    build/sim/crashwindow run BUNDLE/scenario.json    # this bundle's "
                      "copy\n");
        const char *file = rd_str(sc, "file");
        const char *in_tree = file != NULL ? strstr(file, "scenarios/") : NULL;
        if (in_tree != NULL && shell_plain(in_tree + strlen("scenarios/"))) {
            rbuf_puts(md, "    build/sim/crashwindow run ");
            md_put(md, in_tree, 200);
            rbuf_puts(md, "    # the file in the repository\n");
        }
    }
    rbuf_puts(md, "\nor `sh BUNDLE/replay.sh` (BUNDLE: this directory; add `--keep` to leave "
                  "the system up to poke at).\n");
}

static void summary_files(struct rbuf *md, int has_logs, int has_shrunk)
{
    rbuf_puts(md, "\n## Files\n\n");
    if (has_logs)
        rbuf_puts(md, "- `scenario.json`: the scenario as run\n");
    if (has_shrunk)
        rbuf_puts(md, "- `shrunk.json`: the smallest failing schedule the shrinker found\n");
    rbuf_puts(md, "- `verdict.json`: every invariant, witness and count of this run\n");
    if (has_logs)
        rbuf_puts(md, "- `logs/timeline.jsonl`: every event of every process and the broker, "
                      "in time order; `logs/*.events.jsonl` and `logs/*.log`: each process's "
                      "own record; `logs/metrics.jsonl`: samples of the database\n");
    else
        rbuf_puts(md, "- no run files: the run directory held none for this scenario\n");
    rbuf_puts(md, "- `replay.sh`: replays it\n");
}

/* The bundle of one failing scenario. */
static int bundle_scenario(const char *dir, const char *broot, const cJSON *result,
                           const cJSON *sc, char *err, size_t errlen)
{
    char label[160], bdir[PATH_MAX], witness[2048], sig[128];
    scenario_label(sc, label, sizeof(label));
    cw_fmt(bdir, sizeof(bdir), "%s/%s", broot, label);
    if (cw_mkdir_p(bdir) < 0) {
        cw_fmt(err, errlen, "cannot create %s: %s", bdir, strerror(errno));
        return -1;
    }
    const cJSON *failing = sim_failing(result, rd_str(sc, "name"));
    int has_logs, has_shrunk;
    if (scenario_files(dir, sc, failing, bdir, &has_logs, &has_shrunk, err, errlen) < 0)
        return -1;
    rundir_first_witness(sc, witness, sizeof(witness), sig, sizeof(sig));
    struct rbuf md, sh;
    rbuf_init(&md, SUMMARY_MAX);
    rbuf_init(&sh, SUMMARY_MAX);
    rbuf_puts(&md, "# ");
    md_put(&md, label, 160);
    rbuf_puts(&md, ": FAIL\n\n");
    md_put(&md, rd_str(sc, "title"), 600);
    rbuf_puts(&md, "\n\n**First witness:** `");
    md_put(&md, witness, 1000);
    rbuf_puts(&md, "`\n\n");
    summary_facts(&md, result);
    rbuf_puts(&md, "| crash window | `");
    md_put(&md, rd_str(sc, "crash_window") ? rd_str(sc, "crash_window") : "none", 100);
    rbuf_puts(&md, "` |\n");
    summary_checks(&md, sc);
    scenario_replay(&sh, &md, result, sc, failing, label, has_shrunk);
    summary_files(&md, has_logs, has_shrunk);
    int rc = write_buf(bdir, "summary.md", &md, err, errlen) < 0 ||
             write_buf(bdir, "replay.sh", &sh, err, errlen) < 0 ? -1 : 0;
    rbuf_free(&md);
    rbuf_free(&sh);
    return rc;
}

/* The record of a mutant's runs: build.log and each scenario's files. */
static int mutant_files(const char *dir, const cJSON *m, const char *bdir, char *err,
                        size_t errlen)
{
    const char *rel = rd_str(m, "dir");
    if (!rundir_safe_rel(rel))
        return 0;
    char src[PATH_MAX], dst[PATH_MAX];
    struct stat st;
    cw_fmt(src, sizeof(src), "%s/%s/build.log", dir, rel);
    cw_fmt(dst, sizeof(dst), "%s/build.log", bdir);
    if (stat(src, &st) == 0 && fstree_copy_file(src, dst, 0, err, errlen) < 0)
        return -1;
    const cJSON *s;
    cJSON_ArrayForEach(s, rd_get(m, "scenarios")) {
        const char *name = rd_str(s, "name");
        if (!shell_plain(name))
            continue;
        cw_fmt(src, sizeof(src), "%s/%s/%s", dir, rel, name);
        cw_fmt(dst, sizeof(dst), "%s/logs/%s", bdir, name);
        if (stat(src, &st) == 0 && S_ISDIR(st.st_mode) &&
            fstree_copy_files(src, dst, err, errlen) < 0)
            return -1;
    }
    return 0;
}

/* The bundle of a mutant that survived, or could not be built or run. */
static int bundle_mutant(const char *dir, const char *broot, const cJSON *result,
                         const cJSON *m, char *err, size_t errlen)
{
    const char *name = rd_str(m, "name");
    if (!shell_plain(name))
        name = "unnamed";
    char bdir[PATH_MAX];
    cw_fmt(bdir, sizeof(bdir), "%s/mutant-%s", broot, name);
    if (cw_mkdir_p(bdir) < 0) {
        cw_fmt(err, errlen, "cannot create %s: %s", bdir, strerror(errno));
        return -1;
    }
    if (mutant_files(dir, m, bdir, err, errlen) < 0)
        return -1;
    struct rbuf md, sh;
    rbuf_init(&md, SUMMARY_MAX);
    rbuf_init(&sh, SUMMARY_MAX);
    const char *error = rd_str(m, "error");
    rbuf_printf(&md, "# mutant %s: %s\n\n", name, error != NULL ? "ERROR" : "SURVIVED");
    rbuf_puts(&md, "The mistake: ");
    md_put(&md, rd_str(m, "mistake"), 400);
    rbuf_puts(&md, "\n\n**First witness:** `");
    if (error != NULL) {
        md_put(&md, error, 1000);
    } else {
        rbuf_puts(&md, "no scenario it met failed an invariant or an expectation:");
        const cJSON *s;
        cJSON_ArrayForEach(s, rd_get(m, "scenarios")) {
            rbuf_puts(&md, " ");
            md_put(&md, rd_str(s, "name"), 100);
        }
        rbuf_puts(&md, " passed");
    }
    rbuf_puts(&md, "`\n\n");
    summary_facts(&md, result);
    replay_head(&sh, result, name);
    rbuf_printf(&sh, "exec \"$cw\" mutants --only %s \"$@\"\n", name);
    rbuf_printf(&md, "\n## Replay\n\nFrom the top of a checkout of the commit above, built:\n\n"
                     "    build/sim/crashwindow mutants --only %s\n\nor `sh BUNDLE/replay.sh` "
                     "(BUNDLE: this directory).\n\n"
                     "## Files\n\n- `build.log`: the mutant's build\n- `logs/<scenario>/`: "
                     "each aimed scenario's record against the mutant build\n", name);
    int rc = write_buf(bdir, "summary.md", &md, err, errlen) < 0 ||
             write_buf(bdir, "replay.sh", &sh, err, errlen) < 0 ? -1 : 0;
    rbuf_free(&md);
    rbuf_free(&sh);
    return rc;
}

int bundle_write_all(const char *dir, const cJSON *result, char *err, size_t errlen)
{
    char broot[PATH_MAX];
    if (cw_fmt(broot, sizeof(broot), "%s/bundles", dir) >= (int)sizeof(broot)) {
        cw_fmt(err, errlen, "%s: path too long", dir);
        return -1;
    }
    fstree_remove(broot);
    int n = 0;
    const cJSON *sc;
    cJSON_ArrayForEach(sc, rd_get(result, "scenarios")) {
        if (!rundir_failed(sc))
            continue;
        if (bundle_scenario(dir, broot, result, sc, err, errlen) < 0)
            return -1;
        n++;
    }
    const cJSON *m;
    cJSON_ArrayForEach(m, rd_get(result, "mutants")) {
        if (cJSON_IsTrue(rd_get(m, "killed")) && rd_str(m, "error") == NULL)
            continue;
        if (bundle_mutant(dir, broot, result, m, err, errlen) < 0)
            return -1;
        n++;
    }
    return n;
}
