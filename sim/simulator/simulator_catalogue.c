/* simulator_catalogue.c -- the fault point catalogue the generator draws
 * from (fault-points/catalogue.json); see simulator.h.
 *
 * The points are kept sorted by name, so that generation does not depend on
 * the order of the file; a point with no action the simulator knows is left
 * out. */
#include "simulator.h"
#include "simulator_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const sim_action_names[] = { "crash", "fail", "park", "stall" };

static int cmp_point(const void *a, const void *b)
{
    return strcmp(((const struct sim_point *)a)->name, ((const struct sim_point *)b)->name);
}

int sim_catalogue_parse(struct sim_catalogue *cat, const char *text, char *err, size_t errlen)
{
    memset(cat, 0, sizeof(*cat));
    cJSON *root = cJSON_Parse(text);
    const cJSON *points = cJSON_GetObjectItemCaseSensitive(root, "points");
    if (!cJSON_IsArray(points)) {
        snprintf(err, errlen, "the catalogue has no \"points\" array");
        cJSON_Delete(root);
        return -1;
    }
    const cJSON *it;
    int idx = 0;
    cJSON_ArrayForEach(it, points) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        const cJSON *acts = cJSON_GetObjectItemCaseSensitive(it, "actions");
        if (!cJSON_IsString(name) || strchr(name->valuestring, '/') == NULL ||
            strlen(name->valuestring) >= SIM_POINT_MAX || !cJSON_IsArray(acts)) {
            snprintf(err, errlen, "catalogue points[%d]: needs a component/window \"name\" "
                     "shorter than %d and an \"actions\" array", idx, SIM_POINT_MAX);
            goto fail;
        }
        if (cat->n == SIM_MAX_POINTS) {
            snprintf(err, errlen, "the catalogue has more than %d points", SIM_MAX_POINTS);
            goto fail;
        }
        struct sim_point *p = &cat->p[cat->n];
        snprintf(p->name, sizeof(p->name), "%s", name->valuestring);
        p->actions = 0;
        const cJSON *a;
        cJSON_ArrayForEach(a, acts) {
            for (int k = 0; k < 4; k++)
                if (cJSON_IsString(a) && strcmp(a->valuestring, sim_action_names[k]) == 0)
                    p->actions |= 1u << k;
        }
        if (p->actions != 0)
            cat->n++;
        idx++;
    }
    cJSON_Delete(root);
    qsort(cat->p, (size_t)cat->n, sizeof(cat->p[0]), cmp_point);
    return 0;
fail:
    cJSON_Delete(root);
    cat->n = 0;
    return -1;
}

int sim_catalogue_load(struct sim_catalogue *cat, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        memset(cat, 0, sizeof(*cat));
        snprintf(err, errlen, "cannot read the fault point catalogue %s", path);
        return -1;
    }
    char *text = NULL;
    size_t cap = 0;
    ssize_t len = getdelim(&text, &cap, '\0', f);
    fclose(f);
    int rc = -1;
    if (len > 0)
        rc = sim_catalogue_parse(cat, text, err, errlen);
    else
        snprintf(err, errlen, "the fault point catalogue %s is empty", path);
    free(text);
    return rc;
}

/* The component a point belongs to, from its name; -1 when unknown. */
int sim_point_kind(const char *name)
{
    if (strncmp(name, "api/", 4) == 0)
        return SIM_API;
    if (strncmp(name, "relay/", 6) == 0)
        return SIM_RELAY;
    if (strncmp(name, "consumer/", 9) == 0)
        return SIM_CONSUMER;
    return -1;
}
