/*
 * statusmodel.c: reads a status document into an enr_status_model
 * (statusmodel.h): the one place its readers look keys up.
 *
 * Invariant: every lookup goes through val() and obj(), so a value of
 * any JSON type, or a sub-object that is not one, is read the same way
 * wherever it sits.
 */
#include "ops/statusmodel.h"

#include <string.h>

#include "upstream/breaker.h"

#define ENR_SM_KEY(p, field, key) key,
const char *const enr_sm_names[ENR_SM_K_N] = {ENR_SM_NAMES(ENR_SM_KEY, )};
const char *const enr_sm_pool_keys[ENR_SM_P_N] = {ENR_SM_POOL(ENR_SM_KEY, )};
const char *const enr_sm_health_keys[ENR_SM_H_N] = {ENR_SM_HEALTH(ENR_SM_KEY, )};
const char *const enr_sm_resp_keys[ENR_SM_R_N] = {ENR_SM_RESP(ENR_SM_KEY, )};
const char *const enr_sm_lat_keys[ENR_SM_L_N] = {ENR_SM_LAT(ENR_SM_KEY, )};
const char *const enr_sm_pause_keys[ENR_SM_PA_N] = {ENR_SM_PAUSE(ENR_SM_KEY, )};
const char *const enr_sm_budget_keys[ENR_SM_B_N] = {ENR_SM_BUDGET(ENR_SM_KEY, )};
const char *const enr_sm_proc_keys[ENR_SM_W_N] = {ENR_SM_PROC(ENR_SM_KEY, )};
const char *const enr_sm_exit_keys[ENR_SM_X_N] = {ENR_SM_EXIT(ENR_SM_KEY, )};
const char *const enr_sm_last_keys[ENR_SM_LR_N] = {ENR_SM_LAST(ENR_SM_KEY, )};
const char *const enr_sm_store_keys[ENR_SM_S_N] = {ENR_SM_STORE(ENR_SM_KEY, )};
const char *const enr_sm_store_states[ENR_SM_SS_N] = {ENR_SM_STORE_STATE(ENR_SM_KEY, )};
#undef ENR_SM_KEY

/* The document's text of o[k], NULL when absent or null (o may be NULL
 * or not an object: then every key is absent). */
static const char *val(json_object *o, const char *k)
{
    json_object *v;

    if (!json_object_object_get_ex(o, k, &v) || v == NULL)
        return NULL;
    return json_object_get_string(v);
}

/* o[k] when it is an object, else NULL. */
static json_object *obj(json_object *o, const char *k)
{
    json_object *v;

    return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_object) ? v
                                                                                           : NULL;
}

/* out[i] = o[keys[i]] for each of the n keys. */
static void vals(const char **out, json_object *o, const char *const *keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = val(o, keys[i]);
}

static void read_source(enr_sm_source *s, const char *name, json_object *o)
{
    json_object *fail, *b;

    memset(s, 0, sizeof *s);
    s->name = name;
    s->is_object = json_object_is_type(o, json_type_object);
    if (!s->is_object)
        return;
    fail = obj(o, ENR_SM_NAME(failures));
    for (unsigned r = 0; r < ENR_UP_NCOUNTERS; r++) {
        const enr_up_counter_row *row = &enr_up_counter_rows[r];
        s->counter[r] = row->kind[0] ? val(fail, row->kind) : val(o, row->field);
    }
    s->breakers_open = val(obj(o, ENR_SM_NAME(breakers)), enr_breaker_state_name(ENR_BREAKER_OPEN));
    vals(s->pause, obj(o, ENR_SM_NAME(pause)), enr_sm_pause_keys, ENR_SM_PA_N);
    if ((b = obj(o, ENR_SM_NAME(budget))) == NULL)
        return;
    s->has_budget = 1;
    for (unsigned r = 0; r < ENR_BUDGET_NFIELDS; r++)
        s->budget_row[r] = val(b, enr_budget_rows[r].field);
    vals(s->budget, b, enr_sm_budget_keys, ENR_SM_B_N);
}

static void read_store(enr_sm_store *st, json_object *o)
{
    json_object *held;

    memset(st, 0, sizeof *st);
    vals(st->v, o, enr_sm_store_keys, ENR_SM_S_N);
    for (unsigned r = 0; r < ENR_STORE_NSTATS; r++)
        st->row[r] = val(o, enr_store_stat_rows[r].field);
    if ((held = obj(o, ENR_SM_NAME(lease_held))) == NULL)
        return;
    json_object_object_foreach(held, name, units)
    {
        if (st->n_leases == ENR_SM_MAX_SOURCES)
            break;
        st->lease[st->n_leases].source = name;
        st->lease[st->n_leases++].units = units ? json_object_get_string(units) : NULL;
    }
}

static void read_proc(enr_sm_proc *p, json_object *o)
{
    json_object *x;

    memset(p, 0, sizeof *p);
    vals(p->v, o, enr_sm_proc_keys, ENR_SM_W_N);
    if ((x = obj(o, ENR_SM_NAME(last_exit))) != NULL) {
        p->has_exit = 1;
        vals(p->exit, x, enr_sm_exit_keys, ENR_SM_X_N);
    }
    if ((x = obj(o, ENR_SM_NAME(last_request))) != NULL) {
        p->has_last = 1;
        vals(p->last, x, enr_sm_last_keys, ENR_SM_LR_N);
    }
    if ((x = obj(o, ENR_SM_NAME(fds_by_kind))) != NULL) {
        p->has_fds = 1;
        p->fds_summary = val(x, ENR_SM_NAME(summary));
    }
}

/* The objects of doc[k] (an array) into out[max]; their count. */
static size_t read_procs(enr_sm_proc *out, size_t max, json_object *doc, const char *k, int *has)
{
    json_object *a;
    size_t n = 0;

    if (!json_object_object_get_ex(doc, k, &a) || !json_object_is_type(a, json_type_array))
        return 0;
    if (has)
        *has = 1;
    for (size_t i = 0; i < json_object_array_length(a) && n < max; i++) {
        json_object *o = json_object_array_get_idx(a, i);
        if (json_object_is_type(o, json_type_object))
            read_proc(&out[n++], o);
    }
    return n;
}

void enr_status_model_read(enr_status_model *m, json_object *doc)
{
    json_object *o, *up, *srcs;

    m->has_health = m->has_resp = m->has_lat = m->has_procs = 0;
    m->n_sources = 0;
    vals(m->pool, doc, enr_sm_pool_keys, ENR_SM_P_N);
    o = obj(doc, ENR_SM_NAME(health));
    m->has_health = o != NULL;
    vals(m->health, o, enr_sm_health_keys, ENR_SM_H_N);
    m->health_has_reason = json_object_object_get_ex(o, enr_sm_health_keys[ENR_SM_H_reason], NULL);
    o = obj(doc, ENR_SM_NAME(responses));
    m->has_resp = o != NULL;
    vals(m->resp, o, enr_sm_resp_keys, ENR_SM_R_N);
    o = obj(doc, ENR_SM_NAME(latency));
    m->has_lat = o != NULL;
    vals(m->lat, o, enr_sm_lat_keys, ENR_SM_L_N);

    up = obj(doc, ENR_SM_NAME(upstream));
    m->has_up = up != NULL;
    m->pause_ms_left = json_object_object_get_ex(up, ENR_SM_NAME(pause_ms_left), &o)
                           ? json_object_get_uint64(o)
                           : 0;
    m->pause_until = val(up, ENR_SM_NAME(pause_until));
    if ((srcs = obj(up, ENR_SM_NAME(sources))) != NULL) {
        json_object_object_foreach(srcs, name, one)
        {
            if (m->n_sources == ENR_SM_MAX_SOURCES)
                break;
            read_source(&m->source[m->n_sources++], name, one);
        }
    }
    o = obj(doc, ENR_SM_NAME(store));
    m->has_store = o != NULL;
    read_store(&m->store, o);
    m->n_procs =
        read_procs(m->proc, ENR_SB_MAX_WORKERS, doc, ENR_SM_NAME(processes), &m->has_procs);
    m->n_empty = read_procs(m->empty, ENR_SB_MAX_WORKERS, doc, ENR_SM_NAME(empty_slots), NULL);
}
