/* nginx `combined` access-log lines -> the agent's records, in C.

The Python parser (agent/interceptors/nginx.py) is the reference: one regex, then
conversions. This module takes the lines whose shape is plain and only those (ASCII,
no backslash-escaped quote, one upstream time, every field as the regex and the
conversions accept it), and builds the very record the reference builds. Any line it
is not sure of is left to the reference, which decides: parsed, or flagged with its
reason. So an accepted line must give what the reference gives, and a refused one
costs only the time to look at it. The reference tries its plain regex first (quoted
fields without '"'), whose match this module reproduces; a line that needs the
escape-aware one fails here too.

    parse_combined(events, timed) -> list[int]

`events`: objects with a `body` (bytes) and writable `record` and `time`. Each line
taken gets `record` (the dict) and `time` (epoch ms); the result lists the indices of
the others, in order, for the reference. `timed`: the format is combined_timed (a line
without $request_time is left to the reference, which flags it).
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *p;
    Py_ssize_t n;
} Span;

/* interned attribute and key names */
static PyObject *s_body, *s_record, *s_time;
static PyObject *k_time, *k_ts, *k_client, *k_user, *k_method, *k_path, *k_protocol,
    *k_status, *k_bytes, *k_referrer, *k_user_agent, *k_request_time, *k_upstream;

/* the last $time_local converted: the lines of one second share it */
static char cached_text[26];
static PyObject *cached_iso, *cached_ts;

static const char *MONTHS = "JanFebMarAprMayJunJulAugSepOctNovDec";

static int digits(const char *p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 1;
}

/* Days from 1970-01-01 to year-month-01 (proleptic Gregorian). */
static long long days_from_civil(long long y, int m)
{
    y -= m <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    long long yoe = y - era * 400;
    long long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5;
    long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* '10/Oct/2000:13:55:36 -0700' -> cached_iso, cached_ts; 0 when it is not plainly
   such a time (the reference decides then). */
static int convert_time(Span t)
{
    const char *s = t.p;
    if (t.n != 26)
        return 0;
    if (cached_iso != NULL && memcmp(cached_text, s, 26) == 0)
        return 1;
    if (s[2] != '/' || s[6] != '/' || s[11] != ':' || s[14] != ':' || s[17] != ':' ||
        s[20] != ' ' || (s[21] != '+' && s[21] != '-'))
        return 0;
    int day, year, hh, mm, ss, tzh, tzm, month = 0;
    if (!digits(s, 2, &day) || !digits(s + 7, 4, &year) || !digits(s + 12, 2, &hh) ||
        !digits(s + 15, 2, &mm) || !digits(s + 18, 2, &ss) || !digits(s + 22, 2, &tzh) ||
        !digits(s + 24, 2, &tzm))
        return 0;
    for (int i = 0; i < 12; i++) {
        if (memcmp(MONTHS + 3 * i, s + 3, 3) == 0) {
            month = i + 1;
            break;
        }
    }
    if (month == 0 || year < 1 || day < 1 || day > 31 || hh > 23 || mm > 59 || ss > 60)
        return 0;
    long long offset = (tzh * 3600LL + tzm * 60LL) * (s[21] == '+' ? 1 : -1);
    long long days = days_from_civil(year, month) + day - 1;
    long long ts = (days * 86400 + hh * 3600LL + mm * 60LL + ss - offset) * 1000;
    char buf[32];
    int len = snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d%c%02d:%02d", year, month,
                       day, hh, mm, ss, s[21], tzh, tzm);
    PyObject *iso = PyUnicode_DecodeASCII(buf, len, NULL);
    if (iso == NULL)
        return -1;
    PyObject *ts_obj = PyLong_FromLongLong(ts);
    if (ts_obj == NULL) {
        Py_DECREF(iso);
        return -1;
    }
    Py_XSETREF(cached_iso, iso);
    Py_XSETREF(cached_ts, ts_obj);
    memcpy(cached_text, s, 26);
    return 1;
}

/* Cut a token ending at `stop` (not included); 0 when `stop` is not found before
   `end` or the token is shorter than `min`. */
static int cut(const char **at, const char *end, char stop, Py_ssize_t min, Span *out)
{
    const char *p = *at;
    const char *q = memchr(p, stop, (size_t)(end - p));
    if (q == NULL || q - p < min)
        return 0;
    out->p = p;
    out->n = q - p;
    *at = q + 1;
    return 1;
}

static int expect(const char **at, const char *end, const char *text)
{
    size_t n = strlen(text);
    if ((size_t)(end - *at) < n || memcmp(*at, text, n) != 0)
        return 0;
    *at += n;
    return 1;
}

static int all_in(Span s, const char *set)
{
    for (Py_ssize_t i = 0; i < s.n; i++)
        if (s.p[i] == '\0' || strchr(set, s.p[i]) == NULL)
            return 0;
    return 1;
}

static int is_dash(Span s) { return s.n == 1 && s.p[0] == '-'; }

/* float(text) as Python's float() gives it, for text of [-0-9.] only; 0 when
   Python would refuse it (the reference flags the line). */
static int to_double(Span s, double *out)
{
    char buf[64];
    if (s.n == 0 || s.n >= (Py_ssize_t)sizeof buf)
        return 0;
    memcpy(buf, s.p, (size_t)s.n);
    buf[s.n] = '\0';
    char *endp = NULL;
    double v = PyOS_string_to_double(buf, &endp, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (endp != buf + s.n)
        return 0;
    *out = v;
    return 1;
}

static PyObject *text(Span s) { return PyUnicode_DecodeASCII(s.p, s.n, NULL); }

static PyObject *text_or_none(Span s)
{
    if (is_dash(s))
        Py_RETURN_NONE;
    return text(s);
}

typedef struct {
    Span client, user, time_local, request, status, size, referrer, agent, rt, urt;
    int has_rt, has_urt;
} Fields;

/* The regex of agent/interceptors/nginx.py (COMBINED), on its plain path:
   ([^ ]+) [^ ]+ ([^ ]+) \[([^\]]*)\] "([^"]*)" (\d{3}) (\d+|-) "([^"]*)" "([^"]*)"
   (?: ([\d.]+|-)(?: ([-\d.]+...))?)?[ \t\r]*\Z  -- the upstream times without
   ", " or " : " lists (those go to the reference). The tail is read from its end: the
   trailing blanks off, then " rt" and " urt", each up to the next space. */
static int split_line(const char *p, Py_ssize_t n, Fields *f)
{
    const char *end = p + n;
    Span ident;
    for (Py_ssize_t i = 0; i < n; i++)
        if ((unsigned char)p[i] >= 0x80)
            return 0; /* the reference decodes with backslashreplace */
    if (!cut(&p, end, ' ', 1, &f->client) || !cut(&p, end, ' ', 1, &ident) ||
        !cut(&p, end, ' ', 1, &f->user) || !expect(&p, end, "[") ||
        !cut(&p, end, ']', 0, &f->time_local) || !expect(&p, end, " \"") ||
        !cut(&p, end, '"', 0, &f->request) || !expect(&p, end, " ") ||
        !cut(&p, end, ' ', 3, &f->status) || f->status.n != 3 ||
        !all_in(f->status, "0123456789") || !cut(&p, end, ' ', 1, &f->size) ||
        !(is_dash(f->size) || all_in(f->size, "0123456789")) || !expect(&p, end, "\"") ||
        !cut(&p, end, '"', 0, &f->referrer) || !expect(&p, end, " \"") ||
        !cut(&p, end, '"', 0, &f->agent))
        return 0;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        end--;
    f->has_rt = f->has_urt = 0;
    if (p == end)
        return 1;
    if (*p++ != ' ')
        return 0;
    const char *q = memchr(p, ' ', (size_t)(end - p));
    f->rt.p = p;
    f->rt.n = (q ? q : end) - p;
    if (f->rt.n == 0 || !(is_dash(f->rt) || all_in(f->rt, "0123456789.")))
        return 0;
    f->has_rt = 1;
    if (q == NULL)
        return 1;
    f->urt.p = q + 1;
    f->urt.n = end - (q + 1);
    if (f->urt.n == 0 || !all_in(f->urt, "-0123456789."))
        return 0;
    f->has_urt = 1;
    return 1;
}

static int set_item(PyObject *d, PyObject *key, PyObject *value)
{
    if (value == NULL)
        return -1;
    int rc = PyDict_SetItem(d, key, value);
    Py_DECREF(value);
    return rc;
}

/* The record of one line: a new dict, NULL with no error set when the line is the
   reference's, NULL with an error set on failure. */
static PyObject *record_of(PyObject *body, int timed)
{
    Fields f;
    double rt = 0, urt = 0;
    if (!split_line(PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body), &f))
        return NULL;
    if (timed && !f.has_rt)
        return NULL;
    int rt_none = !f.has_rt || is_dash(f.rt);
    int urt_none = !f.has_urt || is_dash(f.urt);
    if ((!rt_none && !to_double(f.rt, &rt)) || (!urt_none && !to_double(f.urt, &urt)))
        return NULL;
    if (!is_dash(f.size) && f.size.n > 18)
        return NULL;
    int ok = convert_time(f.time_local);
    if (ok <= 0)
        return NULL;

    /* request.split(" "): three parts, two, or the whole request as the path */
    Span method = {0}, path = f.request, protocol = {0};
    int spaces = 0;
    const char *first = NULL, *second = NULL;
    for (Py_ssize_t i = 0; i < f.request.n; i++) {
        if (f.request.p[i] == ' ') {
            if (++spaces == 1)
                first = f.request.p + i;
            else if (spaces == 2)
                second = f.request.p + i;
        }
    }
    int parts = spaces + 1;
    if (parts == 2 || parts == 3) {
        method.p = f.request.p;
        method.n = first - f.request.p;
        path.p = first + 1;
        path.n = (parts == 3 ? second : f.request.p + f.request.n) - path.p;
        if (parts == 3) {
            protocol.p = second + 1;
            protocol.n = f.request.p + f.request.n - protocol.p;
        }
    }
    long long size = 0;
    for (Py_ssize_t i = 0; !is_dash(f.size) && i < f.size.n; i++)
        size = size * 10 + (f.size.p[i] - '0');
    int status = (f.status.p[0] - '0') * 100 + (f.status.p[1] - '0') * 10 + (f.status.p[2] - '0');

    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    if (set_item(d, k_time, Py_NewRef(cached_iso)) < 0 ||
        set_item(d, k_ts, Py_NewRef(cached_ts)) < 0 ||
        set_item(d, k_client, text(f.client)) < 0 ||
        set_item(d, k_user, text_or_none(f.user)) < 0 ||
        set_item(d, k_method, method.p != NULL ? text(method) : Py_NewRef(Py_None)) < 0 ||
        set_item(d, k_path, text(path)) < 0 ||
        set_item(d, k_protocol, protocol.p != NULL ? text(protocol) : Py_NewRef(Py_None)) < 0 ||
        set_item(d, k_status, PyLong_FromLong(status)) < 0 ||
        set_item(d, k_bytes, PyLong_FromLongLong(size)) < 0 ||
        set_item(d, k_referrer, text_or_none(f.referrer)) < 0 ||
        set_item(d, k_user_agent, text_or_none(f.agent)) < 0 ||
        set_item(d, k_request_time, rt_none ? Py_NewRef(Py_None) : PyFloat_FromDouble(rt)) < 0 ||
        set_item(d, k_upstream, urt_none ? Py_NewRef(Py_None) : PyFloat_FromDouble(urt)) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *parse_combined(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *events;
    int timed;
    if (!PyArg_ParseTuple(args, "O!p", &PyList_Type, &events, &timed))
        return NULL;
    PyObject *left = PyList_New(0);
    if (left == NULL)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(events);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyList_GET_ITEM(events, i);
        PyObject *body = PyObject_GetAttr(e, s_body);
        if (body == NULL)
            goto fail;
        PyObject *rec = PyBytes_CheckExact(body) ? record_of(body, timed) : NULL;
        Py_DECREF(body);
        if (rec == NULL) {
            if (PyErr_Occurred())
                goto fail;
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL || PyList_Append(left, index) < 0) {
                Py_XDECREF(index);
                goto fail;
            }
            Py_DECREF(index);
            continue;
        }
        PyObject *ts = PyDict_GetItemWithError(rec, k_ts); /* borrowed */
        int rc = ts == NULL ? -1 : PyObject_SetAttr(e, s_record, rec);
        if (rc == 0)
            rc = PyObject_SetAttr(e, s_time, ts);
        Py_DECREF(rec);
        if (rc < 0)
            goto fail;
    }
    return left;
fail:
    Py_DECREF(left);
    return NULL;
}

static PyMethodDef methods[] = {
    {"parse_combined", parse_combined, METH_VARARGS,
     "parse_combined(events, timed) -> indices of the events left to the reference parser"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_parse", "nginx combined lines -> records, in C", -1, methods,
};

#define INTERN(var, s)                                                                            \
    if ((var = PyUnicode_InternFromString(s)) == NULL)                                            \
        return NULL;

PyMODINIT_FUNC PyInit__parse(void)
{
    INTERN(s_body, "body");
    INTERN(s_record, "record");
    INTERN(s_time, "time");
    INTERN(k_time, "time");
    INTERN(k_ts, "ts");
    INTERN(k_client, "client");
    INTERN(k_user, "user");
    INTERN(k_method, "method");
    INTERN(k_path, "path");
    INTERN(k_protocol, "protocol");
    INTERN(k_status, "status");
    INTERN(k_bytes, "bytes");
    INTERN(k_referrer, "referrer");
    INTERN(k_user_agent, "user_agent");
    INTERN(k_request_time, "request_time");
    INTERN(k_upstream, "upstream_response_time");
    return PyModule_Create(&module);
}
