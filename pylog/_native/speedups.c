/*
 * pylog._speedups: the two hot loops of Kafka's record format v2, in C.
 *
 *   encode_records(values, keys, ts_deltas[, reserve[, ts_base]]) -> bytes
 *       Concatenated v2 records with offset deltas 0..n-1 and no headers (keys None: each
 *       of values is a value or a (key, value) tuple); each timestamp
 *       delta is ts_deltas[i] - ts_base: given ts_base, ts_deltas holds the timestamps
 *       themselves (ints >= -1, else TypeError / OverflowError naming the record).
 *   encode_batch(records, base_offset, partition_leader_epoch, attributes, base_timestamp,
 *                max_timestamp, producer_id, producer_epoch, base_sequence) -> bytearray
 *       One uncompressed v2 batch: the 61-byte header (its CRC left 0 for the caller to fill)
 *       and the records of encode_records, every one stamped base_timestamp (delta 0);
 *       records holds values or (key, value) tuples (TypeError for anything else).
 *   scan_records(buf, count) -> tuple of 8 bytes objects (native int64/int32 arrays)
 *       Positions and lengths of every record's fields, for a columnar decode.
 *   scan_columns(parts) -> tuple of 8 bytes objects
 *       The columnar decode of v2 batches: offsets, timestamps and keys and values copied into
 *       Arrow's binary layout (data of their exact size, int32 offsets, a valid byte each).
 *   scan_arrow(parts, outs, fill) -> None
 *       scan_columns' decode into Arrow buffers the caller allocated (pyarrow's memory pool), from
 *       the row and data positions ``fill`` holds on: a fetch is decoded chunk by chunk into one set.
 *   scan_batches(view, position, bounds, walk, crc) -> (used, other, parts)
 *       The whole batches of a read walked, headers, offsets and CRCs, into the parts the two scans
 *       take, in one call; stops at a batch for the general path (legacy, compressed, a fault).
 *   decode_records(buf, count, base_offset, base_timestamp, append_time, record_type[, topic,
 *                  partition, timestamp_type]) -> list
 *       Record objects (with headers), for the object decode: of this module's Record type
 *       (or a subclass adding no field and no constructor) built here, of any other class
 *       by calling it.
 *   Record
 *       pylog.record.Record (a C type with the attributes and behaviour of the pure-Python
 *       class in pylog/record/record.py).
 *   freed_as_record(cls) -> cls
 *       Instances of cls (a subclass of Record adding no field, without __del__) freed as Record's.
 *   segment_names(names, suffixes) -> list of lists of int
 *       For each suffix, the base offsets of the names "<20 digits><suffix>", in listing order.
 *
 * Layout reference: docs/format/batch.md. Every read is bounds-checked; a malformed
 * input raises ValueError with a message the caller turns into InvalidRecordError.
 * pylog works without this module (pure-Python fallbacks); it only makes it faster.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t zz64(int64_t n) { return ((uint64_t)n << 1) ^ (uint64_t)(n >> 63); }

static inline int varint_size(uint64_t v) {
    int n = 1;
    while (v >= 0x80) { v >>= 7; n++; }
    return n;
}

static inline char *put_varint(char *p, uint64_t v) {
    while (v >= 0x80) { *p++ = (char)((v & 0x7F) | 0x80); v >>= 7; }
    *p++ = (char)v;
    return p;
}

/* A zigzag varint of at most max_bytes at *pp (below lim), moving *pp past it; one- and two-byte
 * varints (most lengths and deltas) without a loop. 0 on success, -1 when it runs off the end, -2
 * when it is longer than max_bytes. */
static inline int get_varint(const unsigned char **pp, const unsigned char *lim, int max_bytes, int64_t *out) {
    const unsigned char *p = *pp;
    if (p < lim && p[0] < 0x80) {
        *out = (int64_t)(p[0] >> 1) ^ -(int64_t)(p[0] & 1);
        *pp = p + 1;
        return 0;
    }
    if (p + 1 < lim && p[1] < 0x80) {
        uint64_t v = (uint64_t)(p[0] & 0x7F) | ((uint64_t)p[1] << 7);
        *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
        *pp = p + 2;
        return 0;
    }
    uint64_t value = 0;
    int shift = 0;
    for (int k = 0; k < max_bytes; k++) {
        if (p >= lim) return -1;
        unsigned char b = *p++;
        value |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *out = (int64_t)((value >> 1) ^ (~(value & 1) + 1));
            *pp = p;
            return 0;
        }
        shift += 7;
    }
    return -2;
}

static int bytes_or_none(PyObject *o, const char **data, Py_ssize_t *len) {
    if (o == Py_None) { *data = NULL; *len = -1; return 0; }
    if (PyBytes_Check(o)) { *data = PyBytes_AS_STRING(o); *len = PyBytes_GET_SIZE(o); return 0; }
    return -1;
}

/* Key and value of record i: keys[i] and values[i], or without keys a (key, value) tuple
 * in values (a plain value has no key); -1 when they are not bytes or None. */
static int record_at(PyObject *values, PyObject *keys, Py_ssize_t i, const char **kd, Py_ssize_t *kl,
                     const char **vd, Py_ssize_t *vl) {
    PyObject *v = PyList_GET_ITEM(values, i), *k = Py_None;
    if (keys != Py_None) k = PyList_GET_ITEM(keys, i);
    else if (PyTuple_CheckExact(v) && PyTuple_GET_SIZE(v) == 2) { k = PyTuple_GET_ITEM(v, 0); v = PyTuple_GET_ITEM(v, 1); }
    return bytes_or_none(v, vd, vl) < 0 || bytes_or_none(k, kd, kl) < 0 ? -1 : 0;
}

static PyObject *encode_records(PyObject *self, PyObject *args) {
    PyObject *values, *keys, *deltas;
    Py_ssize_t reserve = -1;   /* >= 0: return a bytearray with this many bytes free in front */
    long long ts_base = 0;     /* subtracted from each of ts_deltas */
    if (!PyArg_ParseTuple(args, "O!OO|nL", &PyList_Type, &values, &keys, &deltas, &reserve, &ts_base)) return NULL;
    int stamps = PyTuple_GET_SIZE(args) >= 5;   /* ts_deltas holds timestamps (ms, >= -1), checked here */
    Py_ssize_t n = PyList_GET_SIZE(values);
    if (keys != Py_None && (!PyList_Check(keys) || PyList_GET_SIZE(keys) != n)) {
        PyErr_SetString(PyExc_TypeError, "keys must be None or a list as long as values");
        return NULL;
    }
    if (deltas != Py_None && (!PyList_Check(deltas) || PyList_GET_SIZE(deltas) != n)) {
        PyErr_SetString(PyExc_TypeError, "ts_deltas must be None or a list as long as values");
        return NULL;
    }
    int64_t *tsd = NULL;
    if (deltas != Py_None) {
        tsd = PyMem_Malloc(sizeof(int64_t) * (n ? n : 1));
        if (!tsd) return PyErr_NoMemory();
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *t = PyList_GET_ITEM(deltas, i);
            if (stamps && !PyLong_CheckExact(t)) {   /* a bool or an int subclass is no timestamp */
                PyMem_Free(tsd);
                PyErr_Format(PyExc_TypeError, "record %zd: timestamp must be an int", i);
                return NULL;
            }
            tsd[i] = PyLong_AsLongLong(t);
            if (tsd[i] == -1 && PyErr_Occurred()) { PyMem_Free(tsd); return NULL; }
            if (stamps && tsd[i] < -1) {
                PyMem_Free(tsd);
                PyErr_Format(PyExc_OverflowError, "record %zd: timestamp %lld is below -1", i, (long long)tsd[i]);
                return NULL;
            }
            tsd[i] -= ts_base;
        }
    }
    /* pass 1: size */
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *kd, *vd; Py_ssize_t kl, vl;
        if (record_at(values, keys, i, &kd, &kl, &vd, &vl) < 0) {
            PyMem_Free(tsd);
            PyErr_Format(PyExc_TypeError, "record %zd: key and value must be bytes or None", i);
            return NULL;
        }
        Py_ssize_t body = 1 + varint_size(zz64(tsd ? tsd[i] : 0)) + varint_size(zz64(i))
                        + varint_size(zz64(kl)) + (kl > 0 ? kl : 0)
                        + varint_size(zz64(vl)) + (vl > 0 ? vl : 0) + 1;
        total += varint_size(zz64(body)) + body;
    }
    PyObject *out;
    char *p;
    if (reserve >= 0) {
        out = PyByteArray_FromStringAndSize(NULL, reserve + total);
        if (!out) { PyMem_Free(tsd); return NULL; }
        p = PyByteArray_AS_STRING(out);
        memset(p, 0, reserve);
        p += reserve;
    } else {
        out = PyBytes_FromStringAndSize(NULL, total);
        if (!out) { PyMem_Free(tsd); return NULL; }
        p = PyBytes_AS_STRING(out);
    }
    /* pass 2: write */
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *kd = NULL, *vd = NULL; Py_ssize_t kl = -1, vl = -1;
        record_at(values, keys, i, &kd, &kl, &vd, &vl);   /* checked in pass 1 */
        uint64_t zts = zz64(tsd ? tsd[i] : 0);
        Py_ssize_t body = 1 + varint_size(zts) + varint_size(zz64(i))
                        + varint_size(zz64(kl)) + (kl > 0 ? kl : 0)
                        + varint_size(zz64(vl)) + (vl > 0 ? vl : 0) + 1;
        p = put_varint(p, zz64(body));
        *p++ = 0;                                /* attributes */
        p = put_varint(p, zts);
        p = put_varint(p, zz64(i));
        p = put_varint(p, zz64(kl));
        if (kl > 0) { memcpy(p, kd, kl); p += kl; }
        p = put_varint(p, zz64(vl));
        if (vl > 0) { memcpy(p, vd, vl); p += vl; }
        *p++ = 0;                                /* header count */
    }
    PyMem_Free(tsd);
    return out;
}

/* encode_batch: a whole uncompressed v2 batch in one buffer, header first (docs/format/batch.md). */
typedef struct { const char *kd, *vd; Py_ssize_t kl, vl, body; } plain_rec_t;

static char *put_be(char *p, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; i--) { p[i] = (char)(v & 0xFF); v >>= 8; }
    return p + bytes;
}

static PyObject *encode_batch(PyObject *self, PyObject *args) {
    PyObject *records;
    long long base_offset, base_ts, max_ts, producer_id;
    int leader_epoch, attributes, base_sequence;
    short producer_epoch;
    if (!PyArg_ParseTuple(args, "O!LiiLLLhi", &PyList_Type, &records, &base_offset, &leader_epoch, &attributes,
                          &base_ts, &max_ts, &producer_id, &producer_epoch, &base_sequence)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(records);
    plain_rec_t *recs = PyMem_Malloc(sizeof(plain_rec_t) * (n ? n : 1));
    if (!recs) return PyErr_NoMemory();
    /* pass 1: each record's fields and size, read once from its objects */
    Py_ssize_t total = 61;
    for (Py_ssize_t i = 0; i < n; i++) {
        plain_rec_t *r = &recs[i];
        if (record_at(records, Py_None, i, &r->kd, &r->kl, &r->vd, &r->vl) < 0) {
            PyMem_Free(recs);
            PyErr_Format(PyExc_TypeError, "record %zd: key and value must be bytes or None", i);
            return NULL;
        }
        r->body = 1 + 1 + varint_size(zz64(i)) + varint_size(zz64(r->kl)) + (r->kl > 0 ? r->kl : 0)
                + varint_size(zz64(r->vl)) + (r->vl > 0 ? r->vl : 0) + 1;
        total += varint_size(zz64(r->body)) + r->body;
    }
    if (total - 12 > INT32_MAX) {
        PyMem_Free(recs);
        PyErr_SetString(PyExc_OverflowError, "batch larger than 2 GiB");
        return NULL;
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL, total);
    if (!out) { PyMem_Free(recs); return NULL; }
    char *p = PyByteArray_AS_STRING(out);
    p = put_be(p, (uint64_t)base_offset, 8);
    p = put_be(p, (uint64_t)(total - 12), 4);
    p = put_be(p, (uint64_t)(uint32_t)leader_epoch, 4);
    *p++ = 2;                                    /* magic */
    p = put_be(p, 0, 4);                         /* CRC: the caller's, over [21, end) */
    p = put_be(p, (uint64_t)(uint16_t)attributes, 2);
    p = put_be(p, (uint64_t)(uint32_t)(n ? n - 1 : 0), 4);
    p = put_be(p, (uint64_t)base_ts, 8);
    p = put_be(p, (uint64_t)max_ts, 8);
    p = put_be(p, (uint64_t)producer_id, 8);
    p = put_be(p, (uint64_t)(uint16_t)producer_epoch, 2);
    p = put_be(p, (uint64_t)(uint32_t)base_sequence, 4);
    p = put_be(p, (uint64_t)(uint32_t)n, 4);
    /* pass 2: the records, every timestamp delta 0 */
    for (Py_ssize_t i = 0; i < n; i++) {
        const plain_rec_t *r = &recs[i];
        p = put_varint(p, zz64(r->body));
        *p++ = 0;                                /* attributes */
        *p++ = 0;                                /* timestamp delta */
        p = put_varint(p, zz64(i));
        p = put_varint(p, zz64(r->kl));
        if (r->kl > 0) { memcpy(p, r->kd, r->kl); p += r->kl; }
        p = put_varint(p, zz64(r->vl));
        if (r->vl > 0) { memcpy(p, r->vd, r->vl); p += r->vl; }
        *p++ = 0;                                /* header count */
    }
    PyMem_Free(recs);
    return out;
}

/* Shared record walker: fills per-record fields; returns -1 with ValueError set on bad input. */
typedef struct {
    int64_t ts_delta; int64_t off_delta;
    Py_ssize_t key_pos, key_len, val_pos, val_len, hdr_pos, hdr_count, rec_end;
} rec_t;

/* The record at p (below end) parsed into r, positions relative to base; checked field by field
 * (lengths within the record, headers walked, nothing left over: ValueError naming the fault).
 * Returns the record's end, NULL on error. */
static inline __attribute__((always_inline)) const unsigned char *parse_record(const unsigned char *p, const unsigned char *end, rec_t *r,
                                         const unsigned char *base) {
    int64_t length, v;
    int rc;
    if ((rc = get_varint(&p, end, 5, &length))) goto bad_varint;
    if (length < 6 || length > end - p) {
        PyErr_Format(PyExc_ValueError, "invalid record size %lld at byte %zd of the records", (long long)length,
                     (Py_ssize_t)(p - base));
        return NULL;
    }
    const unsigned char *rec_end = p + length;
    p++;                                         /* attributes */
    if ((rc = get_varint(&p, rec_end, 10, &r->ts_delta))) goto bad_varint;
    if ((rc = get_varint(&p, rec_end, 5, &r->off_delta))) goto bad_varint;
    if ((rc = get_varint(&p, rec_end, 5, &v))) goto bad_varint;
    if (v < -1 || (v > 0 && v > rec_end - p)) {
        PyErr_Format(PyExc_ValueError, "invalid key length %lld", (long long)v); return NULL;
    }
    r->key_pos = p - base; r->key_len = (Py_ssize_t)v; if (v > 0) p += v;
    if ((rc = get_varint(&p, rec_end, 5, &v))) goto bad_varint;
    if (v < -1 || (v > 0 && v > rec_end - p)) {
        PyErr_Format(PyExc_ValueError, "invalid value length %lld", (long long)v); return NULL;
    }
    r->val_pos = p - base; r->val_len = (Py_ssize_t)v; if (v > 0) p += v;
    if ((rc = get_varint(&p, rec_end, 5, &v))) goto bad_varint;
    if (v < 0 || v > rec_end - p) {
        PyErr_Format(PyExc_ValueError, "invalid header count %lld", (long long)v); return NULL;
    }
    r->hdr_count = (Py_ssize_t)v; r->hdr_pos = p - base;
    for (int64_t h = 0; h < v; h++) {            /* skip headers, checking their lengths */
        int64_t hl;
        if ((rc = get_varint(&p, rec_end, 5, &hl))) goto bad_varint;
        if (hl < 0 || hl > rec_end - p) {
            PyErr_Format(PyExc_ValueError, "invalid header key length %lld", (long long)hl); return NULL;
        }
        p += hl;
        if ((rc = get_varint(&p, rec_end, 5, &hl))) goto bad_varint;
        if (hl < -1 || (hl > 0 && hl > rec_end - p)) {
            PyErr_Format(PyExc_ValueError, "invalid header value length %lld", (long long)hl); return NULL;
        }
        if (hl > 0) p += hl;
    }
    if (p != rec_end) {
        PyErr_Format(PyExc_ValueError, "invalid record size: expected to read %lld bytes but read %lld",
                     (long long)length, (long long)(length + (p - rec_end)));
        return NULL;
    }
    r->rec_end = rec_end - base;
    return rec_end;
bad_varint:
    if (rc == -2) PyErr_SetString(PyExc_ValueError, "varint is longer than its maximum size");
    else PyErr_SetString(PyExc_ValueError, "records end before the declared record count (premature EOF)");
    return NULL;
}

/* parse_record at byte *pos of buf (end bytes), moving *pos past the record; -1 on error. */
static int walk_record(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, rec_t *r) {
    const unsigned char *next = parse_record(buf + *pos, buf + end, r, buf);
    if (!next) return -1;
    *pos = next - buf;
    return 0;
}

static PyObject *scan_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n", &view, &count)) return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t end = view.len;
    if (count < 0 || count > end / 7) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "record count %zd does not fit in %zd bytes of records", count, end);
        return NULL;
    }
    PyObject *arrs[8] = {0};
    arrs[0] = PyBytes_FromStringAndSize(NULL, count * 8);   /* ts delta int64 */
    arrs[1] = PyBytes_FromStringAndSize(NULL, count * 8);   /* offset delta int64 */
    for (int k = 2; k < 8; k++) arrs[k] = PyBytes_FromStringAndSize(NULL, count * 4);
    for (int k = 0; k < 8; k++) if (!arrs[k]) goto fail;
    int64_t *ts = (int64_t *)PyBytes_AS_STRING(arrs[0]);
    int64_t *od = (int64_t *)PyBytes_AS_STRING(arrs[1]);
    int32_t *kp = (int32_t *)PyBytes_AS_STRING(arrs[2]), *kl = (int32_t *)PyBytes_AS_STRING(arrs[3]);
    int32_t *vp = (int32_t *)PyBytes_AS_STRING(arrs[4]), *vl = (int32_t *)PyBytes_AS_STRING(arrs[5]);
    int32_t *hp = (int32_t *)PyBytes_AS_STRING(arrs[6]), *hc = (int32_t *)PyBytes_AS_STRING(arrs[7]);
    Py_ssize_t pos = 0;
    rec_t r;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (walk_record(buf, end, &pos, &r) < 0) goto fail;
        ts[i] = r.ts_delta; od[i] = r.off_delta;
        kp[i] = (int32_t)r.key_pos; kl[i] = (int32_t)r.key_len;
        vp[i] = (int32_t)r.val_pos; vl[i] = (int32_t)r.val_len;
        hp[i] = (int32_t)r.hdr_pos; hc[i] = (int32_t)r.hdr_count;
    }
    if (pos != end) {
        PyErr_SetString(PyExc_ValueError, "incorrect declared batch size, records still remaining in the batch");
        goto fail;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(NNNNNNNN)", arrs[0], arrs[1], arrs[2], arrs[3], arrs[4], arrs[5], arrs[6], arrs[7]);
fail:
    PyBuffer_Release(&view);
    for (int k = 0; k < 8; k++) Py_XDECREF(arrs[k]);
    return NULL;
}

static PyObject *slice_or_none(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t len) {
    if (len < 0) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)buf + pos, len);
}

static PyObject *parse_headers(const unsigned char *buf, Py_ssize_t at, Py_ssize_t end_at, Py_ssize_t count) {
    const unsigned char *p = buf + at, *end = buf + end_at;
    PyObject *tup = PyTuple_New(count);
    if (!tup) return NULL;
    for (Py_ssize_t h = 0; h < count; h++) {
        int64_t kl = 0, vl = -1;
        get_varint(&p, end, 5, &kl);             /* already validated by parse_record */
        PyObject *key = PyUnicode_DecodeUTF8((const char *)p, kl, "surrogateescape");
        p += kl;
        get_varint(&p, end, 5, &vl);
        PyObject *val = slice_or_none(p, 0, vl);
        if (vl > 0) p += vl;
        if (!key || !val) { Py_XDECREF(key); Py_XDECREF(val); Py_DECREF(tup); return NULL; }
        PyObject *pair = PyTuple_Pack(2, key, val);
        Py_DECREF(key); Py_DECREF(val);
        if (!pair) { Py_DECREF(tup); return NULL; }
        PyTuple_SET_ITEM(tup, h, pair);
    }
    return tup;
}

/* Record: pylog.record.Record when this module is built (pylog/record/record.py holds the
 * pure-Python class it replaces, with the same attributes and behaviour, and its docstring).
 * The offset and the timestamp of a decoded record are kept as C integers and made Python
 * ints on first access (then kept), its headers as their encoded bytes, decoded on first
 * access (a tuple and two objects a header otherwise); every other field is a plain member. A heap type, so
 * that Python subclasses (ControlRecord, the consumer's ConsumerRecord) can take a decoded
 * record by a change of class. Decoded records hold bytes, ints, None, str and a tuple of
 * (str, bytes) pairs, so they cannot be part of a reference cycle: like CPython's tuples of
 * atomic values they are left untracked by the cycle collector, whose passes over millions
 * of young records otherwise cost as much as decoding them. */
typedef struct {
    PyObject_HEAD
    PyObject *value, *key, *headers, *topic, *partition, *timestamp_type;
    PyObject *offset, *timestamp;                /* NULL: not made yet, from the C integers below */
    int64_t offset_raw, timestamp_raw;
    PyObject *headers_raw;                       /* headers NULL: their encoded bytes, decoded on first access */
    Py_ssize_t headers_count;
} RecordObject;

static PyTypeObject *record_type = NULL;

static PyObject *record_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    RecordObject *r = (RecordObject *)type->tp_alloc(type, 0);
    if (!r) return NULL;
    PyObject **fields[] = {&r->value, &r->key, &r->topic, &r->partition, &r->timestamp_type, &r->offset,
                           &r->timestamp};
    for (size_t k = 0; k < sizeof fields / sizeof *fields; k++) { Py_INCREF(Py_None); *fields[k] = Py_None; }
    r->headers_raw = NULL;
    r->headers = PyTuple_New(0);
    if (!r->headers) { Py_DECREF(r); return NULL; }
    return (PyObject *)r;
}

static int record_init(RecordObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"value", "key", "timestamp", "headers", "offset", NULL};
    PyObject *value, *key = Py_None, *timestamp = Py_None, *headers = NULL, *offset = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OOOO:Record", kwlist, &value, &key, &timestamp, &headers,
                                     &offset))
        return -1;
    PyObject *empty = NULL;
    if (!headers) { headers = empty = PyTuple_New(0); if (!empty) return -1; }
    Py_INCREF(value); Py_XSETREF(self->value, value);
    Py_INCREF(key); Py_XSETREF(self->key, key);
    Py_INCREF(timestamp); Py_XSETREF(self->timestamp, timestamp);
    Py_INCREF(headers); Py_XSETREF(self->headers, headers); Py_CLEAR(self->headers_raw);
    Py_INCREF(offset); Py_XSETREF(self->offset, offset);
    Py_INCREF(Py_None); Py_XSETREF(self->topic, Py_None);  /* the place: filled by a read */
    Py_INCREF(Py_None); Py_XSETREF(self->partition, Py_None);
    Py_INCREF(Py_None); Py_XSETREF(self->timestamp_type, Py_None);
    Py_XDECREF(empty);
    return 0;
}

static int record_traverse(RecordObject *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->value); Py_VISIT(self->key); Py_VISIT(self->headers); Py_VISIT(self->topic);
    Py_VISIT(self->partition); Py_VISIT(self->timestamp_type); Py_VISIT(self->offset); Py_VISIT(self->timestamp);
    Py_VISIT(self->headers_raw);
    return 0;
}

static int record_clear(RecordObject *self) {
    Py_CLEAR(self->value); Py_CLEAR(self->key); Py_CLEAR(self->headers); Py_CLEAR(self->topic);
    Py_CLEAR(self->partition); Py_CLEAR(self->timestamp_type); Py_CLEAR(self->offset); Py_CLEAR(self->timestamp);
    Py_CLEAR(self->headers_raw);
    return 0;
}

/* Records freed lately (of this type, or of a subclass adding no field, as a consumer's
 * records are), kept for the next ones decoded, as CPython keeps tuples and floats: a read's
 * records reuse the memory of the read before (up to a 1 MiB fetch of 100-byte records, 1.8 MB
 * kept at most), without the allocator, and without counting as allocations towards the
 * cycle collector's next pass. */
#define RECORD_FREE_MAX 16384
static RecordObject *record_free[RECORD_FREE_MAX];
static int record_free_count = 0;

/* 1 when an instance of tp is a block of memory an instance of Record can take over:
 * Record itself, or a subclass adding no field, no __dict__ and no __weakref__. */
static int same_memory(PyTypeObject *tp) {
    if (tp == record_type) return 1;
#ifdef Py_TPFLAGS_MANAGED_DICT
    if (tp->tp_flags & Py_TPFLAGS_MANAGED_DICT) return 0;   /* its dict lives in front of the object */
#endif
    return tp->tp_basicsize == record_type->tp_basicsize && tp->tp_itemsize == 0 && tp->tp_dictoffset == 0 &&
           tp->tp_weaklistoffset == 0 && tp->tp_free == record_type->tp_free;
}

static void record_dealloc(RecordObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    record_clear(self);
    if (record_free_count < RECORD_FREE_MAX && same_memory(tp)) record_free[record_free_count++] = self;
    else tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

/* The offset or timestamp, made from its C integer on first access. */
static PyObject *lazy_int(PyObject **slot, int64_t raw) {
    if (!*slot && !(*slot = PyLong_FromLongLong(raw))) return NULL;
    Py_INCREF(*slot);
    return *slot;
}

static int set_field(PyObject **slot, PyObject *value, const char *name) {
    if (!value) { PyErr_Format(PyExc_AttributeError, "cannot delete a record's %s", name); return -1; }
    Py_INCREF(value);
    Py_XSETREF(*slot, value);
    return 0;
}

static PyObject *record_get_offset(RecordObject *self, void *c) { return lazy_int(&self->offset, self->offset_raw); }
static PyObject *record_get_timestamp(RecordObject *self, void *c) {
    return lazy_int(&self->timestamp, self->timestamp_raw);
}
static int record_set_offset(RecordObject *self, PyObject *v, void *c) { return set_field(&self->offset, v, "offset"); }
static int record_set_timestamp(RecordObject *self, PyObject *v, void *c) {
    return set_field(&self->timestamp, v, "timestamp");
}

/* The headers, decoded from their bytes on first access (then kept). */
static PyObject *record_get_headers(RecordObject *self, void *c) {
    if (!self->headers) {
        if (!self->headers_raw) { PyErr_SetString(PyExc_AttributeError, "headers"); return NULL; }
        self->headers = parse_headers((const unsigned char *)PyBytes_AS_STRING(self->headers_raw), 0,
                                      PyBytes_GET_SIZE(self->headers_raw), self->headers_count);
        if (!self->headers) return NULL;
        Py_CLEAR(self->headers_raw);
    }
    Py_INCREF(self->headers);
    return self->headers;
}

static int record_set_headers(RecordObject *self, PyObject *v, void *c) {
    if (set_field(&self->headers, v, "headers") < 0) return -1;
    Py_CLEAR(self->headers_raw);
    return 0;
}

static int record_fields(RecordObject *r, PyObject **offset, PyObject **timestamp) {
    *offset = lazy_int(&r->offset, r->offset_raw);
    *timestamp = *offset ? lazy_int(&r->timestamp, r->timestamp_raw) : NULL;
    if (!*timestamp) { Py_XDECREF(*offset); return -1; }
    return 0;
}

/* Equal when offset, timestamp, key, value and headers (as tuples) are; the place is not compared. */
static PyObject *record_richcompare(PyObject *a, PyObject *b, int op) {
    if ((op != Py_EQ && op != Py_NE) || !PyObject_TypeCheck(b, record_type)) Py_RETURN_NOTIMPLEMENTED;
    RecordObject *x = (RecordObject *)a, *y = (RecordObject *)b;
    PyObject *xo, *xt, *yo, *yt, *xh = NULL, *yh = NULL;
    if (record_fields(x, &xo, &xt) < 0) return NULL;
    if (record_fields(y, &yo, &yt) < 0) { Py_DECREF(xo); Py_DECREF(xt); return NULL; }
    int eq = PyObject_RichCompareBool(xo, yo, Py_EQ);
    if (eq > 0) eq = PyObject_RichCompareBool(xt, yt, Py_EQ);
    if (eq > 0) eq = PyObject_RichCompareBool(x->key, y->key, Py_EQ);
    if (eq > 0) eq = PyObject_RichCompareBool(x->value, y->value, Py_EQ);
    if (eq > 0) {
        PyObject *xs = record_get_headers(x, NULL), *ys = xs ? record_get_headers(y, NULL) : NULL;
        xh = ys ? PySequence_Tuple(xs) : NULL;
        yh = xh ? PySequence_Tuple(ys) : NULL;
        eq = yh ? PyObject_RichCompareBool(xh, yh, Py_EQ) : -1;
        Py_XDECREF(xs); Py_XDECREF(ys);
    }
    Py_DECREF(xo); Py_DECREF(xt); Py_DECREF(yo); Py_DECREF(yt); Py_XDECREF(xh); Py_XDECREF(yh);
    if (eq < 0) return NULL;
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

/* repr of a key or value: whole up to 32 bytes, else its first 32 and its size. */
static PyObject *short_repr(PyObject *v) {
    Py_ssize_t n = v == Py_None ? 0 : PyObject_Length(v);
    if (n < 0) return NULL;
    if (n <= 32) return PyObject_Repr(v);
    PyObject *head = PySequence_GetSlice(v, 0, 32);
    PyObject *raw = head ? PyBytes_FromObject(head) : NULL;
    PyObject *r = raw ? PyObject_Repr(raw) : NULL;
    PyObject *open = r ? PyUnicode_Substring(r, 0, PyUnicode_GET_LENGTH(r) - 1) : NULL;  /* without its quote */
    PyObject *out = open ? PyUnicode_FromFormat("%U...' (%zd bytes)", open, n) : NULL;
    Py_XDECREF(head); Py_XDECREF(raw); Py_XDECREF(r); Py_XDECREF(open);
    return out;
}

static PyObject *record_repr(RecordObject *self) {
    PyObject *offset, *timestamp;
    if (record_fields(self, &offset, &timestamp) < 0) return NULL;
    PyObject *value = short_repr(self->value), *headers = value ? record_get_headers(self, NULL) : NULL;
    PyObject *out = headers ? PyUnicode_FromFormat("Record(offset=%R, timestamp=%R, key=%R, value=%U, headers=%R)",
                                                   offset, timestamp, self->key, value, headers) : NULL;
    Py_DECREF(offset); Py_DECREF(timestamp); Py_XDECREF(value); Py_XDECREF(headers);
    return out;
}

/* Pickled as a call of its class (a subclass's __init__ runs again) and its place set after. */
static PyObject *record_reduce(RecordObject *self, PyObject *unused) {
    PyObject *offset, *timestamp, *headers = record_get_headers(self, NULL);
    if (!headers) return NULL;
    if (record_fields(self, &offset, &timestamp) < 0) { Py_DECREF(headers); return NULL; }
    return Py_BuildValue("O(OONNN)(O{sOsOsO})", Py_TYPE(self), self->value, self->key, timestamp, headers,
                         offset, Py_None, "topic", self->topic, "partition", self->partition, "timestamp_type",
                         self->timestamp_type);
}

static PyMemberDef record_members[] = {
    {"value", T_OBJECT_EX, offsetof(RecordObject, value), 0, "bytes or None"},
    {"key", T_OBJECT_EX, offsetof(RecordObject, key), 0, "bytes or None"},
    {"topic", T_OBJECT_EX, offsetof(RecordObject, topic), 0, "the topic it was read from, else None"},
    {"partition", T_OBJECT_EX, offsetof(RecordObject, partition), 0, "the partition it was read from, else None"},
    {"timestamp_type", T_OBJECT_EX, offsetof(RecordObject, timestamp_type), 0, "its batch's, once read"},
    {NULL},
};

static PyGetSetDef record_getset[] = {
    {"offset", (getter)record_get_offset, (setter)record_set_offset, "its offset, once read", NULL},
    {"timestamp", (getter)record_get_timestamp, (setter)record_set_timestamp, "ms, or None", NULL},
    {"headers", (getter)record_get_headers, (setter)record_set_headers, "tuple of (str, bytes | None) pairs", NULL},
    {NULL},
};

static PyMethodDef record_methods[] = {
    {"__reduce__", (PyCFunction)record_reduce, METH_NOARGS, NULL},
    {NULL},
};

static PyType_Slot record_slots_spec[] = {
    {Py_tp_new, record_new},
    {Py_tp_init, record_init},
    {Py_tp_dealloc, record_dealloc},
    {Py_tp_traverse, record_traverse},
    {Py_tp_clear, record_clear},
    {Py_tp_free, PyObject_GC_Del},
    {Py_tp_repr, record_repr},
    {Py_tp_richcompare, record_richcompare},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {Py_tp_members, record_members},
    {Py_tp_getset, record_getset},
    {Py_tp_methods, record_methods},
    {0, NULL},
};

static PyType_Spec record_spec = {
    "pylog.record.record.Record", sizeof(RecordObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, record_slots_spec,
};

/* freed_as_record(cls) -> cls: instances of ``cls``, a Python subclass of Record of the same
 * memory (no field, __dict__ or __weakref__ of its own) and without a finalizer, are freed by
 * Record's dealloc (into its free list) instead of the generic one of Python classes, which
 * links each object into the cycle collector's lists again on its way out (a quarter of the
 * cost of freeing a record). A subclass of ``cls`` with fields of its own still frees them
 * first (the generic dealloc calls the nearest base's). */
static PyObject *freed_as_record(PyObject *self, PyObject *cls) {
    PyTypeObject *tp = (PyTypeObject *)cls;
    if (!PyType_Check(cls) || !PyType_IsSubtype(tp, record_type) || !same_memory(tp)) {
        PyErr_Format(PyExc_TypeError, "%R is not a subclass of Record adding no field", cls);
        return NULL;
    }
    if (tp->tp_finalize || tp->tp_del) {
        PyErr_Format(PyExc_TypeError, "%R has a finalizer", cls);
        return NULL;
    }
    tp->tp_dealloc = (destructor)record_dealloc;
    return Py_NewRef(cls);
}

/* 1 when decode_records may build instances of ``type`` itself: Record, or a subclass of the
 * same memory whose construction is Record's (no __new__ or __init__ of its own to run). */
static int built_here(PyObject *type) {
    if (type == (PyObject *)record_type) return 1;
    if (!PyType_Check(type) || !PyType_IsSubtype((PyTypeObject *)type, record_type)) return 0;
    PyTypeObject *tp = (PyTypeObject *)type;
    return same_memory(tp) && tp->tp_init == record_type->tp_init && tp->tp_new == record_type->tp_new;
}

/* A decoded record of a type built_here: value, key, headers stolen (with headers_count > 0,
 * the bytes of the encoded headers, decoded on first access), place borrowed. */
static PyObject *new_record(PyTypeObject *type, PyObject *value, PyObject *key, PyObject *headers,
                            Py_ssize_t headers_count, int64_t offset, int64_t timestamp, PyObject **place) {
    RecordObject *r;                                                 /* left untracked (see above) */
    if (record_free_count) r = (RecordObject *)PyObject_Init((PyObject *)record_free[--record_free_count], type);
    else r = PyObject_GC_New(RecordObject, type);
    if (!r) { Py_DECREF(value); Py_DECREF(key); Py_DECREF(headers); return NULL; }
    r->value = value; r->key = key;
    if (headers_count) { r->headers = NULL; r->headers_raw = headers; r->headers_count = headers_count; }
    else { r->headers = headers; r->headers_raw = NULL; r->headers_count = 0; }
    Py_INCREF(place[0]); r->topic = place[0];
    Py_INCREF(place[1]); r->partition = place[1];
    Py_INCREF(place[2]); r->timestamp_type = place[2];
    r->offset = r->timestamp = NULL;
    r->offset_raw = offset; r->timestamp_raw = timestamp;
    return (PyObject *)r;
}

static PyObject *decode_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    long long base_offset, base_ts;
    PyObject *append_time, *record_type_arg;
    PyObject *place[3] = {Py_None, Py_None, Py_None};  /* topic, partition, timestamp_type */
    static const char *place_names[3] = {"topic", "partition", "timestamp_type"};
    if (!PyArg_ParseTuple(args, "y*nLLOO|OOO", &view, &count, &base_offset, &base_ts, &append_time, &record_type_arg,
                          &place[0], &place[1], &place[2]))
        return NULL;
    int placed = place[0] != Py_None || place[1] != Py_None || place[2] != Py_None;
    const unsigned char *buf = view.buf;
    Py_ssize_t end = view.len;
    if (count < 0 || count > end / 7) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "record count %zd does not fit in %zd bytes of records", count, end);
        return NULL;
    }
    long long fixed_ts = 0;
    int use_fixed = append_time != Py_None;
    if (use_fixed) {
        fixed_ts = PyLong_AsLongLong(append_time);
        if (fixed_ts == -1 && PyErr_Occurred()) { PyBuffer_Release(&view); return NULL; }
    }
    PyObject *out = PyList_New(count);
    if (!out) { PyBuffer_Release(&view); return NULL; }
    /* tracked once filled: the collections the records' allocations set off meanwhile need not
     * walk it (it holds only untracked records until then) */
    PyObject_GC_UnTrack(out);
    PyObject *empty = PyTuple_New(0);
    if (!empty) { Py_DECREF(out); PyBuffer_Release(&view); return NULL; }
    int exact = built_here(record_type_arg);
    Py_ssize_t pos = 0;
    rec_t r;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (walk_record(buf, end, &pos, &r) < 0) goto fail;
        PyObject *value = slice_or_none(buf, r.val_pos, r.val_len);
        PyObject *key = slice_or_none(buf, r.key_pos, r.key_len);
        PyObject *headers = empty;
        if (!r.hdr_count) Py_INCREF(empty);
        else if (exact) headers = PyBytes_FromStringAndSize((const char *)buf + r.hdr_pos, r.rec_end - r.hdr_pos);
        else headers = parse_headers(buf, r.hdr_pos, r.rec_end, r.hdr_count);
        if (!(value && key && headers)) { Py_XDECREF(value); Py_XDECREF(key); Py_XDECREF(headers); goto fail; }
        int64_t offset = base_offset + r.off_delta, ts = use_fixed ? fixed_ts : base_ts + r.ts_delta;
        PyObject *rec = NULL;
        if (exact) {
            rec = new_record((PyTypeObject *)record_type_arg, value, key, headers, r.hdr_count, offset, ts, place);
        } else {
            PyObject *argv[5] = {value, key, PyLong_FromLongLong(ts), headers, PyLong_FromLongLong(offset)};
            if (argv[2] && argv[4]) rec = PyObject_Vectorcall(record_type_arg, argv, 5, NULL);
            for (int k = 0; k < 5; k++) Py_XDECREF(argv[k]);
            for (int k = 0; rec && placed && k < 3; k++) {
                if (PyObject_SetAttrString(rec, place_names[k], place[k]) < 0) Py_CLEAR(rec);
            }
        }
        if (!rec) goto fail;
        PyList_SET_ITEM(out, i, rec);
    }
    if (pos != end) {
        PyErr_SetString(PyExc_ValueError, "incorrect declared batch size, records still remaining in the batch");
        goto fail;
    }
    Py_DECREF(empty);
    PyBuffer_Release(&view);
    PyObject_GC_Track(out);
    return out;
fail:
    Py_DECREF(empty);
    Py_DECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

/* One batch of the ``parts`` the column scans take: (records, count, base_offset, base_timestamp,
 * append_time), ``records`` its uncompressed record bytes (any buffer: a slice of the fetched bytes
 * is not copied), ``append_time`` None or the batch's max timestamp (a LogAppendTime batch). */
typedef struct { Py_buffer view; Py_ssize_t count; long long base_offset, base_ts, fixed_ts; int fixed; } part_t;

/* parts[b] parsed into *p, its view taken (released by release_parts); -1 with the error set. */
static int parse_part(PyObject *item, part_t *p) {
    PyObject *append_time, *extra[2];            /* scan_batches' last offset and leader epoch, not read here */
    if (!PyArg_ParseTuple(item, "y*nLLO|OO;parts holds (records, count, base_offset, base_timestamp, append_time) "
                          "tuples", &p->view, &p->count, &p->base_offset, &p->base_ts, &append_time, &extra[0],
                          &extra[1]))
        return -1;
    if (p->count < 0 || p->count > p->view.len / 7) {
        PyErr_Format(PyExc_ValueError, "record count %zd does not fit in %zd bytes of records", p->count,
                     p->view.len);
        return -1;
    }
    p->fixed = append_time != Py_None;
    if (p->fixed && (p->fixed_ts = PyLong_AsLongLong(append_time)) == -1 && PyErr_Occurred()) return -1;
    return 0;
}

static void release_parts(part_t *ps, Py_ssize_t nparts) {
    for (Py_ssize_t b = 0; b < nparts; b++) if (ps[b].view.obj) PyBuffer_Release(&ps[b].view);  /* those taken */
    PyMem_Free(ps);
}

/* Every part of ``parts`` parsed (parse_part), with the sum of their record counts and of their
 * record bytes; NULL with the error set. */
static part_t *parse_parts(PyObject *parts, Py_ssize_t *rows, Py_ssize_t *bytes) {
    Py_ssize_t nparts = PyList_GET_SIZE(parts);
    part_t *ps = PyMem_Calloc(nparts ? nparts : 1, sizeof(part_t));
    if (!ps) return (part_t *)PyErr_NoMemory();
    *rows = *bytes = 0;
    for (Py_ssize_t b = 0; b < nparts; b++) {
        if (parse_part(PyList_GET_ITEM(parts, b), &ps[b]) < 0) { release_parts(ps, nparts); return NULL; }
        *rows += ps[b].count;
        *bytes += ps[b].view.len;
    }
    if (*bytes > INT32_MAX) {
        release_parts(ps, nparts);
        PyErr_SetString(PyExc_OverflowError, "more than 2 GiB of records in one run");
        return NULL;
    }
    return ps;
}

/* scan_columns(parts) -> (offsets, timestamps, key_data, key_offsets, key_valid, value_data,
 *                         value_offsets, value_valid)
 * The columnar decode of v2 batches (``parts``: part_t's tuples, one a batch): offsets and
 * timestamps as native int64 arrays, keys and values in Arrow's binary layout (data and int32
 * offsets [n+1]), key_valid/value_valid one byte (0 or 1) a record. One walk over the records
 * checks each as decode_records checks it (ValueError) and notes where its key and value lie;
 * the key and value data are then allocated at their exact size and gathered from there (the
 * records just walked, still in the processor's cache). A reader decoding fetch after fetch so
 * takes no more memory than it returns, where over-sized blocks are mapped and unmapped by the C
 * library and their pages faulted in again at every fetch. */
static PyObject *scan_columns(PyObject *self, PyObject *args) {
    PyObject *parts;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &parts)) return NULL;
    Py_ssize_t nparts = PyList_GET_SIZE(parts), n = 0, total = 0;
    part_t *ps = parse_parts(parts, &n, &total);
    if (!ps) return NULL;
    PyObject *out[8] = {0}, *result = NULL;
    const unsigned char **at = PyMem_Malloc((n ? n : 1) * 2 * sizeof(*at));  /* each record's key and value */
    if (!at) { PyErr_NoMemory(); goto done; }
    out[0] = PyBytes_FromStringAndSize(NULL, n * 8);       /* offsets */
    out[1] = PyBytes_FromStringAndSize(NULL, n * 8);       /* timestamps */
    out[3] = PyBytes_FromStringAndSize(NULL, (n + 1) * 4); /* key offsets */
    out[4] = PyBytes_FromStringAndSize(NULL, n);           /* key valid */
    out[6] = PyBytes_FromStringAndSize(NULL, (n + 1) * 4); /* value offsets */
    out[7] = PyBytes_FromStringAndSize(NULL, n);           /* value valid */
    if (!(out[0] && out[1] && out[3] && out[4] && out[6] && out[7])) goto done;
    int64_t *offsets = (int64_t *)PyBytes_AS_STRING(out[0]), *stamps = (int64_t *)PyBytes_AS_STRING(out[1]);
    int32_t *ko = (int32_t *)PyBytes_AS_STRING(out[3]), *vo = (int32_t *)PyBytes_AS_STRING(out[6]);
    char *kv = PyBytes_AS_STRING(out[4]), *vv = PyBytes_AS_STRING(out[7]);
    int32_t kat = 0, vat = 0;
    Py_ssize_t i = 0;
    rec_t r;
    for (Py_ssize_t b = 0; b < nparts; b++) {              /* the walk: every field but the data */
        const part_t *p = &ps[b];
        const unsigned char *buf = p->view.buf, *q = buf, *end = buf + p->view.len;
        for (Py_ssize_t c = 0; c < p->count; c++, i++) {
            if (!(q = parse_record(q, end, &r, buf))) goto done;
            offsets[i] = p->base_offset + r.off_delta;
            stamps[i] = p->fixed ? p->fixed_ts : p->base_ts + r.ts_delta;
            ko[i] = kat; kv[i] = r.key_len >= 0; at[2 * i] = buf + r.key_pos;
            if (r.key_len > 0) kat += (int32_t)r.key_len;
            vo[i] = vat; vv[i] = r.val_len >= 0; at[2 * i + 1] = buf + r.val_pos;
            if (r.val_len > 0) vat += (int32_t)r.val_len;
        }
        if (q != end) {
            PyErr_SetString(PyExc_ValueError, "incorrect declared batch size, records still remaining in the batch");
            goto done;
        }
    }
    ko[n] = kat; vo[n] = vat;
    out[2] = PyBytes_FromStringAndSize(NULL, kat);         /* key data */
    out[5] = PyBytes_FromStringAndSize(NULL, vat);         /* value data */
    if (!out[2] || !out[5]) goto done;
    char *kd = PyBytes_AS_STRING(out[2]), *vd = PyBytes_AS_STRING(out[5]);
    for (i = 0; i < n; i++) {                              /* the gather */
        memcpy(kd + ko[i], at[2 * i], ko[i + 1] - ko[i]);
        memcpy(vd + vo[i], at[2 * i + 1], vo[i + 1] - vo[i]);
    }
    result = PyTuple_New(8);
    if (!result) goto done;
    for (int k = 0; k < 8; k++) { PyTuple_SET_ITEM(result, k, out[k]); out[k] = NULL; }
done:
    release_parts(ps, nparts);
    PyMem_Free(at);
    for (int k = 0; k < 8; k++) Py_XDECREF(out[k]);
    return result;
}

/* The Arrow buffers scan_arrow and scan_arrow_batches fill (offsets int64, timestamps int64 in
 * microseconds, timestamp types int32, key offsets int32, key validity bitmap, key data, value
 * offsets int32, value validity bitmap, value data), their room, and where the next row goes. */
enum { A_OFFSETS, A_STAMPS, A_TYPES, A_KOFF, A_KBITS, A_KDATA, A_VOFF, A_VBITS, A_VDATA, A_COUNT };
enum { F_ROW, F_KEY_AT, F_VALUE_AT, F_KEY_NULLS, F_VALUE_NULLS, F_COUNT };
typedef struct {
    Py_buffer ob[A_COUNT];
    int taken;
    Py_ssize_t rows, kcap, vcap;                 /* room: rows, key bytes, value bytes */
    Py_ssize_t fill[F_COUNT];                    /* row, key_at, value_at, key_nulls, value_nulls */
} arrow_out_t;

static void release_arrow(arrow_out_t *o) {
    for (int k = 0; k < o->taken; k++) PyBuffer_Release(&o->ob[k]);
    o->taken = 0;
}

/* The writable buffers of ``outs`` (a tuple of A_COUNT) and the fill of ``fill`` (a list of
 * F_COUNT ints), checked against each other; -1 with the error set (buffers released). */
static int take_arrow(PyObject *outs, PyObject *fill, arrow_out_t *o) {
    o->taken = 0;
    if (!PyTuple_Check(outs) || PyTuple_GET_SIZE(outs) != A_COUNT || !PyList_Check(fill) ||
        PyList_GET_SIZE(fill) != F_COUNT) {
        PyErr_SetString(PyExc_TypeError, "Arrow buffers: a tuple of 9 buffers and a list of 5 ints");
        return -1;
    }
    for (int k = 0; k < F_COUNT; k++) {
        if ((o->fill[k] = PyLong_AsSsize_t(PyList_GET_ITEM(fill, k))) == -1 && PyErr_Occurred()) return -1;
    }
    for (; o->taken < A_COUNT; o->taken++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(outs, o->taken), &o->ob[o->taken], PyBUF_WRITABLE) < 0) {
            release_arrow(o);
            return -1;
        }
    }
    Py_buffer *ob = o->ob;
    Py_ssize_t rows = o->rows = ob[A_OFFSETS].len / 8, *f = o->fill;
    o->kcap = ob[A_KDATA].len; o->vcap = ob[A_VDATA].len;
    if (f[F_ROW] < 0 || f[F_KEY_AT] < 0 || f[F_VALUE_AT] < 0 || f[F_KEY_NULLS] < 0 || f[F_VALUE_NULLS] < 0 ||
        f[F_KEY_NULLS] > f[F_ROW] || f[F_VALUE_NULLS] > f[F_ROW] || f[F_ROW] > rows || ob[A_STAMPS].len / 8 < rows ||
        ob[A_TYPES].len / 4 < rows || ob[A_KOFF].len / 4 < rows + 1 || ob[A_VOFF].len / 4 < rows + 1 ||
        ob[A_KBITS].len * 8 < rows || ob[A_VBITS].len * 8 < rows || f[F_KEY_AT] > o->kcap ||
        f[F_VALUE_AT] > o->vcap || o->kcap > INT32_MAX || o->vcap > INT32_MAX) {
        release_arrow(o);
        PyErr_SetString(PyExc_ValueError, "Arrow buffers too small for their rows");
        return -1;
    }
    ((int32_t *)ob[A_KOFF].buf)[f[F_ROW]] = (int32_t)f[F_KEY_AT];
    ((int32_t *)ob[A_VOFF].buf)[f[F_ROW]] = (int32_t)f[F_VALUE_AT];
    return 0;
}

/* The fill written back into ``fill`` and the buffers released; -1 with the error set. */
static int put_arrow(arrow_out_t *o, PyObject *fill) {
    release_arrow(o);
    for (int k = 0; k < F_COUNT; k++) {
        PyObject *v = PyLong_FromSsize_t(o->fill[k]);
        if (!v || PyList_SetItem(fill, k, v) < 0) return -1;
    }
    return 0;
}

static inline void arrow_bit(unsigned char *bits, Py_ssize_t i, int set) {
    unsigned char mask = (unsigned char)(1u << (i & 7));
    bits[i >> 3] = set ? (unsigned char)(bits[i >> 3] | mask) : (unsigned char)(bits[i >> 3] & ~mask);
}

/* Row i's validity bit; a bitmap is written only from its first null on (Arrow needs none
 * without nulls): then the rows before it are marked valid at once. */
static inline void arrow_valid(unsigned char *bits, Py_ssize_t i, int valid, Py_ssize_t *nulls) {
    if (valid) {
        if (*nulls) arrow_bit(bits, i, 1);
        return;
    }
    if (!*nulls) {
        memset(bits, 0xFF, (size_t)(i >> 3));
        bits[i >> 3] = (unsigned char)((1u << (i & 7)) - 1);
    }
    arrow_bit(bits, i, 0);
    ++*nulls;
}

/* The ``count`` records of one batch (its record bytes at base, len bytes) decoded after the rows
 * of o, each checked as decode_records checks it and every write bounded by its buffer's room
 * (ValueError); -1 on error. */
static int arrow_rows(arrow_out_t *o, const unsigned char *base, Py_ssize_t len, Py_ssize_t count,
                      long long base_offset, long long base_ts, int fixed, long long fixed_ts) {
    /* locals, not o's fields: the writes through the int64 buffers could alias them */
    Py_ssize_t *f = o->fill, row = f[F_ROW], key_at = f[F_KEY_AT], value_at = f[F_VALUE_AT];
    Py_ssize_t key_nulls = f[F_KEY_NULLS], value_nulls = f[F_VALUE_NULLS], kcap = o->kcap, vcap = o->vcap;
    if (count < 0 || count > len / 7 || count > o->rows - row) {
        PyErr_Format(PyExc_ValueError, "record count %zd does not fit in %zd bytes of records or the rows left",
                     count, len);
        return -1;
    }
    Py_buffer *ob = o->ob;
    int64_t *offsets = ob[A_OFFSETS].buf, *stamps = ob[A_STAMPS].buf;
    int32_t *types = ob[A_TYPES].buf, *ko = ob[A_KOFF].buf, *vo = ob[A_VOFF].buf, type = fixed ? 1 : 0;
    unsigned char *kbits = ob[A_KBITS].buf, *vbits = ob[A_VBITS].buf;
    char *kd = ob[A_KDATA].buf, *vd = ob[A_VDATA].buf;
    const unsigned char *p = base, *end = base + len;
    rec_t r;
    for (Py_ssize_t c = 0; c < count; c++, row++) {
        if (!(p = parse_record(p, end, &r, base))) return -1;
        if ((r.key_len > 0 && r.key_len > kcap - key_at) || (r.val_len > 0 && r.val_len > vcap - value_at)) {
            PyErr_SetString(PyExc_ValueError, "Arrow data buffers too small");
            return -1;
        }
        offsets[row] = base_offset + r.off_delta;
        stamps[row] = (fixed ? fixed_ts : base_ts + r.ts_delta) * 1000;
        types[row] = type;
        arrow_valid(kbits, row, r.key_len >= 0, &key_nulls);
        arrow_valid(vbits, row, r.val_len >= 0, &value_nulls);
        if (r.key_len > 0) { memcpy(kd + key_at, base + r.key_pos, r.key_len); key_at += r.key_len; }
        if (r.val_len > 0) { memcpy(vd + value_at, base + r.val_pos, r.val_len); value_at += r.val_len; }
        ko[row + 1] = (int32_t)key_at;
        vo[row + 1] = (int32_t)value_at;
    }
    if (p != end) {
        PyErr_SetString(PyExc_ValueError, "incorrect declared batch size, records still remaining in the batch");
        return -1;
    }
    f[F_ROW] = row; f[F_KEY_AT] = key_at; f[F_VALUE_AT] = value_at;
    f[F_KEY_NULLS] = key_nulls; f[F_VALUE_NULLS] = value_nulls;
    return 0;
}

/* scan_arrow(parts, outs, fill) -> None
 * The records of ``parts`` (scan_columns') written into Arrow buffers the caller allocated (from
 * pyarrow's memory pool, whose pages are reused from one read to the next) instead of new bytes
 * objects: ``outs`` the 9 writable buffers of arrow_out_t, filled from ``fill`` = [row, key_at,
 * value_at, key_nulls, value_nulls] on (the offsets' entry ``row`` is written too; a bitmap is
 * written only once its column has a null), ``fill`` updated to where the next call goes on.
 * Every record is checked as decode_records checks it and every write is bounded by its buffer's
 * size (ValueError). */
static PyObject *scan_arrow(PyObject *self, PyObject *args) {
    PyObject *parts, *outs, *fill;
    if (!PyArg_ParseTuple(args, "O!OO", &PyList_Type, &parts, &outs, &fill)) return NULL;
    arrow_out_t o;
    if (take_arrow(outs, fill, &o) < 0) return NULL;
    Py_ssize_t nparts = PyList_GET_SIZE(parts);
    for (Py_ssize_t b = 0; b < nparts; b++) {
        part_t p = {0};
        int rc = parse_part(PyList_GET_ITEM(parts, b), &p);
        if (!rc) rc = arrow_rows(&o, p.view.buf, p.view.len, p.count, p.base_offset, p.base_ts, p.fixed, p.fixed_ts);
        if (p.view.obj) PyBuffer_Release(&p.view);
        if (rc < 0) { release_arrow(&o); return NULL; }
    }
    if (put_arrow(&o, fill) < 0) return NULL;
    Py_RETURN_NONE;
}

/* scan_batches(view, position, bounds, walk, crc) -> (used, other, parts)
 * The whole v2 batches at the start of ``view`` (a memoryview of bytes read at file ``position``)
 * walked as FetchData.data_batch_chunks walks them, in one call: ``parts`` holds, for each batch
 * whose records a read returns, the ``parts`` tuple of scan_columns and scan_arrow (records, a
 * view of ``view``; count; base offset; base timestamp; append time or None) followed by its last
 * offset and partition leader epoch. ``bounds`` = (lo, hi, end_offset) (-1: none): a batch ending
 * below lo or starting at hi or beyond is passed over; every batch's offsets must follow the last
 * one's, walk[0], and stay below end_offset. ``walk`` = [last offset, next offset, end position of
 * the last whole batch (-1: none)], updated as batches pass. ``crc`` is crc32c.crc32c: every batch
 * read has its CRC checked; control batches are checked and passed over. Returns the bytes of
 * the whole batches taken and ``other``: True when the walk stopped at a batch for the general
 * path, data_batch_chunks (a legacy or compressed batch, or a size, CRC or offset that cannot be
 * right, which that path reports), False when the view ends (inside a batch, or at its end). */
enum { WALK_LAST, WALK_NEXT, WALK_END, WALK_COUNT };

static inline uint64_t be_at(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int k = 0; k < bytes; k++) v = (v << 8) | p[k];
    return v;
}

/* The CRC-32C of the batch at b (size bytes) by ``crc``, compared with its stored one: 1 when they
 * match, 0 when not, -1 with the error set. */
static int batch_crc_matches(PyObject *crc, const unsigned char *b, int64_t size) {
    PyObject *bytes = PyMemoryView_FromMemory((char *)b + 21, (Py_ssize_t)size - 21, PyBUF_READ);
    PyObject *sum = bytes ? PyObject_CallOneArg(crc, bytes) : NULL;
    Py_XDECREF(bytes);
    if (!sum) return -1;
    unsigned long computed = PyLong_AsUnsignedLong(sum);
    Py_DECREF(sum);
    if (computed == (unsigned long)-1 && PyErr_Occurred()) return -1;
    return computed == (unsigned long)be_at(b + 17, 4);
}

/* The ``parts`` tuple of the batch at byte pos of view (b, size bytes); NULL with the error set. */
static PyObject *batch_part(PyObject *view, Py_ssize_t pos, const unsigned char *b, int64_t size, int64_t last) {
    PyObject *records = PySequence_GetSlice(view, pos + 61, pos + (Py_ssize_t)size);
    if (!records) return NULL;
    int attributes = (int)be_at(b + 21, 2) & 0xFF;
    PyObject *append_time = attributes & 0x08 ? PyLong_FromLongLong((int64_t)be_at(b + 35, 8)) : Py_NewRef(Py_None);
    PyObject *part = append_time ? Py_BuildValue("(NiLLNLi)", records, (int32_t)be_at(b + 57, 4),
                                                 (long long)(int64_t)be_at(b, 8), (long long)(int64_t)be_at(b + 27, 8),
                                                 append_time, (long long)last, (int32_t)be_at(b + 12, 4))
                                 : NULL;
    if (!append_time) Py_DECREF(records);
    return part;
}

static PyObject *scan_batches(PyObject *self, PyObject *args) {
    PyObject *view, *walk, *crc;
    long long position, lo, hi, end_offset;
    if (!PyArg_ParseTuple(args, "O!L(LLL)O!O", &PyMemoryView_Type, &view, &position, &lo, &hi, &end_offset,
                          &PyList_Type, &walk, &crc))
        return NULL;
    long long state[WALK_COUNT];
    if (PyList_GET_SIZE(walk) != WALK_COUNT) { PyErr_SetString(PyExc_TypeError, "walk holds 3 ints"); return NULL; }
    for (int k = 0; k < WALK_COUNT; k++) {
        if ((state[k] = PyLong_AsLongLong(PyList_GET_ITEM(walk, k))) == -1 && PyErr_Occurred()) return NULL;
    }
    Py_buffer *vb = PyMemoryView_GET_BUFFER(view);
    if (!PyBuffer_IsContiguous(vb, 'C')) { PyErr_SetString(PyExc_TypeError, "view is not contiguous"); return NULL; }
    PyObject *parts = PyList_New(0), *result = NULL;
    if (!parts) return NULL;
    const unsigned char *buf = vb->buf;
    Py_ssize_t pos = 0, n = vb->len;
    int other = 0;
    while (n - pos >= 17) {                      /* base offset, length, leader epoch, magic */
        const unsigned char *b = buf + pos;
        int64_t size = (int64_t)(int32_t)be_at(b + 8, 4) + 12;
        if (b[16] != 2 || size < 61) { other = 1; break; }
        if (size > n - pos) break;               /* the view ends inside it */
        int64_t base = (int64_t)be_at(b, 8), last = base + (int32_t)be_at(b + 23, 4);
        int attributes = (int)be_at(b + 21, 2) & 0xFF;
        if (base <= state[WALK_LAST] || last < base || (end_offset >= 0 && last >= end_offset)) { other = 1; break; }
        if (last >= lo && !(hi >= 0 && base >= hi)) {    /* read: its CRC checked */
            if (!(attributes & 0x20) && ((attributes & 0x07) || (int32_t)be_at(b + 57, 4) < 0)) { other = 1; break; }
            int matches = batch_crc_matches(crc, b, size);
            if (matches < 0) goto done;
            if (!matches) { other = 1; break; }
            if (!(attributes & 0x20)) {          /* not a control batch */
                PyObject *part = batch_part(view, pos, b, size, last);
                if (!part || PyList_Append(parts, part) < 0) { Py_XDECREF(part); goto done; }
                Py_DECREF(part);
            }
        }
        state[WALK_LAST] = last;
        if (last + 1 > state[WALK_NEXT]) { state[WALK_NEXT] = last + 1; state[WALK_END] = position + pos + size; }
        pos += (Py_ssize_t)size;
    }
    for (int k = 0; k < WALK_COUNT; k++) {
        PyObject *v = PyLong_FromLongLong(state[k]);
        if (!v || PyList_SetItem(walk, k, v) < 0) goto done;
    }
    result = Py_BuildValue("(nOO)", pos, other ? Py_True : Py_False, parts);
done:
    Py_DECREF(parts);
    return result;
}

/* gather(buf, positions int32 bytes, lengths int32 bytes) -> (data bytes, offsets int32 bytes [n+1])
 * Copies the byte ranges (a negative length is a null: no bytes) into one contiguous buffer. */
static PyObject *gather(PyObject *self, PyObject *args) {
    Py_buffer buf, pos, len;
    if (!PyArg_ParseTuple(args, "y*y*y*", &buf, &pos, &len)) return NULL;
    PyObject *data = NULL, *offs = NULL;
    Py_ssize_t n = pos.len / 4;
    if (len.len / 4 != n) { PyErr_SetString(PyExc_ValueError, "positions and lengths differ in size"); goto done; }
    const int32_t *p = pos.buf, *l = len.buf;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (l[i] > 0) {
            if (p[i] < 0 || (Py_ssize_t)p[i] + l[i] > buf.len) {
                PyErr_SetString(PyExc_ValueError, "byte range outside the buffer"); goto done;
            }
            total += l[i];
        }
    }
    if (total > INT32_MAX) { PyErr_SetString(PyExc_OverflowError, "more than 2 GiB of values"); goto done; }
    data = PyBytes_FromStringAndSize(NULL, total);
    offs = PyBytes_FromStringAndSize(NULL, (n + 1) * 4);
    if (!data || !offs) goto done;
    char *d = PyBytes_AS_STRING(data);
    int32_t *o = (int32_t *)PyBytes_AS_STRING(offs);
    int32_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        o[i] = at;
        if (l[i] > 0) { memcpy(d + at, (const char *)buf.buf + p[i], l[i]); at += l[i]; }
    }
    o[n] = at;
done:
    PyBuffer_Release(&buf); PyBuffer_Release(&pos); PyBuffer_Release(&len);
    if (PyErr_Occurred()) { Py_XDECREF(data); Py_XDECREF(offs); return NULL; }
    return Py_BuildValue("(NN)", data, offs);
}

/* segment_names(names list[str], suffixes tuple[str]) -> [[base offset, ...] per suffix]
 * A name counts when it is exactly 20 ASCII digits followed by one of the suffixes. */
#define MAX_SUFFIXES 8
#define BASE_DIGITS 20
static PyObject *segment_names(PyObject *self, PyObject *args) {
    PyObject *names, *suffixes;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &names, &PyTuple_Type, &suffixes)) return NULL;
    Py_ssize_t k = PyTuple_GET_SIZE(suffixes);
    if (k > MAX_SUFFIXES) { PyErr_SetString(PyExc_ValueError, "too many suffixes"); return NULL; }
    const char *sfx[MAX_SUFFIXES];
    Py_ssize_t sfx_len[MAX_SUFFIXES];
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *item = PyTuple_GET_ITEM(suffixes, i);
        if (!PyUnicode_Check(item)) { PyErr_SetString(PyExc_TypeError, "suffixes must be str"); return NULL; }
        sfx[i] = PyUnicode_AsUTF8AndSize(item, &sfx_len[i]);
        if (!sfx[i]) return NULL;
    }
    PyObject *out = PyList_New(k);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *lst = PyList_New(0);
        if (!lst) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, i, lst);
    }
    for (Py_ssize_t n = 0; n < PyList_GET_SIZE(names); n++) {
        PyObject *name = PyList_GET_ITEM(names, n);
        if (!PyUnicode_Check(name) || !PyUnicode_IS_ASCII(name)) continue;
        Py_ssize_t len = PyUnicode_GET_LENGTH(name);
        if (len <= BASE_DIGITS) continue;
        const char *s = (const char *)PyUnicode_1BYTE_DATA(name);
        Py_ssize_t which = -1;
        for (Py_ssize_t i = 0; i < k; i++) {
            if (len - BASE_DIGITS == sfx_len[i] && memcmp(s + BASE_DIGITS, sfx[i], (size_t)sfx_len[i]) == 0) {
                which = i;
                break;
            }
        }
        if (which < 0) continue;
        uint64_t v = 0;
        int digits = 1, overflow = 0;
        for (int j = 0; j < BASE_DIGITS; j++) {
            unsigned d = (unsigned char)s[j] - '0';
            if (d > 9) { digits = 0; break; }
            if (v > (UINT64_MAX - d) / 10) overflow = 1;
            v = v * 10 + d;
        }
        if (!digits) continue;
        PyObject *num;
        if (overflow) {
            char text[BASE_DIGITS + 1];
            memcpy(text, s, BASE_DIGITS);
            text[BASE_DIGITS] = 0;
            num = PyLong_FromString(text, NULL, 10);
        } else {
            num = PyLong_FromUnsignedLongLong(v);
        }
        if (!num || PyList_Append(PyList_GET_ITEM(out, which), num) < 0) {
            Py_XDECREF(num);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(num);
    }
    return out;
}

/* index_search(buf, count, entry_bytes, column, target, right) -> int
 * Binary search of an index file's big-endian entries in place (a mapped file: nothing
 * converted): entries are a key (int32 or int64, entry_bytes - 4 bytes) then a value (int32).
 * Returns how many entries have column (0 key, 1 value) < target (<= when right), or -1 when
 * an entry read does not lie, in both columns, between the entries read before it on either
 * side (the file is corrupt). O(log count). */
static inline int64_t index_field(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v = (v << 8) | p[i];
    return bytes == 8 ? (int64_t)v : (int64_t)(int32_t)(uint32_t)v;
}

static PyObject *index_search(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t count, entry_bytes;
    int column, right;
    long long target;
    if (!PyArg_ParseTuple(args, "y*nniLp", &buf, &count, &entry_bytes, &column, &target, &right)) return NULL;
    if ((entry_bytes != 8 && entry_bytes != 12) || count < 0 || count > buf.len / entry_bytes) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "index_search: entries outside the buffer");
        return NULL;
    }
    const unsigned char *b = buf.buf;
    int key_bytes = (int)entry_bytes - 4;
    Py_ssize_t lo = 0, hi = count;
    int64_t low_k = INT64_MIN, low_v = INT64_MIN, high_k = INT64_MAX, high_v = INT64_MAX;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        const unsigned char *e = b + mid * entry_bytes;
        int64_t k = index_field(e, key_bytes), v = index_field(e + key_bytes, 4);
        if (k < low_k || k > high_k || v < low_v || v > high_v) { lo = -1; break; }
        int64_t x = column ? v : k;
        if (x < target || (right && x == target)) { lo = mid + 1; low_k = k; low_v = v; }
        else { hi = mid; high_k = k; high_v = v; }
    }
    PyBuffer_Release(&buf);
    return PyLong_FromSsize_t(lo);
}

static PyMethodDef methods[] = {
    {"gather", gather, METH_VARARGS, "Copy byte ranges into one buffer with int32 offsets."},
    {"encode_records", encode_records, METH_VARARGS,
     "Encode v2 records (no headers): values (or (key, value) tuples), keys, ts deltas[, reserve[, ts base]]."},
    {"encode_batch", encode_batch, METH_VARARGS,
     "An uncompressed v2 batch of values or (key, value) tuples, one timestamp: header (CRC 0) and records."},
    {"scan_records", scan_records, METH_VARARGS, "Field positions of every v2 record, as native arrays."},
    {"scan_columns", scan_columns, METH_VARARGS,
     "Columnar decode of v2 batches: offsets, timestamps, Arrow binary keys and values."},
    {"scan_arrow", scan_arrow, METH_VARARGS, "scan_columns into caller-allocated Arrow buffers, from a given row on."},
    {"scan_batches", scan_batches, METH_VARARGS,
     "Walk the whole v2 batches of a read (headers, offsets, CRCs) into scan_columns' parts."},
    {"decode_records", decode_records, METH_VARARGS,
     "Decode v2 records into Record objects; optional topic, partition, timestamp_type stamped on each."},
    {"freed_as_record", freed_as_record, METH_O,
     "Make the instances of a subclass of Record adding no field freed as Record's; returns it."},
    {"segment_names", segment_names, METH_VARARGS, "Base offsets of <20 digits><suffix> names, per suffix."},
    {"index_search", index_search, METH_VARARGS, "Binary search of big-endian index entries in place."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "pylog._speedups", NULL, -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    record_type = (PyTypeObject *)PyType_FromSpec(&record_spec);
    if (!record_type || PyObject_SetAttrString((PyObject *)record_type, "is_control", Py_False) < 0 ||
        PyModule_AddObjectRef(m, "Record", (PyObject *)record_type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
