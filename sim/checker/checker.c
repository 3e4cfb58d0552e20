/* checker.c -- the driver: loads the evidence, runs every invariant, gives
 * the verdicts.  What each invariant asserts, what it reads and which
 * function judges it is the table of invariants.c (invariants.h;
 * `crashwindow invariants` prints it); checker_run calls each judge
 * through that table, in the order of the scenario format's names.
 *
 * Evidence comes only from outside the system under test:
 *   - the database: what the pipeline committed (outbox rows, inbox markers,
 *     ledger and notification rows, idempotency records, the runbook's
 *     records of what it removed or requeued);
 *   - the broker's log: what really crossed the wire (every publish with the
 *     SHA-256 of its payload, every delivery), written by a process the
 *     system under test cannot influence;
 *   - the claim history (claim_history.h): every claim, release and second
 *     mark of an outbox row, recorded by a trigger the runner installs, in
 *     the database's own times -- the lease, backoff and dead-letter
 *     invariants read it;
 *   - the runner's own observations: the HTTP answers it received, its
 *     samples of pg_stat_activity.
 * What a process logs about itself is context for witnesses and for the
 * counts of "expect", never what an invariant is decided on.
 *
 * The checker's files: checker_load.c loads that evidence once
 * (checker_internal.h holds what the others share of it);
 * checker_delivery.c, checker_leases.c and checker_answers.c judge the
 * invariants, by family; checker_hazard.c decides which violations a
 * hazard scenario's hazard explains; checker_classify.c counts, classifies
 * and evaluates the expectations. */
#include "checker.h"
#include "checker_internal.h"
#include "invariants.h"

#include <stdlib.h>
#include <string.h>

/* ---- driver ------------------------------------------------------------- */

int checker_run(const struct chk_input *in, struct chk_result *res)
{
    struct chk_ctx c;
    memset(res, 0, sizeof(*res));
    memset(&c, 0, sizeof(c));
    c.in = in;
    c.res = res;
    for (int i = 0; i < INV_COUNT; i++)
        res->inv[i].witnesses = cJSON_CreateArray();
    for (int p = 0; p < in->sc->nprocs; p++) {
        if (in->sc->procs[p].kind != SC_CONSUMER)
            continue;
        int dup = 0;
        for (int k = 0; k < c.nconsumers; k++)
            dup |= strcmp(c.consumers[k], in->sc->procs[p].consumer_name) == 0;
        if (!dup)
            c.consumers[c.nconsumers++] = in->sc->procs[p].consumer_name;
    }
    if (chk_input_lacks(in, res) < 0) {
        for (int i = 0; i < INV_COUNT; i++)
            res->inv[i].pass = 0;
        return -1;
    }
    if (chk_load_outbox(&c) == 0 && chk_load_requeues(&c) == 0 && chk_load_claim_history(&c) == 0 &&
        chk_load_consumer_records(&c) == 0) {
        chk_load_hazard(&c);
        for (int i = 0; i < INV_COUNT; i++)
            inv_table[i].judge(&c);
        chk_counts(&c);
        chk_classify(&c);
    }
    free(c.rows);
    free(c.requeues);
    free(c.claims);
    free(c.claims_seq);
    free(c.retries);
    free(c.crecs);
    for (int i = 0; i < INV_COUNT; i++)
        res->inv[i].pass = res->inv[i].ran && res->inv[i].violations == 0 && !c.db_failed;
    return c.db_failed ? -1 : 0;
}

void checker_free(struct chk_result *res)
{
    for (int i = 0; i < INV_COUNT; i++) {
        cJSON_Delete(res->inv[i].witnesses);
        res->inv[i].witnesses = NULL;
    }
}

static int listed(const struct scenario *sc, int inv)
{
    for (int i = 0; i < sc->ninvariants; i++)
        if ((int)sc->invariants[i] == inv)
            return 1;
    return 0;
}

int checker_inv_vacuous(const struct chk_result *res, int inv)
{
    const struct chk_inv *x = &res->inv[inv];
    return x->ran && x->checked == 0 && x->violations == 0;
}

int checker_inv_pass(const struct chk_result *res, const struct scenario *sc, int inv)
{
    const struct chk_inv *x = &res->inv[inv];
    if (!x->pass)
        return 0;
    return !(listed(sc, inv) && x->checked == 0);
}

cJSON *checker_invariants_json(const struct chk_result *res, const struct scenario *sc)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < INV_COUNT; i++) {
        const struct chk_inv *x = &res->inv[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", sc_invariant_name((enum sc_invariant)i));
        /* the table's sentence travels with the verdict, so a stored run's
         * report states what each invariant asserts */
        cJSON_AddStringToObject(o, "asserts", inv_table[i].asserts);
        /* A hazard's invariant: "hazard caught" when the hazard explains
         * every violation, "hazard not caught" when it found none, and
         * "fail" on a violation the hazard does not explain. */
        int hz = checker_inv_hazard(res, sc, i);
        cJSON_AddStringToObject(o, "verdict", x->not_examined ? "not examined"
                                              : hz == CHK_HAZARD_CAUGHT ? "hazard caught"
                                              : hz == CHK_HAZARD_NOT_CAUGHT ? "hazard not caught"
                                              : hz == CHK_HAZARD_UNEXPLAINED ? "fail"
                                              : checker_inv_finding(res, i) ? "finding reproduced"
                                              : checker_inv_pass(res, sc, i) ? "pass" : "fail");
        if (sc->nhazard > 0)
            cJSON_AddNumberToObject(o, "hazard_explained", (double)x->hazard_explained);
        if (x->explains != NULL) {
            cJSON_AddStringToObject(o, "known_finding", x->explains);
            cJSON_AddNumberToObject(o, "explained", (double)x->explained);
        }
        cJSON_AddNumberToObject(o, "checked", (double)x->checked);
        cJSON_AddNumberToObject(o, "violations", (double)x->violations);
        cJSON_AddBoolToObject(o, "listed", listed(sc, i));
        cJSON_AddBoolToObject(o, "vacuous", checker_inv_vacuous(res, i));
        cJSON *w = x->witnesses ? cJSON_Duplicate(x->witnesses, 1) : cJSON_CreateArray();
        if (listed(sc, i) && checker_inv_vacuous(res, i))
            cJSON_AddItemToArray(w, cJSON_CreateString(
                "vacuous: the scenario lists this invariant but nothing was there to check"));
        if (x->not_examined)
            cJSON_AddItemToArray(w, cJSON_CreateString(
                "not examined: the target's mapping and the broker log cannot show it"));
        else if (!x->ran)
            cJSON_AddItemToArray(w, cJSON_CreateString(
                res->error[0] ? res->error : "not run: the checker could not read the database"));
        cJSON_AddItemToObject(o, "witnesses", w);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}
