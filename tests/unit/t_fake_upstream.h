/*
 * t_fake_upstream.h: tests/fake_upstream.py as a child process of a unit
 * test (on loopback, killed with the test), and its control port: fault
 * modes, counters, reset.  fake_port is the port of its data API.
 */
#ifndef ENR_T_FAKE_UPSTREAM_H
#define ENR_T_FAKE_UPSTREAM_H

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "upstream/curlapi.h"
#include "t.h"

static pid_t fake_pid;
static int fake_port, fake_cport;
static char ready_path[128];

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- the fake upstream process ---- */

static const char *fake_script(void)
{
    static char path[4200];
    const char *env = getenv("ENR_FAKE_UPSTREAM");
    char exe[4096];
    ssize_t n;

    if (env)
        return env;
    if (access("tests/fake_upstream.py", R_OK) == 0)
        return "tests/fake_upstream.py";
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1); /* build/tests/test_upstream */
    if (n <= 0)
        return "tests/fake_upstream.py";
    exe[n] = '\0';
    snprintf(path, sizeof(path), "%s/../../tests/fake_upstream.py", dirname(exe));
    return path;
}

static void fake_stop(void)
{
    int st;
    if (fake_pid > 0) {
        kill(fake_pid, SIGTERM);
        T_CHECK(t_wait_child(fake_pid, 5000, &st) == 0,
                "the fake upstream ends within 5 s of TERM (killed)");
        fake_pid = 0;
    }
    if (ready_path[0])
        unlink(ready_path);
}

static void on_signal(int sig)
{
    (void)sig;
    if (fake_pid > 0)
        kill(fake_pid, SIGKILL);
    _exit(2);
}

static int fake_start(void)
{
    const char *script = fake_script();
    char buf[256] = "";
    FILE *f;

    snprintf(ready_path, sizeof(ready_path), "/tmp/enr-fake-upstream-%d.json", (int)getpid());
    unlink(ready_path);
    fake_pid = fork();
    if (fake_pid < 0)
        return -1;
    if (fake_pid == 0) {
        int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
        /* If this test dies, the fake upstream must not outlive it. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (devnull >= 0)
            dup2(devnull, 1);
        execlp("python3", "python3", script, "--ready-file", ready_path, (char *)NULL);
        _exit(127);
    }
    /* Up to 20 s: on a loaded machine python3 alone can take seconds to
     * start; a fake that died is not waited for. */
    for (int i = 0; i < 800 && waitpid(fake_pid, NULL, WNOHANG) == 0; i++) {
        f = fopen(ready_path, "re");
        if (f) {
            size_t n = fread(buf, 1, sizeof(buf) - 1, f);
            fclose(f);
            buf[n] = '\0';
            break;
        }
        sleep_ms(25);
    }
    if (sscanf(buf, "{\"port\": %d, \"control_port\": %d", &fake_port, &fake_cport) != 2)
        return -1;
    return 0;
}

static size_t collect(char *p, size_t s, size_t n, void *ud)
{
    enr_buf_append(ud, p, s * n);
    return s * n;
}

/* A control-port request; returns the HTTP status, body in out. */
static long control(const char *method, const char *path, const char *body, enr_buf *out)
{
    CURL *e = curl_easy_init();
    char url[256];
    long status = 0;
    struct curl_slist *h = NULL;

    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", fake_cport, path);
    enr_buf_reset(out);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PROXY, "");
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
    if (strcmp(method, "POST") == 0) {
        h = curl_slist_append(NULL, "Content-Type: application/json");
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? body : "{}");
    }
    if (curl_easy_perform(e) == CURLE_OK)
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(e);
    curl_slist_free_all(h);
    enr_buf_putc(out, '\0');
    return status;
}

static void set_fake(const char *json)
{
    enr_buf out = {0};
    long st = control("POST", "/_control", json, &out);
    if (st != 200)
        printf("control %s -> %ld %s\n", json, st, out.data ? out.data : "");
    enr_buf_free(&out);
    sleep_ms(30); /* a refuse switch closes the listener from a thread */
}

/* The fake's counters back to zero. */
static void fake_reset(void)
{
    enr_buf out = {0};
    control("POST", "/_reset", "{}", &out);
    enr_buf_free(&out);
}

/* One counter of /_stats (-1 on error); "last_targets" etc. via stats_json. */
static json_object *stats_json(void)
{
    enr_buf out = {0};
    json_object *o = NULL;
    if (control("GET", "/_stats", NULL, &out) == 200)
        o = json_tokener_parse(out.data);
    enr_buf_free(&out);
    return o;
}

static long stat_of(const char *key)
{
    json_object *o = stats_json(), *v;
    long r = -1;
    if (o && json_object_object_get_ex(o, key, &v))
        r = (long)json_object_get_int64(v);
    json_object_put(o);
    return r;
}

/* Waits (at most 5 s) until the fake holds no data connection: one a
 * client closed stays counted until the fake's thread reads its end,
 * later on a loaded machine.  1 when it came to none. */
static int fake_wait_no_connections(void)
{
    const struct timespec step = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 500; i++) {
        if (stat_of("open_connections") == 0)
            return 1;
        nanosleep(&step, NULL);
    }
    return 0;
}

#endif
