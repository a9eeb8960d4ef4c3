/* SPDX-License-Identifier: MIT */
/*
 * Last-Event-ID: stream_parse_event_id on the input as a NUL-terminated header value, checked
 * against a reference parser written from stream.h's "<stream>-<seq>" form (both decimal, 1 ..
 * UINT64_MAX, digits only; the stream part at most 20 characters, leading zeros allowed), and
 * stream_event_id must round-trip whatever parses. The other header helpers go along:
 * util_parse_u64 under a few bounds, and the case-insensitive util_span_ieq and util_has_prefix_i
 * (Content-Type, Accept, Host, Origin, Authorization), each against a reference.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "stream.h"
#include "util.h"

#define FZ_ID_LEN 42 /* stream.h: "at least 42 bytes" */

/* Digits only, at least one, no overflow: the decimal value of s[0..len). */
static bool
fz_ref_u64(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;

    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

static bool
fz_ref_event_id(const char *s, uint64_t *stream_id, uint64_t *seq)
{
    const char *dash = strchr(s, '-');

    if (dash == NULL || dash - s > 20)
        return false;
    return fz_ref_u64(s, (size_t)(dash - s), stream_id) && *stream_id != 0
           && fz_ref_u64(dash + 1, strlen(dash + 1), seq) && *seq != 0;
}

/* Formats the pair and parses it back; both must be exact. */
static void
fz_check_round_trip(uint64_t stream_id, uint64_t seq)
{
    char id[FZ_ID_LEN];
    uint64_t a = 0, b = 0;
    int len = stream_event_id(stream_id, seq, id, sizeof id);
    bool ok = stream_parse_event_id(id, &a, &b);

    FUZZ_CHECK(len > 0 && (size_t)len < sizeof id && (size_t)len == strlen(id),
               "stream_event_id length %d", len);
    FUZZ_CHECK(ok == (stream_id != 0 && seq != 0), "\"%s\" parses: %d", id, ok);
    FUZZ_CHECK(!ok || (a == stream_id && b == seq), "\"%s\" parses as %" PRIu64 "-%" PRIu64, id, a,
               b);
}

static void
fz_check_event_id(const char *s)
{
    uint64_t a = 0, b = 0, ra = 0, rb = 0;
    bool ok = stream_parse_event_id(s, &a, &b);
    bool want = fz_ref_event_id(s, &ra, &rb);

    FUZZ_CHECK(ok == want, "stream_parse_event_id(\"%s\") = %d, want %d", s, ok, want);
    if (ok) {
        FUZZ_CHECK(a == ra && b == rb, "\"%s\" parses as %" PRIu64 "-%" PRIu64, s, a, b);
        fz_check_round_trip(a, b);
    }
}

static void
fz_check_parse_u64(const char *s)
{
    static const uint64_t bounds[][2] = {
        { 0, UINT64_MAX },
        { 1, UINT64_MAX },
        { 0, 65535 },
        { 16, 1000000 },
    };
    uint64_t ref = 0;
    bool num = fz_ref_u64(s, strlen(s), &ref);

    for (size_t i = 0; i < ARRAY_LEN(bounds); i++) {
        const char *why = NULL;
        uint64_t v = 0;
        int rc = util_parse_u64(s, bounds[i][0], bounds[i][1], &v, &why);
        bool want = num && ref >= bounds[i][0] && ref <= bounds[i][1];

        FUZZ_CHECK(rc == (want ? 0 : -1), "util_parse_u64(\"%s\", %zu) = %d", s, i, rc);
        FUZZ_CHECK(want ? v == ref : why != NULL && why[0] != '\0', "util_parse_u64(\"%s\")", s);
    }
}

static char
fz_lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* a is the text before the first '\n', b the text after it (the whole input when none). */
static void
fz_check_ieq(const char *s)
{
    const char *nl = strchr(s, '\n');
    const char *b = nl != NULL ? nl + 1 : s;
    size_t alen = nl != NULL ? (size_t)(nl - s) : strlen(s), blen = strlen(b);
    char *a = malloc(alen + 1);
    bool same = true;

    FUZZ_CHECK(a != NULL, "out of memory");
    memcpy(a, s, alen);
    a[alen] = '\0';
    for (size_t i = 0; i < alen && i < blen; i++)
        same = same && fz_lower(a[i]) == fz_lower(b[i]);
    FUZZ_CHECK(util_span_ieq(a, alen, b) == (same && alen == blen), "util_span_ieq(%zu, %zu)", alen,
               blen);
    FUZZ_CHECK(util_has_prefix_i(a, b) == (same && alen >= blen), "util_has_prefix_i(%zu, %zu)",
               alen, blen);
    FUZZ_CHECK(util_has_prefix_i(a, "") && util_span_ieq(a, 0, ""), "empty prefix");
    free(a);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    uint64_t pair[2] = { 0, 0 };

    FUZZ_CHECK(s != NULL, "out of memory");
    memcpy(s, data, size);
    s[size] = '\0';
    fz_check_event_id(s);
    fz_check_parse_u64(s);
    fz_check_ieq(s);
    memcpy(pair, data, size < sizeof pair ? size : sizeof pair);
    fz_check_round_trip(pair[0], pair[1]);
    free(s);
    return 0;
}
