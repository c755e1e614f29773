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
 *       The columnar decode of v2 batches in one walk: offsets, timestamps and keys and values
 *       copied into Arrow's binary layout (data, int32 offsets, a valid byte each).
 *   scan_columns_exact(parts) -> tuple of 8 bytes objects
 *       scan_columns' result, the key and value data allocated at their exact size (two walks).
 *   scan_arrow(parts, outs, row, key_at, value_at, key_nulls, value_nulls) -> the same five after
 *       scan_columns' walk into Arrow buffers the caller allocated (pyarrow's memory pool), from
 *       a given row and data positions on: a fetch is decoded chunk by chunk into one set.
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

/* Read a zigzag varint of at most max_bytes; returns 0 on success. */
static inline int get_varint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, int max_bytes,
                             int64_t *out) {
    if (*pos < end && buf[*pos] < 0x80) {        /* one byte: most lengths and deltas */
        unsigned b = buf[(*pos)++];
        *out = (int64_t)(b >> 1) ^ -(int64_t)(b & 1);
        return 0;
    }
    uint64_t value = 0;
    int shift = 0;
    Py_ssize_t i = *pos;
    for (int k = 0; k < max_bytes; k++) {
        if (i >= end) return -1;                 /* ran off the end */
        unsigned char b = buf[i++];
        value |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *out = (int64_t)((value >> 1) ^ (~(value & 1) + 1));
            *pos = i;
            return 0;
        }
        shift += 7;
    }
    return -2;                                   /* too long */
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

static int walk_record(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, rec_t *r) {
    int64_t length, v;
    int rc = get_varint(buf, end, pos, 5, &length);
    if (rc) goto bad_varint;
    if (length < 6 || *pos + length > end) {
        PyErr_Format(PyExc_ValueError, "invalid record size %lld at byte %zd of the records",
                     (long long)length, *pos);
        return -1;
    }
    Py_ssize_t rec_end = *pos + (Py_ssize_t)length;
    Py_ssize_t p = *pos + 1;                     /* skip attributes */
    if ((rc = get_varint(buf, rec_end, &p, 10, &r->ts_delta))) goto bad_varint;
    if ((rc = get_varint(buf, rec_end, &p, 5, &r->off_delta))) goto bad_varint;
    if ((rc = get_varint(buf, rec_end, &p, 5, &v))) goto bad_varint;
    if (v < -1 || (v > 0 && p + v > rec_end)) {
        PyErr_Format(PyExc_ValueError, "invalid key length %lld", (long long)v); return -1;
    }
    r->key_pos = p; r->key_len = (Py_ssize_t)v; if (v > 0) p += v;
    if ((rc = get_varint(buf, rec_end, &p, 5, &v))) goto bad_varint;
    if (v < -1 || (v > 0 && p + v > rec_end)) {
        PyErr_Format(PyExc_ValueError, "invalid value length %lld", (long long)v); return -1;
    }
    r->val_pos = p; r->val_len = (Py_ssize_t)v; if (v > 0) p += v;
    if ((rc = get_varint(buf, rec_end, &p, 5, &v))) goto bad_varint;
    if (v < 0 || v > rec_end - p) {
        PyErr_Format(PyExc_ValueError, "invalid header count %lld", (long long)v); return -1;
    }
    r->hdr_count = (Py_ssize_t)v; r->hdr_pos = p;
    for (int64_t h = 0; h < v; h++) {            /* skip headers, checking their lengths */
        int64_t hl;
        if ((rc = get_varint(buf, rec_end, &p, 5, &hl))) goto bad_varint;
        if (hl < 0 || p + hl > rec_end) {
            PyErr_Format(PyExc_ValueError, "invalid header key length %lld", (long long)hl); return -1;
        }
        p += hl;
        if ((rc = get_varint(buf, rec_end, &p, 5, &hl))) goto bad_varint;
        if (hl < -1 || (hl > 0 && p + hl > rec_end)) {
            PyErr_Format(PyExc_ValueError, "invalid header value length %lld", (long long)hl); return -1;
        }
        if (hl > 0) p += hl;
    }
    if (p != rec_end) {
        PyErr_Format(PyExc_ValueError, "invalid record size: expected to read %lld bytes but read %lld",
                     (long long)length, (long long)(length + p - rec_end));
        return -1;
    }
    r->rec_end = rec_end;
    *pos = rec_end;
    return 0;
bad_varint:
    if (rc == -2) PyErr_SetString(PyExc_ValueError, "varint is longer than its maximum size");
    else PyErr_SetString(PyExc_ValueError, "records end before the declared record count (premature EOF)");
    return -1;
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

static PyObject *parse_headers(const unsigned char *buf, Py_ssize_t p, Py_ssize_t end, Py_ssize_t count) {
    PyObject *tup = PyTuple_New(count);
    if (!tup) return NULL;
    for (Py_ssize_t h = 0; h < count; h++) {
        int64_t kl, vl;
        get_varint(buf, end, &p, 5, &kl);        /* already validated by walk_record */
        PyObject *key = PyUnicode_DecodeUTF8((const char *)buf + p, kl, "surrogateescape");
        p += kl;
        get_varint(buf, end, &p, 5, &vl);
        PyObject *val = slice_or_none(buf, p, vl);
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

/* scan_columns(parts) -> (offsets, timestamps, key_data, key_offsets, key_valid, value_data,
 *                         value_offsets, value_valid)
 * The columnar decode of v2 batches in one walk: ``parts`` is a list of (records, count,
 * base_offset, base_timestamp, append_time) per batch, ``records`` its uncompressed record
 * bytes (any buffer: a slice of the fetched bytes is not copied), ``append_time`` None or the
 * batch's max timestamp. Keys and values are copied straight into their column (Arrow's
 * binary layout: data and int32 offsets [n+1]); offsets and timestamps are native int64
 * arrays, key_valid/value_valid one byte (0 or 1) a record. Every record is checked as
 * decode_records checks it (ValueError). */
static PyObject *scan_columns(PyObject *self, PyObject *args) {
    PyObject *parts;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &parts)) return NULL;
    Py_ssize_t nparts = PyList_GET_SIZE(parts);
    typedef struct { Py_buffer view; Py_ssize_t count; long long base_offset, base_ts, fixed_ts; int fixed; } part_t;
    part_t *ps = PyMem_Calloc(nparts ? nparts : 1, sizeof(part_t));
    if (!ps) return PyErr_NoMemory();
    Py_ssize_t n = 0, total = 0;
    PyObject *out[8] = {0}, *result = NULL;
    for (Py_ssize_t b = 0; b < nparts; b++) {
        part_t *p = &ps[b];
        PyObject *append_time;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(parts, b), "y*nLLO;parts holds (records, count, base_offset, "
                              "base_timestamp, append_time) tuples", &p->view, &p->count, &p->base_offset,
                              &p->base_ts, &append_time))
            goto done;
        if (p->count < 0 || p->count > p->view.len / 7) {
            PyErr_Format(PyExc_ValueError, "record count %zd does not fit in %zd bytes of records", p->count,
                         p->view.len);
            goto done;
        }
        p->fixed = append_time != Py_None;
        if (p->fixed && (p->fixed_ts = PyLong_AsLongLong(append_time)) == -1 && PyErr_Occurred()) goto done;
        n += p->count;
        total += p->view.len;
    }
    if (total > INT32_MAX) { PyErr_SetString(PyExc_OverflowError, "more than 2 GiB of records in one run"); goto done; }
    out[0] = PyBytes_FromStringAndSize(NULL, n * 8);       /* offsets */
    out[1] = PyBytes_FromStringAndSize(NULL, n * 8);       /* timestamps */
    out[2] = PyBytes_FromStringAndSize(NULL, total);       /* key data: at most every byte, cut to size after */
    out[3] = PyBytes_FromStringAndSize(NULL, (n + 1) * 4); /* key offsets */
    out[4] = PyBytes_FromStringAndSize(NULL, n);           /* key valid */
    out[5] = PyBytes_FromStringAndSize(NULL, total);       /* value data */
    out[6] = PyBytes_FromStringAndSize(NULL, (n + 1) * 4); /* value offsets */
    out[7] = PyBytes_FromStringAndSize(NULL, n);           /* value valid */
    for (int k = 0; k < 8; k++) if (!out[k]) goto done;
    int64_t *offsets = (int64_t *)PyBytes_AS_STRING(out[0]), *stamps = (int64_t *)PyBytes_AS_STRING(out[1]);
    char *kd = PyBytes_AS_STRING(out[2]), *vd = PyBytes_AS_STRING(out[5]);
    int32_t *ko = (int32_t *)PyBytes_AS_STRING(out[3]), *vo = (int32_t *)PyBytes_AS_STRING(out[6]);
    char *kv = PyBytes_AS_STRING(out[4]), *vv = PyBytes_AS_STRING(out[7]);
    int32_t kat = 0, vat = 0;
    Py_ssize_t i = 0;
    rec_t r;
    for (Py_ssize_t b = 0; b < nparts; b++) {
        const unsigned char *buf = ps[b].view.buf;
        Py_ssize_t end = ps[b].view.len, pos = 0;
        for (Py_ssize_t c = 0; c < ps[b].count; c++, i++) {
            if (walk_record(buf, end, &pos, &r) < 0) goto done;
            offsets[i] = ps[b].base_offset + r.off_delta;
            stamps[i] = ps[b].fixed ? ps[b].fixed_ts : ps[b].base_ts + r.ts_delta;
            ko[i] = kat; kv[i] = r.key_len >= 0;
            if (r.key_len > 0) { memcpy(kd + kat, buf + r.key_pos, r.key_len); kat += (int32_t)r.key_len; }
            vo[i] = vat; vv[i] = r.val_len >= 0;
            if (r.val_len > 0) { memcpy(vd + vat, buf + r.val_pos, r.val_len); vat += (int32_t)r.val_len; }
        }
        if (pos != end) {
            PyErr_SetString(PyExc_ValueError, "incorrect declared batch size, records still remaining in the batch");
            goto done;
        }
    }
    ko[n] = kat; vo[n] = vat;
    if (_PyBytes_Resize(&out[2], kat) < 0 || _PyBytes_Resize(&out[5], vat) < 0) goto done;
    result = PyTuple_New(8);
    if (!result) goto done;
    for (int k = 0; k < 8; k++) { PyTuple_SET_ITEM(result, k, out[k]); out[k] = NULL; }
done:
    for (Py_ssize_t b = 0; b < nparts; b++) if (ps[b].view.obj) PyBuffer_Release(&ps[b].view);  /* those taken */
    PyMem_Free(ps);
    for (int k = 0; k < 8; k++) Py_XDECREF(out[k]);
    return result;
}

/* A varint of at most max_bytes at *pp (below lim), zigzag-decoded; one- and two-byte varints (most
 * lengths and deltas) without a loop. 0 on success, else get_varint's -1 (ran off the end) or -2 (too long). */
static inline int arrow_varint(const unsigned char **pp, const unsigned char *lim, int max_bytes, int64_t *out) {
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
    Py_ssize_t at = 0;
    int rc = get_varint(p, lim - p, &at, max_bytes, out);
    if (!rc) *pp = p + at;
    return rc;
}

/* The key and value bytes of ``count`` records at p (below lim) added to *kbytes and *vbytes: a walk
 * reading only each record's length, deltas and key and value lengths. -1 when they do not parse within
 * the records' bounds (a record walk_record accepts always parses here). */
static int sum_data_lengths(const unsigned char *p, const unsigned char *lim, Py_ssize_t count,
                            Py_ssize_t *kbytes, Py_ssize_t *vbytes) {
    int64_t length, delta, kl, vl;
    for (Py_ssize_t c = 0; c < count; c++) {
        if (arrow_varint(&p, lim, 5, &length) || length < 1 || length > lim - p) return -1;
        const unsigned char *end = p + length, *q = p + 1;  /* past the attributes */
        if (arrow_varint(&q, end, 10, &delta) || arrow_varint(&q, end, 5, &delta) || arrow_varint(&q, end, 5, &kl))
            return -1;
        if (kl > 0) {
            if (kl > end - q) return -1;
            q += kl;
            *kbytes += kl;
        }
        if (arrow_varint(&q, end, 5, &vl)) return -1;
        if (vl > 0) {
            if (vl > end - q) return -1;
            *vbytes += vl;
        }
        p = end;
    }
    return 0;
}

/* scan_columns_exact(parts) -> scan_columns(parts)'s 8 bytes objects, the key and value data
 * allocated at their exact size: a first, light walk sums the key and value lengths
 * (sum_data_lengths) where scan_columns allocates the records' size for each and cuts it after.
 * A reader decoding fetch after fetch then takes no more memory than it returns, where
 * over-sized blocks are mapped and unmapped by the C library and their pages faulted in again
 * at every fetch. Same checks and errors as scan_columns. */
static PyObject *scan_columns_exact(PyObject *self, PyObject *args) {
    PyObject *parts;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &parts)) return NULL;
    Py_ssize_t nparts = PyList_GET_SIZE(parts);
    typedef struct { Py_buffer view; Py_ssize_t count; long long base_offset, base_ts, fixed_ts; int fixed; } part_t;
    part_t *ps = PyMem_Calloc(nparts ? nparts : 1, sizeof(part_t));
    if (!ps) return PyErr_NoMemory();
    Py_ssize_t n = 0, total = 0, kbytes = 0, vbytes = 0;
    PyObject *out[8] = {0}, *result = NULL;
    rec_t r;
    for (Py_ssize_t b = 0; b < nparts; b++) {
        part_t *p = &ps[b];
        PyObject *append_time;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(parts, b), "y*nLLO;parts holds (records, count, base_offset, "
                              "base_timestamp, append_time) tuples", &p->view, &p->count, &p->base_offset,
                              &p->base_ts, &append_time))
            goto done;
        if (p->count < 0 || p->count > p->view.len / 7) {
            PyErr_Format(PyExc_ValueError, "record count %zd does not fit in %zd bytes of records", p->count,
                         p->view.len);
            goto done;
        }
        p->fixed = append_time != Py_None;
        if (p->fixed && (p->fixed_ts = PyLong_AsLongLong(append_time)) == -1 && PyErr_Occurred()) goto done;
        n += p->count;
        total += p->view.len;
        if (sum_data_lengths(p->view.buf, (const unsigned char *)p->view.buf + p->view.len, p->count, &kbytes,
                             &vbytes) < 0) {
            PyErr_SetString(PyExc_ValueError, "record lengths do not parse");
            goto done;
        }
    }
    if (total > INT32_MAX) { PyErr_SetString(PyExc_OverflowError, "more than 2 GiB of records in one run"); goto done; }
    out[0] = PyBytes_FromStringAndSize(NULL, n * 8);       /* offsets */
    out[1] = PyBytes_FromStringAndSize(NULL, n * 8);       /* timestamps */
    out[2] = PyBytes_FromStringAndSize(NULL, kbytes);      /* key data */
    out[3] = PyBytes_FromStringAndSize(NULL, (n + 1) * 4); /* key offsets */
    out[4] = PyBytes_FromStringAndSize(NULL, n);           /* key valid */
    out[5] = PyBytes_FromStringAndSize(NULL, vbytes);      /* value data */
    out[6] = PyBytes_FromStringAndSize(NULL, (n + 1) * 4); /* value offsets */
    out[7] = PyBytes_FromStringAndSize(NULL, n);           /* value valid */
    for (int k = 0; k < 8; k++) if (!out[k]) goto done;
    int64_t *offsets = (int64_t *)PyBytes_AS_STRING(out[0]), *stamps = (int64_t *)PyBytes_AS_STRING(out[1]);
    char *kd = PyBytes_AS_STRING(out[2]), *vd = PyBytes_AS_STRING(out[5]);
    int32_t *ko = (int32_t *)PyBytes_AS_STRING(out[3]), *vo = (int32_t *)PyBytes_AS_STRING(out[6]);
    char *kv = PyBytes_AS_STRING(out[4]), *vv = PyBytes_AS_STRING(out[7]);
    int32_t kat = 0, vat = 0;
    Py_ssize_t i = 0;
    for (Py_ssize_t b = 0; b < nparts; b++) {
        const unsigned char *buf = ps[b].view.buf;
        Py_ssize_t end = ps[b].view.len, pos = 0;
        for (Py_ssize_t c = 0; c < ps[b].count; c++, i++) {
            if (walk_record(buf, end, &pos, &r) < 0) goto done;
            offsets[i] = ps[b].base_offset + r.off_delta;
            stamps[i] = ps[b].fixed ? ps[b].fixed_ts : ps[b].base_ts + r.ts_delta;
            if (kat + r.key_len > kbytes || vat + r.val_len > vbytes) {  /* not the lengths first read */
                PyErr_SetString(PyExc_ValueError, "record lengths changed between two walks");
                goto done;
            }
            ko[i] = kat; kv[i] = r.key_len >= 0;
            if (r.key_len > 0) { memcpy(kd + kat, buf + r.key_pos, r.key_len); kat += (int32_t)r.key_len; }
            vo[i] = vat; vv[i] = r.val_len >= 0;
            if (r.val_len > 0) { memcpy(vd + vat, buf + r.val_pos, r.val_len); vat += (int32_t)r.val_len; }
        }
        if (pos != end) {
            PyErr_SetString(PyExc_ValueError, "incorrect declared batch size, records still remaining in the batch");
            goto done;
        }
    }
    ko[n] = kat; vo[n] = vat;
    result = PyTuple_New(8);
    if (!result) goto done;
    for (int k = 0; k < 8; k++) { PyTuple_SET_ITEM(result, k, out[k]); out[k] = NULL; }
done:
    for (Py_ssize_t b = 0; b < nparts; b++) if (ps[b].view.obj) PyBuffer_Release(&ps[b].view);  /* those taken */
    PyMem_Free(ps);
    for (int k = 0; k < 8; k++) Py_XDECREF(out[k]);
    return result;
}

/* One record of a v2 batch for scan_arrow, checked as walk_record checks it (ValueError with the same
 * messages); headers are skipped. Returns the record's end, NULL on error. */
static const unsigned char *arrow_record(const unsigned char *p, const unsigned char *end, rec_t *r,
                                         const unsigned char *base) {
    int64_t length, v;
    int rc;
    if ((rc = arrow_varint(&p, end, 5, &length))) goto bad_varint;
    if (length < 6 || length > end - p) {
        PyErr_Format(PyExc_ValueError, "invalid record size %lld at byte %zd of the records", (long long)length,
                     (Py_ssize_t)(p - base));
        return NULL;
    }
    const unsigned char *rec_end = p + length;
    p++;                                         /* attributes */
    if ((rc = arrow_varint(&p, rec_end, 10, &r->ts_delta))) goto bad_varint;
    if ((rc = arrow_varint(&p, rec_end, 5, &r->off_delta))) goto bad_varint;
    if ((rc = arrow_varint(&p, rec_end, 5, &v))) goto bad_varint;
    if (v < -1 || (v > 0 && v > rec_end - p)) {
        PyErr_Format(PyExc_ValueError, "invalid key length %lld", (long long)v); return NULL;
    }
    r->key_pos = p - base; r->key_len = (Py_ssize_t)v; if (v > 0) p += v;
    if ((rc = arrow_varint(&p, rec_end, 5, &v))) goto bad_varint;
    if (v < -1 || (v > 0 && v > rec_end - p)) {
        PyErr_Format(PyExc_ValueError, "invalid value length %lld", (long long)v); return NULL;
    }
    r->val_pos = p - base; r->val_len = (Py_ssize_t)v; if (v > 0) p += v;
    if ((rc = arrow_varint(&p, rec_end, 5, &v))) goto bad_varint;
    if (v < 0 || v > rec_end - p) {
        PyErr_Format(PyExc_ValueError, "invalid header count %lld", (long long)v); return NULL;
    }
    for (int64_t h = 0; h < v; h++) {            /* skip headers, checking their lengths */
        int64_t hl;
        if ((rc = arrow_varint(&p, rec_end, 5, &hl))) goto bad_varint;
        if (hl < 0 || hl > rec_end - p) {
            PyErr_Format(PyExc_ValueError, "invalid header key length %lld", (long long)hl); return NULL;
        }
        p += hl;
        if ((rc = arrow_varint(&p, rec_end, 5, &hl))) goto bad_varint;
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
    return rec_end;
bad_varint:
    if (rc == -2) PyErr_SetString(PyExc_ValueError, "varint is longer than its maximum size");
    else PyErr_SetString(PyExc_ValueError, "records end before the declared record count (premature EOF)");
    return NULL;
}

/* scan_arrow(parts, outs, row, key_at, value_at, key_nulls, value_nulls)
 *     -> (row, key_at, value_at, key_nulls, value_nulls)
 * scan_columns' walk, written into Arrow buffers the caller allocated (from pyarrow's memory pool,
 * whose pages are reused from one read to the next) instead of new bytes objects. ``parts`` is
 * scan_columns'; ``outs`` the writable buffers (offsets int64, timestamps int64 in microseconds,
 * timestamp types int32, key offsets int32, key validity bitmap, key data, value offsets int32,
 * value validity bitmap, value data), filled from row ``row`` and data positions ``key_at`` /
 * ``value_at`` on (the offsets' entry ``row`` is written too), ``key_nulls`` / ``value_nulls`` the
 * nulls of the rows before: a bitmap is written only once its column has a null. Returns where
 * the next call goes on. Every record is checked as decode_records checks it and every write is
 * bounded by its buffer's size (ValueError, nothing returned). */
enum { A_OFFSETS, A_STAMPS, A_TYPES, A_KOFF, A_KBITS, A_KDATA, A_VOFF, A_VBITS, A_VDATA, A_COUNT };

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

static PyObject *scan_arrow(PyObject *self, PyObject *args) {
    PyObject *parts, *outs;
    Py_ssize_t row, key_at, value_at, key_nulls, value_nulls;
    if (!PyArg_ParseTuple(args, "O!O!nnnnn", &PyList_Type, &parts, &PyTuple_Type, &outs, &row, &key_at, &value_at,
                          &key_nulls, &value_nulls))
        return NULL;
    if (PyTuple_GET_SIZE(outs) != A_COUNT) {
        PyErr_SetString(PyExc_TypeError, "scan_arrow: outs holds 9 buffers");
        return NULL;
    }
    Py_buffer ob[A_COUNT];
    int taken = 0;
    PyObject *result = NULL;
    for (; taken < A_COUNT; taken++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(outs, taken), &ob[taken], PyBUF_WRITABLE) < 0) goto done;
    }
    Py_ssize_t rows = ob[A_OFFSETS].len / 8;
    if (row < 0 || key_at < 0 || value_at < 0 || key_nulls < 0 || value_nulls < 0 || key_nulls > row ||
        value_nulls > row || ob[A_STAMPS].len / 8 < rows || ob[A_TYPES].len / 4 < rows ||
        ob[A_KOFF].len / 4 < rows + 1 || ob[A_VOFF].len / 4 < rows + 1 || ob[A_KBITS].len * 8 < rows ||
        ob[A_VBITS].len * 8 < rows || key_at > ob[A_KDATA].len || value_at > ob[A_VDATA].len ||
        ob[A_KDATA].len > INT32_MAX || ob[A_VDATA].len > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "scan_arrow: buffers too small for their rows");
        goto done;
    }
    int64_t *offsets = ob[A_OFFSETS].buf, *stamps = ob[A_STAMPS].buf;
    int32_t *types = ob[A_TYPES].buf, *ko = ob[A_KOFF].buf, *vo = ob[A_VOFF].buf;
    unsigned char *kbits = ob[A_KBITS].buf, *vbits = ob[A_VBITS].buf;
    char *kd = ob[A_KDATA].buf, *vd = ob[A_VDATA].buf;
    Py_ssize_t kcap = ob[A_KDATA].len, vcap = ob[A_VDATA].len;
    if (row < rows) { ko[row] = (int32_t)key_at; vo[row] = (int32_t)value_at; }
    Py_ssize_t nparts = PyList_GET_SIZE(parts);
    rec_t r;
    for (Py_ssize_t b = 0; b < nparts; b++) {
        Py_buffer view;
        Py_ssize_t count;
        long long base_offset, base_ts, fixed_ts = 0;
        PyObject *append_time;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(parts, b), "y*nLLO;parts holds (records, count, base_offset, "
                              "base_timestamp, append_time) tuples", &view, &count, &base_offset, &base_ts,
                              &append_time))
            goto done;
        int fixed = append_time != Py_None;
        if (fixed && (fixed_ts = PyLong_AsLongLong(append_time)) == -1 && PyErr_Occurred()) {
            PyBuffer_Release(&view);
            goto done;
        }
        if (count < 0 || count > view.len / 7 || count > rows - row) {
            PyErr_Format(PyExc_ValueError, "record count %zd does not fit in %zd bytes of records or the rows left",
                         count, view.len);
            PyBuffer_Release(&view);
            goto done;
        }
        const unsigned char *base = view.buf, *p = base, *end = base + view.len;
        int32_t type = fixed ? 1 : 0;
        for (Py_ssize_t c = 0; c < count; c++, row++) {
            if (!(p = arrow_record(p, end, &r, base))) { PyBuffer_Release(&view); goto done; }
            if ((r.key_len > 0 && r.key_len > kcap - key_at) || (r.val_len > 0 && r.val_len > vcap - value_at)) {
                PyErr_SetString(PyExc_ValueError, "scan_arrow: data buffers too small");
                PyBuffer_Release(&view);
                goto done;
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
        PyBuffer_Release(&view);
        if (p != end) {
            PyErr_SetString(PyExc_ValueError, "incorrect declared batch size, records still remaining in the batch");
            goto done;
        }
    }
    result = Py_BuildValue("(nnnnn)", row, key_at, value_at, key_nulls, value_nulls);
done:
    for (int k = 0; k < taken; k++) PyBuffer_Release(&ob[k]);
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
     "Decode v2 batches' records into columns: offsets, timestamps, keys and values in Arrow's layout."},
    {"scan_columns_exact", scan_columns_exact, METH_VARARGS,
     "scan_columns with the key and value data allocated at their exact size (the records walked twice)."},
    {"scan_arrow", scan_arrow, METH_VARARGS,
     "Decode v2 batches' records into caller-allocated Arrow buffers: offsets, timestamps, keys, values."},
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
