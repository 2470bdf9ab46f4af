/*
 * test_statusmodel.c: the status document's model (ops/statusmodel.h)
 * against its writer (ops/statusdoc.c): every key the views read is one
 * the document has (both spell it from the model's tables, and a key the
 * writer stops writing fails here, not on an operator's screen); and the
 * reading rules for a document from another process (null is absent, a
 * sub-object that is not one is absent, the sources bounded); the shared
 * store's object only while shared_store is set, every row of its table
 * (storestats.h) in it and read back, its address without a secret.
 */
#include <stdlib.h>
#include <string.h>

#include "ops/statusdoc.h"
#include "ops/statusmodel.h"
#include "t.h"

/* Each of v[0..n) set; checks counted for the test func. */
static void all_set(const char *func, const char *what, const char *const *v,
                    const char *const *keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        T_CHECK_IN(func, v[i] != NULL, "%s: the document has \"%s\"", what, keys ? keys[i] : "?");
}

/* A pool of two slots: a busy worker that ended a request before and
 * whose slot's last worker crashed, and an empty slot. */
static void fill_pool(enr_scoreboard *sb)
{
    enr_sb_slot *w = &sb->slot[0], *e = &sb->slot[1];

    sb->nslots = 2;
    w->pid = 100;
    w->state = ENR_WS_BUSY;
    w->req_start_mono_ms = 1;
    strcpy(w->req_id, "req-1");
    w->last_end_ms = 1000;
    w->last_exit_reason = ENR_EXIT_RSS;
    w->latency[0] = 3;
    e->state = ENR_WS_EMPTY;
    e->last_exit_reason = ENR_EXIT_FD;
}

static void test_writer_has_every_key(void)
{
    static enr_config c;
    static enr_health h;
    static enr_status_model m;
    static enr_fd_kinds fds[ENR_SB_MAX_WORKERS];
    char err[256];
    enr_scoreboard *sb = enr_sb_create();
    int ok[ENR_SB_MAX_WORKERS] = {1};
    json_object *doc;

    T_CHECK(sb != NULL && enr_config_load(&c, NULL, err, sizeof err) == 0, "set up: %s", err);
    if (sb == NULL)
        return;
    fill_pool(sb);
    for (int p = 0; p < ENR_SOURCE_PROVIDERS; p++)
        c.sources[p] = ENR_SOURCE_UPSTREAM;
    h.published = 1;
    strcpy(h.reason, "p99 over the bound");
    enr_status_view v = {.c = &c, .sb = sb, .health = &h, .fds = fds, .fds_ok = ok};
    doc = enr_status_doc(&v, 1);
    enr_status_model_read(&m, doc);

    all_set(__func__, "pool", m.pool, enr_sm_pool_keys, ENR_SM_P_N);
    T_CHECK(m.has_health && m.health_has_reason, "health, unhealthy with its reason");
    all_set(__func__, "health", m.health, enr_sm_health_keys, ENR_SM_H_N);
    all_set(__func__, "responses", m.resp, enr_sm_resp_keys, ENR_SM_R_N);
    all_set(__func__, "latency", m.lat, enr_sm_lat_keys, ENR_SM_L_N);
    T_CHECK(m.has_up && m.pause_ms_left == 0 && m.pause_until == NULL,
            "upstream not paused: until null");
    T_CHECK(m.n_sources == 1, "one source in use: %u", m.n_sources);
    all_set(__func__, "source counters", m.source[0].counter, NULL, ENR_UP_NCOUNTERS);
    T_CHECK(m.source[0].breakers_open != NULL, "source: breakers.open");
    T_STREQ(m.source[0].pause[ENR_SM_PA_paused], "false");
    T_CHECK(m.has_procs && m.n_procs == 1 && m.n_empty == 1, "one worker, one empty slot: %zu %zu",
            m.n_procs, m.n_empty);
    all_set(__func__, "worker", m.proc[0].v, NULL, ENR_SM_W_N);
    T_STREQ(m.proc[0].v[ENR_SM_W_request_id], "req-1");
    T_CHECK(m.proc[0].has_exit && m.proc[0].has_last && m.proc[0].has_fds, "worker's objects");
    all_set(__func__, "last exit", m.proc[0].exit, NULL, ENR_SM_X_N);
    all_set(__func__, "last request", m.proc[0].last, NULL, ENR_SM_LR_N);
    T_CHECK(m.proc[0].fds_summary != NULL, "fds_by_kind.summary");
    T_STREQ(m.empty[0].v[ENR_SM_W_slot], "1");
    T_STREQ(m.empty[0].exit[ENR_SM_X_reason], "fd");
    json_object_put(doc);
}

/* The store's object: none without shared_store (the document a host
 * without a store always had), else every row and key, read back. */
static void test_store_object(void)
{
    static enr_config c;
    static enr_status_model m;
    char err[256];
    enr_scoreboard *sb = enr_sb_create();
    json_object *doc, *x;

    T_CHECK(sb != NULL && enr_config_load(&c, NULL, err, sizeof err) == 0, "set up: %s", err);
    if (sb == NULL)
        return;
    fill_pool(sb);
    enr_status_view v = {.c = &c, .sb = sb};
    doc = enr_status_doc(&v, 0);
    enr_status_model_read(&m, doc);
    T_CHECK(!json_object_object_get_ex(doc, ENR_SM_NAME(store), NULL) && !m.has_store,
            "no shared_store: no store object");
    json_object_put(doc);

    snprintf(c.shared_store, sizeof c.shared_store, "redis://[::1]:6380/3");
    sb->slot[0].store[ENR_STORE_ROW_up] = 1;
    sb->slot[0].store[ENR_STORE_ROW_rtt_us] = 412;
    sb->slot[0].store[ENR_STORE_ROW_errors] = 2;
    sb->slot[1].store[ENR_STORE_ROW_errors] = 3;    /* a counter: the empty slot's too */
    sb->slot[1].store[ENR_STORE_ROW_rtt_us] = 9000; /* a gauge: live workers' only */
    doc = enr_status_doc(&v, 0);
    enr_status_model_read(&m, doc);
    T_CHECK(m.has_store, "shared_store set: the store object");
    all_set(__func__, "store", m.store.v, enr_sm_store_keys, ENR_SM_S_N);
    for (unsigned r = 0; r < ENR_STORE_NSTATS; r++)
        T_CHECK(m.store.row[r] != NULL, "store has \"%s\"", enr_store_stat_rows[r].field);
    T_STREQ(m.store.v[ENR_SM_S_state], "connected");
    T_STREQ(m.store.v[ENR_SM_S_address], "redis://[::1]:6380/3");
    T_STREQ(m.store.row[ENR_STORE_ROW_rtt_us], "412");
    T_STREQ(m.store.row[ENR_STORE_ROW_errors], "5");
    x = json_object_object_get(doc, ENR_SM_NAME(store));
    T_CHECK(
        json_object_is_type(json_object_object_get(x, ENR_SM_NAME(lease_held)), json_type_object),
        "store.lease_held an object");
    json_object_put(doc);

    sb->slot[0].store[ENR_STORE_ROW_up] = 0;
    doc = enr_status_doc(&v, 0);
    enr_status_model_read(&m, doc);
    T_STREQ(m.store.v[ENR_SM_S_state], "unreachable");
    json_object_put(doc);
}

/* What another process may send: read by one rule wherever it sits. */
static void test_reading_rules(void)
{
    static enr_status_model m;
    enr_buf srcs = {0};
    json_object *doc;

    enr_buf_printf(&srcs, "{\"lost\":null,\"health\":[1],\"latency\":{\"p50_ms\":[1,2]},"
                          "\"upstream\":{\"pause_ms_left\":\"7\",\"sources\":{\"a\":5");
    for (int i = 0; i < ENR_SM_MAX_SOURCES + 4; i++)
        enr_buf_printf(&srcs, ",\"s%d\":{\"budget\":null,\"pause\":\"x\"}", i);
    enr_buf_printf(&srcs,
                   "}},\"processes\":[1,{\"slot\":0.5}],\"empty_slots\":{},"
                   "\"store\":{\"state\":\"unreachable\",\"errors\":[],\"lease_held\":{\"a\":7");
    for (int i = 0; i < ENR_SM_MAX_SOURCES + 4; i++)
        enr_buf_printf(&srcs, ",\"s%d\":null", i);
    enr_buf_printf(&srcs, "}}}");
    enr_buf_putc(&srcs, '\0');
    doc = json_tokener_parse(srcs.data);
    T_CHECK(doc != NULL, "the document parses");
    enr_status_model_read(&m, doc);
    T_CHECK(m.pool[ENR_SM_P_lost] == NULL && m.pool[ENR_SM_P_pool] == NULL,
            "null and absent alike");
    T_CHECK(!m.has_health && m.health[ENR_SM_H_status] == NULL, "health not an object: absent");
    T_STREQ(m.lat[ENR_SM_L_p50_ms], "[ 1, 2 ]");
    T_CHECK(m.pause_ms_left == 7, "pause_ms_left as json-c reads it: %llu",
            (unsigned long long)m.pause_ms_left);
    T_CHECK(m.n_sources == ENR_SM_MAX_SOURCES, "sources bounded: %u", m.n_sources);
    T_CHECK(!m.source[0].is_object && m.source[0].counter[0] == NULL, "a source not an object");
    T_CHECK(m.source[1].is_object && !m.source[1].has_budget &&
                m.source[1].pause[ENR_SM_PA_paused] == NULL,
            "budget null and pause not an object: absent");
    T_CHECK(m.has_procs && m.n_procs == 1 && m.n_empty == 0, "workers: objects of an array only");
    T_STREQ(m.proc[0].v[ENR_SM_W_slot], "0.5");
    T_CHECK(m.has_store && m.store.v[ENR_SM_S_address] == NULL &&
                m.store.row[ENR_STORE_ROW_rtt_us] == NULL,
            "store: absent keys are NULL");
    T_STREQ(m.store.row[ENR_STORE_ROW_errors], "[ ]");
    T_CHECK(m.store.n_leases == ENR_SM_MAX_SOURCES, "leases bounded: %u", m.store.n_leases);
    T_STREQ(m.store.lease[0].source, "a");
    T_STREQ(m.store.lease[0].units, "7");
    T_CHECK(m.store.lease[1].units == NULL, "a lease null: NULL");
    json_object_put(doc);
    enr_buf_free(&srcs);
}

int main(void)
{
    test_writer_has_every_key();
    test_store_object();
    test_reading_rules();
    T_DONE();
}
