/*
 * test_secret.c: upstream header lines, the secret file (size, mode,
 * kind, content), credentials, redaction, and the configuration keys
 * that use them: the secret read, every refusal said without a byte of
 * it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/config.h"
#include "base/secret.h"
#include "upstream/upsecret.h"
#include "upstream/upstream_url.h"
#include "t.h"

#define SECRET "s3cr3t-K3y_with+/=chars"

static char dir[] = "/tmp/enr-secret-XXXXXX";

static const char *write_file(const char *name, const char *text, size_t len, mode_t mode)
{
    static char path[256];
    int fd;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        if (write(fd, text, len) != (ssize_t)len)
            perror("write");
        close(fd);
    }
    chmod(path, mode);
    return path;
}

static int hdr(const char *line)
{
    char why[256];
    return enr_upstream_header_check(line, strlen(line), NULL, why, sizeof why);
}

static void test_header_lines(void)
{
    char why[256];
    size_t n = 0;

    T_CHECK(enr_upstream_header_check("X-Client: enrichd/1", 19, &n, why, sizeof why) == 0 &&
                n == 8,
            "a plain header, name length %zu", n);
    T_CHECK(hdr("X-Empty:") == 0, "an empty value");
    T_CHECK(hdr("X-Tab: a\tb") == 0, "a tab in the value");
    T_CHECK(hdr("X!#$%&'*+-.^_`|~: v") == 0, "every token character");
    T_CHECK(hdr("no colon") == -1, "no ':'");
    T_CHECK(hdr(": v") == -1, "no name");
    T_CHECK(hdr("X Y: v") == -1, "space in the name");
    T_CHECK(hdr("X-A : v") == -1, "space before the colon");
    T_CHECK(hdr("X(y): v") == -1, "a separator in the name");
    T_CHECK(enr_upstream_header_check("X-A: v\r\nHost: evil", 18, NULL, why, sizeof why) == -1,
            "CRLF in the value (header injection)");
    T_CHECK(enr_upstream_header_check("X-A: v\nB: c", 11, NULL, why, sizeof why) == -1, "LF");
    T_CHECK(enr_upstream_header_check("X-A: v\0w", 8, NULL, why, sizeof why) == -1, "NUL");
    T_CHECK(hdr("X-A: \x7f") == -1, "DEL");
    T_CHECK(hdr("Host: evil.example") == -1 && hdr("content-length: 5") == -1 &&
                hdr("ACCEPT: text/html") == -1 && hdr("Transfer-Encoding: chunked") == -1 &&
                hdr("Connection: close") == -1,
            "the client's own headers are refused, in any case");
    {
        char big[ENR_UP_HEADER_MAX + 8];
        memset(big, 'a', sizeof big);
        memcpy(big, "X-Big: ", 7);
        T_CHECK(enr_upstream_header_check(big, ENR_UP_HEADER_MAX, NULL, why, sizeof why) == -1,
                "a line of %d bytes", ENR_UP_HEADER_MAX);
        T_CHECK(enr_upstream_header_check(big, ENR_UP_HEADER_MAX - 1, NULL, why, sizeof why) == 0,
                "a line of %d bytes is fine", ENR_UP_HEADER_MAX - 1);
    }
    /* the refusal never quotes the value */
    T_CHECK(enr_upstream_header_check("X-A: " SECRET "\r", strlen("X-A: " SECRET "\r"), NULL, why,
                                      sizeof why) == -1 &&
                strstr(why, SECRET) == NULL,
            "why has no value: %s", why);

    T_CHECK(enr_secret_header_check("X-Api-Key", why, sizeof why) == 0, "secret header: a name");
    T_CHECK(enr_secret_header_check("Authorization: Bearer {secret}", why, sizeof why) == 0,
            "secret header: a template");
    T_CHECK(enr_secret_header_check("Authorization: Bearer", why, sizeof why) == -1,
            "a template without the placeholder");
    T_CHECK(enr_secret_header_check("X: {secret}{secret}", why, sizeof why) == -1, "twice");
    T_CHECK(enr_secret_header_check("Host", why, sizeof why) == -1, "an owned name");
    T_CHECK(enr_secret_header_check("X Y", why, sizeof why) == -1, "not a token");
    {
        char line[256];
        T_CHECK(enr_secret_header_line("X-Api-Key", "abc", 3, line, sizeof line) == 0 &&
                    strcmp(line, "X-Api-Key: abc") == 0,
                "the line: %s", line);
        T_CHECK(enr_secret_header_line("Authorization: Bearer {secret} x", "abc", 3, line,
                                       sizeof line) == 0 &&
                    strcmp(line, "Authorization: Bearer abc x") == 0,
                "the template filled: %s", line);
        T_CHECK(enr_secret_header_line("X-Api-Key", "abc", 3, line, 8) == -1, "too small");
    }
    T_CHECK(enr_secret_query_check("key", why, sizeof why) == 0, "query name");
    T_CHECK(enr_secret_query_check("api_key-1.~", why, sizeof why) == 0, "unreserved");
    T_CHECK(enr_secret_query_check("", why, sizeof why) == -1, "empty");
    T_CHECK(enr_secret_query_check("a&b", why, sizeof why) == -1, "'&'");
    T_CHECK(enr_secret_query_check("a=b", why, sizeof why) == -1, "'='");
    T_CHECK(enr_secret_query_check("ids", why, sizeof why) == -1 &&
                enr_secret_query_check("provider", why, sizeof why) == -1,
            "the client's own parameters");
}

static void test_read(void)
{
    char out[ENR_SECRET_MAX + 1], why[512];
    size_t len = 99;
    const char *p;

    p = write_file("ok", SECRET "\n", strlen(SECRET) + 1, 0600);
    T_CHECK(enr_secret_read(p, out, sizeof out, &len, why, sizeof why) == 0 &&
                len == strlen(SECRET) && strcmp(out, SECRET) == 0,
            "read, newline dropped: %s", why);
    p = write_file("crlf", SECRET "\r\n", strlen(SECRET) + 2, 0640);
    T_CHECK(enr_secret_read(p, out, sizeof out, &len, why, sizeof why) == 0 &&
                strcmp(out, SECRET) == 0,
            "CRLF dropped; group-readable is allowed");
    p = write_file("bare", SECRET, strlen(SECRET), 0400);
    T_CHECK(enr_secret_read(p, out, sizeof out, &len, why, sizeof why) == 0 &&
                strcmp(out, SECRET) == 0,
            "no newline, mode 0400");

    p = write_file("world", SECRET, strlen(SECRET), 0604);
    T_CHECK(enr_secret_read(p, out, sizeof out, &len, why, sizeof why) == -1 &&
                strstr(why, "open to others") && strstr(why, "0604") && len == 0,
            "readable by others: %s", why);
    p = write_file("worldw", SECRET, strlen(SECRET), 0602);
    T_CHECK(enr_secret_read(p, out, sizeof out, &len, why, sizeof why) == -1, "writable by others");
    p = write_file("empty", "\n", 1, 0600);
    T_CHECK(enr_secret_read(p, out, sizeof out, &len, why, sizeof why) == -1 &&
                strstr(why, "empty"),
            "empty: %s", why);
    p = write_file("two", "abc\ndef\n", 8, 0600);
    T_CHECK(enr_secret_read(p, out, sizeof out, &len, why, sizeof why) == -1 &&
                strstr(why, "abc") == NULL && strstr(why, "def") == NULL,
            "two lines, and no byte of them in why: %s", why);
    p = write_file("space", "ab cd", 5, 0600);
    T_CHECK(enr_secret_read(p, out, sizeof out, &len, why, sizeof why) == -1, "a space");
    p = write_file("nul", "ab\0cd", 5, 0600);
    T_CHECK(enr_secret_read(p, out, sizeof out, &len, why, sizeof why) == -1, "a NUL");
    {
        static char big[ENR_SECRET_MAX + 2];
        memset(big, 'k', sizeof big);
        p = write_file("max", big, ENR_SECRET_MAX, 0600);
        T_CHECK(enr_secret_read(p, out, sizeof out, &len, why, sizeof why) == 0 &&
                    len == ENR_SECRET_MAX,
                "%d bytes: the most", ENR_SECRET_MAX);
        p = write_file("big", big, ENR_SECRET_MAX + 1, 0600);
        T_CHECK(enr_secret_read(p, out, sizeof out, &len, why, sizeof why) == -1 &&
                    strstr(why, "larger"),
                "%d bytes: refused (%s)", ENR_SECRET_MAX + 1, why);
    }
    T_CHECK(enr_secret_read("/nonexistent/x", out, sizeof out, &len, why, sizeof why) == -1 &&
                strstr(why, "No such file"),
            "missing: %s", why);
    T_CHECK(enr_secret_read(dir, out, sizeof out, &len, why, sizeof why) == -1 &&
                strstr(why, "not a regular file"),
            "a directory");
    {
        char fifo[300];
        snprintf(fifo, sizeof fifo, "%s/fifo", dir);
        mkfifo(fifo, 0600);
        T_CHECK(enr_secret_read(fifo, out, sizeof out, &len, why, sizeof why) == -1 &&
                    strstr(why, "not a regular file"),
                "a FIFO is refused without blocking");
        unlink(fifo);
    }
    T_CHECK(enr_secret_read("/dev/zero", out, sizeof out, &len, why, sizeof why) == -1, "a device");
}

static void test_credential(void)
{
    char path[512], why[256];

    unsetenv("CREDENTIALS_DIRECTORY");
    T_CHECK(enr_secret_credential_path("api", path, sizeof path, why, sizeof why) == -1 &&
                strstr(why, "LoadCredential"),
            "no CREDENTIALS_DIRECTORY: %s", why);
    setenv("CREDENTIALS_DIRECTORY", dir, 1);
    T_CHECK(enr_secret_credential_path("api", path, sizeof path, why, sizeof why) == 0 &&
                strncmp(path, dir, strlen(dir)) == 0 && strstr(path, "/api"),
            "the path: %s", path);
    T_CHECK(enr_secret_credential_path("../etc", path, sizeof path, why, sizeof why) == -1,
            "no '/'");
    T_CHECK(enr_secret_credential_path("..", path, sizeof path, why, sizeof why) == -1, "no ..");
    T_CHECK(enr_secret_credential_path("", path, sizeof path, why, sizeof why) == -1, "empty");
}

static void test_redact(void)
{
    char out[256], text[256];

    enr_url_redact("https://api.example/v1?key=abc&x=1", out, sizeof out);
    T_STREQ(out, "https://api.example/v1?[redacted]");
    enr_url_redact("https://api.example/v1", out, sizeof out);
    T_STREQ(out, "https://api.example/v1");
    enr_url_redact("ftp://h/?k=v", out, 10);
    T_CHECK(strlen(out) == 9 && strstr(out, "k=v") == NULL, "truncated, still no query");

    snprintf(text, sizeof text, "failed: https://h/?key=%s and %s", "s3cr3t-K3y_with%2B%2F%3Dchars",
             SECRET);
    enr_secret_scrub(text, SECRET, strlen(SECRET));
    T_CHECK(strstr(text, "s3cr3t") == NULL && strstr(text, "failed: https://h/?key=*") != NULL,
            "raw and percent-encoded forms scrubbed: %s", text);
    {
        char enc[64] = "";
        T_CHECK(enr_secret_pct("a+b/c", 5, enc, sizeof enc) == 0 && strcmp(enc, "a%2Bb%2Fc") == 0,
                "percent-encoding: %s", enc);
        enc[0] = '\0';
        T_CHECK(enr_secret_pct("++++", 4, enc, 8) == -1 && strlen(enc) < 8, "does not fit");
    }
}

static void count_warning(void *arg, const char *msg)
{
    (void)msg;
    (*(unsigned *)arg)++;
}

static int conf(enr_config *c, const char *text, char *err, size_t errlen)
{
    return enr_config_parse(c, text, strlen(text), "t.conf", err, errlen);
}

/* upstream_header lines: how many, twice, and the ones refused. */
static void test_config_headers(void)
{
    enr_config c;
    char err[768];

    T_CHECK(conf(&c,
                 "upstream_url = http://127.0.0.1:1/v1\nupstream_header = X-A: 1\n"
                 "upstream_header = X-B: two words\n",
                 err, sizeof err) == 0 &&
                c.upstream_nheaders == 2 && strcmp(c.upstream_headers[1], "X-B: two words") == 0,
            "two header lines: %s", err);
    T_CHECK(conf(&c, "", err, sizeof err) == 0 && c.upstream_nheaders == 0 &&
                c.upstream_secret.len == 0 && c.upstream_max_calls_per_s == 0,
            "defaults: no header, no secret, no rate limit");
    T_CHECK(conf(&c, "upstream_header = X-A: 1\nupstream_header = x-a: 2\n", err, sizeof err) ==
                    -1 &&
                strstr(err, "t.conf:2: upstream_header: header x-a given twice"),
            "a header twice: %s", err);
    {
        char many[1024] = "";
        for (int i = 0; i <= ENR_UP_HEADERS_MAX; i++)
            snprintf(many + strlen(many), sizeof many - strlen(many), "upstream_header = X-%d: v\n",
                     i);
        T_CHECK(conf(&c, many, err, sizeof err) == -1 && strstr(err, "more than"),
                "more than %d lines: %s", ENR_UP_HEADERS_MAX, err);
    }
    T_CHECK(conf(&c, "upstream_header = Host: evil\n", err, sizeof err) == -1, "Host refused");
}

/* upstream_secret_file (okpath, mode 0600; cfg-world, 0644): read only
 * when asked, and the keys it needs or excludes. */
static void test_config_secret_file(const char *okpath)
{
    enr_config c;
    char err[768], text[2048];

    snprintf(text, sizeof text,
             "upstream_url = http://127.0.0.1:1/v1\nupstream_secret_file = %s\n"
             "upstream_secret_header = X-Api-Key\n",
             okpath);
    T_CHECK(conf(&c, text, err, sizeof err) == 0 && c.upstream_secret.bytes == NULL,
            "the configuration alone reads no secret: %s", err);
    T_CHECK(enr_config_load_secrets(&c, err, sizeof err) == 0 &&
                c.upstream_secret.len == strlen(SECRET) &&
                strcmp(c.upstream_secret.bytes, SECRET) == 0,
            "secret file read: %s", err);
    enr_config_secrets_free(&c, NULL);
    T_CHECK(c.upstream_secret.bytes == NULL, "freed");
    snprintf(text, sizeof text,
             "upstream_url = http://127.0.0.1:1/v1\nupstream_secret_file = %s/cfg-world\n"
             "upstream_secret_query = key\n",
             dir);
    T_CHECK(conf(&c, text, err, sizeof err) == 0 &&
                enr_config_probe_credentials(&c, NULL, NULL, err, sizeof err) == -1 &&
                strstr(err, "t.conf:2: upstream_secret_file:") && strstr(err, "open to others"),
            "-t refuses a world-readable file without reading it: %s", err);
    T_CHECK(enr_config_load_secrets(&c, err, sizeof err) == -1 &&
                strstr(err, "t.conf:2: upstream_secret_file:") && strstr(err, "open to others") &&
                strstr(err, SECRET) == NULL,
            "a world-readable file refused, at its line, no secret in the message: %s", err);
    snprintf(text, sizeof text, "upstream_url = http://127.0.0.1:1/v1\nupstream_secret_file = %s\n",
             okpath);
    T_CHECK(conf(&c, text, err, sizeof err) == -1 && strstr(err, "needs upstream_secret_header"),
            "a secret with nowhere to go: %s", err);
    T_CHECK(conf(&c, "upstream_secret_query = key\n", err, sizeof err) == -1 &&
                strstr(err, "needs upstream_secret_file"),
            "a place with no secret: %s", err);
    snprintf(text, sizeof text, "upstream_secret_file = %s\nupstream_secret_query = key\n", okpath);
    T_CHECK(conf(&c, text, err, sizeof err) == -1 && strstr(err, "needs upstream_url"),
            "a secret without upstream_url: %s", err);
    snprintf(text, sizeof text,
             "upstream_url = http://127.0.0.1:1/v1\nupstream_secret_file = %s\n"
             "upstream_secret_credential = api\nupstream_secret_query = key\n",
             okpath);
    T_CHECK(conf(&c, text, err, sizeof err) == -1 && strstr(err, "not both"),
            "file and credential");
    snprintf(text, sizeof text,
             "upstream_url = http://127.0.0.1:1/v1\nupstream_secret_file = %s\n"
             "upstream_secret_query = key\nupstream_secret_header = X-K\n",
             okpath);
    T_CHECK(conf(&c, text, err, sizeof err) == -1 && strstr(err, "not both"), "header and query");
    snprintf(text, sizeof text,
             "upstream_url = http://127.0.0.1:1/v1\nupstream_header = X-Api-Key: 1\n"
             "upstream_secret_file = %s\nupstream_secret_header = x-api-key\n",
             okpath);
    T_CHECK(conf(&c, text, err, sizeof err) == -1 && strstr(err, "also an upstream_header"),
            "the secret's header also a plain one: %s", err);
}

/* the credential way: $CREDENTIALS_DIRECTORY/NAME */
static void test_config_credential(void)
{
    enr_config c;
    char err[768];

    setenv("CREDENTIALS_DIRECTORY", dir, 1);
    write_file("api", SECRET "\n", strlen(SECRET) + 1, 0400);
    T_CHECK(conf(&c,
                 "upstream_url = http://127.0.0.1:1/v1\nupstream_secret_credential = api\n"
                 "upstream_secret_header = Authorization: Bearer {secret}\n",
                 err, sizeof err) == 0 &&
                enr_config_load_secrets(&c, err, sizeof err) == 0 &&
                strcmp(c.upstream_secret.bytes, SECRET) == 0,
            "credential read: %s", err);
    enr_config_secrets_free(&c, NULL);
    unsetenv("CREDENTIALS_DIRECTORY");
    T_CHECK(conf(&c,
                 "upstream_url = http://127.0.0.1:1/v1\nupstream_secret_credential = api\n"
                 "upstream_secret_header = X-K\n",
                 err, sizeof err) == 0 &&
                enr_config_load_secrets(&c, err, sizeof err) == -1 &&
                strstr(err, "CREDENTIALS_DIRECTORY"),
            "credential outside systemd: the daemon refuses it (%s)", err);
    {
        unsigned nw = 0;
        T_CHECK(enr_config_probe_credentials(&c, count_warning, &nw, err, sizeof err) == 0 &&
                    nw == 1,
                "credential outside systemd: -t warns, does not fail");
    }
}

/* The rate limit's key, and a bad URL's message without its secret. */
static void test_config_limits(void)
{
    enr_config c;
    char err[768];

    T_CHECK(conf(&c, "upstream_max_calls_per_s = 50\n", err, sizeof err) == 0 &&
                c.upstream_max_calls_per_s == 50,
            "rate limit key");
    T_CHECK(conf(&c, "upstream_max_calls_per_s = 1000001\n", err, sizeof err) == -1, "bounded");
    T_CHECK(conf(&c, "upstream_url = ftp://h/x?key=" SECRET "\n", err, sizeof err) == -1 &&
                strstr(err, SECRET) == NULL && strstr(err, "?[redacted]"),
            "a bad URL is quoted without its query: %s", err);
}

static void test_config_keys(void)
{
    char okpath[256];

    /* write_file's path is one static buffer: copied before the next */
    snprintf(okpath, sizeof okpath, "%s",
             write_file("cfg-ok", SECRET "\n", strlen(SECRET) + 1, 0600));
    write_file("cfg-world", SECRET "\n", strlen(SECRET) + 1, 0644);
    test_config_headers();
    test_config_secret_file(okpath);
    test_config_credential();
    test_config_limits();
}

/* The permission rule of each kind of credential file. */
static void test_cred_modes(void)
{
    static const struct {
        mode_t mode;
        uid_t uid;
        enr_cred_kind kind;
        int ok;
    } cases[] = {
        {0600, 0, ENR_CRED_PRIVATE, 1},     {0400, 0, ENR_CRED_PRIVATE, 1},
        {0640, 0, ENR_CRED_PRIVATE, 1},     {0640, 65534, ENR_CRED_PRIVATE, 0},
        {0600, 65534, ENR_CRED_PRIVATE, 1}, {0620, 0, ENR_CRED_PRIVATE, 0},
        {0660, 0, ENR_CRED_PRIVATE, 0},     {0644, 0, ENR_CRED_PRIVATE, 0},
        {0604, 0, ENR_CRED_PRIVATE, 0},     {0666, 0, ENR_CRED_PRIVATE, 0},
        {0644, 0, ENR_CRED_PUBLIC, 1},      {0444, 65534, ENR_CRED_PUBLIC, 1},
        {0664, 0, ENR_CRED_PUBLIC, 0},      {0646, 0, ENR_CRED_PUBLIC, 0},
        {0666, 0, ENR_CRED_PUBLIC, 0},
    };
    char why[512];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct stat st;
        memset(&st, 0, sizeof st);
        st.st_mode = S_IFREG | cases[i].mode;
        st.st_uid = cases[i].uid;
        T_CHECK((enr_cred_mode_check("/k", &st, cases[i].kind, why, sizeof why) == 0) ==
                    cases[i].ok,
                "%s %04o uid %u: %s", cases[i].kind == ENR_CRED_PRIVATE ? "private" : "public",
                (unsigned)cases[i].mode, (unsigned)cases[i].uid, cases[i].ok ? "accepted" : why);
    }
    T_CHECK(enr_cred_probe(write_file("pempty", "", 0, 0600), ENR_CRED_PRIVATE, 1, why,
                           sizeof why) == -1 &&
                strstr(why, "empty"),
            "-t: an empty secret file: %s", why);
    T_CHECK(enr_cred_probe(write_file("pok", "abc", 3, 0600), ENR_CRED_PRIVATE, 1, why,
                           sizeof why) == 0,
            "-t: a good one");
    T_CHECK(enr_cred_probe("/nonexistent/k", ENR_CRED_PUBLIC, 0, why, sizeof why) == -1,
            "-t: a missing one");
}

/* 1 when /proc/self/smaps says the mapping at p is left out of cores. */
static int dontdump(const void *p)
{
    char line[512];
    FILE *f = fopen("/proc/self/smaps", "re");
    int in = 0, dd = -1;
    unsigned long lo, hi;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL) {
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = lo == (unsigned long)(uintptr_t)p;
        else if (in && strncmp(line, "VmFlags:", 8) == 0)
            dd = strstr(line, " dd") != NULL;
    }
    fclose(f);
    return dd;
}

static void test_handle(void)
{
    enr_secret s, empty;
    char why[512];
    const char *p = write_file("h", SECRET "\n", strlen(SECRET) + 1, 0600);
    void *at;

    memset(&s, 0, sizeof s);
    memset(&empty, 0, sizeof empty);
    T_CHECK(enr_secret_load(&s, p, why, sizeof why) == 0 && s.len == strlen(SECRET) &&
                strcmp(s.bytes, SECRET) == 0,
            "loaded: %s", why);
    at = s.bytes;
    T_CHECK(dontdump(at) == 1, "its mapping is MADV_DONTDUMP");
    T_CHECK(prctl(PR_GET_DUMPABLE) == 0, "the process holding it is not dumpable");
    enr_secret_child_dumpable();
    T_CHECK(prctl(PR_GET_DUMPABLE) == 1, "a child says it is dumpable again");
    enr_secret_free(&s);
    T_CHECK(s.bytes == NULL && s.len == 0 && dontdump(at) == -1, "freed: unmapped");
    enr_secret_free(&empty);
    enr_secret_forget(&empty);
    T_CHECK(enr_secret_load(&s, write_file("hw", "x", 1, 0644), why, sizeof why) == -1 &&
                s.bytes == NULL,
            "refused: nothing kept (%s)", why);
}

static void test_cleartext(void)
{
    static const struct {
        const char *url;
        int clear;
    } cases[] = {
        {"https://api.example/v1", 0},   {"http://127.0.0.1:8/v1", 0},
        {"http://127.9.9.9/x", 0},       {"http://localhost:80/", 0},
        {"http://[::1]:9/v1", 0},        {"HTTP://api.example/v1", 1},
        {"http://10.0.0.5/v1", 1},       {"http://127.0.0.1.evil.example/", 1},
        {"http://localhost.evil/", 1},   {"http://[::1x]/", 1},
        {"http://[2001:db8::1]:80/", 1}, {"", 0},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        T_CHECK(enr_secret_cleartext_url(cases[i].url) == cases[i].clear, "%s: %s", cases[i].url,
                cases[i].clear ? "clear text to another host" : "not");
}

int main(void)
{
    enr_config_set_url_check(enr_upstream_url_check); /* as the daemon does */
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    test_header_lines();
    test_read();
    test_credential();
    test_redact();
    test_config_keys();
    test_cred_modes();
    test_handle();
    test_cleartext();
    {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            perror("rm");
    }
    T_DONE();
}
