/* The Spark source's record decoding in C: the records of v2 record batches, already
 * decompressed, straight into Arrow buffers (spark_etl/source/batches.py builds the
 * arrays from them with pyarrow.Array.from_buffers).
 *
 * Decoding a record in Python costs ~1.5 us and making one Python object per field
 * ~0.1 us; this walk costs a few tens of ns a record, so no per-record Python
 * object is made at all. Also XXH64 (written from its published specification), the
 * audit's hash of each value, taken while the value is in cache.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- XXH64 ---------------------------------------------------------------- */

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t le64(const unsigned char *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

static inline uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t xxh_round(uint64_t acc, uint64_t lane)
{
    return rotl64(acc + lane * P2, 31) * P1;
}

static inline uint64_t xxh_merge(uint64_t acc, uint64_t v)
{
    return (acc ^ xxh_round(0, v)) * P1 + P4;
}

static uint64_t xxh64(const unsigned char *p, size_t len, uint64_t seed)
{
    const unsigned char *end = p + len;
    uint64_t acc;
    if (len >= 32) {
        uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
        const unsigned char *last_stripe = end - 32;
        do {
            v1 = xxh_round(v1, le64(p));
            v2 = xxh_round(v2, le64(p + 8));
            v3 = xxh_round(v3, le64(p + 16));
            v4 = xxh_round(v4, le64(p + 24));
            p += 32;
        } while (p <= last_stripe);
        acc = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        acc = xxh_merge(acc, v1);
        acc = xxh_merge(acc, v2);
        acc = xxh_merge(acc, v3);
        acc = xxh_merge(acc, v4);
    } else {
        acc = seed + P5;
    }
    acc += (uint64_t)len;
    while (end - p >= 8) {
        acc ^= xxh_round(0, le64(p));
        acc = rotl64(acc, 27) * P1 + P4;
        p += 8;
    }
    if (end - p >= 4) {
        acc ^= (uint64_t)le32(p) * P1;
        acc = rotl64(acc, 23) * P2 + P3;
        p += 4;
    }
    while (p < end) {
        acc ^= (uint64_t)(*p) * P5;
        acc = rotl64(acc, 11) * P1;
        p++;
    }
    acc ^= acc >> 33;
    acc *= P2;
    acc ^= acc >> 29;
    acc *= P3;
    acc ^= acc >> 32;
    return acc;
}

PyObject *lf_xxh64(PyObject *self, PyObject *args)
{
    Py_buffer data;
    unsigned long long seed = 0;
    if (!PyArg_ParseTuple(args, "y*|K", &data, &seed))
        return NULL;
    uint64_t h = xxh64((const unsigned char *)data.buf, (size_t)data.len, (uint64_t)seed);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLongLong(h);
}

/* ---- growable buffer (the headers' parts, rarely used) ------------------- */

typedef struct {
    unsigned char *p;
    size_t len, cap;
} Grow;

static int grow_reserve(Grow *g, size_t more)
{
    if (g->len + more <= g->cap)
        return 0;
    size_t cap = g->cap ? g->cap : 4096;
    while (cap < g->len + more)
        cap *= 2;
    unsigned char *p = realloc(g->p, cap);
    if (!p)
        return -1;
    g->p = p;
    g->cap = cap;
    return 0;
}

static int grow_put(Grow *g, const void *src, size_t n)
{
    if (grow_reserve(g, n) < 0)
        return -1;
    memcpy(g->p + g->len, src, n);
    g->len += n;
    return 0;
}

static int grow_i32(Grow *g, int32_t v) { return grow_put(g, &v, sizeof v); }

/* set bit i of a bitmap that grows a byte at a time */
static int grow_bit(Grow *g, size_t i, int bit)
{
    size_t need = i / 8 + 1;
    if (need > g->len) {
        if (grow_reserve(g, need - g->len) < 0)
            return -1;
        memset(g->p + g->len, 0, need - g->len);
        g->len = need;
    }
    if (bit)
        g->p[i / 8] |= (unsigned char)(1u << (i % 8));
    return 0;
}

/* ---- the walk -------------------------------------------------------------- */

typedef struct {
    Py_buffer buf;
    long long count, base_offset, first_timestamp, max_timestamp;
    int log_append_time;
} Part;

typedef struct {
    /* outputs sized for n_max records / the records' total bytes */
    int64_t *offsets, *timestamps;
    int32_t *ts_types;
    int32_t *key_off, *val_off;
    unsigned char *key_data, *val_data, *key_valid, *val_valid;
    uint64_t *hashes;
    int want_headers;
    size_t n, key_len, val_len, key_nulls, val_nulls;
    /* headers: list offsets and validity per row; the struct's key and value children */
    Grow hl_off, hl_valid, hk_off, hk_data, hv_off, hv_data, hv_valid;
    size_t headers, hl_nulls, hv_nulls, rows_with_headers;
    /* the error, and the batch it is in */
    const char *error;
    long long error_offset;
} Out;

typedef struct {
    const unsigned char *p;
    size_t n, pos;
} Reader;

/* A zigzag varint of at most 10 bytes; 0 or -1 when it runs past the end or is too long. */
static inline int varint(Reader *r, int64_t *out)
{
    uint64_t z = 0;
    int shift = 0;
    for (;;) {
        if (r->pos >= r->n)
            return -1;
        unsigned char b = r->p[r->pos++];
        z |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
        shift += 7;
        if (shift > 63)
            return -1;
    }
    *out = (int64_t)((z >> 1) ^ (~(z & 1) + 1));
    return 0;
}

/* A length-prefixed field: *at and *size (-1 = null), checked against the record's end. */
static inline int field(Reader *r, size_t record_end, const unsigned char **at, int64_t *size)
{
    if (varint(r, size) < 0 || *size < -1 || r->pos > record_end)
        return -1;
    *at = r->p + r->pos;
    if (*size > 0) {
        if ((uint64_t)*size > record_end - r->pos)
            return -1;
        r->pos += (size_t)*size;
    }
    return 0;
}

static int decode_headers(Out *o, Reader *r, size_t record_end, int64_t count)
{
    for (int64_t h = 0; h < count; h++) {
        const unsigned char *k, *v;
        int64_t ks, vs;
        if (r->pos >= record_end || field(r, record_end, &k, &ks) < 0 || ks < 0) {
            o->error = "record header key is malformed";
            return -1;
        }
        if (r->pos >= record_end || field(r, record_end, &v, &vs) < 0) {
            o->error = "record header value is malformed";
            return -1;
        }
        if (o->hk_data.len + (size_t)ks > INT32_MAX || o->hv_data.len + (size_t)(vs > 0 ? vs : 0) > INT32_MAX) {
            o->error = "record headers exceed 2 GiB";
            return -1;
        }
        if (grow_put(&o->hk_data, k, (size_t)ks) < 0 || grow_i32(&o->hk_off, (int32_t)o->hk_data.len) < 0)
            goto nomem;
        if (vs >= 0 && grow_put(&o->hv_data, v, (size_t)vs) < 0)
            goto nomem;
        if (grow_i32(&o->hv_off, (int32_t)o->hv_data.len) < 0 || grow_bit(&o->hv_valid, o->headers, vs >= 0) < 0)
            goto nomem;
        o->hv_nulls += vs < 0;
        o->headers++;
    }
    return 0;
nomem:
    o->error = "out of memory";
    return -1;
}

static int walk_part(Out *o, const Part *part, long long start, long long end, uint64_t seed)
{
    Reader r = {(const unsigned char *)part->buf.buf, (size_t)part->buf.len, 0};
    for (long long i = 0; i < part->count; i++) {
        int64_t length, ts_delta, off_delta, nheaders;
        const unsigned char *key, *value;
        int64_t ks, vs;
        if (varint(&r, &length) < 0 || length < 6 || (uint64_t)length > r.n - r.pos) {
            o->error = "record length runs past the end of the batch";
            return -1;
        }
        size_t record_end = r.pos + (size_t)length;
        r.pos += 1; /* attributes */
        if (varint(&r, &ts_delta) < 0 || varint(&r, &off_delta) < 0 || r.pos > record_end ||
            field(&r, record_end, &key, &ks) < 0 || field(&r, record_end, &value, &vs) < 0 ||
            varint(&r, &nheaders) < 0 || nheaders < 0 || r.pos > record_end) {
            o->error = "record is malformed";
            return -1;
        }
        /* wrapping sums: a corrupt delta must not be undefined behaviour */
        long long offset = (long long)((uint64_t)part->base_offset + (uint64_t)off_delta);
        if (offset < start || offset >= end) {
            r.pos = record_end; /* headers: skipped, the record's length bounds them */
            continue;
        }
        size_t n = o->n;
        o->offsets[n] = offset;
        o->timestamps[n] = part->log_append_time
                               ? part->max_timestamp
                               : (int64_t)((uint64_t)part->first_timestamp + (uint64_t)ts_delta);
        o->ts_types[n] = part->log_append_time;
        if (ks >= 0) {
            memcpy(o->key_data + o->key_len, key, (size_t)ks);
            o->key_len += (size_t)ks;
            o->key_valid[n / 8] |= (unsigned char)(1u << (n % 8));
        } else {
            o->key_nulls++;
        }
        o->key_off[n + 1] = (int32_t)o->key_len;
        if (vs >= 0) {
            memcpy(o->val_data + o->val_len, value, (size_t)vs);
            o->val_len += (size_t)vs;
            o->val_valid[n / 8] |= (unsigned char)(1u << (n % 8));
        } else {
            o->val_nulls++;
        }
        o->val_off[n + 1] = (int32_t)o->val_len;
        if (o->hashes)
            o->hashes[n] = xxh64(value, vs > 0 ? (size_t)vs : 0, seed);
        if (o->want_headers) {
            if (nheaders > 0) {
                if (decode_headers(o, &r, record_end, nheaders) < 0)
                    return -1;
                o->rows_with_headers++;
            } else {
                o->hl_nulls++;
            }
            if (grow_bit(&o->hl_valid, n, nheaders > 0) < 0 ||
                grow_i32(&o->hl_off, (int32_t)o->headers) < 0) {
                o->error = "out of memory";
                return -1;
            }
        } else {
            r.pos = record_end;
        }
        if (r.pos != record_end) {
            o->error = "record length does not match its fields";
            return -1;
        }
        o->n = n + 1;
    }
    if (r.pos != r.n) {
        o->error = "records section does not hold records_count records";
        return -1;
    }
    return 0;
}

/* ---- Python entry ----------------------------------------------------------- */

static PyObject *bytes_of(Grow *g)
{
    return PyBytes_FromStringAndSize((const char *)g->p, (Py_ssize_t)g->len);
}

/* A bytes object cut to `len`, or None (for a validity bitmap without nulls). */
static PyObject *finish(PyObject **b, size_t len, int keep)
{
    PyObject *out = *b;
    *b = NULL;
    if (!keep) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    if (_PyBytes_Resize(&out, (Py_ssize_t)len) < 0)
        return NULL;
    return out;
}

#define N_BUFS 11

PyObject *lf_decode_batches(PyObject *self, PyObject *args)
{
    PyObject *parts_obj;
    long long start, end;
    int want_hash, want_headers;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "O!LLpKp", &PyList_Type, &parts_obj, &start, &end, &want_hash,
                          &seed, &want_headers))
        return NULL;
    Py_ssize_t nparts = PyList_GET_SIZE(parts_obj);
    Part *parts = PyMem_Calloc(nparts ? (size_t)nparts : 1, sizeof(Part));
    if (!parts)
        return PyErr_NoMemory();
    Py_ssize_t got = 0;
    size_t n_max = 0, total = 0;
    PyObject *bufs[N_BUFS] = {NULL};
    PyObject *result = NULL;
    Out o;
    memset(&o, 0, sizeof o);
    for (; got < nparts; got++) {
        Part *p = &parts[got];
        PyObject *item = PyList_GET_ITEM(parts_obj, got);
        if (!PyTuple_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "decode_batches: each part is a tuple");
            goto done;
        }
        if (!PyArg_ParseTuple(item, "y*LLLLp", &p->buf, &p->count,
                              &p->base_offset, &p->first_timestamp, &p->max_timestamp,
                              &p->log_append_time))
            goto done;
        if (p->count < 0 || (size_t)p->count > (size_t)p->buf.len / 7) {
            /* a record takes at least 7 bytes */
            got++;
            PyErr_Format(PyExc_ValueError,
                         "record batch at offset %lld: records_count %lld does not fit its %zd bytes",
                         p->base_offset, p->count, p->buf.len);
            goto done;
        }
        n_max += (size_t)p->count;
        total += (size_t)p->buf.len;
    }
    if (total > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "records exceed 2 GiB: decode fewer batches at once");
        goto done;
    }
    /* offsets, timestamps, ts types, key offsets/data/validity, value offsets/data/validity, hashes */
    size_t bitmap = (n_max + 7) / 8;
    size_t sizes[N_BUFS] = {8 * n_max, 8 * n_max, 4 * n_max, 4 * (n_max + 1), total, bitmap,
                            4 * (n_max + 1), total, bitmap, want_hash ? 8 * n_max : 0, 0};
    for (int i = 0; i < N_BUFS - 1; i++) {
        bufs[i] = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizes[i]);
        if (!bufs[i])
            goto done;
    }
    o.offsets = (int64_t *)PyBytes_AS_STRING(bufs[0]);
    o.timestamps = (int64_t *)PyBytes_AS_STRING(bufs[1]);
    o.ts_types = (int32_t *)PyBytes_AS_STRING(bufs[2]);
    o.key_off = (int32_t *)PyBytes_AS_STRING(bufs[3]);
    o.key_data = (unsigned char *)PyBytes_AS_STRING(bufs[4]);
    o.key_valid = (unsigned char *)PyBytes_AS_STRING(bufs[5]);
    o.val_off = (int32_t *)PyBytes_AS_STRING(bufs[6]);
    o.val_data = (unsigned char *)PyBytes_AS_STRING(bufs[7]);
    o.val_valid = (unsigned char *)PyBytes_AS_STRING(bufs[8]);
    o.hashes = want_hash ? (uint64_t *)PyBytes_AS_STRING(bufs[9]) : NULL;
    o.want_headers = want_headers;
    memset(o.key_valid, 0, bitmap);
    memset(o.val_valid, 0, bitmap);
    o.key_off[0] = o.val_off[0] = 0;
    int failed = 0;
    if (want_headers && (grow_i32(&o.hl_off, 0) < 0 || grow_i32(&o.hk_off, 0) < 0 ||
                         grow_i32(&o.hv_off, 0) < 0)) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nparts && !failed; i++) {
        if (walk_part(&o, &parts[i], start, end, (uint64_t)seed) < 0) {
            o.error_offset = parts[i].base_offset;
            failed = 1;
        }
    }
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_Format(PyExc_ValueError, "record batch at offset %lld: %s", o.error_offset, o.error);
        goto done;
    }
    size_t n = o.n, bm = (n + 7) / 8;
    PyObject *headers;
    if (want_headers && o.rows_with_headers) {
        if (grow_bit(&o.hl_valid, n ? n - 1 : 0, 0) < 0 || grow_bit(&o.hv_valid, o.headers ? o.headers - 1 : 0, 0) < 0) {
            PyErr_NoMemory();
            goto done;
        }
        headers = Py_BuildValue("(NNnnNNNNNn)", bytes_of(&o.hl_off), bytes_of(&o.hl_valid),
                                (Py_ssize_t)o.hl_nulls, (Py_ssize_t)o.headers, bytes_of(&o.hk_off),
                                bytes_of(&o.hk_data), bytes_of(&o.hv_off), bytes_of(&o.hv_data),
                                bytes_of(&o.hv_valid), (Py_ssize_t)o.hv_nulls);
    } else {
        headers = Py_None;
        Py_INCREF(headers);
    }
    if (!headers)
        goto done;
    size_t cut[N_BUFS - 1] = {8 * n, 8 * n, 4 * n, 4 * (n + 1), o.key_len, bm,
                              4 * (n + 1), o.val_len, bm, want_hash ? 8 * n : 0};
    int keep[N_BUFS - 1] = {1, 1, 1, 1, 1, o.key_nulls > 0, 1, 1, o.val_nulls > 0, want_hash};
    PyObject *outs[N_BUFS - 1] = {NULL};
    for (int i = 0; i < N_BUFS - 1; i++) {
        outs[i] = finish(&bufs[i], cut[i], keep[i]);
        if (!outs[i]) {
            for (int j = 0; j < i; j++)
                Py_DECREF(outs[j]);
            Py_DECREF(headers);
            goto done;
        }
    }
    result = Py_BuildValue("(nNNNNNNnNNNnNN)", (Py_ssize_t)n, outs[0], outs[1], outs[2], outs[3],
                           outs[4], outs[5], (Py_ssize_t)o.key_nulls, outs[6], outs[7], outs[8],
                           (Py_ssize_t)o.val_nulls, outs[9], headers);
done:
    for (int i = 0; i < N_BUFS; i++)
        Py_XDECREF(bufs[i]);
    free(o.hl_off.p);
    free(o.hl_valid.p);
    free(o.hk_off.p);
    free(o.hk_data.p);
    free(o.hv_off.p);
    free(o.hv_data.p);
    free(o.hv_valid.p);
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&parts[i].buf);
    PyMem_Free(parts);
    return result;
}
