/*
 * pylog._speedups: the two hot loops of Kafka's record format v2, in C.
 *
 *   encode_records(values, keys, ts_deltas[, reserve[, ts_base]]) -> bytes
 *       Concatenated v2 records with offset deltas 0..n-1 and no headers; each timestamp
 *       delta is ts_deltas[i] - ts_base: given ts_base, ts_deltas holds the timestamps
 *       themselves (ints >= -1, else TypeError / OverflowError naming the record).
 *   scan_records(buf, count) -> tuple of 8 bytes objects (native int64/int32 arrays)
 *       Positions and lengths of every record's fields, for a columnar decode.
 *   decode_records(buf, count, base_offset, base_timestamp, append_time, record_type) -> list
 *       Record objects (with headers), for the object decode.
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
        if (bytes_or_none(PyList_GET_ITEM(values, i), &vd, &vl) < 0 ||
            (keys != Py_None && bytes_or_none(PyList_GET_ITEM(keys, i), &kd, &kl) < 0)) {
            PyMem_Free(tsd);
            PyErr_Format(PyExc_TypeError, "record %zd: key and value must be bytes or None", i);
            return NULL;
        }
        if (keys == Py_None) kl = -1;
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
        const char *kd = NULL, *vd; Py_ssize_t kl = -1, vl;
        bytes_or_none(PyList_GET_ITEM(values, i), &vd, &vl);
        if (keys != Py_None) bytes_or_none(PyList_GET_ITEM(keys, i), &kd, &kl);
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

/* A record class whose fields are its own __slots__ (pylog.record.Record, not a subclass):
 * the byte offsets of its eight slots, found once, so a record is built without running
 * its __init__ (which only assigns them). Such a record holds bytes, ints, None and a tuple
 * of (str, bytes) pairs, so it cannot be part of a reference cycle: like CPython's tuples
 * of atomic values it is left untracked by the cycle collector, whose passes over millions
 * of young records otherwise cost as much as decoding them. */
#define RECORD_SLOTS 8
static const char *record_slot_names[RECORD_SLOTS] = {
    "value", "key", "timestamp", "headers", "offset", "topic", "partition", "timestamp_type"};
static PyTypeObject *slots_type = NULL;
static Py_ssize_t slot_offsets[RECORD_SLOTS];

/* 1 when ``type``'s slots are known (found now or before), 0 when it has not all of them. */
static int record_slots(PyObject *type) {
    if ((PyTypeObject *)type == slots_type) return 1;
    if (!PyType_Check(type)) return 0;
    Py_ssize_t found[RECORD_SLOTS];
    for (int k = 0; k < RECORD_SLOTS; k++) {
        PyObject *d = PyObject_GetAttrString(type, record_slot_names[k]);
        if (!d) { PyErr_Clear(); return 0; }
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) &&  /* its own slots: a subclass may do more in __init__ */
                 ((PyMemberDescrObject *)d)->d_common.d_type == (PyTypeObject *)type &&
                 ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
        if (ok) found[k] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!ok) return 0;
    }
    Py_XDECREF(slots_type);
    Py_INCREF(type);
    slots_type = (PyTypeObject *)type;
    memcpy(slot_offsets, found, sizeof found);
    return 1;
}

/* A new instance of slots_type holding argv[0..4] (value, key, timestamp, headers, offset:
 * references stolen) and place[0..2] (topic, partition, timestamp_type). */
static PyObject *new_slots_record(PyObject **argv, PyObject **place) {
    PyObject *rec = slots_type->tp_alloc(slots_type, 0);
    if (!rec) { for (int k = 0; k < 5; k++) Py_DECREF(argv[k]); return NULL; }
    for (int k = 0; k < RECORD_SLOTS; k++) {
        PyObject *v = k < 5 ? argv[k] : place[k - 5];
        if (k >= 5) Py_INCREF(v);
        *(PyObject **)((char *)rec + slot_offsets[k]) = v;
    }
    PyObject_GC_UnTrack(rec);
    return rec;
}

static PyObject *decode_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    long long base_offset, base_ts;
    PyObject *append_time, *record_type;
    PyObject *place[3] = {Py_None, Py_None, Py_None};  /* topic, partition, timestamp_type */
    if (!PyArg_ParseTuple(args, "y*nLLOO|OOO", &view, &count, &base_offset, &base_ts, &append_time, &record_type,
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
    PyObject *empty = PyTuple_New(0);
    int by_slots = record_slots(record_type);
    Py_ssize_t pos = 0;
    rec_t r;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (walk_record(buf, end, &pos, &r) < 0) goto fail;
        PyObject *argv[5];
        argv[0] = slice_or_none(buf, r.val_pos, r.val_len);
        argv[1] = slice_or_none(buf, r.key_pos, r.key_len);
        argv[2] = PyLong_FromLongLong(use_fixed ? fixed_ts : base_ts + r.ts_delta);
        if (r.hdr_count) argv[3] = parse_headers(buf, r.hdr_pos, r.rec_end, r.hdr_count);
        else { argv[3] = empty; Py_INCREF(empty); }
        argv[4] = PyLong_FromLongLong(base_offset + r.off_delta);
        PyObject *rec = NULL;
        if (!(argv[0] && argv[1] && argv[2] && argv[3] && argv[4])) {
            for (int k = 0; k < 5; k++) Py_XDECREF(argv[k]);
            goto fail;
        }
        if (by_slots) {
            rec = new_slots_record(argv, place);
        } else {
            rec = PyObject_Vectorcall(record_type, argv, 5, NULL);
            for (int k = 0; k < 5; k++) Py_DECREF(argv[k]);
            for (int k = 0; rec && placed && k < 3; k++) {
                if (PyObject_SetAttrString(rec, record_slot_names[5 + k], place[k]) < 0) Py_CLEAR(rec);
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
    return out;
fail:
    Py_DECREF(empty);
    Py_DECREF(out);
    PyBuffer_Release(&view);
    return NULL;
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

static PyMethodDef methods[] = {
    {"gather", gather, METH_VARARGS, "Copy byte ranges into one buffer with int32 offsets."},
    {"encode_records", encode_records, METH_VARARGS,
     "Encode v2 records (no headers): values, keys, ts deltas[, reserve[, ts base]]."},
    {"scan_records", scan_records, METH_VARARGS, "Field positions of every v2 record, as native arrays."},
    {"decode_records", decode_records, METH_VARARGS,
     "Decode v2 records into Record objects; optional topic, partition, timestamp_type stamped on each."},
    {"segment_names", segment_names, METH_VARARGS, "Base offsets of <20 digits><suffix> names, per suffix."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "pylog._speedups", NULL, -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
