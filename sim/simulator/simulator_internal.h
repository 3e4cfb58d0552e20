/* simulator_internal.h -- what the simulator's files share and nothing
 * outside sim/simulator needs; simulator.h is the public interface.
 *
 * Generation (simulator_gen.c), rendering (simulator_render.c) and the
 * one-line description (simulator_describe.c) must agree on a few rules --
 * which relay is held back behind a first-pass park, what a process is
 * called -- so each rule lives once, here. */
#ifndef CW_SIMULATOR_INTERNAL_H
#define CW_SIMULATOR_INTERNAL_H

#include "simulator.h"

#include <stddef.h>

/* ---- simulator_catalogue.c ----------------------------------------------- */

/* The names of enum sim_action, as the catalogue and CW_FAULTS spell them. */
extern const char *const sim_action_names[];

/* The component a point belongs to, from its name (SIM_API, SIM_RELAY,
 * SIM_CONSUMER); -1 when unknown. */
int sim_point_kind(const char *name);

/* ---- simulator_gen.c ----------------------------------------------------- */

/* Clears a, then makes it an action of kind on proc, every broker switch
 * left as it is (-1; drop 0). */
void sim_act_init(struct sim_act *a, enum sim_act_kind kind, int proc);

/* The relay that parks on its first pass while other relays share the work,
 * or -1: its peers start only once it has parked.  No draw. */
int sim_first_parker(const struct sim_plan *p);

/* Whether proc starts only once sim_first_parker's relay has parked. */
int sim_held_back(const struct sim_plan *p, int proc);

/* ---- simulator_render.c -------------------------------------------------- */

/* The scenario's name of process idx: "api", "relay-2", "acct-1",
 * "notif-2" (ordinal among the same kind and group). */
void sim_proc_name(const struct sim_plan *p, int idx, char *out, size_t outlen);

/* The runner's names of enum sim_db and enum sim_net ("db" and "net"
 * steps). */
extern const char *const sim_db_actions[];
extern const char *const sim_lock_tables[SIM_LOCK_TABLES];
extern const struct sim_refusal sim_refusals[SIM_REFUSALS];
extern const struct sim_refusal sim_severs[SIM_SEVERS];
extern const char *const sim_net_names[];

#endif
