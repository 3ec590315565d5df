/* Compiled twin of odradek.client's record hot paths (pure-Python twins in _records.py and
 * columnar.py, same results; tests compare them).
 *
 *   murmur2(bytes) -> int                          Kafka's murmur2 (signed int32)
 *   encode_records(records, base_ts) -> (bytes, count, max_ts)
 *        records: list of (key|None, value|None, headers|None, timestamp_ms)
 *   decode_records(topic, partition, data, min_offset, record_cls, decompress) -> (list, next_offset)
 *        control batches skipped; compressed batches via decompress(codec, memoryview) -> bytes
 *   columnar(data, start, end, include_headers, decompress) -> dict of buffers (see columnar.py)
 *
 * Build: python -m odradek.client._build (gcc, no other dependency).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---------- growable buffer (backed by a bytearray: handed to Arrow without a copy) ---------- */
typedef struct { char *p; size_t len, cap; PyObject *obj; } buf_t;

static int buf_reserve(buf_t *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    if (!b->obj) {
        b->obj = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)cap);
        if (!b->obj) return -1;
    } else if (PyByteArray_Resize(b->obj, (Py_ssize_t)cap) < 0) return -1;
    b->p = PyByteArray_AS_STRING(b->obj); b->cap = cap; return 0;
}
static inline int buf_put(buf_t *b, const void *src, size_t n) {
    if (b->len + n > b->cap && buf_reserve(b, n) < 0) return -1;
    memcpy(b->p + b->len, src, n); b->len += n; return 0;
}
static void buf_free(buf_t *b) { Py_CLEAR(b->obj); b->p = NULL; b->len = b->cap = 0; }
/* the buffer's contents as a bytearray (new reference); the buffer is reset */
static PyObject *buf_to_bytes(buf_t *b) {
    PyObject *o = b->obj;
    if (!o) return PyByteArray_FromStringAndSize("", 0);
    if (PyByteArray_Resize(o, (Py_ssize_t)b->len) < 0) return NULL;
    b->obj = NULL; b->p = NULL; b->len = b->cap = 0;
    return o;
}

/* ---------- varints ---------- */
static inline int put_varint(char *out, int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    int n = 0;
    while (z >= 0x80) { out[n++] = (char)((z & 0x7F) | 0x80); z >>= 7; }
    out[n++] = (char)z;
    return n;
}
static inline int varint_len(int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    int n = 1; while (z >= 0x80) { z >>= 7; n++; } return n;
}
/* returns 0 on success, -1 on overrun */
static inline int get_varint(const unsigned char *p, size_t end, size_t *pos, int64_t *out) {
    uint64_t r = 0; int shift = 0; size_t i = *pos;
    while (1) {
        if (i >= end || shift > 63) return -1;
        unsigned char b = p[i++];
        r |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) break;
        shift += 7;
    }
    *pos = i;
    *out = (int64_t)((r >> 1) ^ (~(r & 1) + 1));
    return 0;
}
static inline int64_t rd64(const unsigned char *p) {
    uint64_t v = 0; for (int i = 0; i < 8; i++) v = (v << 8) | p[i]; return (int64_t)v;
}
static inline int32_t rd32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}
static inline int16_t rd16(const unsigned char *p) { return (int16_t)(((uint16_t)p[0] << 8) | p[1]); }

/* ---------- murmur2 ---------- */
static int32_t murmur2_impl(const unsigned char *data, Py_ssize_t length) {
    const uint32_t m = 0x5bd1e995; const int r = 24;
    uint32_t h = 0x9747b28cU ^ (uint32_t)length;
    Py_ssize_t l4 = length / 4;
    for (Py_ssize_t i = 0; i < l4; i++) {
        Py_ssize_t i4 = i * 4;
        uint32_t k = (uint32_t)data[i4] | ((uint32_t)data[i4 + 1] << 8) | ((uint32_t)data[i4 + 2] << 16) | ((uint32_t)data[i4 + 3] << 24);
        k *= m; k ^= k >> r; k *= m; h *= m; h ^= k;
    }
    Py_ssize_t idx = length & ~3;
    switch (length % 4) {
        case 3: h ^= (uint32_t)data[idx + 2] << 16; /* fall through */
        case 2: h ^= (uint32_t)data[idx + 1] << 8;  /* fall through */
        case 1: h ^= data[idx]; h *= m;
    }
    h ^= h >> 13; h *= m; h ^= h >> 15;
    return (int32_t)h;
}

static PyObject *py_murmur2(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    int32_t h = murmur2_impl(view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLong(h);
}

/* ---------- encode ---------- */
static int bytes_or_none(PyObject *o, const char **p, Py_ssize_t *n) {
    if (o == Py_None) { *p = NULL; *n = -1; return 0; }
    if (PyBytes_Check(o)) { *p = PyBytes_AS_STRING(o); *n = PyBytes_GET_SIZE(o); return 0; }
    PyErr_SetString(PyExc_TypeError, "key, value and header values must be bytes or None");
    return -1;
}

static PyObject *py_encode_records(PyObject *self, PyObject *args) {
    PyObject *records; long long base_ts;
    if (!PyArg_ParseTuple(args, "OL", &records, &base_ts)) return NULL;
    PyObject *seq = PySequence_Fast(records, "records must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    buf_t out = {0};
    int64_t max_ts = base_ts;
    char tmp[10];
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *rec = items[i];
        if (!PyTuple_Check(rec) || PyTuple_GET_SIZE(rec) != 4) { PyErr_SetString(PyExc_TypeError, "record must be a 4-tuple"); goto fail; }
        const char *k, *v; Py_ssize_t kn, vn;
        if (bytes_or_none(PyTuple_GET_ITEM(rec, 0), &k, &kn) < 0) goto fail;
        if (bytes_or_none(PyTuple_GET_ITEM(rec, 1), &v, &vn) < 0) goto fail;
        PyObject *hdrs = PyTuple_GET_ITEM(rec, 2);
        long long ts = PyLong_AsLongLong(PyTuple_GET_ITEM(rec, 3));
        if (ts == -1 && PyErr_Occurred()) goto fail;
        if (ts > max_ts) max_ts = ts;
        Py_ssize_t nh = 0;
        PyObject *hseq = NULL;
        if (hdrs != Py_None) {
            hseq = PySequence_Fast(hdrs, "headers must be a sequence");
            if (!hseq) goto fail;
            nh = PySequence_Fast_GET_SIZE(hseq);
        }
        /* body size */
        size_t body = 1 + varint_len(ts - base_ts) + varint_len(i);
        body += kn < 0 ? 1 : varint_len(kn) + kn;
        body += vn < 0 ? 1 : varint_len(vn) + vn;
        body += varint_len(nh);
        for (Py_ssize_t j = 0; j < nh; j++) {
            PyObject *h = PySequence_Fast_GET_ITEM(hseq, j);
            if (!PyTuple_Check(h) || PyTuple_GET_SIZE(h) != 2) { Py_DECREF(hseq); PyErr_SetString(PyExc_TypeError, "header must be (str, bytes)"); goto fail; }
            Py_ssize_t hkn; const char *hk;
            PyObject *hko = PyTuple_GET_ITEM(h, 0);
            if (PyUnicode_Check(hko)) { hk = PyUnicode_AsUTF8AndSize(hko, &hkn); if (!hk) { Py_DECREF(hseq); goto fail; } }
            else if (bytes_or_none(hko, &hk, &hkn) < 0 || hkn < 0) { Py_DECREF(hseq); goto fail; }
            const char *hv = NULL; Py_ssize_t hvn = -1;
            if (bytes_or_none(PyTuple_GET_ITEM(h, 1), &hv, &hvn) < 0) { Py_DECREF(hseq); goto fail; }
            body += varint_len(hkn) + hkn + (hvn < 0 ? 1 : varint_len(hvn) + hvn);
        }
        if (buf_reserve(&out, body + 10) < 0) { Py_XDECREF(hseq); goto fail; }
        char *w = out.p + out.len;
        w += put_varint(w, (int64_t)body);
        *w++ = 0;
        w += put_varint(w, ts - base_ts);
        w += put_varint(w, i);
        if (kn < 0) *w++ = 1; else { w += put_varint(w, kn); memcpy(w, k, kn); w += kn; }
        if (vn < 0) *w++ = 1; else { w += put_varint(w, vn); memcpy(w, v, vn); w += vn; }
        w += put_varint(w, nh);
        for (Py_ssize_t j = 0; j < nh; j++) {
            PyObject *h = PySequence_Fast_GET_ITEM(hseq, j);
            Py_ssize_t hkn; const char *hk;
            PyObject *hko = PyTuple_GET_ITEM(h, 0);
            if (PyUnicode_Check(hko)) hk = PyUnicode_AsUTF8AndSize(hko, &hkn); else { hk = PyBytes_AS_STRING(hko); hkn = PyBytes_GET_SIZE(hko); }
            const char *hv = NULL; Py_ssize_t hvn = -1;
            bytes_or_none(PyTuple_GET_ITEM(h, 1), &hv, &hvn);
            w += put_varint(w, hkn); memcpy(w, hk, hkn); w += hkn;
            if (hvn < 0) *w++ = 1; else { w += put_varint(w, hvn); memcpy(w, hv, hvn); w += hvn; }
        }
        out.len = w - out.p;
        Py_XDECREF(hseq);
        (void)tmp;
    }
    Py_DECREF(seq);
    PyObject *bytes = PyBytes_FromStringAndSize(out.p ? out.p : "", (Py_ssize_t)out.len);
    buf_free(&out);
    if (!bytes) return NULL;
    return Py_BuildValue("(NnL)", bytes, n, (long long)max_ts);
fail:
    Py_DECREF(seq);
    buf_free(&out);
    return NULL;
}

/* ---------- batch iteration shared by the decoders ---------- */
typedef struct {
    int64_t base_offset; int32_t batch_length; int32_t leader_epoch; int8_t magic;
    int16_t attributes; int32_t last_offset_delta; int64_t base_ts; int64_t max_ts;
    int64_t producer_id; int32_t count;
} batch_hdr;

static void read_hdr(const unsigned char *p, batch_hdr *h) {
    h->base_offset = rd64(p); h->batch_length = rd32(p + 8); h->leader_epoch = rd32(p + 12);
    h->magic = (int8_t)p[16]; h->attributes = rd16(p + 21); h->last_offset_delta = rd32(p + 23);
    h->base_ts = rd64(p + 27); h->max_ts = rd64(p + 35); h->producer_id = rd64(p + 43);
    h->count = rd32(p + 57);
}

/* Get the uncompressed record section of a batch; *owner receives a new reference (or NULL). */
static int batch_records(PyObject *data_obj, const unsigned char *base, size_t pos, size_t end, int codec,
                         PyObject *decompress, const unsigned char **rp, size_t *rlen, PyObject **owner) {
    *owner = NULL;
    if (!codec) { *rp = base + pos + 61; *rlen = end - (pos + 61); return 0; }
    PyObject *mv = PyMemoryView_FromObject(data_obj);
    if (!mv) return -1;
    PyObject *slice = PySequence_GetSlice(mv, (Py_ssize_t)(pos + 61), (Py_ssize_t)end);
    Py_DECREF(mv);
    if (!slice) return -1;
    PyObject *raw = PyObject_CallFunction(decompress, "iO", codec, slice);
    Py_DECREF(slice);
    if (!raw) return -1;
    if (!PyBytes_Check(raw)) { Py_DECREF(raw); PyErr_SetString(PyExc_TypeError, "decompress must return bytes"); return -1; }
    *rp = (const unsigned char *)PyBytes_AS_STRING(raw); *rlen = PyBytes_GET_SIZE(raw); *owner = raw;
    return 0;
}

#define CORRUPT() do { PyErr_SetString(PyExc_ValueError, "corrupt record batch"); goto fail; } while (0)

/* ---------- decode to ConsumerRecord rows ---------- */
static PyObject *py_decode_records(PyObject *self, PyObject *args) {
    PyObject *topic, *data_obj, *record_cls, *decompress; long partition; long long min_offset;
    if (!PyArg_ParseTuple(args, "UlOLOO", &topic, &partition, &data_obj, &min_offset, &record_cls, &decompress)) return NULL;
    if (!PyType_Check(record_cls)) { PyErr_SetString(PyExc_TypeError, "record_cls must be a type"); return NULL; }
    PyTypeObject *cls = (PyTypeObject *)record_cls;
    Py_buffer view;
    if (PyObject_GetBuffer(data_obj, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *base = view.buf; size_t n = (size_t)view.len, pos = 0;
    PyObject *out = PyList_New(0), *py_part = PyLong_FromLong(partition), *owner = NULL;
    int64_t next_offset = min_offset;
    if (!out || !py_part) goto fail;
    while (pos + 61 <= n) {
        batch_hdr h; read_hdr(base + pos, &h);
        size_t end = pos + 12 + (size_t)h.batch_length;
        if (h.batch_length < 49 || end > n) break;
        int64_t last = h.base_offset + h.last_offset_delta;
        if (last < min_offset) { pos = end; continue; }
        next_offset = last + 1;
        if (h.magic != 2) { PyErr_SetString(PyExc_ValueError, "unsupported record batch magic"); goto fail; }
        if (h.attributes & 0x20) { pos = end; continue; }  /* control batch */
        int codec = h.attributes & 7, tstype = (h.attributes >> 3) & 1;
        const unsigned char *rp; size_t rlen;
        if (batch_records(data_obj, base, pos, end, codec, decompress, &rp, &rlen, &owner) < 0) goto fail;
        size_t q = 0;
        PyObject *py_ep = PyLong_FromLong(h.leader_epoch);
        if (!py_ep) goto fail;
        for (int32_t i = 0; i < h.count && q < rlen; i++) {
            int64_t len, tsd, offd, kl, vl, nh;
            if (get_varint(rp, rlen, &q, &len) < 0) { Py_DECREF(py_ep); CORRUPT(); }
            size_t next = q + (size_t)len;
            if (len < 0 || next > rlen) { Py_DECREF(py_ep); CORRUPT(); }
            q++;
            if (get_varint(rp, next, &q, &tsd) < 0 || get_varint(rp, next, &q, &offd) < 0 || get_varint(rp, next, &q, &kl) < 0) { Py_DECREF(py_ep); CORRUPT(); }
            if (kl > (int64_t)(next - q)) { Py_DECREF(py_ep); CORRUPT(); }
            const unsigned char *kp = rp + q; if (kl > 0) q += kl;
            if (get_varint(rp, next, &q, &vl) < 0 || vl > (int64_t)(next - q)) { Py_DECREF(py_ep); CORRUPT(); }
            const unsigned char *vp = rp + q; if (vl > 0) q += vl;
            if (get_varint(rp, next, &q, &nh) < 0) { Py_DECREF(py_ep); CORRUPT(); }
            int64_t offset = h.base_offset + offd;
            if (offset < min_offset) { q = next; continue; }
            PyObject *headers = PyList_New(0);
            if (!headers) { Py_DECREF(py_ep); goto fail; }
            for (int64_t j = 0; j < nh; j++) {
                int64_t hkl, hvl;
                if (get_varint(rp, next, &q, &hkl) < 0 || hkl < 0 || hkl > (int64_t)(next - q)) { Py_DECREF(headers); Py_DECREF(py_ep); CORRUPT(); }
                PyObject *hk = PyUnicode_DecodeUTF8((const char *)rp + q, hkl, "replace"); q += hkl;
                if (!hk) { Py_DECREF(headers); Py_DECREF(py_ep); goto fail; }
                if (get_varint(rp, next, &q, &hvl) < 0 || hvl > (int64_t)(next - q)) { Py_DECREF(hk); Py_DECREF(headers); Py_DECREF(py_ep); CORRUPT(); }
                PyObject *hv;
                if (hvl < 0) { hv = Py_None; Py_INCREF(hv); } else { hv = PyBytes_FromStringAndSize((const char *)rp + q, hvl); q += hvl; }
                PyObject *pair = hv ? PyTuple_Pack(2, hk, hv) : NULL;
                Py_DECREF(hk); Py_XDECREF(hv);
                if (!pair || PyList_Append(headers, pair) < 0) { Py_XDECREF(pair); Py_DECREF(headers); Py_DECREF(py_ep); goto fail; }
                Py_DECREF(pair);
            }
            PyObject *rec = cls->tp_alloc(cls, 9);
            if (!rec) { Py_DECREF(headers); Py_DECREF(py_ep); goto fail; }
            Py_INCREF(topic); PyTuple_SET_ITEM(rec, 0, topic);
            Py_INCREF(py_part); PyTuple_SET_ITEM(rec, 1, py_part);
            PyTuple_SET_ITEM(rec, 2, PyLong_FromLongLong(offset));
            PyTuple_SET_ITEM(rec, 3, PyLong_FromLongLong(tstype ? h.max_ts : h.base_ts + tsd));
            PyTuple_SET_ITEM(rec, 4, PyLong_FromLong(tstype));
            if (kl < 0) { Py_INCREF(Py_None); PyTuple_SET_ITEM(rec, 5, Py_None); }
            else PyTuple_SET_ITEM(rec, 5, PyBytes_FromStringAndSize((const char *)kp, kl));
            if (vl < 0) { Py_INCREF(Py_None); PyTuple_SET_ITEM(rec, 6, Py_None); }
            else PyTuple_SET_ITEM(rec, 6, PyBytes_FromStringAndSize((const char *)vp, vl));
            PyTuple_SET_ITEM(rec, 7, headers);
            Py_INCREF(py_ep); PyTuple_SET_ITEM(rec, 8, py_ep);
            for (int f = 2; f < 7; f++) if (!PyTuple_GET_ITEM(rec, f)) { Py_DECREF(rec); Py_DECREF(py_ep); goto fail; }
            /* Records hold only str/int/bytes and a list of (str, bytes) pairs: they cannot form
             * reference cycles, so keep them out of the cyclic GC (it would otherwise traverse
             * every buffered record on each collection: 4 us/record instead of 0.6). */
            PyObject_GC_UnTrack(headers);
            PyObject_GC_UnTrack(rec);
            int rc = PyList_Append(out, rec);
            Py_DECREF(rec);
            if (rc < 0) { Py_DECREF(py_ep); goto fail; }
            q = next;
        }
        Py_DECREF(py_ep);
        Py_CLEAR(owner);
        pos = end;
    }
    PyBuffer_Release(&view);
    Py_DECREF(py_part);
    return Py_BuildValue("(NL)", out, (long long)next_offset);
fail:
    Py_XDECREF(owner);
    PyBuffer_Release(&view);
    Py_XDECREF(out); Py_XDECREF(py_part);
    return NULL;
}

/* ---------- columnar ---------- */
typedef struct { buf_t offsets, data, validity; int64_t nulls, n; } bincol;

static int bitmap_push(buf_t *bm, int64_t idx, int valid) {
    if ((idx & 7) == 0) { char z = 0; if (buf_put(bm, &z, 1) < 0) return -1; }
    if (valid) bm->p[idx >> 3] |= (char)(1 << (idx & 7));
    return 0;
}
static int bincol_push(bincol *c, const unsigned char *p, int64_t len) {
    int32_t off;
    if (c->n == 0) { off = 0; if (buf_put(&c->offsets, &off, 4) < 0) return -1; }
    if (len >= 0) { if (buf_put(&c->data, p, (size_t)len) < 0) return -1; } else c->nulls++;
    if (c->data.len > INT32_MAX) { PyErr_SetString(PyExc_OverflowError, "binary column over 2 GiB"); return -1; }
    off = (int32_t)c->data.len;
    if (buf_put(&c->offsets, &off, 4) < 0) return -1;
    if (bitmap_push(&c->validity, c->n, len >= 0) < 0) return -1;
    c->n++;
    return 0;
}
static void bincol_free(bincol *c) { buf_free(&c->offsets); buf_free(&c->data); buf_free(&c->validity); }
static PyObject *bincol_dict(bincol *c) {
    if (c->n == 0) { int32_t z = 0; buf_put(&c->offsets, &z, 4); }
    return Py_BuildValue("{s:N,s:N,s:N,s:L,s:L}", "offsets", buf_to_bytes(&c->offsets), "data", buf_to_bytes(&c->data),
                         "validity", buf_to_bytes(&c->validity), "null_count", (long long)c->nulls, "length", (long long)c->n);
}

static PyObject *py_columnar(PyObject *self, PyObject *args) {
    PyObject *data_obj, *decompress; long long start, end_off; int include_headers;
    if (!PyArg_ParseTuple(args, "OLLpO", &data_obj, &start, &end_off, &include_headers, &decompress)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(data_obj, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *base = view.buf; size_t n = (size_t)view.len, pos = 0;
    bincol key = {0}, val = {0}, hkey = {0}, hval = {0};
    buf_t offs = {0}, tss = {0}, tst = {0}, hlist = {0};
    int64_t rows = 0, next_offset = start, nheaders = 0;
    PyObject *owner = NULL;
    /* fast path reservation: assume ~100-byte records */
    if (buf_reserve(&offs, n / 8 + 64) < 0 || buf_reserve(&tss, n / 8 + 64) < 0 || buf_reserve(&tst, n / 16 + 64) < 0) goto fail;
    if (buf_reserve(&val.data, n) < 0 || buf_reserve(&val.offsets, n / 16 + 64) < 0 || buf_reserve(&key.offsets, n / 16 + 64) < 0) goto fail;
    if (include_headers) { int32_t z = 0; if (buf_put(&hlist, &z, 4) < 0) goto fail; }
    while (pos + 61 <= n) {
        batch_hdr h; read_hdr(base + pos, &h);
        size_t end = pos + 12 + (size_t)h.batch_length;
        if (h.batch_length < 49 || end > n) break;
        int64_t last = h.base_offset + h.last_offset_delta;
        if (h.base_offset >= end_off) break;
        if (last < start) { pos = end; continue; }
        next_offset = last + 1;
        if (h.magic != 2) { PyErr_SetString(PyExc_ValueError, "unsupported record batch magic"); goto fail; }
        if (h.attributes & 0x20) { pos = end; continue; }
        int codec = h.attributes & 7; int32_t tstype = (h.attributes >> 3) & 1;
        const unsigned char *rp; size_t rlen;
        if (batch_records(data_obj, base, pos, end, codec, decompress, &rp, &rlen, &owner) < 0) goto fail;
        size_t q = 0;
        for (int32_t i = 0; i < h.count && q < rlen; i++) {
            int64_t len, tsd, offd, kl, vl, nh;
            if (get_varint(rp, rlen, &q, &len) < 0) CORRUPT();
            size_t next = q + (size_t)len;
            if (len < 0 || next > rlen) CORRUPT();
            q++;
            if (get_varint(rp, next, &q, &tsd) < 0 || get_varint(rp, next, &q, &offd) < 0 || get_varint(rp, next, &q, &kl) < 0) CORRUPT();
            if (kl > (int64_t)(next - q)) CORRUPT();
            const unsigned char *kp = rp + q; if (kl > 0) q += kl;
            if (get_varint(rp, next, &q, &vl) < 0 || vl > (int64_t)(next - q)) CORRUPT();
            const unsigned char *vp = rp + q; if (vl > 0) q += vl;
            int64_t offset = h.base_offset + offd;
            if (offset < start || offset >= end_off) { q = next; continue; }
            if (bincol_push(&key, kp, kl) < 0 || bincol_push(&val, vp, vl) < 0) goto fail;
            int64_t ts_us = (tstype ? h.max_ts : h.base_ts + tsd) * 1000;
            if (buf_put(&offs, &offset, 8) < 0 || buf_put(&tss, &ts_us, 8) < 0 || buf_put(&tst, &tstype, 4) < 0) goto fail;
            if (include_headers) {
                if (get_varint(rp, next, &q, &nh) < 0 || nh < 0) CORRUPT();
                for (int64_t j = 0; j < nh; j++) {
                    int64_t hkl, hvl;
                    if (get_varint(rp, next, &q, &hkl) < 0 || hkl < 0 || hkl > (int64_t)(next - q)) CORRUPT();
                    if (bincol_push(&hkey, rp + q, hkl) < 0) goto fail;
                    q += hkl;
                    if (get_varint(rp, next, &q, &hvl) < 0 || hvl > (int64_t)(next - q)) CORRUPT();
                    if (bincol_push(&hval, rp + q, hvl) < 0) goto fail;
                    if (hvl > 0) q += hvl;
                }
                nheaders += nh;
                int32_t lo = (int32_t)nheaders;
                if (buf_put(&hlist, &lo, 4) < 0) goto fail;
            }
            rows++;
            q = next;
        }
        Py_CLEAR(owner);
        pos = end;
    }
    PyBuffer_Release(&view);
    PyObject *res = Py_BuildValue("{s:L,s:L,s:N,s:N,s:N,s:N,s:N}", "rows", (long long)rows, "next_offset", (long long)next_offset,
                                  "key", bincol_dict(&key), "value", bincol_dict(&val),
                                  "offset", buf_to_bytes(&offs), "timestamp", buf_to_bytes(&tss), "timestamp_type", buf_to_bytes(&tst));
    if (res && include_headers) {
        PyObject *hd = Py_BuildValue("{s:N,s:N,s:N}", "list_offsets", buf_to_bytes(&hlist), "key", bincol_dict(&hkey), "value", bincol_dict(&hval));
        if (!hd || PyDict_SetItemString(res, "headers", hd) < 0) { Py_XDECREF(hd); Py_CLEAR(res); }
        else Py_DECREF(hd);
    }
    bincol_free(&key); bincol_free(&val); bincol_free(&hkey); bincol_free(&hval);
    buf_free(&offs); buf_free(&tss); buf_free(&tst); buf_free(&hlist);
    return res;
fail:
    Py_XDECREF(owner);
    PyBuffer_Release(&view);
    bincol_free(&key); bincol_free(&val); bincol_free(&hkey); bincol_free(&hval);
    buf_free(&offs); buf_free(&tss); buf_free(&tst); buf_free(&hlist);
    return NULL;
}

static PyObject *py_iota32(PyObject *self, PyObject *args) {
    Py_ssize_t n; long step;
    if (!PyArg_ParseTuple(args, "nl", &n, &step)) return NULL;
    PyObject *o = PyByteArray_FromStringAndSize(NULL, (n + 1) * 4);
    if (!o) return NULL;
    int32_t *p = (int32_t *)PyByteArray_AS_STRING(o);
    for (Py_ssize_t i = 0; i <= n; i++) p[i] = (int32_t)(i * step);
    return o;
}

static PyMethodDef methods[] = {
    {"iota32", py_iota32, METH_VARARGS, "int32 buffer 0, step, 2*step, ... (n+1 values)."},
    {"murmur2", py_murmur2, METH_O, "Kafka's murmur2 of a bytes-like object (signed int32)."},
    {"encode_records", py_encode_records, METH_VARARGS, "Encode records into a v2 record section."},
    {"decode_records", py_decode_records, METH_VARARGS, "Decode batches into record tuples."},
    {"columnar", py_columnar, METH_VARARGS, "Decode batches into Arrow-ready column buffers."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&moduledef); }
