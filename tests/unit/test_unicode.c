/*
 * test_unicode.c: id lower-casing and title normalization (CONTRACT rules
 * 4.2, 7.2, 8, 10, 12) with the engine's Unicode 17.0 tables, with ICU
 * (Debian's, Unicode 15.0) as a second oracle on code points that did not
 * change since 15.0, including how the engine treats unpaired
 * surrogates (written "\xed\xa0\x80" = U+D800 in WTF-8, text.h).
 */
#include <stdlib.h>

#include <time.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include "t.h"
#include "engine/unicode.h"

#define D800 "\xed\xa0\x80"
#define DC00 "\xed\xb0\x80"

static enr_uni *uni;

/* Escapes non-printable bytes so a failure line is readable. */
static const char *show(const char *s, size_t n)
{
    static char b[4][4096];
    static int which;
    char *o = b[which++ & 3];
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < 4096; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            o[k++] = (char)c;
        else
            k += (size_t)snprintf(o + k, 4096 - k, "\\x%02x", c);
    }
    o[k] = '\0';
    return o;
}

typedef int (*uni_fn)(enr_uni *, const char *, size_t, enr_buf *);

static int title_nomax(enr_uni *u, const char *s, size_t len, enr_buf *out)
{
    return enr_uni_title(u, s, len, ENR_UNI_NO_MAX, out);
}

static int id_nomax(enr_uni *u, const char *s, size_t len, enr_buf *out)
{
    return enr_uni_id(u, s, len, ENR_UNI_NO_MAX, out);
}

static void check_n(uni_fn fn, const char *name, const char *in, size_t in_len, const char *want,
                    size_t want_len)
{
    enr_buf out = {0};
    int rc = fn(uni, in, in_len, &out);
    T_CHECK(rc == 0 && !out.oom && out.len == want_len &&
                (want_len == 0 || memcmp(out.data, want, want_len) == 0),
            "%s(\"%s\") rc %d: got \"%s\", want \"%s\"", name, show(in, in_len), rc,
            show(out.data ? out.data : "", out.len), show(want, want_len));
    enr_buf_free(&out);
}

static void id_is(const char *in, const char *want)
{
    check_n(id_nomax, "id", in, strlen(in), want, strlen(want));
}

static void title_is(const char *in, const char *want)
{
    check_n(title_nomax, "title", in, strlen(in), want, strlen(want));
}

static void test_id_ascii(void)
{
    id_is(" AbC-123 ", "abc-123");
    id_is("\t\n\v\f\r ABC \t", "abc");
    id_is(" A , B ", "a , b");
    id_is("", "");
    id_is("   ", "");
    id_is("[object Object]", "[object object]");
    id_is("0", "0");
    id_is("A/B\x7f", "a/b\x7f");
    id_is("Infinity", "infinity");
    id_is("-Infinity", "-infinity");
    check_n(id_nomax, "id", "A\0B", 3, "a\0b", 3);
}

static void test_id_unicode(void)
{
    /* rule 8 trimming: all non-ASCII white space, but not U+0085/U+200B */
    id_is("\xc2\xa0\xe1\x9a\x80\xe2\x80\x80\xe2\x80\x8a\xe2\x80\xa8\xe2\x80\xa9\xe2\x80\xaf"
          "X\xe2\x81\x9f\xe3\x80\x80\xef\xbb\xbf",
          "x");
    id_is("\xc2\x85X\xe2\x80\x8b", "\xc2\x85x\xe2\x80\x8b");
    id_is("\xe1\xa0\x8eX\xe2\x81\xa0", "\xe1\xa0\x8ex\xe2\x81\xa0");
    id_is("A\xe3\x80\x80"
          "B",
          "a\xe3\x80\x80"
          "b"); /* inner white space stays */
    id_is("A\xc3\xa9", "a\xc3\xa9");
    id_is("\xc3\x89T\xc3\x89", "\xc3\xa9t\xc3\xa9");

    /* rule 10 examples */
    id_is("\xc3\x9f", "\xc3\x9f");                 /* ß stays */
    id_is("\xef\xac\x80", "\xef\xac\x80");         /* ﬀ stays */
    id_is("\xc7\x85", "\xc7\x86");                 /* ǅ -> ǆ */
    id_is("\xe1\xba\x9e", "\xc3\x9f");             /* ẞ -> ß */
    id_is("\xe2\x84\xaa", "k");                    /* Kelvin */
    id_is("\xe2\x84\xa6", "\xcf\x89");             /* Ohm -> ω */
    id_is("\xe2\x85\xab", "\xe2\x85\xbb");         /* Ⅻ -> ⅻ */
    id_is("\xe2\x92\xb6", "\xe2\x93\x90");         /* Ⓐ -> ⓐ */
    id_is("\xef\xbc\xa1", "\xef\xbd\x81");         /* Ａ -> ａ */
    id_is("\xe1\x8e\xa0", "\xea\xad\xb0");         /* Cherokee Ꭰ -> ꭰ */
    id_is("\xe1\xb2\x90", "\xe1\x83\x90");         /* Mtavruli Ა -> ა */
    id_is("\xf0\x90\x90\x80", "\xf0\x90\x90\xa8"); /* Deseret */
    id_is("\xf0\x9e\xa4\x80", "\xf0\x9e\xa4\xa2"); /* Adlam */
    id_is("\xc4\xb0", "i\xcc\x87");                /* U+0130 -> i + U+0307 */
    id_is("\xc4\xb0STANBUL", "i\xcc\x87stanbul");
    id_is("I", "i"); /* no Turkish tailoring */
    id_is("\xf0\x9f\x98\x80"
          "A",
          "\xf0\x9f\x98\x80"
          "a");
    /* Unicode 16/17 letters lower-case with the 17.0 tables */
    id_is("\xea\x9f\x8b", "\xc9\xa4");             /* U+A7CB -> U+0264 */
    id_is("\xf0\x96\xba\xa0", "\xf0\x96\xba\xbb"); /* U+16EA0 -> U+16EBB (17.0) */

    /* final sigma (rule 10) */
    id_is("\xce\x9f\xce\x94\xce\xa5\xce\xa3\xce\xa3\xce\x95\xce\xa5\xce\xa3",
          "\xce\xbf\xce\xb4\xcf\x85\xcf\x83\xcf\x83\xce\xb5\xcf\x85\xcf\x82"); /* ΟΔΥΣΣΕΥΣ */
    id_is("\xce\x91\xce\xa3 \xce\x91", "\xce\xb1\xcf\x82 \xce\xb1");           /* ΑΣ Α */
    id_is("\xce\xa3\xce\xa3", "\xcf\x83\xcf\x82");                             /* ΣΣ */
    id_is("1\xce\xa3", "1\xcf\x83");                                           /* 1Σ */
    id_is("\xce\xa3", "\xcf\x83");                                             /* Σ */
    id_is("\xca\xb0\xce\xa3", "\xca\xb0\xcf\x83");                             /* ʰΣ */
    id_is("A\xce\xa3\xca\xb0", "a\xcf\x82\xca\xb0");                           /* AΣʰ */
    id_is("\xce\x91'\xce\xa3", "\xce\xb1'\xcf\x82");                           /* Α'Σ */
    id_is("\xce\x91\xce\xa3.", "\xce\xb1\xcf\x82.");                           /* ΑΣ. */
    id_is("\xce\x91\xce\xa3\xf0\x9d\x90\x80", "\xce\xb1\xcf\x83\xf0\x9d\x90\x80"); /* ΑΣ𝐀 */
    id_is("A\xce\xa3\xca\x95", "a\xcf\x82\xca\x95"); /* ʕ is not Cased from 16.0 on */
    id_is("\xce\x91\xcd\x85\xce\xa3", "\xce\xb1\xcd\x85\xcf\x82"); /* U+0345 is skipped */
    /* an unpaired surrogate is neither Cased nor Case_Ignorable: it stops both scans */
    id_is("\xce\x91" D800 "\xce\xa3", "\xce\xb1" D800 "\xcf\x83");
    id_is("\xce\x91\xce\xa3" D800 "\xce\x91", "\xce\xb1\xcf\x82" D800 "\xce\xb1");
    id_is("\xce\x91\xce\xa3'" D800, "\xce\xb1\xcf\x82'" D800);

    /* unpaired surrogates pass through, also next to each other */
    id_is(D800, D800);
    id_is(DC00 D800, DC00 D800);
    id_is(" " D800 "A ", D800 "a");
    id_is("\xed\xa0\xbd"
          "A",
          "\xed\xa0\xbd"
          "a");
    id_is("\xed\xbf\xbf", "\xed\xbf\xbf");

    /* growth: U+0130 doubles the UTF-16 length, past the initial buffers */
    {
        size_t n = 3000;
        char *in = malloc(2 * n + 1), *want = malloc(3 * n + 1);
        for (size_t i = 0; i < n; i++) {
            memcpy(in + 2 * i, "\xc4\xb0", 2);
            memcpy(want + 3 * i, "i\xcc\x87", 3);
        }
        check_n(id_nomax, "id", in, 2 * n, want, 3 * n);
        free(in);
        free(want);
    }
}

static void test_title(void)
{
    title_is("  Hello\xe3\x80\x80World\t!! ", "Hello World !!");
    title_is("  a \t\n b  ", "a b");
    title_is("plain", "plain");
    title_is("", "");
    title_is(" \t ", "");
    title_is("\xe3\x80\x80\xef\xbb\xbf", "");
    title_is("\xef\xac\x81nal \xe2\x91\xa0\xe2\x85\xab \xe3\x8d\xbb",
             "final 1XII \xe5\xb9\xb3\xe6\x88\x90");
    title_is("\xc2\xa8 x\xc2\xa0\xc2\xa0y \xef\xbb\xbf", "\xcc\x88 x y");
    title_is("\xc2\xa8", "\xcc\x88");
    title_is("\xef\xb7\xba", "\xd8\xb5\xd9\x84\xd9\x89 \xd8\xa7\xd9\x84\xd9\x84\xd9\x87 "
                             "\xd8\xb9\xd9\x84\xd9\x8a\xd9\x87 \xd9\x88\xd8\xb3\xd9\x84\xd9\x85");
    title_is("e\xcc\x81", "\xc3\xa9");                                /* composition */
    title_is("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81"); /* Hangul */
    title_is("x\xcc\x81\xcc\xa3", "x\xcc\xa3\xcc\x81");               /* reordering */
    title_is("\xef\xbc\xa1\xef\xbc\xa2", "AB");                       /* fullwidth */
    title_is("Gr\xc3\xbc\xc3\x9f"
             "e  aus K\xc3\xb6ln ",
             "Gr\xc3\xbc\xc3\x9f"
             "e aus K\xc3\xb6ln");
    title_is("\xe2\x80\x82x\xe2\x80\x8by\xc2\x85z",
             "x\xe2\x80\x8by\xc2\x85z");                        /* U+200B, U+0085 stay */
    title_is("\xf0\x9e\x80\xb0", "\xd0\xb0");                   /* U+1E030 -> а */
    title_is("\xea\x9f\xb1", "S");                              /* U+A7F1 (17.0) -> S */
    title_is("a\xcc\x81\xe1\xab\x8f", "\xc3\xa1\xe1\xab\x8f");  /* U+1ACF is class 230 (17.0) */
    title_is("a\xe1\xab\x8f\xcc\x96", "a\xcc\x96\xe1\xab\x8f"); /* ... and goes after class 220 */

    /* rule 12: an unpaired surrogate passes unchanged and blocks composition and reordering */
    title_is("e" D800 "\xcc\x81", "e" D800 "\xcc\x81");
    title_is("x\xcc\x81" D800 "\xcc\xa3", "x\xcc\x81" D800 "\xcc\xa3");
    title_is(D800, D800);
    title_is(DC00 D800 " \xef\xac\x81", DC00 D800 " fi");
    title_is(" " D800 "  " D800 " ", D800 " " D800);

    /* rule 11's example title: controls pass NFKC unchanged, only white space folds */
    check_n(title_nomax, "title", "\0\b\t\n\f\r\v\x1f\x7f\xc2\x85\xe2\x80\xa8" D800, 17,
            "\0\b \x1f\x7f\xc2\x85 " D800, 11);

    /* appending: the fold's trimming is relative to where this title starts */
    {
        enr_buf out = {0};
        enr_buf_lit(&out, "X ");
        int rc1 = enr_uni_title(uni, "  a\xc2\xa0 ", 6, ENR_UNI_NO_MAX, &out);
        int rc2 = enr_uni_title(uni, " \xef\xac\x81 ", 5, ENR_UNI_NO_MAX, &out);
        int rc3 = enr_uni_id(uni, " B ", 3, ENR_UNI_NO_MAX, &out);
        T_CHECK(rc1 == 0 && rc2 == 0 && rc3 == 0 && out.len == 6 &&
                    memcmp(out.data, "X afib", 6) == 0,
                "append: got \"%s\"", show(out.data, out.len));
        enr_buf_free(&out);
    }

    /* growth: U+FDFA expands to 18 units */
    {
        size_t n = 2000;
        char *in = malloc(3 * n + 1);
        for (size_t i = 0; i < n; i++)
            memcpy(in + 3 * i, "\xef\xb7\xba", 3);
        enr_buf out = {0};
        int rc = enr_uni_title(uni, in, 3 * n, ENR_UNI_NO_MAX, &out);
        /* each expansion is 33 bytes and starts and ends with a letter, so copies abut */
        T_CHECK(rc == 0 && out.len == 33 * n, "title growth: rc %d, len %zu", rc, out.len);

        /* max: exactly max bytes pass, max - 1 is refused with nothing appended */
        enr_buf_reset(&out);
        enr_buf_lit(&out, "X");
        rc = enr_uni_title(uni, in, 3 * n, 33 * n, &out);
        T_CHECK(rc == 0 && out.len == 1 + 33 * n, "title of exactly max: rc %d", rc);
        enr_buf_reset(&out);
        enr_buf_lit(&out, "X");
        rc = enr_uni_title(uni, in, 3 * n, 33 * n - 1, &out);
        T_CHECK(rc == ENR_UNI_TOO_LONG && out.len == 1, "title of max + 1: rc %d len %zu", rc,
                out.len);
        /* a result far over max is refused before ICU's buffer grows for it */
        rc = enr_uni_title(uni, in, 3 * n, 1000, &out);
        T_CHECK(rc == ENR_UNI_TOO_LONG && out.len == 1, "title far over max: rc %d", rc);
        free(in);
        enr_buf_free(&out);
    }
    /* the same on the paths without ICU (ASCII, already NFKC) and with folding */
    {
        enr_buf out = {0};
        T_CHECK(enr_uni_title(uni, " ab  c ", 7, 4, &out) == 0 && out.len == 4, "ASCII at max");
        T_CHECK(enr_uni_title(uni, " ab  cd ", 8, 4, &out) == ENR_UNI_TOO_LONG && out.len == 4,
                "ASCII over max");
        T_CHECK(enr_uni_title(uni, "\xc3\xa9 \xc3\xa9", 5, 5, &out) == 0 && out.len == 9,
                "NFKC text at max");
        T_CHECK(enr_uni_title(uni, "\xc3\xa9 \xc3\xa9", 5, 4, &out) == ENR_UNI_TOO_LONG &&
                    out.len == 9,
                "NFKC text over max");
        enr_buf_free(&out);
    }
}

/* ICU's lower-casing of the whole text, the reference for the pieces. */
static void icu_lower_whole(const char *s, size_t len, enr_buf *out)
{
    UErrorCode e = U_ZERO_ERROR;
    int32_t n = 0, m;
    UChar *src = malloc((len + 1) * sizeof(UChar)), *dst;
    u_strFromUTF8(src, (int32_t)len + 1, &n, s, (int32_t)len, &e);
    dst = malloc(((size_t)n * 2 + 1) * sizeof(UChar));
    m = u_strToLower(dst, n * 2 + 1, src, n, "", &e);
    char *o = malloc((size_t)m * 3 + 1);
    int32_t k = 0;
    u_strToUTF8(o, m * 3 + 1, &k, dst, m, &e);
    T_CHECK(U_SUCCESS(e), "reference lower-casing");
    enr_buf_append(out, o, (size_t)k);
    free(src);
    free(dst);
    free(o);
}

/* A long id is lower-cased in pieces: the result is the whole text's,
 * final sigma included, wherever the cuts fall. */
static void test_id_pieces(void)
{
    static const char *const units[] = {
        "\xce\x91\xce\xa3.\xce\xa3 \xc3\x80\x42,", /* ΑΣ.Σ ÀB, */
        "AB\xce\xa3",                              /* final sigma after ASCII letters */
        "\xce\xa3'A.",                             /* sigma before ignorable ASCII */
        "x\xc4\xb0Q:",                             /* U+0130 grows */
        "[object Object],",
        "\xce\xa3",
        "\xef\xbf\xbd",                  /* U+FFFD: cuts between them */
        "\xce\xa3\xef\xbf\xbd\xce\xa3'", /* sigma next to U+FFFD */
    };
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        for (size_t reps = 1000; reps <= 1003; reps++) {
            enr_buf in = {0}, got = {0}, want = {0};
            enr_buf_lit(&in, "Q");
            for (size_t i = 0; i < reps; i++)
                enr_buf_append(&in, units[u], strlen(units[u]));
            int rc = enr_uni_id(uni, in.data, in.len, ENR_UNI_NO_MAX, &got);
            icu_lower_whole(in.data, in.len, &want);
            T_CHECK(rc == 0 && got.len == want.len && memcmp(got.data, want.data, got.len) == 0,
                    "id in pieces = whole (unit %zu x %zu): len %zu vs %zu", u, reps, got.len,
                    want.len);
            enr_buf_free(&in);
            enr_buf_free(&got);
            enr_buf_free(&want);
        }
    }
    /* nothing ASCII to cut at: one piece, still right */
    {
        enr_buf in = {0}, got = {0}, want = {0};
        for (size_t i = 0; i < 5000; i++)
            enr_buf_lit(&in, "\xce\xa3\xcc\x81");
        T_CHECK(enr_uni_id(uni, in.data, in.len, ENR_UNI_NO_MAX, &got) == 0, "no cut: rc");
        /* max: the lower-cased length exactly passes, one byte less is refused */
        {
            enr_buf tmp = {0};
            T_CHECK(enr_uni_id(uni, in.data, in.len, got.len, &tmp) == 0 && tmp.len == got.len,
                    "id of exactly max");
            enr_buf_reset(&tmp);
            T_CHECK(enr_uni_id(uni, in.data, in.len, got.len - 1, &tmp) == ENR_UNI_TOO_LONG &&
                        tmp.len == 0,
                    "id of max + 1: refused, nothing appended");
            T_CHECK(enr_uni_id(uni, " AbC ", 5, 3, &tmp) == 0 && tmp.len == 3 &&
                        enr_uni_id(uni, " AbC ", 5, 2, &tmp) == ENR_UNI_TOO_LONG && tmp.len == 3,
                    "ASCII id: max is on the trimmed, lower-cased id");
            enr_buf_free(&tmp);
        }
        icu_lower_whole(in.data, in.len, &want);
        T_CHECK(got.len == want.len && memcmp(got.data, want.data, got.len) == 0, "no cut: same");
        enr_buf_free(&in);
        enr_buf_free(&got);
        enr_buf_free(&want);
    }
}

static void test_version(void)
{
    const char *v = enr_uni_version();
    T_CHECK(strcmp(v, "Unicode 17.0") == 0, "version \"%s\"", v);
    T_CHECK(enr_uni_version() == v, "version is computed once");
}

/* A long run of marks out of canonical order: the same title as ICU makes
 * of the text as it came, and in linear time (31 s of CPU before). */
static void test_mark_run(void)
{
    enum { SMALL = 3000, BIG = 100000 };
    char *in = malloc(1 + 4 * BIG);
    UChar *u16 = malloc(sizeof(UChar) * (1 + 2 * SMALL)), *ref = malloc(sizeof(UChar) * 8 * SMALL);
    char *ref8 = malloc(8 * SMALL * 3);
    enr_buf out = {0};
    UErrorCode err = U_ZERO_ERROR;
    int32_t m, l8;
    size_t k = 0;
    clock_t t0;

    in[k++] = 'a';
    for (int i = 0; i < BIG; i++) { /* U+0301 (class 230), U+0316 (class 220) */
        memcpy(in + k, "\xcc\x81\xcc\x96", 4);
        k += 4;
    }
    /* ICU itself on the small one (quadratic, but small) is the reference. */
    u16[0] = 'a';
    for (int i = 0; i < SMALL; i++) {
        u16[1 + 2 * i] = 0x301;
        u16[2 + 2 * i] = 0x316;
    }
    m = unorm2_normalize(unorm2_getNFKCInstance(&err), u16, 1 + 2 * SMALL, ref, 8 * SMALL, &err);
    u_strToUTF8(ref8, 8 * SMALL * 3, &l8, ref, m, &err);
    T_CHECK(U_SUCCESS(err), "reference");
    T_CHECK(enr_uni_title(uni, in, 1 + 4 * (size_t)SMALL, ENR_UNI_NO_MAX, &out) == 0 &&
                out.len == (size_t)l8 && memcmp(out.data, ref8, out.len) == 0,
            "a run of %d marks out of order: the same NFKC as ICU's", 2 * SMALL);
    enr_buf_reset(&out);
    t0 = clock();
    /* a and the first U+0301 compose to U+00E1: one byte less */
    T_CHECK(enr_uni_title(uni, in, k, ENR_UNI_NO_MAX, &out) == 0 && out.len == k - 1,
            "a run of %d marks: %zu bytes", 2 * BIG, out.len);
    T_CHECK(clock() - t0 < CLOCKS_PER_SEC / 2, "a run of %d marks in %.3f s", 2 * BIG,
            (double)(clock() - t0) / CLOCKS_PER_SEC);
    enr_buf_free(&out);
    free(in);
    free(u16);
    free(ref);
    free(ref8);
}

/* U+0F73 is a starter whose decomposition (U+0F71 U+0F72) holds marks of
 * classes 129 and 130: U+0F73 U+0F71 repeated is one run of marks out of
 * order once decomposed, sorted in linear time all the same. */
static void test_decomposed_mark_run(void)
{
    enum { N = 100000 };
    enr_buf in = {0}, want = {0}, out = {0};
    clock_t t0;

    for (int i = 0; i < N; i++)
        enr_buf_lit(&in, "\xe0\xbd\xb3\xe0\xbd\xb1"); /* U+0F73 U+0F71 */
    for (int i = 0; i < 2 * N; i++)
        enr_buf_lit(&want, "\xe0\xbd\xb1"); /* U+0F71 (129) first */
    for (int i = 0; i < N; i++)
        enr_buf_lit(&want, "\xe0\xbd\xb2"); /* then U+0F72 (130) */
    t0 = clock();
    T_CHECK(enr_uni_title(uni, in.data, in.len, ENR_UNI_NO_MAX, &out) == 0 && out.len == want.len &&
                memcmp(out.data, want.data, out.len) == 0,
            "U+0F73 U+0F71 x %d: marks in canonical order (%zu bytes)", N, out.len);
    T_CHECK(clock() - t0 < CLOCKS_PER_SEC / 2, "U+0F73 U+0F71 x %d in %.3f s", N,
            (double)(clock() - t0) / CLOCKS_PER_SEC);
    enr_buf_free(&in);
    enr_buf_free(&want);
    enr_buf_free(&out);
}

/* Appends the WTF-8 form of code point c. */
static size_t put_bmp(char *o, unsigned c)
{
    if (c > 0xffff) {
        o[0] = (char)(0xf0 | (c >> 18));
        o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
        o[2] = (char)(0x80 | ((c >> 6) & 0x3f));
        o[3] = (char)(0x80 | (c & 0x3f));
        return 4;
    }
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xc0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    o[0] = (char)(0xe0 | (c >> 12));
    o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
    o[2] = (char)(0x80 | (c & 0x3f));
    return 3;
}

/* The title fast paths (the NFKC check on UTF-8 bytes, fullwidth forms
 * and the like replaced, white space that NFKC makes a space) against
 * ICU's own check and normalizer (enr_uni_set_slow): every code point
 * of planes 0 to 3 and of the variation selectors, a lone surrogate
 * included, between letters, after a space, doubled, before a combining
 * mark that could compose or reorder with it, and between marks that
 * make the segment ICU is given (kana and a voiced mark, marks out of
 * order). */
static void test_title_fast_is_icu(void)
{
    static const char *const ctx[][2] = {{"a", "b"},
                                         {" ", " "},
                                         {"\xef\xbc\xa1", "\xcc\x8a"},
                                         {"e\xcc\x81", "\xcc\xa3"},
                                         {"", ""},
                                         {"\xe3\x81\x8b\xe3\x82\x99 ", "\xe3\x82\x99x"},
                                         {"x\xcc\x81\xcc\xa3", " \xef\xbc\xa1\xcc\x81\xcc\xa3y"}};
    enr_uni *slow = enr_uni_new();
    enr_buf of = {0}, os = {0};
    long diffs = 0, fast_rc = 0;

    T_CHECK(slow != NULL, "enr_uni_new");
    if (slow == NULL)
        return;
    enr_uni_set_slow(slow, 1);
    for (unsigned c = 0x80; c < 0x40000; c = c == 0x3ffff ? 0xe0000 : c + 1) {
        if (c == 0xe01f0)
            break;
        for (size_t k = 0; k < sizeof ctx / sizeof ctx[0]; k++) {
            char in[48];
            size_t n = strlen(ctx[k][0]);
            int rf, rs;

            memcpy(in, ctx[k][0], n);
            n += put_bmp(in + n, c);
            if (k == 4) /* doubled */
                n += put_bmp(in + n, c);
            memcpy(in + n, ctx[k][1], strlen(ctx[k][1]));
            n += strlen(ctx[k][1]);
            enr_buf_reset(&of);
            enr_buf_reset(&os);
            rf = enr_uni_title(uni, in, n, ENR_UNI_NO_MAX, &of);
            rs = enr_uni_title(slow, in, n, ENR_UNI_NO_MAX, &os);
            fast_rc |= rf;
            if (rf != rs || of.len != os.len || (of.len && memcmp(of.data, os.data, of.len) != 0)) {
                if (diffs++ < 5)
                    T_CHECK(0, "U+%04X in context %zu: fast \"%s\", ICU \"%s\"", c, k,
                            show(of.data ? of.data : "", of.len),
                            show(os.data ? os.data : "", os.len));
            }
        }
    }
    T_CHECK(diffs == 0 && fast_rc == 0, "every code point: fast title path = ICU (%ld differ)",
            diffs);
    enr_buf_free(&of);
    enr_buf_free(&os);
    enr_uni_free(slow);
}

/* Titles whose replacements make them longer (U+FDFA: 3 bytes to 33,
 * with white space inside; ligatures, Roman numerals), with ICU segments
 * and white space between, cut by every max up to their length (around
 * it for the longest): the
 * fast path grows its room and refuses past max exactly as ICU's does,
 * and leaves the buffer's text alone when it refuses. */
static void test_title_fast_max(void)
{
    static const char *const unit[] = {
        "\xef\xb7\xba",          "\xef\xac\x81 ",  "\xe2\x85\xab\xe3\x80\x80",
        "e\xcc\x81\xef\xbc\xa1", "\xe3\x8d\xbb\t", "\xc7\x84x\xcc\xa3\xcc\x81"};
    enr_uni *slow = enr_uni_new();
    enr_buf of = {0}, os = {0}, in = {0};
    long diffs = 0, cases = 0;

    T_CHECK(slow != NULL, "enr_uni_new");
    if (slow == NULL)
        return;
    enr_uni_set_slow(slow, 1);
    for (size_t k = 0; k < sizeof unit / sizeof unit[0]; k++) {
        for (size_t reps = 1; reps <= 300; reps = reps * 3 + 1) {
            size_t full;

            enr_buf_reset(&in);
            for (size_t r = 0; r < reps; r++) {
                enr_buf_append(&in, unit[k], strlen(unit[k]));
                enr_buf_append(&in, unit[(k + r) % 6], strlen(unit[(k + r) % 6]));
            }
            enr_buf_reset(&os);
            T_CHECK(enr_uni_title(slow, in.data, in.len, ENR_UNI_NO_MAX, &os) == 0, "ICU");
            full = os.len;
            for (size_t max = full > 600 ? full - 40 : 0; max <= full + 40; max++) {
                int rf, rs;

                /* from the smallest buffer, so that the room grows */
                enr_buf_free(&of);
                enr_buf_free(&os);
                enr_buf_lit(&of, "kept");
                enr_buf_lit(&os, "kept");
                rf = enr_uni_title(uni, in.data, in.len, max, &of);
                rs = enr_uni_title(slow, in.data, in.len, max, &os);
                cases++;
                if (rf != rs || of.len != os.len || memcmp(of.data, os.data, of.len) != 0) {
                    if (diffs++ < 5)
                        T_CHECK(0, "unit %zu x %zu, max %zu: fast %d \"%s\", ICU %d \"%s\"", k,
                                reps, max, rf, show(of.data, of.len), rs, show(os.data, os.len));
                }
            }
        }
    }
    T_CHECK(diffs == 0 && cases > 1000, "long titles cut by max: fast = ICU (%ld of %ld differ)",
            diffs, cases);
    enr_buf_free(&of);
    enr_buf_free(&os);
    enr_buf_free(&in);
    enr_uni_free(slow);
}

int main(void)
{
    uni = enr_uni_new();
    T_CHECK(uni != NULL, "enr_uni_new");
    if (uni == NULL)
        T_DONE();
    test_id_ascii();
    test_id_unicode();
    test_title();
    test_version();
    test_id_pieces();
    test_mark_run();
    test_decomposed_mark_run();
    test_title_fast_is_icu();
    test_title_fast_max();
    enr_uni_free(uni);
    T_DONE();
}
