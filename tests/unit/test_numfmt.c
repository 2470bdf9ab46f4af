/*
 * test_numfmt.c: numbers to and from text (CONTRACT rules 2.6, 4.1, 9,
 * 13.1): every example of the contract, tables computed independently by
 * CPython (numfmt_cases.inc), and a randomized round-trip/shortness check.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine/numfmt.h"
#include "t.h"

#include "numfmt_cases.inc"

static double from_bits(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

static uint64_t to_bits(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

static void fmt_is(double v, const char *want)
{
    char out[ENR_NUM_MAX];
    size_t n = enr_num_format(v, out);
    T_CHECK(strcmp(out, want) == 0 && n == strlen(want), "format %.17g: got \"%s\", want \"%s\"", v,
            out, want);
}

/* Same double, bit for bit (so -0 and 0 differ, NaN equals NaN). */
static void same(double got, double want, const char *what, const char *input)
{
    int ok = isnan(want) ? isnan(got) : to_bits(got) == to_bits(want);
    T_CHECK(ok, "%s(\"%s\"): got %.17g, want %.17g", what, input, got, want);
}

static void json_is(const char *s, double want)
{
    same(enr_num_parse_json(s, strlen(s)), want, "parse_json", s);
}

static void text_is(const char *s, double want)
{
    same(enr_num_from_text(s, strlen(s)), want, "from_text", s);
}

static void test_format_contract(void)
{
    fmt_is(1e21, "1e+21");
    fmt_is(1.5e-7, "1.5e-7");
    fmt_is(1e20, "100000000000000000000");
    fmt_is(12345678901234567890.0, "12345678901234567000");
    fmt_is(123456789012345678901.0, "123456789012345680000");
    fmt_is(18446744073709551616.0, "18446744073709552000");
    fmt_is(HUGE_VAL, "Infinity");
    fmt_is(-HUGE_VAL, "-Infinity");
    fmt_is(NAN, "NaN");
    fmt_is(0.0, "0");
    fmt_is(-0.0, "0");
    fmt_is(123.456, "123.456");
    fmt_is(0.000001, "0.000001");
    fmt_is(0.00001234, "0.00001234");
    fmt_is(1e-7, "1e-7");
    fmt_is(5e-324, "5e-324");
    fmt_is(-5e-324, "-5e-324");
    fmt_is(DBL_MAX, "1.7976931348623157e+308");
    fmt_is(-DBL_MAX, "-1.7976931348623157e+308");
    fmt_is(1.2345678901234568e+29, "1.2345678901234568e+29");
    fmt_is(253, "253");
    fmt_is(-253, "-253");
    fmt_is(31, "31");
    fmt_is(9007199254740991.0, "9007199254740991");
    fmt_is(9007199254740992.0, "9007199254740992");
    fmt_is(9007199254740993.0, "9007199254740992"); /* the double is 2^53 */
    fmt_is(999999999999999900000.0, "999999999999999900000");
    fmt_is(1e21 * 1.5, "1.5e+21");
    fmt_is(0.1 + 0.2, "0.30000000000000004");
    fmt_is(0.1, "0.1");
    fmt_is(-0.5, "-0.5");
    fmt_is(2.5, "2.5");
    fmt_is(1.0 / 3, "0.3333333333333333");
    fmt_is(DBL_MIN, "2.2250738585072014e-308");
    fmt_is(4.9406564584124654e-322, "4.94e-322"); /* 100 x the smallest subnormal */
    fmt_is(1e-322, "1e-322");
    fmt_is(123e-20, "1.23e-18");
    fmt_is(-1e-7, "-1e-7");
    fmt_is(100, "100");
    fmt_is(1e15, "1000000000000000");
    fmt_is(4.35, "4.35");
}

static void test_format_table(void)
{
    for (size_t i = 0; i < sizeof fmt_cases / sizeof fmt_cases[0]; i++)
        fmt_is(from_bits(fmt_cases[i].bits), fmt_cases[i].text);
}

/* Counts the significant digits of a printed number. */
static int sig_digits(const char *s)
{
    int k = 0, started = 0, zeros = 0;
    for (; *s && *s != 'e'; s++) {
        if (*s < '0' || *s > '9')
            continue;
        if (*s == '0' && !started)
            continue;
        started = 1;
        if (*s == '0') {
            zeros++;
        } else {
            k += zeros + 1;
            zeros = 0;
        }
    }
    return k;
}

/* Every printed value reads back exactly, and no candidate with one digit
 * fewer (either neighbour of v at that precision) reads back as v. */
static void test_format_random(void)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    int bad_trip = 0, bad_short = 0, n = 200000;

    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        /* half raw bit patterns, half short decimals such as 2531.25 */
        double v = (i & 1) ? from_bits(x & 0x7fffffffffffffffULL)
                           : (double)(x % 100000000) / pow(10, (double)((x >> 40) % 12));
        char out[ENR_NUM_MAX], txt[64];
        if (!isfinite(v) || v == 0)
            continue;
        enr_num_format(v, out);
        if (strtod(out, NULL) != v) {
            if (bad_trip++ < 5)
                printf("no round trip: %a -> %s\n", v, out);
            continue;
        }
        int k = sig_digits(out);
        if (k <= 1)
            continue;
        snprintf(txt, sizeof txt, "%.*e", k - 2, v); /* nearest (k-1)-digit candidate */
        if (strtod(txt, NULL) == v) {
            if (bad_short++ < 5)
                printf("not shortest: %a -> %s, but %s\n", v, out, txt);
        }
    }
    T_CHECK(bad_trip == 0, "%d of %d random doubles do not round-trip", bad_trip, n);
    T_CHECK(bad_short == 0, "%d of %d random doubles are not shortest", bad_short, n);
}

static void test_parse_json(void)
{
    json_is("0", 0.0);
    json_is("-0", -0.0);
    json_is("-0.0", -0.0);
    json_is("-1e-400", -0.0);
    json_is("1e-400", 0.0);
    json_is("1e400", HUGE_VAL);
    json_is("-1e400", -HUGE_VAL);
    json_is("1e99999999999999999999999", HUGE_VAL);
    json_is("1e-99999999999999999999999", 0.0);
    json_is("0e99999999999999999999999", 0.0);
    json_is("253", 253);
    json_is("-17", -17);
    json_is("1e21", 1e21);
    json_is("1.5e-7", 1.5e-7);
    json_is("123456789012345678901234567890", 123456789012345678901234567890.0);
    json_is("9007199254740993", 9007199254740992.0);
    json_is("9007199254740995", 9007199254740996.0);
    json_is("999999999999999", 999999999999999.0);
    json_is("0.1", 0.1);
    json_is("1E+2", 100);
    json_is("12.5E-1", 1.25);
    json_is("4.35", 4.35);
    json_is("1.7976931348623157e308", DBL_MAX);
    json_is("1.7976931348623159e308", HUGE_VAL);
    json_is("2.4703282292062328e-324", 5e-324);
    json_is("2.4703282292062327e-324", 0.0);
    json_is("0.000000000000000000000000000001", 1e-30);
    json_is("123e30", 123e30); /* the extended exact fast path */

    /* The token is not NUL-terminated: digits after len must be ignored. */
    same(enr_num_parse_json("1234567", 3), 123, "parse_json", "123|4567");
    same(enr_num_parse_json("1.59999", 3), 1.5, "parse_json", "1.5|9999");
    same(enr_num_parse_json("1e59", 3), 1e5, "parse_json", "1e5|9");

    for (size_t i = 0; i < sizeof parse_cases / sizeof parse_cases[0]; i++) {
        const char *s = parse_cases[i].text;
        double want = from_bits(parse_cases[i].bits);
        same(enr_num_parse_json(s, strlen(s)), want, "parse_json", s);
        same(enr_num_from_text(s, strlen(s)), want, "from_text", s);
    }
}

/* The forms a number's text takes: white space around it, decimals,
 * the radix prefixes (rounded to nearest, ties to even) and infinities. */
static void test_from_text_forms(void)
{
    text_is("", 0);
    text_is(" \t\n", 0);
    text_is("\xe3\x80\x80", 0);
    text_is(" 12 ", 12);
    text_is("\xc2\xa0"
            "12\xe3\x80\x80",
            12);
    text_is("\xef\xbb\xbf"
            "12",
            12);
    text_is("\xe2\x80\xa8"
            "7\xe2\x80\xaf",
            7);
    text_is("1.", 1);
    text_is(".5", 0.5);
    text_is("5.e1", 50);
    text_is("+5", 5);
    text_is("-5", -5);
    text_is("017", 17);
    text_is("08", 8);
    text_is("0b101", 5);
    text_is("0B101", 5);
    text_is("0o17", 15);
    text_is("0O17", 15);
    text_is("0x1F", 31);
    text_is("0X1f", 31);
    text_is("0x10", 16);
    text_is("0x0", 0);
    text_is("0x20000000000001", 9007199254740992.0);
    text_is("0x20000000000003", 9007199254740996.0);
    text_is("0x20000000000002", 9007199254740994.0);
    text_is("0x1fffffffffffff", 9007199254740991.0);
    text_is("0x0000000000000000000000000000000000000000001", 1);
    text_is("0xfffffffffffff800", 18446744073709549568.0); /* 53 ones: exact */
    text_is("0xfffffffffffffc00", 18446744073709551616.0); /* tie, odd: up to even */
    text_is("0xfffffffffffffbff", 18446744073709549568.0);
    text_is("0xfffffffffffff400", 18446744073709547520.0); /* tie, even: down */
    text_is("0xfffffffffffff401", 18446744073709549568.0);
    text_is("0b"
            "100000000000000000000000000000000000000000000000000001"
            "0000000000000000000000000000000000000000000000000000000001",
            ldexp(1.0, 111) + ldexp(1.0, 59)); /* sticky bit far below decides: up */
    text_is("0b"
            "100000000000000000000000000000000000000000000000000001"
            "0000000000000000000000000000000000000000000000000000000000",
            ldexp(1.0, 111)); /* exact tie, even: down */
    text_is("Infinity", HUGE_VAL);
    text_is("+Infinity", HUGE_VAL);
    text_is("-Infinity", -HUGE_VAL);
    text_is(" -Infinity\t", -HUGE_VAL);
    text_is("1e400", HUGE_VAL);
    text_is("1e-400", 0);
    text_is("-0", -0.0);
    text_is("1.7976931348623159e308", HUGE_VAL);
    text_is("2.4703282292062328e-324", 5e-324);
    text_is("0.0000001", 1e-7);
    text_is("123456789012345678901", 123456789012345678901.0);
    text_is("253", 253);
    text_is("1E3", 1000);
    text_is("1e+3", 1000);
    text_is("1e-3", 0.001);
    text_is("00000.00000", 0);
    text_is("5", 5);
}

/* Hex texts of hundreds of digits: past the largest double or just below. */
static void test_from_text_long_hex(void)
{
    char f300[303] = "0x";
    memset(f300 + 2, 'f', 300);
    f300[302] = '\0';
    text_is(f300, HUGE_VAL);
    char f256[259] = "0x";
    memset(f256 + 2, 'f', 256); /* 2^1024 - 1 rounds up to 2^1024: infinite */
    f256[258] = '\0';
    text_is(f256, HUGE_VAL);
    char f255[258] = "0x";
    memset(f255 + 2, 'f', 255); /* 2^1020 - 1 */
    f255[257] = '\0';
    text_is(f255, ldexp(1.0, 1020));
}

/* What is not a number: NaN, and the length, not a NUL, ends the text. */
static void test_from_text_refused(void)
{
    static const char *const nan_list[] = {"12px",
                                           "1 2",
                                           "1_000",
                                           "1,5",
                                           "-0x1F",
                                           "+0x1F",
                                           "0x",
                                           "0x1.8",
                                           "0x1p3",
                                           "0b102",
                                           "0o8",
                                           ".",
                                           ".e1",
                                           "+-5",
                                           "1e",
                                           "infinity",
                                           "inf",
                                           "NaN",
                                           "\xd9\xa1\xd9\xa2",
                                           "\xef\xbc\x91\xef\xbc\x92",
                                           "\xe2\x80\x8b"
                                           "12",
                                           "PT4M13S",
                                           "\xe2\x88\x92"
                                           "5",
                                           "INFINITY",
                                           "Infinityx",
                                           "-",
                                           "+",
                                           "e5",
                                           "1e+",
                                           "1e-",
                                           "1.2.3",
                                           "0x-1",
                                           "0xg",
                                           "0b",
                                           "0o",
                                           "--1",
                                           "1e5.5",
                                           "0b1 0",
                                           "nan",
                                           "-nan",
                                           "inf",
                                           "+inf",
                                           "0x1P3",
                                           "1d",
                                           "1f",
                                           "\xc2\x85"
                                           "1",
                                           "\xe1\xa0\x8e"
                                           "1",
                                           "1\xe2\x80\x8b",
                                           "\xed\xa0\x80"
                                           "1",
                                           "12\x01"};
    for (size_t i = 0; i < sizeof nan_list / sizeof nan_list[0]; i++)
        text_is(nan_list[i], NAN);
    same(enr_num_from_text("12\0", 3), NAN, "from_text", "12\\u0000");
    same(enr_num_from_text("\0", 1), NAN, "from_text", "\\u0000");
    /* not NUL-terminated: bytes after len are not part of the text */
    same(enr_num_from_text("12px", 2), 12, "from_text", "12|px");
    same(enr_num_from_text("0x1F", 3), 1, "from_text", "0x1|F");
}

static void test_from_text(void)
{
    test_from_text_forms();
    test_from_text_long_hex();
    test_from_text_refused();
}

int main(void)
{
    test_format_contract();
    test_format_table();
    test_format_random();
    test_parse_json();
    test_from_text();
    T_DONE();
}
