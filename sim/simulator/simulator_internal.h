/* simulator_internal.h -- what the simulator's files share and nothing
 * outside sim/simulator needs; see simulator.h for the public interface. */
#ifndef CW_SIMULATOR_INTERNAL_H
#define CW_SIMULATOR_INTERNAL_H

#include "simulator.h"

#include <stddef.h>

/* simulator_catalogue.c */
extern const char *const action_names[];
int point_kind(const char *name);

/* simulator_gen.c */
void act_init(struct sim_act *a, enum sim_act_kind kind, int proc);
int first_parker(const struct sim_plan *p);
int held_back(const struct sim_plan *p, int proc);

/* simulator_render.c */
void proc_name(const struct sim_plan *p, int idx, char *out, size_t outlen);
extern const char *const db_actions[];
extern const char *const net_names[];

#endif
