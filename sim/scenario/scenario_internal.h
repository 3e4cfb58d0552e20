#ifndef CW_SCENARIO_INTERNAL_H
#define CW_SCENARIO_INTERNAL_H

#include "scenario.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* Validation context: the file name and where the message goes. */
struct vctx {
    const char *path;
    char *err;
    size_t errlen;
    const char *const *points;
};

__attribute__((format(printf, 3, 4)))
int verr(struct vctx *v, const char *field, const char *fmt, ...);

extern const char *const kind_names[SC_CONSUMER + 1];
extern const char *const verb_names[V_NET + 1];
extern const char *const db_action_names[DB_STALL_REPLICATION + 1];
extern const char *const until_names[U_SQL + 1];
extern const char *const invariant_names[INV_COUNT];

int in_list(const char *s, const char *const *list);
int only_fields(struct vctx *v, const cJSON *obj, const char *field,
                const char *const *allowed);
int get_str(struct vctx *v, const cJSON *obj, const char *key, const char *field,
            int required, const char **out);
int get_int(struct vctx *v, const cJSON *obj, const char *key, const char *field,
            int required, long long lo, long long hi, long long *out);
int opt_int(struct vctx *v, const cJSON *obj, const char *key, const char *field,
            long long lo, long long hi, int *out);
int name_index(const char *const *names, int n, const char *name);
int get_bool(struct vctx *v, const cJSON *obj, const char *key, const char *field,
             int *out);
int check_action(const char *act);
int find_proc(const struct scenario *sc, const char *name);
int check_control(struct vctx *v, const cJSON *c, const char *field);
int get_where(struct vctx *v, const cJSON *s, const char *field,
              const char **key, const char **value, char *buf, size_t buflen);

int parse_step(struct vctx *v, struct scenario *sc, const cJSON *s, int idx);

#endif
