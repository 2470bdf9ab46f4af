/*
 * numfmt.c: doubles to and from text (docs/contract.md §2.6, 9, 13.1).
 *
 * Text to double: every accepted spelling is reduced to significant
 * digits and a decimal exponent.  Short cases are exact in double
 * arithmetic (Clinger's fast path); everything else goes to glibc's
 * strtod, which rounds correctly in the C locale, on a rebuilt string of
 * at most ENR_DEC_KEEP digits, so input of any length needs no heap and
 * strtod never sees anything outside the contract's grammar.
 *
 * Double to text: integers below 2^53 are printed directly; otherwise
 * the shortest round-trip digits are found with %.*e and a strtod check
 * (see shortest_digits for why the candidates tried are enough), then
 * laid out as ECMAScript Number::toString does.
 *
 * Invariant: no function here allocates or depends on mutable state;
 * the process must run in the C locale for LC_NUMERIC (never changed by
 * enrichd).
 */
#include "engine/numfmt.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"

/*
 * Every midpoint between two adjacent doubles has at most 767 significant
 * decimal digits, so digits past that only matter as "some non-zero digit
 * follows": keeping 780 and replacing the rest by a sticky 1 preserves the
 * correctly rounded result.
 */
#define ENR_DEC_KEEP 780
/* Beyond these decimal exponents of the leading digit any value is 0 or
 * infinite; clamping keeps exponent arithmetic far from overflow. */
#define ENR_DEC_EXP_CLAMP 100000L
#define ENR_DEC_EXP_HUGE 400L

static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

/* ------------------------------------------------------------------ */
/* text -> double                                                       */

/*
 * Converts p[0..end) that matches  digits* [ "." digits* ] [ (e|E) [+-] digits+ ]
 * with at least one mantissa digit (the caller has checked the grammar).
 */
static double dec_convert(const char *p, const char *end, int neg)
{
    char buf[ENR_DEC_KEEP + 32];
    size_t nd = 0;       /* significant digits kept in buf */
    int sticky = 0;      /* a non-zero digit was dropped */
    long long point = 0; /* digits (significant or not) before the point, after leading zeros */
    int seen_nonzero = 0, after_point = 0;
    long long lead_frac_zeros = 0; /* zeros after the point before the first significant digit */
    long exp = 0;
    double r;

    for (; p < end; p++) {
        int c = (unsigned char)*p;
        if (c == '.') {
            after_point = 1;
            continue;
        }
        if (!is_digit(c))
            break;
        if (!seen_nonzero) {
            if (c == '0') {
                if (after_point)
                    lead_frac_zeros++;
                continue;
            }
            seen_nonzero = 1;
        }
        if (!after_point)
            point++;
        if (nd < ENR_DEC_KEEP)
            buf[nd++] = (char)c;
        else if (c != '0')
            sticky = 1;
    }
    if (p < end) { /* e or E */
        int eneg = 0;
        p++;
        if (*p == '+' || *p == '-')
            eneg = *p++ == '-';
        for (; p < end; p++) {
            if (exp < ENR_DEC_EXP_CLAMP)
                exp = exp * 10 + (*p - '0');
        }
        if (eneg)
            exp = -exp;
    }
    if (nd == 0)
        return neg ? -0.0 : 0.0;

    /* value = 0.d1d2... x 10^dexp */
    long long dexp = (seen_nonzero ? point : 0) - lead_frac_zeros + exp;
    if (dexp > ENR_DEC_EXP_HUGE)
        return neg ? -HUGE_VAL : HUGE_VAL;
    if (dexp < -ENR_DEC_EXP_HUGE)
        return neg ? -0.0 : 0.0;

    while (nd > 1 && buf[nd - 1] == '0' && !sticky)
        nd--;
    /* value = int(d1..dnd) x 10^e10 */
    long e10 = (long)dexp - (long)nd;

    if (nd <= 15 && !sticky && e10 >= -22 && e10 <= 22 + 15 - (long)nd) {
        int64_t m = 0;
        for (size_t i = 0; i < nd; i++)
            m = m * 10 + (buf[i] - '0');
        double dm = (double)m; /* exact: m < 10^15 < 2^53 */
        if (e10 < 0) {
            r = dm / pow10_exact[-e10];
        } else if (e10 <= 22) {
            r = dm * pow10_exact[e10];
        } else {
            /* m x 10^(e10-22) still has at most 15 digits, so it is exact */
            r = dm * pow10_exact[e10 - 22] * pow10_exact[22];
        }
        return neg ? -r : r;
    }

    if (sticky) {
        buf[nd++] = '1';
        e10--;
    }
    size_t n = nd;
    buf[n++] = 'e';
    if (e10 < 0) {
        buf[n++] = '-';
        e10 = -e10;
    }
    char tmp[24];
    size_t t = 0;
    do {
        tmp[t++] = (char)('0' + e10 % 10);
        e10 /= 10;
    } while (e10 > 0);
    while (t > 0)
        buf[n++] = tmp[--t];
    buf[n] = '\0';
    r = strtod(buf, NULL);
    return neg ? -r : r;
}

double enr_num_parse_json(const char *s, size_t len)
{
    int neg = 0;

    if (len > 0 && s[0] == '-') {
        neg = 1;
        s++;
        len--;
    }
    /* Short integers (durations, most numeric ids) skip the scan. */
    if (len > 0 && len <= 15) {
        uint64_t m = 0;
        size_t i;
        for (i = 0; i < len && is_digit((unsigned char)s[i]); i++)
            m = m * 10 + (uint64_t)(s[i] - '0');
        if (i == len) {
            double r = (double)m;
            return neg ? -r : r;
        }
    }
    return dec_convert(s, s + len, neg);
}

/* Value of one digit in radix 2^bits, or -1. */
static int radix_digit(int c, int bits)
{
    int d;

    if (c >= '0' && c <= '9')
        d = c - '0';
    else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
    else
        return -1;
    return d < (1 << bits) ? d : -1;
}

/*
 * Exact value of a 0x/0o/0b literal rounded to nearest, ties to even:
 * the first 60-odd significant bits are kept, the rest only as an
 * exponent and a sticky bit.
 */
static double radix_convert(const unsigned char *p, const unsigned char *end, int bits)
{
    uint64_t m = 0;
    long extra = 0; /* binary digits dropped after m filled up */
    int sticky = 0;

    if (p == end)
        return NAN;
    for (; p < end; p++) {
        int d = radix_digit(*p, bits);
        if (d < 0)
            return NAN;
        if (m < ((uint64_t)1 << 60)) {
            m = (m << bits) | (uint64_t)d;
        } else {
            /* d's bits go into sticky; the exponent saturates where the
             * result is already infinite. */
            if (d)
                sticky = 1;
            if (extra < 4096)
                extra += bits;
        }
    }
    if (m == 0)
        return 0.0;
    int width = 64 - __builtin_clzll(m);
    if (width > 53) {
        int shift = width - 53;
        uint64_t low = m & (((uint64_t)1 << shift) - 1);
        uint64_t half = (uint64_t)1 << (shift - 1);
        m >>= shift;
        if (low > half || (low == half && (sticky || (m & 1))))
            m++;
        extra += shift;
    }
    return ldexp((double)m, (int)extra);
}

double enr_num_from_text(const char *s, size_t len)
{
    const unsigned char *p, *end;
    size_t w;
    int neg = 0;

    if (len == 0) /* also spares s == NULL (an empty buffer) any arithmetic */
        return 0;
    p = (const unsigned char *)s;
    end = p + len;

    while (p < end && (w = enr_ws_len(p, end)) > 0)
        p += w;
    while (end > p && (w = enr_ws_len_back(p, end)) > 0)
        end -= w;
    if (p == end)
        return 0.0;

    if (end - p >= 2 && p[0] == '0') {
        switch (p[1]) {
        case 'x':
        case 'X':
            return radix_convert(p + 2, end, 4);
        case 'o':
        case 'O':
            return radix_convert(p + 2, end, 3);
        case 'b':
        case 'B':
            return radix_convert(p + 2, end, 1);
        default:
            break;
        }
    }
    if (*p == '+' || *p == '-') {
        neg = *p == '-';
        p++;
    }
    if ((size_t)(end - p) == 8 && memcmp(p, "Infinity", 8) == 0)
        return neg ? -HUGE_VAL : HUGE_VAL;

    /* Check the decimal grammar before anything converts it. */
    const unsigned char *q = p;
    size_t mant_digits = 0;
    while (q < end && is_digit(*q)) {
        q++;
        mant_digits++;
    }
    if (q < end && *q == '.') {
        q++;
        while (q < end && is_digit(*q)) {
            q++;
            mant_digits++;
        }
    }
    if (mant_digits == 0)
        return NAN;
    if (q < end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < end && (*q == '+' || *q == '-'))
            q++;
        if (q == end || !is_digit(*q))
            return NAN;
        while (q < end && is_digit(*q))
            q++;
    }
    if (q != end)
        return NAN;
    return dec_convert((const char *)p, (const char *)end, neg);
}

/* ------------------------------------------------------------------ */
/* double -> text                                                       */

/*
 * Parses the output of "%.*e" for a positive finite value into digits
 * (trailing zeros removed) and n, the decimal exponent of Number::toString
 * (value = 0.digits x 10^n).  Returns the digit count.
 */
static int parse_e(const char *e, char dig[20], int *n)
{
    int k = 0, x = 0, xneg = 0;

    dig[k++] = *e++;
    if (*e == '.') {
        e++;
        while (is_digit((unsigned char)*e))
            dig[k++] = *e++;
    }
    e++; /* 'e' */
    if (*e == '-' || *e == '+')
        xneg = *e++ == '-';
    while (is_digit((unsigned char)*e))
        x = x * 10 + (*e++ - '0');
    while (k > 1 && dig[k - 1] == '0')
        k--;
    *n = (xneg ? -x : x) + 1;
    return k;
}

/* Prints v (positive, finite) with p significant digits and checks that
 * it reads back as v. */
static int try_digits(double v, int p, char txt[40])
{
    snprintf(txt, 40, "%.*e", p - 1, v);
    return strtod(txt, NULL) == v;
}

/* The digits of v = m x 10^-d (m > 0) without trailing zeros into dig,
 * *n the decimal exponent as shortest_digits gives it; the count. */
static int mantissa_digits(uint64_t m, int d, char dig[20], int *n)
{
    char tmp[24];
    int t = 0, k = 0;

    while (m % 10 == 0) {
        m /= 10;
        d--;
    }
    do {
        tmp[t++] = (char)('0' + m % 10);
        m /= 10;
    } while (m > 0);
    *n = t - d;
    while (t > 0)
        dig[k++] = tmp[--t];
    return k;
}

/*
 * The shortest digits that round-trip, the closest to v among equally
 * short ones.  Normal doubles: if some candidate of at most 15 digits
 * round-trips, the 15-digit rounding of v is that candidate padded with
 * zeros (DBL_DIG = 15 makes 15-digit decimals survive a trip through a
 * double).  At 16 digits only the two 16-digit neighbours of v can
 * round-trip; the nearer one is tried first, then the other, which can
 * be the only one inside the rounding interval when v is a power of two
 * (its lower half-gap is half as wide).  17 digits always round-trip.
 * Subnormals have fewer digits of precision and a symmetric interval, so
 * the nearest p-digit candidate is tried for p = 1, 2, ... instead.
 */
static int shortest_digits(double v, char dig[20], int *n)
{
    char txt[40];

    /*
     * Fast path for values with few decimals (253.5, 0.25): if m / 10^d
     * rounds to v with m < 10^15, then m is a round-tripping candidate of
     * at most 15 digits, and by the DBL_DIG argument above the only one
     * once padded to 15 digits, so m without its trailing zeros is the
     * answer.  m / 10^d is the correctly rounded quotient of two exact
     * doubles, which is what strtod would give.
     */
    if (v >= DBL_MIN && v < 1e15) {
        for (int d = 1; d <= 22; d++) {
            double x = v * pow10_exact[d];
            if (x >= 1e15)
                break;
            uint64_t m = (uint64_t)(x + 0.5);
            if (m != 0 && (double)m / pow10_exact[d] == v)
                return mantissa_digits(m, d, dig, n);
        }
    }
    /* And the same for large values with few digits (1e21, 2.5e20): m x
     * 10^k with m < 10^15 is the correctly rounded product of two exact
     * doubles, which is what strtod would give; d = -k below. */
    if (v >= 1e15 && v < 1e37) {
        for (int k = 1; k <= 22; k++) {
            double x = v / pow10_exact[k];
            if (x < 1)
                break;
            if (x >= 1e15)
                continue;
            uint64_t m = (uint64_t)(x + 0.5);
            if (m != 0 && (double)m * pow10_exact[k] == v)
                return mantissa_digits(m, -k, dig, n);
        }
    }
    if (v < DBL_MIN) {
        for (int p = 1; p < 17; p++)
            if (try_digits(v, p, txt))
                return parse_e(txt, dig, n);
        try_digits(v, 17, txt);
        return parse_e(txt, dig, n);
    }
    if (try_digits(v, 15, txt))
        return parse_e(txt, dig, n);
    if (try_digits(v, 16, txt))
        return parse_e(txt, dig, n);

    /* The other 16-digit neighbour: step the last digit towards v. */
    char d16[20];
    int n16;
    int k = parse_e(txt, d16, &n16);
    double near = strtod(txt, NULL);
    char alt[40];
    int i;
    for (i = k; i < 16; i++)
        d16[i] = '0';
    if (near < v) {
        for (i = 15; i >= 0 && d16[i] == '9'; i--)
            d16[i] = '0';
        if (i < 0) { /* 9999999999999999 -> 1000000000000000, one more digit */
            d16[0] = '1';
            n16++;
        } else {
            d16[i]++;
        }
    } else {
        for (i = 15; i >= 0 && d16[i] == '0'; i--)
            d16[i] = '9';
        d16[i]--;            /* the leading digit is not 0, so i >= 0 */
        if (d16[0] == '0') { /* 1000000000000000 -> 0999999999999999 */
            memmove(d16, d16 + 1, 15);
            d16[15] = '9';
            n16--;
        }
    }
    snprintf(alt, sizeof alt, "%c.%.15se%d", d16[0], d16 + 1, n16 - 1);
    if (strtod(alt, NULL) == v)
        return parse_e(alt, dig, n);

    try_digits(v, 17, txt);
    return parse_e(txt, dig, n);
}

static size_t put_uint(uint64_t u, char *out)
{
    char tmp[24];
    size_t t = 0, n = 0;

    do {
        tmp[t++] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    while (t > 0)
        out[n++] = tmp[--t];
    return n;
}

size_t enr_num_format(double v, char out[ENR_NUM_MAX])
{
    size_t o = 0;

    if (isnan(v)) {
        memcpy(out, "NaN", 4);
        return 3;
    }
    if (v == 0) { /* also -0 */
        memcpy(out, "0", 2);
        return 1;
    }
    if (v < 0) {
        out[o++] = '-';
        v = -v;
    }
    if (isinf(v)) {
        memcpy(out + o, "Infinity", 9);
        return o + 8;
    }
    if (v < 9007199254740992.0 && v == (double)(uint64_t)v) {
        o += put_uint((uint64_t)v, out + o);
        out[o] = '\0';
        return o;
    }

    char dig[20];
    int n;
    int k = shortest_digits(v, dig, &n);

    if (k <= n && n <= 21) {
        memcpy(out + o, dig, (size_t)k);
        o += (size_t)k;
        for (int i = k; i < n; i++)
            out[o++] = '0';
    } else if (0 < n && n < k) { /* k <= 17, so also n <= 21 */
        memcpy(out + o, dig, (size_t)n);
        o += (size_t)n;
        out[o++] = '.';
        memcpy(out + o, dig + n, (size_t)(k - n));
        o += (size_t)(k - n);
    } else if (-6 < n && n <= 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -n; i++)
            out[o++] = '0';
        memcpy(out + o, dig, (size_t)k);
        o += (size_t)k;
    } else {
        int x = n - 1;
        out[o++] = dig[0];
        if (k > 1) {
            out[o++] = '.';
            memcpy(out + o, dig + 1, (size_t)(k - 1));
            o += (size_t)(k - 1);
        }
        out[o++] = 'e';
        out[o++] = x < 0 ? '-' : '+';
        o += put_uint((uint64_t)(x < 0 ? -x : x), out + o);
    }
    out[o] = '\0';
    return o;
}
