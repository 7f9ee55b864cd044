/* Atrace's event scanner: a batch of Chrome / Kineto trace events (the JSON text of an
 * array of event objects) read straight into columns, in one pass, with no object per event.
 *
 * It is the fast path of batch.parse_batch, and it answers only where it is sure to give
 * what that function's msgspec path gives: anything it is not made for (a malformed or
 * unusual number, a field of an unexpected type, a duplicated field, a lone surrogate or
 * text that is not UTF-8 in any string it passes over, a time that needs more than 16
 * integer digits, a run of colliding hashes...) makes scan() return None, and the caller
 * decodes the batch with msgspec, which gives its usual answer or error. So this file never
 * reports an error (memory failures included); it only declines. A signal that arrives
 * during a long batch (Ctrl-C) is raised, not declined.
 *
 * scan(text) -> None | (n, x, flows, others), where
 *   x      = (local, keys, key, ts, dur, corr, ext, op_types, args, arg_len)
 *   flows  = (local, keys, key, ids, ts, ts_state)
 *   others = [(position, start, end), ...]   (byte span of each other event)
 * Columns are bytearrays of native int64 (key: int32, dur: float64, ts_state: uint8);
 * keys are the distinct (name, cat, pid, tid) of complete events and (cat, ph, bp, pid,
 * tid) of flows in order of first appearance; op_types is [(index, op_type)].
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NO_ID (-1)
#define MAX_DEPTH 512
#define MAX_PROBES 128           /* a longer run of occupied slots: decline (hash flooding) */
#define SIGNAL_CHECK_EVERY 65536 /* events between two looks for a pending signal */

#ifndef EVENTSCAN_SOURCE_SHA256 /* set by native.build: the SHA-256 of this file */
#define EVENTSCAN_SOURCE_SHA256 ""
#endif

/* ------------------------------------------------------------------ allocation */

/* For the tests (_fail_nth_allocation): the n-th allocation from now fails, 0: none. */
static Py_ssize_t fail_countdown = 0;

static int injected_failure(void) { return fail_countdown > 0 && --fail_countdown == 0; }

static void *scan_malloc(size_t n) { return injected_failure() ? NULL : malloc(n); }

static void *scan_realloc(void *p, size_t n) { return injected_failure() ? NULL : realloc(p, n); }

/* ------------------------------------------------------------------ growable buffers */

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t more) {
    if (b->len + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    char *data = scan_realloc(b->data, cap);
    if (!data) return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *src, size_t n) {
    if (n == 0) return 0; /* (an empty buffer has no memory to copy to) */
    if (buf_reserve(b, n)) return -1;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

#define PUT(b, type, value)                       \
    do {                                          \
        type v_ = (value);                        \
        if (buf_put((b), &v_, sizeof v_)) goto fail; \
    } while (0)

static PyObject *buf_to_bytearray(Buf *b) {
    return PyByteArray_FromStringAndSize(b->data ? b->data : "", (Py_ssize_t)b->len);
}

/* ------------------------------------------------------------------ interning tables */

/* Distinct byte strings, each of a kind (its tag), to small ids in order of first
 * appearance, with each one's Python object (made once, by the caller). Open addressing,
 * power-of-two size. */
typedef struct {
    uint64_t hash;
    size_t off, len;  /* in the table's bytes */
    Py_ssize_t id;    /* -1: empty */
    char tag;
} Slot;

typedef struct {
    Slot *slots;
    size_t mask, count;
    Buf bytes;
    PyObject *objects; /* list: id -> object */
} Table;

/* Hashes under keys drawn once per process (at import, from os.urandom): which values
 * share a run of slots cannot be known from outside, so a trace cannot be written to make
 * every look-up walk the table. Short values (integers, the keys' tuples of ids, most
 * names) take multilinear hashing, strongly universal in its high 32 bits (Lemire and
 * Kaser, 2014) and a few multiplications; longer ones SipHash-1-3, as CPython's str. */
#define SHORT_VALUE 32
static uint64_t hash_key[2];
static uint64_t short_key[SHORT_VALUE / 4 + 2];

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                          \
    do {                                                                  \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);         \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                            \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                            \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);         \
    } while (0)

static uint64_t siphash13(char tag, const unsigned char *p, size_t n) {
    uint64_t k0 = hash_key[0], k1 = hash_key[1] ^ (uint64_t)(unsigned char)tag;
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    uint64_t last = (uint64_t)n << 56;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t m;
        memcpy(&m, p, 8);
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    for (size_t i = 0; i < n; i++) last |= (uint64_t)p[i] << (8 * i);
    v3 ^= last;
    SIPROUND;
    v0 ^= last;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

static inline uint64_t hash_bytes(char tag, const unsigned char *p, size_t n) {
    if (n > SHORT_VALUE) return siphash13(tag, p, n);
    uint64_t h = short_key[0] + short_key[SHORT_VALUE / 4 + 1] * (uint64_t)(n << 8 | (unsigned char)tag);
    const uint64_t *key = short_key + 1;
    for (; n >= 4; p += 4, n -= 4) { /* 32 bits at a time, each by its own key */
        uint32_t chunk;
        memcpy(&chunk, p, 4);
        h += *key++ * chunk;
    }
    uint32_t last = 0;
    for (size_t i = 0; i < n; i++) last |= (uint32_t)p[i] << (8 * i);
    h += *key * last;
    return h >> 32 | h << 32; /* the strong bits low, where the slot is taken from */
}

static int table_init(Table *t) {
    t->mask = 255;
    t->count = 0;
    t->slots = scan_malloc((t->mask + 1) * sizeof(Slot));
    t->objects = PyList_New(0);
    t->bytes = (Buf){0};
    if (!t->slots || !t->objects) return -1;
    for (size_t i = 0; i <= t->mask; i++) t->slots[i].id = -1;
    return 0;
}

static void table_free(Table *t) {
    free(t->slots);
    free(t->bytes.data);
    Py_XDECREF(t->objects);
}

static int table_grow(Table *t) {
    size_t mask = t->mask * 2 + 1;
    Slot *slots = scan_malloc((mask + 1) * sizeof(Slot));
    if (!slots) return -1;
    for (size_t i = 0; i <= mask; i++) slots[i].id = -1;
    for (size_t i = 0; i <= t->mask; i++) {
        Slot s = t->slots[i];
        if (s.id < 0) continue;
        size_t j = s.hash & mask;
        for (int probes = 0; slots[j].id >= 0; probes++) {
            if (probes == MAX_PROBES) {
                free(slots);
                return -1;
            }
            j = (j + 1) & mask;
        }
        slots[j] = s;
    }
    free(t->slots);
    t->slots = slots;
    t->mask = mask;
    return 0;
}

/* The id of the byte string p[0:n] of kind ``tag``; *is_new is set when it was added
 * (its object is then to be appended to t->objects by the caller). -1 on memory failure
 * or past MAX_PROBES occupied slots in a row. */
static Py_ssize_t table_find(Table *t, char tag, const unsigned char *p, size_t n, int *is_new) {
    uint64_t h = hash_bytes(tag, p, n);
    size_t j = h & t->mask;
    for (int probes = 0; t->slots[j].id >= 0; probes++) {
        Slot *s = &t->slots[j];
        if (s->hash == h && s->len == n && s->tag == tag && (n == 0 || memcmp(t->bytes.data + s->off, p, n) == 0)) {
            *is_new = 0;
            return s->id;
        }
        if (probes == MAX_PROBES) return -1;
        j = (j + 1) & t->mask;
    }
    Slot s = {h, t->bytes.len, n, (Py_ssize_t)t->count, tag};
    if (buf_put(&t->bytes, p, n)) return -1;
    t->slots[j] = s;
    t->count++;
    if (t->count * 2 > t->mask && table_grow(t)) return -1;
    *is_new = 1;
    return s.id;
}

/* ------------------------------------------------------------------ JSON scanning */

typedef struct {
    const unsigned char *p, *end;
} Cur;

static inline void ws(Cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) c->p++;
}

static inline int hexval(unsigned char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* The length of the UTF-8 sequence at p (its first byte 0x80 or more) if it is one that
 * Python's strict decoder takes (no overlong form, no surrogate, nothing past U+10FFFF),
 * else 0. A continuation byte is never '"', so a sequence cannot run past its string. */
static inline int utf8_sequence(const unsigned char *p, const unsigned char *end) {
    unsigned char a = p[0];
    ptrdiff_t left = end - p;
    if (a >= 0xC2 && a <= 0xDF) return left >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (a >= 0xE0 && a <= 0xEF) {
        if (left < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if ((a == 0xE0 && p[1] < 0xA0) || (a == 0xED && p[1] >= 0xA0)) return 0; /* overlong, surrogate */
        return 3;
    }
    if (a >= 0xF0 && a <= 0xF4) {
        if (left < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
        if ((a == 0xF0 && p[1] < 0x90) || (a == 0xF4 && p[1] >= 0x90)) return 0; /* overlong, > U+10FFFF */
        return 4;
    }
    return 0;
}

static uint32_t hex4(const unsigned char *p);

/* The bytes a string holds as they are: ASCII but '"', '\\' and controls (set at import). */
static unsigned char PLAIN[256];

/* Whether the four characters at p are hexadecimal digits. */
static inline int is_hex4(const unsigned char *p) {
    return hexval(p[0]) >= 0 && hexval(p[1]) >= 0 && hexval(p[2]) >= 0 && hexval(p[3]) >= 0;
}

/* A string at c->p (its opening quote): [*s, *e) is its text between the quotes;
 * *escaped says whether it holds a backslash. 0, or -1 when it is not a string that
 * msgspec decodes: bad JSON, text that is not UTF-8, or a \u escape of a surrogate that is
 * not the first half of a pair followed by its second half (msgspec refuses these wherever
 * they lie, in fields it skips too). */
static int scan_string(Cur *c, const unsigned char **s, const unsigned char **e, int *escaped) {
    const unsigned char *p = c->p + 1, *end = c->end;
    *escaped = 0;
    *s = p;
    for (;;) {
        while (end - p >= 8) { /* eight bytes at a time while all are plain ASCII */
            uint64_t w;
            memcpy(&w, p, 8);
            uint64_t q = w ^ 0x2222222222222222ULL, b = w ^ 0x5C5C5C5C5C5C5C5CULL;
            uint64_t hit = ((q - 0x0101010101010101ULL) & ~q) | ((b - 0x0101010101010101ULL) & ~b) |
                           ((w - 0x2020202020202020ULL) & ~w) | w;
            if (hit & 0x8080808080808080ULL) break;
            p += 8;
        }
        for (;;) { /* then a byte at a time, a UTF-8 sequence at a time past ASCII */
            while (p < end && PLAIN[*p]) p++;
            if (p >= end || *p < 0x80) break;
            int n = utf8_sequence(p, end);
            if (!n) return -1;
            p += n;
        }
        if (p >= end || *p < 0x20) return -1;
        if (*p == '"') break;
        *escaped = 1; /* a backslash: check the escape */
        if (p + 1 >= end) return -1;
        unsigned char k = p[1];
        if (k == 'u') {
            if (end - p < 6 || !is_hex4(p + 2)) return -1;
            uint32_t cp = hex4(p + 2);
            p += 6;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return -1; /* a second half alone */
            if (cp >= 0xD800 && cp <= 0xDBFF) {          /* a first half: its second must follow */
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !is_hex4(p + 2)) return -1;
                uint32_t lo = hex4(p + 2);
                if (lo < 0xDC00 || lo > 0xDFFF) return -1;
                p += 6;
            }
        } else if (k == '"' || k == '\\' || k == '/' || k == 'b' || k == 'f' || k == 'n' || k == 'r' || k == 't') {
            p += 2;
        } else {
            return -1;
        }
    }
    *e = p;
    c->p = p + 1;
    return 0;
}

static int put_utf8(Buf *b, uint32_t cp) {
    unsigned char out[4];
    size_t n;
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        out[0] = 0xC0 | (cp >> 6);
        out[1] = 0x80 | (cp & 0x3F);
        n = 2;
    } else if (cp < 0x10000) {
        out[0] = 0xE0 | (cp >> 12);
        out[1] = 0x80 | ((cp >> 6) & 0x3F);
        out[2] = 0x80 | (cp & 0x3F);
        n = 3;
    } else {
        out[0] = 0xF0 | (cp >> 18);
        out[1] = 0x80 | ((cp >> 12) & 0x3F);
        out[2] = 0x80 | ((cp >> 6) & 0x3F);
        out[3] = 0x80 | (cp & 0x3F);
        n = 4;
    }
    return buf_put(b, out, n);
}

static uint32_t hex4(const unsigned char *p) {
    return (uint32_t)(hexval(p[0]) << 12 | hexval(p[1]) << 8 | hexval(p[2]) << 4 | hexval(p[3]));
}

/* The string's text with its escapes resolved, appended to b. -1 on a lone surrogate
 * (which the msgspec path refuses) or memory failure. */
static int unescape(Buf *b, const unsigned char *p, const unsigned char *e) {
    while (p < e) {
        const unsigned char *q = p;
        while (q < e && *q != '\\') q++;
        if (buf_put(b, p, (size_t)(q - p))) return -1;
        if (q >= e) break;
        unsigned char k = q[1];
        if (k != 'u') {
            char ch = k == 'b' ? '\b' : k == 'f' ? '\f' : k == 'n' ? '\n' : k == 'r' ? '\r' : k == 't' ? '\t' : (char)k;
            if (buf_put(b, &ch, 1)) return -1;
            p = q + 2;
            continue;
        }
        uint32_t cp = hex4(q + 2);
        p = q + 6;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return -1;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (p + 6 > e || p[0] != '\\' || p[1] != 'u') return -1;
            uint32_t lo = hex4(p + 2);
            if (lo < 0xDC00 || lo > 0xDFFF) return -1;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p += 6;
        }
        if (put_utf8(b, cp)) return -1;
    }
    return 0;
}

/* A JSON number at c->p: its span, and whether it is an integer (no fraction, no
 * exponent). -1 when it is not a number. */
static int scan_number(Cur *c, int *is_int) {
    const unsigned char *p = c->p, *end = c->end;
    *is_int = 1;
    if (p < end && *p == '-') p++;
    if (p >= end) return -1;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        return -1;
    }
    if (p < end && *p == '.') {
        *is_int = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') return -1;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        *is_int = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return -1;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    c->p = p;
    return 0;
}

static int skip_value(Cur *c, int depth);

static int skip_container(Cur *c, int depth, unsigned char close, int object) {
    if (depth > MAX_DEPTH) return -1;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return 0;
    }
    for (;;) {
        if (object) {
            const unsigned char *s, *e;
            int escaped;
            if (c->p >= c->end || *c->p != '"' || scan_string(c, &s, &e, &escaped)) return -1;
            ws(c);
            if (c->p >= c->end || *c->p != ':') return -1;
            c->p++;
            ws(c);
        }
        if (skip_value(c, depth + 1)) return -1;
        ws(c);
        if (c->p >= c->end) return -1;
        if (*c->p == ',') {
            c->p++;
            ws(c);
            continue;
        }
        if (*c->p != close) return -1;
        c->p++;
        return 0;
    }
}

static int literal(Cur *c, const char *word, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) return -1;
    c->p += n;
    return 0;
}

/* Skips (and checks) one JSON value at c->p. */
static int skip_value(Cur *c, int depth) {
    if (c->p >= c->end) return -1;
    const unsigned char *s, *e;
    int flag;
    switch (*c->p) {
    case '"':
        return scan_string(c, &s, &e, &flag);
    case '{':
        return skip_container(c, depth, '}', 1);
    case '[':
        return skip_container(c, depth, ']', 0);
    case 't':
        return literal(c, "true", 4);
    case 'f':
        return literal(c, "false", 5);
    case 'n':
        return literal(c, "null", 4);
    default:
        return scan_number(c, &flag);
    }
}

/* ------------------------------------------------------------------ numbers */

/* A JSON integer's text to int64; -1 when it does not fit (the msgspec path then gives a
 * Python int that the columns cannot hold, or an error). */
static int parse_int64(const unsigned char *p, const unsigned char *e, int64_t *out) {
    int neg = *p == '-';
    if (neg) p++;
    if (e - p > 19) return -1;
    uint64_t v = 0;
    for (; p < e; p++) v = v * 10 + (uint64_t)(*p - '0'); /* 19 digits cannot wrap uint64 */
    if (v > (uint64_t)INT64_MAX + (uint64_t)neg) return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* Microseconds as JSON text to integer nanoseconds, exactly (timeparse.us_text_to_ns):
 * more than three decimals round half to even. -1 for an exponent or a number that may
 * not fit (those take the msgspec path's exact decimals). */
static int us_to_ns(const unsigned char *p, const unsigned char *e, int64_t *out) {
    int neg = *p == '-';
    if (neg) p++;
    const unsigned char *q = p;
    while (q < e && *q >= '0' && *q <= '9') q++;
    ptrdiff_t digits = q - p;
    if (digits > 16 || (digits == 16 && *p >= '9')) return -1;
    int64_t whole = 0;
    for (const unsigned char *d = p; d < q; d++) whole = whole * 10 + (*d - '0');
    int64_t frac = 0;
    int decimals = 0, round_up = 0;
    if (q < e && *q == '.') {
        q++;
        for (; q < e && *q >= '0' && *q <= '9' && decimals < 3; q++, decimals++) frac = frac * 10 + (*q - '0');
        if (q < e && *q >= '0' && *q <= '9') { /* beyond ns: round half to even */
            int first = *q++ - '0';
            int rest = 0;
            for (; q < e && *q >= '0' && *q <= '9'; q++) rest |= *q != '0';
            round_up = first > 5 || (first == 5 && rest);
            if (first == 5 && !rest) round_up = -1; /* a tie: to even, below */
        }
    }
    if (q != e) return -1; /* an exponent */
    for (; decimals < 3; decimals++) frac *= 10;
    int64_t ns = whole * 1000 + frac;
    if (round_up == -1) round_up = ns & 1;
    ns += round_up;
    *out = neg ? -ns : ns;
    return 0;
}

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A plain decimal (no exponent, at most 15 digits) as the nearest double, as msgspec
 * gives it: its digits are an integer a double holds exactly, and so is the power of
 * ten, so one division rounds correctly. -1: not so plain (Python's own correctly
 * rounded reading then, which, unlike strtod, ignores the process's locale). */
static int fast_double(const unsigned char *p, const unsigned char *e, double *out) {
    int neg = *p == '-';
    if (neg) p++;
    int64_t m = 0;
    int digits = 0, decimals = 0, point = 0;
    for (; p < e; p++) {
        if (*p == '.') {
            point = 1;
            continue;
        }
        if (*p < '0' || *p > '9' || ++digits > 15) return -1;
        m = m * 10 + (*p - '0');
        decimals += point;
    }
    double v = (double)m / POW10[decimals];
    *out = neg ? -v : v;
    return 0;
}

/* ------------------------------------------------------------------ one event */

enum { F_PH, F_NAME, F_CAT, F_TS, F_DUR, F_PID, F_TID, F_ID, F_BP, F_ARGS, F_COUNT };

typedef struct {
    const unsigned char *s, *e; /* the value's span (a string's: between its quotes) */
    int kind;                   /* '"' string, 'i' integer, 'n' other number, 'z' null, '?' other */
    int escaped;
} Field;

/* The last value met at one place of the events (events in a row mostly share their
 * process, thread and category), to skip the look-up when the text is the same. */
typedef struct {
    int valid, present, kind;
    const unsigned char *s;
    size_t n;
    Py_ssize_t id;
} Memo;

enum { M_NAME, M_CAT, M_PID, M_TID, M_PH, M_BP, M_OP, M_COUNT };

typedef struct {
    Memo memo[M_COUNT];
    Table values; /* tagged strings and integers -> objects */
    Table x_keys, fl_keys; /* tuples of value ids -> the keys' tuples */
    Buf scratch;
} Scanner;

/* Which of the fields read this key is (-1: none): by length, then by its letters. */
static int field_of(const unsigned char *s, size_t n) {
    switch (n) {
    case 2:
        if (!memcmp(s, "ph", 2)) return F_PH;
        if (!memcmp(s, "ts", 2)) return F_TS;
        if (!memcmp(s, "id", 2)) return F_ID;
        if (!memcmp(s, "bp", 2)) return F_BP;
        return -1;
    case 3:
        if (!memcmp(s, "cat", 3)) return F_CAT;
        if (!memcmp(s, "dur", 3)) return F_DUR;
        if (!memcmp(s, "pid", 3)) return F_PID;
        if (!memcmp(s, "tid", 3)) return F_TID;
        return -1;
    case 4:
        if (!memcmp(s, "name", 4)) return F_NAME;
        if (!memcmp(s, "args", 4)) return F_ARGS;
        return -1;
    default:
        return -1;
    }
}

/* One value at c->p, noted in f. -1 when it is not JSON. */
static int scan_field(Cur *c, Field *f) {
    f->s = c->p;
    f->escaped = 0;
    if (c->p >= c->end) return -1;
    unsigned char ch = *c->p;
    if (ch == '"') {
        f->kind = '"';
        return scan_string(c, &f->s, &f->e, &f->escaped);
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        int is_int;
        if (scan_number(c, &is_int)) return -1;
        f->kind = is_int ? 'i' : 'n';
    } else {
        f->kind = ch == 'n' ? 'z' : '?';
        if (skip_value(c, 1)) return -1;
    }
    f->e = c->p;
    return 0;
}

/* The object of a value of the table, made when the value is first met. */
static int value_object(Table *t, char tag, const unsigned char *p, size_t n) {
    PyObject *obj;
    if (tag == 's') {
        obj = PyUnicode_DecodeUTF8((const char *)p, (Py_ssize_t)n, "strict");
    } else if (tag == 'i') {
        int64_t v;
        memcpy(&v, p, 8);
        obj = PyLong_FromLongLong(v);
    } else {
        obj = Py_NewRef(Py_None);
    }
    if (!obj) {
        PyErr_Clear(); /* not UTF-8: the msgspec path says so */
        return -1;
    }
    int failed = PyList_Append(t->objects, obj);
    Py_DECREF(obj);
    return failed;
}

/* The id, among sc->values, of a string, integer or null field; a missing field takes
 * the default dflt ('s' for "", 'i' for 0, 'z' for None). -1: decline. */
static Py_ssize_t value_id(Scanner *sc, Memo *m, const Field *f, int present, char dflt, int allow_int, int allow_null) {
    size_t n = present ? (size_t)(f->e - f->s) : 0;
    if (m->valid && m->present == present &&
        (!present || (m->kind == f->kind && m->n == n && memcmp(m->s, f->s, n) == 0)))
        return m->id;
    const unsigned char *p = (const unsigned char *)"";
    int64_t v = 0;
    char tag = dflt;
    Buf *b = &sc->scratch;
    if (!present) {
        if (tag == 'i') p = (const unsigned char *)&v, n = 8;
    } else if (f->kind == '"') {
        tag = 's';
        p = f->s;
        if (f->escaped) {
            b->len = 0;
            if (unescape(b, f->s, f->e)) return -1;
            p = (const unsigned char *)b->data;
            n = b->len;
        }
    } else if (f->kind == 'i' && allow_int) {
        if (parse_int64(f->s, f->e, &v)) return -1;
        tag = 'i';
        p = (const unsigned char *)&v;
        n = 8;
    } else if (f->kind == 'z' && allow_null) {
        tag = 'z';
        n = 0;
    } else {
        return -1;
    }
    int is_new;
    Py_ssize_t id = table_find(&sc->values, tag, p, n, &is_new);
    if (id < 0 || (is_new && value_object(&sc->values, tag, p, n))) return -1;
    *m = (Memo){1, present, present ? f->kind : 0, present ? f->s : NULL, present ? (size_t)(f->e - f->s) : 0, id};
    return id;
}

/* A flow's id as its own object (ids are mostly distinct: not worth a table). */
static PyObject *id_object(const Field *f, int present) {
    if (!present || f->kind == 'z') return Py_NewRef(Py_None);
    if (f->kind == 'i') {
        int64_t v;
        return parse_int64(f->s, f->e, &v) ? NULL : PyLong_FromLongLong(v);
    }
    if (f->kind != '"') return NULL;
    if (!f->escaped) return PyUnicode_DecodeUTF8((const char *)f->s, f->e - f->s, "strict");
    Buf b = {0};
    PyObject *obj = unescape(&b, f->s, f->e) ? NULL : PyUnicode_DecodeUTF8(b.data ? b.data : "", (Py_ssize_t)b.len, "strict");
    free(b.data);
    return obj;
}

/* The index of a key (a tuple of value ids) in a key table, its tuple made when new. */
static Py_ssize_t key_index(Scanner *sc, Table *t, const Py_ssize_t *ids, int n) {
    int32_t packed[5];
    for (int i = 0; i < n; i++) packed[i] = (int32_t)ids[i];
    int is_new;
    Py_ssize_t k = table_find(t, 'k', (const unsigned char *)packed, (size_t)n * 4, &is_new);
    if (k < 0 || !is_new) return k;
    PyObject *tuple = PyTuple_New(n);
    if (!tuple) return -1;
    for (int i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(sc->values.objects, ids[i]);
        PyTuple_SET_ITEM(tuple, i, Py_NewRef(item));
    }
    int failed = PyList_Append(t->objects, tuple);
    Py_DECREF(tuple);
    return failed ? -1 : k;
}

/* correlation, External id and op_type among the top-level keys of an args object. */
static int scan_args(Scanner *sc, const Field *f, int64_t *corr, int64_t *ext, PyObject **op_type) {
    Cur c = {f->s, f->e};
    int seen = 0;
    c.p++; /* '{' */
    ws(&c);
    if (*c.p == '}') return 0;
    for (;;) {
        const unsigned char *s, *e;
        int escaped;
        if (scan_string(&c, &s, &e, &escaped) || escaped) return -1;
        ws(&c);
        c.p++; /* ':' (checked when the event was scanned) */
        ws(&c);
        size_t n = (size_t)(e - s);
        int which = n == 11 && !memcmp(s, "correlation", 11) ? 1
                    : n == 11 && !memcmp(s, "External id", 11) ? 2
                    : n == 7 && !memcmp(s, "op_type", 7)        ? 4
                                                                : 0;
        Field v;
        if (scan_field(&c, &v)) return -1;
        if (which) {
            if (seen & which) return -1; /* given twice */
            seen |= which;
            if (which == 4) {
                if (v.kind != 'z') { /* null leaves it None */
                    Py_ssize_t id = value_id(sc, &sc->memo[M_OP], &v, 1, 's', 0, 0);
                    if (id < 0) return -1;
                    *op_type = PyList_GET_ITEM(sc->values.objects, id);
                }
            } else {
                int64_t value;
                if (v.kind != 'i' || parse_int64(v.s, v.e, &value)) return -1;
                *(which == 1 ? corr : ext) = value;
            }
        }
        ws(&c);
        if (*c.p == '}') return 0;
        c.p++; /* ',' */
        ws(&c);
    }
}

typedef struct {
    Buf x_local, x_key, x_ts, x_dur, x_corr, x_ext, args, arg_len;
    Buf fl_local, fl_key, fl_ts, fl_state;
    PyObject *op_types, *fl_ids, *others;
} Out;

/* One event object at c->p (its '{'), the k-th of the batch. 0, or -1: decline. */
static int scan_event(Scanner *sc, Out *o, Cur *c, Py_ssize_t k, const unsigned char *base) {
    Field f[F_COUNT];
    int present = 0;
    const unsigned char *start = c->p;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
    } else {
        for (;;) {
            const unsigned char *s, *e;
            int escaped;
            if (c->p >= c->end || *c->p != '"' || scan_string(c, &s, &e, &escaped)) return -1;
            int which = escaped ? -2 : field_of(s, (size_t)(e - s));
            if (which == -2) return -1; /* an escaped key: leave it to msgspec */
            ws(c);
            if (c->p >= c->end || *c->p != ':') return -1;
            c->p++;
            ws(c);
            if (which >= 0) {
                if (present & (1 << which)) return -1; /* given twice */
                present |= 1 << which;
                if (scan_field(c, &f[which])) return -1;
            } else if (skip_value(c, 1)) {
                return -1;
            }
            ws(c);
            if (c->p >= c->end) return -1;
            if (*c->p == ',') {
                c->p++;
                ws(c);
                continue;
            }
            if (*c->p != '}') return -1;
            c->p++;
            break;
        }
    }
#define HAS(x) (present & (1 << (x)))
    /* Fields typed as the msgspec path types them, for every event. */
    if (HAS(F_PH) && ((f[F_PH].kind != '"' && f[F_PH].kind != 'z') || f[F_PH].escaped)) return -1;
    if (HAS(F_NAME) && f[F_NAME].kind != '"') return -1;
    if (HAS(F_CAT) && f[F_CAT].kind != '"') return -1;
    if (HAS(F_DUR) && f[F_DUR].kind != 'i' && f[F_DUR].kind != 'n') return -1;
    if (HAS(F_BP) && f[F_BP].kind != '"' && f[F_BP].kind != 'z') return -1;
    for (int i = F_PID; i <= F_ID; i++)
        if (HAS(i) && f[i].kind != '"' && f[i].kind != 'i' && !(i == F_ID && f[i].kind == 'z')) return -1;
    int phase = 3;
    if (HAS(F_PH) && f[F_PH].kind == '"' && f[F_PH].e - f[F_PH].s == 1) {
        unsigned char ph = *f[F_PH].s;
        phase = ph == 'X' ? 0 : (ph == 's' || ph == 'f' || ph == 't') ? 1 : 3;
    }
    if (phase == 3) {
        PyObject *span = Py_BuildValue("(nnn)", k, (Py_ssize_t)(start - base), (Py_ssize_t)(c->p - base));
        if (!span) return -1;
        int failed = PyList_Append(o->others, span);
        Py_DECREF(span);
        return failed ? -1 : 0;
    }
    Py_ssize_t pid = value_id(sc, &sc->memo[M_PID], &f[F_PID], HAS(F_PID), 'i', 1, 0);
    Py_ssize_t tid = value_id(sc, &sc->memo[M_TID], &f[F_TID], HAS(F_TID), 'i', 1, 0);
    Py_ssize_t cat = value_id(sc, &sc->memo[M_CAT], &f[F_CAT], HAS(F_CAT), 's', 0, 0);
    if (pid < 0 || tid < 0 || cat < 0) return -1;
    if (phase == 0) { /* complete */
        if (!HAS(F_TS) || (f[F_TS].kind != 'i' && f[F_TS].kind != 'n')) return -1;
        int64_t ts, corr = NO_ID, ext = NO_ID;
        if (us_to_ns(f[F_TS].s, f[F_TS].e, &ts)) return -1;
        double dur = 0.0;
        if (HAS(F_DUR) && fast_double(f[F_DUR].s, f[F_DUR].e, &dur)) {
            char text[64];
            size_t n = (size_t)(f[F_DUR].e - f[F_DUR].s);
            if (n >= sizeof text) return -1;
            memcpy(text, f[F_DUR].s, n);
            text[n] = 0;
            char *stop;
            dur = PyOS_string_to_double(text, &stop, NULL); /* overflow: an infinity, declined */
            if (dur == -1.0 && PyErr_Occurred()) return -1;
            if (*stop || !isfinite(dur)) return -1;
        }
        Py_ssize_t name = value_id(sc, &sc->memo[M_NAME], &f[F_NAME], HAS(F_NAME), 's', 0, 0);
        if (name < 0) return -1;
        Py_ssize_t ids[4] = {name, cat, pid, tid};
        Py_ssize_t key = key_index(sc, &sc->x_keys, ids, 4);
        if (key < 0) return -1;
        PyObject *op_type = NULL;
        int64_t arg_len = 0;
        if (HAS(F_ARGS)) {
            if (*f[F_ARGS].s != '{' || scan_args(sc, &f[F_ARGS], &corr, &ext, &op_type)) return -1;
            arg_len = f[F_ARGS].e - f[F_ARGS].s;
            if (buf_put(&o->args, f[F_ARGS].s, (size_t)arg_len)) return -1;
        }
        Py_ssize_t index = (Py_ssize_t)(o->x_key.len / 4);
        if (op_type) {
            PyObject *pair = Py_BuildValue("(nO)", index, op_type);
            if (!pair || PyList_Append(o->op_types, pair)) {
                Py_XDECREF(pair);
                return -1;
            }
            Py_DECREF(pair);
        }
        PUT(&o->x_local, int64_t, k);
        PUT(&o->x_key, int32_t, (int32_t)key);
        PUT(&o->x_ts, int64_t, ts);
        PUT(&o->x_dur, double, dur);
        PUT(&o->x_corr, int64_t, corr);
        PUT(&o->x_ext, int64_t, ext);
        PUT(&o->arg_len, int64_t, arg_len);
        return 0;
    }
    /* a flow */
    Py_ssize_t ph = value_id(sc, &sc->memo[M_PH], &f[F_PH], 1, 's', 0, 0);
    Py_ssize_t bp = value_id(sc, &sc->memo[M_BP], &f[F_BP], HAS(F_BP), 'z', 0, 1);
    if (ph < 0 || bp < 0) return -1;
    Py_ssize_t ids[5] = {cat, ph, bp, pid, tid};
    Py_ssize_t key = key_index(sc, &sc->fl_keys, ids, 5);
    if (key < 0) return -1;
    int64_t ts = 0;
    uint8_t state = 0;
    if (!HAS(F_TS)) {
        state = 1; /* missing */
    } else if (f[F_TS].kind == 'i' || f[F_TS].kind == 'n') {
        if (us_to_ns(f[F_TS].s, f[F_TS].e, &ts)) return -1;
    } else {
        state = 2; /* not a number */
    }
    PyObject *ident = id_object(&f[F_ID], HAS(F_ID));
    if (!ident) return -1;
    int failed = PyList_Append(o->fl_ids, ident);
    Py_DECREF(ident);
    if (failed) return -1;
    PUT(&o->fl_local, int64_t, k);
    PUT(&o->fl_key, int32_t, (int32_t)key);
    PUT(&o->fl_ts, int64_t, ts);
    PUT(&o->fl_state, uint8_t, state);
    return 0;
fail:
    return -1;
#undef HAS
}

/* ------------------------------------------------------------------ the batch */

static void out_free(Out *o) {
    Buf *bufs[] = {&o->x_local, &o->x_key, &o->x_ts, &o->x_dur, &o->x_corr, &o->x_ext, &o->args,
                   &o->arg_len, &o->fl_local, &o->fl_key, &o->fl_ts, &o->fl_state};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]->data);
    Py_XDECREF(o->op_types);
    Py_XDECREF(o->fl_ids);
    Py_XDECREF(o->others);
}

static PyObject *result(Scanner *sc, Out *o, Py_ssize_t n) {
    PyObject *x = Py_BuildValue(
        "(NONNNNNONN)", buf_to_bytearray(&o->x_local), sc->x_keys.objects, buf_to_bytearray(&o->x_key),
        buf_to_bytearray(&o->x_ts), buf_to_bytearray(&o->x_dur), buf_to_bytearray(&o->x_corr),
        buf_to_bytearray(&o->x_ext), o->op_types, buf_to_bytearray(&o->args), buf_to_bytearray(&o->arg_len));
    PyObject *fl = Py_BuildValue(
        "(NONONN)", buf_to_bytearray(&o->fl_local), sc->fl_keys.objects, buf_to_bytearray(&o->fl_key), o->fl_ids,
        buf_to_bytearray(&o->fl_ts), buf_to_bytearray(&o->fl_state));
    if (!x || !fl) {
        Py_XDECREF(x);
        Py_XDECREF(fl);
        return NULL;
    }
    return Py_BuildValue("(nNNO)", n, x, fl, o->others);
}

static PyObject *scan(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE)) return NULL; /* not bytes: as msgspec, a TypeError */
    Scanner sc = {0};
    Out o = {0};
    PyObject *ret = NULL;
    int declined = 1, interrupted = 0;
    if (table_init(&sc.values) || table_init(&sc.x_keys) || table_init(&sc.fl_keys)) goto done;
    o.op_types = PyList_New(0);
    o.fl_ids = PyList_New(0);
    o.others = PyList_New(0);
    if (!o.op_types || !o.fl_ids || !o.others) goto done;
    const unsigned char *base = view.buf;
    Cur c = {base, base + view.len};
    Py_ssize_t n = 0;
    ws(&c);
    if (c.p >= c.end || *c.p != '[') goto done;
    c.p++;
    ws(&c);
    if (c.p < c.end && *c.p == ']') {
        c.p++;
    } else {
        for (;;) {
            if (c.p >= c.end || *c.p != '{') goto done;
            if (scan_event(&sc, &o, &c, n, base)) goto done;
            n++;
            if (n % SIGNAL_CHECK_EVERY == 0 && PyErr_CheckSignals()) {
                interrupted = 1;
                goto done;
            }
            ws(&c);
            if (c.p < c.end && *c.p == ',') {
                c.p++;
                ws(&c);
                continue;
            }
            if (c.p < c.end && *c.p == ']') {
                c.p++;
                break;
            }
            goto done;
        }
    }
    ws(&c);
    if (c.p != c.end) goto done;
    ret = result(&sc, &o, n);
    declined = ret == NULL; /* out of memory at the end: decline too */
done:
    PyBuffer_Release(&view);
    table_free(&sc.values);
    table_free(&sc.x_keys);
    table_free(&sc.fl_keys);
    free(sc.scratch.data);
    out_free(&o);
    if (interrupted) return NULL; /* the signal's exception (KeyboardInterrupt...) */
    if (declined) {
        if (PyErr_Occurred()) PyErr_Clear(); /* memory or anything else: msgspec decides */
        Py_RETURN_NONE;
    }
    return ret;
}

static PyObject *fail_nth_allocation(PyObject *self, PyObject *arg) {
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    fail_countdown = n > 0 ? n : 0;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_O, "scan(text) -> columns of a batch of trace events, or None to decline"},
    {"_fail_nth_allocation", fail_nth_allocation, METH_O,
     "for the tests: the scanner's n-th allocation from now fails (0: none)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_eventscan", NULL, -1, methods};

/* The hash keys, from os.urandom (the same source CPython seeds its own hashes from). */
static int draw_key(void *key, size_t n) {
    PyObject *os = PyImport_ImportModule("os");
    if (!os) return -1;
    PyObject *bytes = PyObject_CallMethod(os, "urandom", "n", (Py_ssize_t)n);
    Py_DECREF(os);
    if (!bytes) return -1;
    if (!PyBytes_Check(bytes) || PyBytes_GET_SIZE(bytes) != (Py_ssize_t)n) {
        Py_DECREF(bytes);
        PyErr_SetString(PyExc_RuntimeError, "os.urandom gave no key");
        return -1;
    }
    memcpy(key, PyBytes_AS_STRING(bytes), n);
    Py_DECREF(bytes);
    return 0;
}

PyMODINIT_FUNC PyInit__eventscan(void) {
    if (draw_key(hash_key, sizeof hash_key) || draw_key(short_key, sizeof short_key)) return NULL;
    for (int ch = 0x20; ch < 0x80; ch++) PLAIN[ch] = ch != '"' && ch != '\\';
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddStringConstant(m, "SOURCE_SHA256", EVENTSCAN_SOURCE_SHA256)) Py_CLEAR(m);
    return m;
}
