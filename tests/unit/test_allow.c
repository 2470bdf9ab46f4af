/*
 * test_allow.c: listen_allow parsing (what `enrichd -t` refuses) and
 * matching (what a worker lets through), and the key in a config file.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "base/allow.h"
#include "base/config.h"
#include "t.h"

/* Whether a allows the address ip (IPv6 when it holds a ':'). */
static int match(const enr_allow *a, const char *ip)
{
    struct sockaddr_in6 s6;
    struct sockaddr_in s4;

    memset(&s6, 0, sizeof s6);
    memset(&s4, 0, sizeof s4);
    if (strchr(ip, ':') != NULL) {
        s6.sin6_family = AF_INET6;
        inet_pton(AF_INET6, ip, &s6.sin6_addr);
        return enr_allow_match(a, (struct sockaddr *)&s6, sizeof s6);
    }
    s4.sin_family = AF_INET;
    inet_pton(AF_INET, ip, &s4.sin_addr);
    return enr_allow_match(a, (struct sockaddr *)&s4, sizeof s4);
}

static void bad(const char *text, const char *want)
{
    enr_allow a;
    char why[200] = "";

    T_CHECK(enr_allow_parse(text, &a, why, sizeof why) == -1 && strstr(why, want) != NULL,
            "\"%s\" refused with \"%s\": got \"%s\"", text, want, why);
}

int main(void)
{
    enr_allow a;
    enr_config c;
    char why[200] = "", err[300] = "";

    T_CHECK(enr_allow_parse("127.0.0.0/8 ::1", &a, why, sizeof why) == 0, "default: %s", why);
    T_CHECK(a.n == 2, "two entries, got %u", a.n);
    T_CHECK(match(&a, "127.0.0.1") && match(&a, "127.255.1.2"), "loopback /8 matches");
    T_CHECK(!match(&a, "128.0.0.1") && !match(&a, "10.0.0.1"), "others do not");
    T_CHECK(match(&a, "::1") && !match(&a, "::2") && !match(&a, "fe80::1"), "::1 only");
    T_CHECK(match(&a, "::ffff:127.0.0.9"), "IPv4-mapped peer compared as IPv4");
    T_CHECK(!match(&a, "::ffff:10.0.0.9"), "IPv4-mapped outside the list");

    T_CHECK(enr_allow_parse(" 10.1.2.3,192.168.0.0/16 ,, 2001:db8::/32\t172.16.0.0/12", &a, why,
                            sizeof why) == 0,
            "commas and spaces: %s", why);
    T_CHECK(a.n == 4, "four entries, got %u", a.n);
    T_CHECK(match(&a, "10.1.2.3") && !match(&a, "10.1.2.4"), "a single address is a /32");
    T_CHECK(match(&a, "172.31.255.255") && !match(&a, "172.32.0.0"), "/12 boundary");
    T_CHECK(match(&a, "2001:db8:ffff::1") && !match(&a, "2001:db9::1"), "/32 IPv6");
    T_CHECK(!match(&a, "127.0.0.1"), "loopback is not implied");
    T_CHECK(enr_allow_parse("0.0.0.0/0", &a, why, sizeof why) == 0 && match(&a, "8.8.8.8") &&
                !match(&a, "::1"),
            "/0 is every IPv4 peer, no IPv6 one");
    {
        struct sockaddr sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_family = AF_UNIX;
        T_CHECK(!enr_allow_match(&a, &sa, sizeof sa), "no other family matches");
    }

    /* Dual stack: an IPv4 client of [::]:PORT is ::ffff:A.B.C.D, matched
     * as A.B.C.D, and by an IPv6 entry that holds the whole mapped range. */
    T_CHECK(enr_allow_parse("::/0", &a, why, sizeof why) == 0 && match(&a, "::ffff:8.8.8.8") &&
                match(&a, "2001:db8::1") && !match(&a, "8.8.8.8"),
            "::/0 is every IPv6 peer, IPv4-mapped ones included: %s", why);
    T_CHECK(enr_allow_parse("::ffff:0:0/96", &a, why, sizeof why) == 0 &&
                match(&a, "::ffff:10.1.1.1") && !match(&a, "::1"),
            "the mapped range itself: %s", why);
    T_CHECK(enr_allow_parse("::/96", &a, why, sizeof why) == 0 && match(&a, "::1") &&
                !match(&a, "::ffff:127.0.0.1"),
            "an IPv6 entry short of the mapped range does not take mapped peers: %s", why);
    T_CHECK(enr_allow_parse("::/95 10.0.0.0/8", &a, why, sizeof why) == 0 &&
                match(&a, "::ffff:10.2.3.4") && !match(&a, "::ffff:11.2.3.4"),
            "a mapped peer under IPv4 entries: %s", why);
    /* Entries that no TCP peer can ever match are refused, saying why. */
    bad("::ffff:127.0.0.1",
        "IPv4-mapped: such peers are matched as IPv4 addresses (write 127.0.0.1)");
    bad("::ffff:10.0.0.0/104", "(write 10.0.0.0/8)");
    bad("::ffff:0:0/97", "IPv4-mapped");
    bad("0.0.0.0", "unspecified address");
    bad("::", "unspecified address");
    bad("224.0.0.0/4", "multicast");
    bad("239.1.2.3", "multicast");
    bad("ff02::1", "multicast");
    bad("255.255.255.255", "broadcast");
    T_CHECK(enr_allow_parse("0.0.0.0/0 ::/0 192.0.0.0/3", &a, why, sizeof why) == 0,
            "networks that hold such addresses and others are fine: %s", why);

    bad("", "empty");
    bad(" , ", "empty");
    bad("localhost", "not an IPv4 or IPv6 address");
    bad("127.0.0.1/33", "prefix must be 0..32");
    bad("::1/129", "prefix must be 0..128");
    bad("10.0.0.0/-1", "prefix is not a number");
    bad("10.0.0.0/", "prefix is not a number");
    bad("10.0.0.0/8x", "prefix must be");
    bad("10.0.0.1/8", "bits set past /8");
    bad("2001:db8::1/32", "bits set past /32");
    bad("127.0.0.1;10.0.0.1", "not an IPv4 or IPv6 address");
    bad("1.1.1.1 1.1.1.2 1.1.1.3 1.1.1.4 1.1.1.5 1.1.1.6 1.1.1.7 1.1.1.8 1.1.1.9 1.1.1.10 "
        "1.1.1.11 1.1.1.12 1.1.1.13 1.1.1.14 1.1.1.15 1.1.1.16 1.1.1.17 1.1.1.18 1.1.1.19 "
        "1.1.1.20 1.1.1.21 1.1.1.22 1.1.1.23 1.1.1.24 1.1.1.25 1.1.1.26 1.1.1.27 1.1.1.28 "
        "1.1.1.29 1.1.1.30 1.1.1.31 1.1.1.32 1.1.1.33",
        "more than 32 entries");

    /* The key: default loopback only; a bad value names file, line, key. */
    T_CHECK(enr_config_load(&c, NULL, err, sizeof err) == 0, "built-in: %s", err);
    T_CHECK(c.listen_allow_nets.n == 2 && match(&c.listen_allow_nets, "127.0.0.1") &&
                !match(&c.listen_allow_nets, "192.168.1.1"),
            "default is loopback only");
    T_CHECK(enr_config_parse(&c, "listen_allow = 10.0.0.0/8, 127.0.0.1\n", 37, "t.conf", err,
                             sizeof err) == 0 &&
                match(&c.listen_allow_nets, "10.9.9.9"),
            "set in a file: %s", err);
    T_CHECK(enr_config_parse(&c, "\nlisten_allow = 10.0.0.1/8\n", 27, "t.conf", err, sizeof err) ==
                    -1 &&
                strncmp(err, "t.conf:2: listen_allow: ", 24) == 0,
            "bad value: FILE:LINE: key: problem, got \"%s\"", err);
    T_CHECK(match(&c.listen_allow_nets, "10.9.9.9"), "a refused file leaves the config as it was");
    T_DONE();
}
