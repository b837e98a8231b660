/* The produce path's records check in C: the same walk as records._check_records,
 * which stays the reference (and the fallback where this module was not built).
 *
 * Python walks a record in ~1.5 us; the broker's whole produce path costs ~0.06 us
 * per record, so checking every produced record in Python would cost the broker
 * most of its produce throughput. Accepts exactly what _check_records accepts
 * (tests/broker/protocol/test_records_check.py compares the two); raises
 * ValueError with the reason otherwise.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    const unsigned char *p;
    Py_ssize_t n;
    Py_ssize_t pos;
    const char *error;
} Reader;

/* One zigzag varint as records._zigzag_decode reads it (at most 10 bytes).
 * Returns 0, or -1 with r->error set. *wide is set when the value needs more than
 * 64 bits (Python's arbitrary-size ints still hold it). */
static int read_varint(Reader *r, int64_t *out, int *wide)
{
    uint64_t z = 0;
    int shift = 0;
    *wide = 0;
    for (;;) {
        if (r->pos >= r->n) {
            r->error = "record varint runs past the end of the records";
            return -1;
        }
        unsigned char b = r->p[r->pos++];
        uint64_t bits = b & 0x7f;
        if (shift == 63 && bits > 1)
            *wide = 1;
        z |= bits << shift;
        if (!(b & 0x80))
            break;
        shift += 7;
        if (shift > 63) {
            r->error = "record varint is too long";
            return -1;
        }
    }
    *out = (int64_t)((z >> 1) ^ (~(z & 1) + 1));
    return 0;
}

/* A varint that must fit 64 bits: any wider value makes _check_records fail too
 * (a length past the end, a delta out of order, a count that runs past). */
static int read_int(Reader *r, int64_t *out, const char *what)
{
    int wide;
    if (read_varint(r, out, &wide) < 0)
        return -1;
    if (wide) {
        r->error = what;
        return -1;
    }
    return 0;
}

/* Skip a field of `size` bytes (-1: null when `smallest` is -1). */
static int skip_field(Reader *r, int64_t smallest, const char *what)
{
    int64_t size;
    if (read_int(r, &size, what) < 0)
        return -1;
    if (size < smallest) {
        r->error = what;
        return -1;
    }
    if (size > 0) {
        if (size > r->n - r->pos) {
            r->error = "record field runs past the end of the records";
            return -1;
        }
        r->pos += (Py_ssize_t)size;
    }
    return 0;
}

static int walk(Reader *r, long long count, long long last_delta)
{
    int64_t previous = -1;
    for (long long i = 0; i < count; i++) {
        int64_t length, value, delta, headers;
        int wide;
        if (read_int(r, &length, "record length runs past the end of the batch") < 0)
            return -1;
        if (length < 0 || length > r->n - r->pos) {
            r->error = "record length runs past the end of the batch";
            return -1;
        }
        Py_ssize_t end = r->pos + (Py_ssize_t)length;
        r->pos += 1; /* attributes */
        if (read_varint(r, &value, &wide) < 0) /* timestamp delta: any value */
            return -1;
        if (read_int(r, &delta, "record offset delta out of order in the batch") < 0)
            return -1;
        if (delta <= previous || delta > last_delta) {
            r->error = "record offset delta out of order in the batch";
            return -1;
        }
        previous = delta;
        if (skip_field(r, -1, "record field length") < 0 || skip_field(r, -1, "record field length") < 0)
            return -1;
        if (read_int(r, &headers, "record header count") < 0)
            return -1;
        if (headers < 0) {
            r->error = "record header count";
            return -1;
        }
        for (int64_t h = 0; h < headers; h++) {
            if (r->pos >= end) {
                r->error = "record headers run past the record";
                return -1;
            }
            if (skip_field(r, 0, "record header field length") < 0)
                return -1;
            if (r->pos >= end) {
                r->error = "record headers run past the record";
                return -1;
            }
            if (skip_field(r, -1, "record header field length") < 0)
                return -1;
        }
        if (r->pos != end) {
            r->error = "record length does not match its fields";
            return -1;
        }
    }
    if (r->pos != r->n) {
        r->error = "records section does not hold records_count records";
        return -1;
    }
    return 0;
}

static PyObject *check_records(PyObject *self, PyObject *args)
{
    Py_buffer data;
    long long count, last_delta;
    if (!PyArg_ParseTuple(args, "y*LL", &data, &count, &last_delta))
        return NULL;
    Reader r = {(const unsigned char *)data.buf, data.len, 0, NULL};
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = walk(&r, count, last_delta) < 0;
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    if (failed) {
        PyErr_SetString(PyExc_ValueError, r.error);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* _decode.c */
PyObject *lf_decode_batches(PyObject *self, PyObject *args);
PyObject *lf_xxh64(PyObject *self, PyObject *args);

static PyMethodDef methods[] = {
    {"check_records", check_records, METH_VARARGS,
     "check_records(data, count, last_offset_delta): walk an uncompressed records "
     "section; ValueError with the reason when it does not hold `count` valid records."},
    {"decode_batches", lf_decode_batches, METH_VARARGS,
     "decode_batches(parts, start, end, want_hash, seed, want_headers): the records with "
     "start <= offset < end of decompressed v2 records sections as Arrow buffers; "
     "ValueError with the reason when a section is malformed."},
    {"xxh64", lf_xxh64, METH_VARARGS, "xxh64(data, seed=0): XXH64 of `data` as an unsigned int."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_check", NULL, -1, methods};

PyMODINIT_FUNC PyInit__check(void)
{
    return PyModule_Create(&module);
}
