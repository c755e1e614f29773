"""``pylog dump``: the same output as Kafka's ``kafka-dump-log.sh`` (DumpLogSegments),
for ``.log``, ``.index``, ``.timeindex``, ``.txnindex``, ``.snapshot`` and KRaft snapshot
``.checkpoint`` files, so scripts written for Kafka's tool work on pylog's files and the
other way round.

A URL (``s3://``, ``gs://``, ``az://``, ``abfss://``, ``file://``) of such an object is read
with ranged GETs through the store of its directory (:class:`Files`) and printed as the file
is. The tiered layouts' objects are named ``<offset>-<segment id>.<suffix>``, which Kafka's
tool does not take (said on stderr); Aiven's ``.log`` (chunked, maybe compressed) and
``.indexes`` (every index of the segment in one object) are read through the
``.rsm-manifest`` beside them."""

from __future__ import annotations

import argparse
import binascii
import json
import os
import re
import sys

from pylog.cli.common import add_storage_arguments, one_line_warnings, open_object_store
from pylog.coordinator.offsets_records import GROUP_RECORDS
from pylog.coordinator.txn_records import TXN_RECORDS
from pylog.errors import CorruptFileError, CorruptIndexError, InvalidArgumentError, InvalidRecordError, PylogError, \
    RecordFormatError
from pylog.index import OffsetIndex
from pylog.index.txn_index import AbortedTxn
from pylog.layout import INDEX_SUFFIX, INT32_MAX, KRAFT_SNAPSHOT_SUFFIX, LOG_SUFFIX, OFFSET_INDEX_ENTRY, \
    SNAPSHOT_SUFFIX, TIME_INDEX_ENTRY, TIME_INDEX_SUFFIX, TXN_INDEX_ENTRY, TXN_INDEX_ENTRY_BYTES, \
    TXN_INDEX_SUFFIX, TXN_INDEX_VERSION
from pylog.producer_state import parse_snapshot
from pylog.record.batch import decode_batches, increment_sequence
from pylog.record.kraft import control_text, metadata_text, snapshot_title
from pylog.record.remote_metadata import remote_metadata_text
from pylog.remote.aiven import ChunkedSegmentBytes, read_indexes, read_manifest
from pylog.remote.store import is_url

RECORD_INDENT = "|"
#: The tiered layouts' object names (Aiven's plugin, Kafka's LocalTieredStorage):
#: ``<start offset>-<segment id>.<suffix>``, which Kafka's tool cannot take a base offset from
TIERED_NAME = re.compile(r"(?P<offset>\d+)-(?P<segment_id>[A-Za-z0-9_-]{22})\.(?P<suffix>[a-z_-]+)")
#: Aiven's object holding a segment's indexes (:mod:`pylog.remote.aiven`)
AIVEN_INDEXES_SUFFIX = ".indexes"
#: The indexes in Aiven's ``.indexes``, by :func:`pylog.remote.aiven.read_indexes`'s names, in the
#: order printed, each with the heading it is printed under
AIVEN_INDEXES = {"offset": "Offset index", "timestamp": "Time index", "transaction": "Transaction index",
                 "producer_snapshot": "Producer snapshot", "leader_epoch": "Leader epoch checkpoint"}
#: Kafka's decoder options pylog does not implement, and the topic whose records they decode
NOT_DECODED = {"--share-group-state-decoder": "__share_group_state"}


def add_parser(sub) -> None:
    p = sub.add_parser("dump")
    p.add_argument("paths", nargs="*", metavar="FILE",
                   help=".log/.index/.timeindex/.txnindex/.snapshot/.checkpoint files (or use --files), or their "
                        "URLs in object storage (s3://, s3a://, gs://, az://, abfss://, file://; Aiven's tiered "
                        ".log and .indexes too)")
    p.add_argument("--files", default="",
                   help="comma-separated files, as kafka-dump-log.sh takes them (added after any FILE)")
    p.add_argument("--deep-iteration", action="store_true", help="print every record, not just batches")
    p.add_argument("--print-data-log", action="store_true", help="print keys and payloads (implies deep iteration)")
    p.add_argument("--verify-index-only", action="store_true", help="only report index entries that disagree with the log")
    p.add_argument("--index-sanity-check", action="store_true", help="only run the index sanity check")
    p.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024,
                   help="bytes of the .log read to check each index entry (default 5 MiB)")
    p.add_argument("--max-bytes", type=int, default=INT32_MAX, help="read at most this many bytes of a .log")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="print only keys and payloads of records, not their offsets, sizes and sequences")
    decoders = p.add_mutually_exclusive_group()
    decoders.add_argument("--offsets-decoder", action="store_true",
                          help="print keys and payloads as __consumer_offsets records (implies --print-data-log)")
    decoders.add_argument("--transaction-log-decoder", action="store_true",
                          help="print keys and payloads as __transaction_state records (implies --print-data-log)")
    decoders.add_argument("--cluster-metadata-decoder", action="store_true",
                          help="print payloads as KRaft cluster metadata records (implies --print-data-log)")
    decoders.add_argument("--remote-log-metadata-decoder", action="store_true",
                          help="print payloads as __remote_log_metadata records (implies --print-data-log)")
    for option in NOT_DECODED:
        decoders.add_argument(option, action="store_true", help=argparse.SUPPRESS)
    decoders.add_argument("--value-decoder", choices=list(VALUE_DECODERS),
                          help="print payloads as utf8 text (the default, Kafka's StringDecoder), compact json "
                               "or hex (implies --print-data-log)")
    add_storage_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    """Dump each file by its suffix (the text after the name's last dot, as Kafka picks);
    a file that cannot be read is reported on stderr and the others are still dumped."""
    one_line_warnings(args.command)
    summaries = Summaries()
    files = Files(args)
    dumpers = {
        LOG_SUFFIX: lambda path: dump_log(path, args, f"Log starting offset: {_base_offset(path)}", summaries, files),
        KRAFT_SNAPSHOT_SUFFIX: lambda path: dump_log(path, args, snapshot_title(os.path.basename(path)), summaries,
                                                     files),
        INDEX_SUFFIX: lambda path: dump_index(path, args, summaries, files, time_index=False),
        TIME_INDEX_SUFFIX: lambda path: dump_index(path, args, summaries, files, time_index=True),
        TXN_INDEX_SUFFIX: lambda path: dump_txn_index(path, files.read(path)),
        SNAPSHOT_SUFFIX: lambda path: dump_snapshot(path, files.read(path)),
        AIVEN_INDEXES_SUFFIX: lambda path: dump_aiven_indexes(path, args, summaries, files),
    }
    for option, topic in NOT_DECODED.items():
        if getattr(args, option[2:].replace("-", "_")):
            raise InvalidArgumentError(f"{option} ({topic} records) is not implemented by pylog dump; "
                                       f"--value-decoder hex prints their bytes")
    paths = [p if is_url(p) else java_path(p) for p in (*args.paths, *(f for f in args.files.split(",") if f))]
    if not paths:
        raise InvalidArgumentError("no files to dump: give them as arguments or with --files a.log,b.index")
    if args.max_bytes < 0:
        raise InvalidArgumentError(f"--max-bytes must be at least 0, not {args.max_bytes}")
    status = 0
    for path in paths:
        print(f"Dumping {path}")
        name = os.path.basename(path)
        dump = dumpers.get(name[name.rfind("."):] if "." in name else None)
        if dump is None:
            print(f"Ignoring unknown file {path}", file=sys.stderr)
        elif not is_url(path) and not os.path.exists(path):
            print(f"pylog dump: error: no such file {path}", file=sys.stderr)
            status = 1
        else:
            try:
                files.say_what_kafka_takes(path)
                dump(path)
            except PylogError as e:
                print(f"pylog dump: error: {e}", file=sys.stderr)
                status = 1
    summaries.print()
    return status


class Files:
    """How ``pylog dump`` reads what it is given: a local file; or an object, by its URL,
    through the store of its directory (opened once per directory, no request): a whole
    object in one GET, a prefix in one ranged GET, an existence check in one HEAD. An Aiven
    ``.log`` is read through the ``.rsm-manifest`` beside it (one GET, then the chunks)."""

    def __init__(self, args):
        self._args = args
        self._stores: dict = {}
        self._manifests: dict = {}

    def object(self, url: str):
        """(the store of ``url``'s directory, the object's key in it)."""
        parent, _, key = url.rpartition("/")
        if parent not in self._stores:
            self._stores[parent] = open_object_store(parent, self._args)
        return self._stores[parent], key

    def exists(self, path: str) -> bool:
        if not is_url(path):
            return os.path.exists(path)
        store, key = self.object(path)
        return store.exists(key)

    def read(self, path: str, limit: int | None = None) -> bytes:
        """The file's bytes, its first ``limit`` only when given."""
        if not is_url(path):
            with open(path, "rb") as f:
                return f.read(-1 if limit is None else limit)
        store, key = self.object(path)
        manifest = self.manifest(path) if path.endswith(LOG_SUFFIX) else None
        if manifest is not None:
            source = ChunkedSegmentBytes(store, key, manifest)
            return source.read(0, source.size if limit is None else min(limit, source.size))
        return store.read_range(key, 0, INT32_MAX if limit is None else limit)  # an empty object too

    def manifest(self, url: str):
        """The Aiven manifest of the tiered object ``url`` (None when it has none beside it)."""
        m = TIERED_NAME.fullmatch(os.path.basename(url))
        if m is None or not is_url(url):
            return None
        manifest_url = url[: len(url) - len(m["suffix"])] + "rsm-manifest"
        if manifest_url not in self._manifests:
            store, key = self.object(manifest_url)
            self._manifests[manifest_url] = read_manifest(store, key) if store.exists(key) else None
        return self._manifests[manifest_url]

    def say_what_kafka_takes(self, path: str) -> None:
        """On stderr, why Kafka's DumpLogSegments would not read ``path`` as pylog does, if so."""
        name = os.path.basename(path)
        m = TIERED_NAME.fullmatch(name)
        if m is None:
            return
        suffix = m["suffix"]
        why = f"its name is a tiered layout's <start offset>-<segment id>.{suffix}, not <base offset>.{suffix}"
        manifest = self.manifest(path)
        if manifest is not None and name.endswith(AIVEN_INDEXES_SUFFIX):
            why = "it knows no .indexes (Aiven's object holding the segment's indexes); pylog reads them through " \
                  "the .rsm-manifest beside it"
        elif manifest is not None and manifest.transformed:
            why += "; and its chunks are transformed (compressed or encrypted): pylog reads them through the manifest"
        print(f"pylog dump: Kafka's DumpLogSegments does not take {name}: {why}", file=sys.stderr)


def dump_aiven_indexes(path: str, args, summaries: "Summaries", files: Files) -> None:
    """Each index in Aiven's ``.indexes`` object, under its heading, as the index file is
    dumped: offsets and times checked against the segment (the ``.log`` beside it).
    Cost: the manifest, the ``.indexes`` (one GET each), and the ``.log`` when an index
    has entries."""
    manifest = files.manifest(path)
    if manifest is None:
        raise CorruptFileError("no .rsm-manifest beside it: Aiven's .indexes object is read through its manifest",
                               path=path)
    store, key = files.object(path)
    indexes = read_indexes(store, key, manifest)
    log_url = path[: -len(AIVEN_INDEXES_SUFFIX)] + LOG_SUFFIX
    log_bytes: list = []

    def log_data():
        if not log_bytes:
            log_bytes.append(files.read(log_url) if files.exists(log_url) else None)
        return log_bytes[0]
    for name, heading in AIVEN_INDEXES.items():
        if name not in indexes:
            continue
        print(f"{heading}:")
        data = indexes[name]
        if name in ("offset", "timestamp"):
            dump_index_bytes(path, data, log_data, lambda: indexes.get("offset", b""), args, summaries,
                             time_index=name == "timestamp")
        elif name == "transaction":
            dump_txn_index(path, data)
        elif name == "producer_snapshot":
            dump_snapshot(path, data)
        else:
            print(data.decode("utf-8", "replace"), end="" if data.endswith(b"\n") or not data else "\n")


def java_path(path) -> str:
    """A path as Java's ``File`` prints it: repeated separators as one, no trailing one."""
    text = re.sub("/+", "/", os.fspath(path))
    return text[:-1] if len(text) > 1 and text.endswith("/") else text


def java_absolute_path(path: str) -> str:
    """Java's ``File.getAbsolutePath()``: the working directory joined, nothing normalised
    (a URL as it is)."""
    return path if os.path.isabs(path) or is_url(path) else java_path(os.path.join(os.getcwd(), path))


class Summaries:
    """What DumpLogSegments reports on stderr after the last file, as it prints it: the
    index mismatches of each .index (highest index offset first, one line an offset), the
    time index errors, then each log's non-consecutive offsets (by the offset before the
    gap, the last gap after it kept). Files in the order they were dumped; Kafka's come in
    a HashMap's order (docs/cli.md)."""

    def __init__(self):
        self.index_mismatches: dict[str, dict[int, int]] = {}
        self.time_mismatches: dict[str, list] = {}
        self.time_out_of_order: dict[str, list] = {}
        self.time_not_found: dict[str, list] = {}
        self.non_consecutive: dict[str, dict[int, int]] = {}

    def print(self) -> None:
        for path, by_offset in self.index_mismatches.items():
            _print_err(f"Mismatches in :{path}")
            for a in sorted(by_offset, reverse=True):
                _print_err(f"  Index offset: {a}, log offset: {by_offset[a]}")
        for heading, pairs_by_path, line in (
                ("Found timestamp mismatch in :", self.time_mismatches, "  Index timestamp: {}, log timestamp: {}"),
                ("Found out of order timestamp in :", self.time_out_of_order,
                 "  Index timestamp: {}, Previously indexed timestamp: {}"),
                ("The following indexed offsets are not found in :", self.time_not_found,
                 "Indexed offset: {}, found log offset: {}")):
            for path, pairs in pairs_by_path.items():
                _print_err(heading + path)
                for a, b in pairs:
                    _print_err(line.format(a, b))
        for path, by_offset in self.non_consecutive.items():
            _print_err(f"Non-consecutive offsets in {path}")
            for a in sorted(by_offset):
                _print_err(f"  {a} is followed by {by_offset[a]}")


def _print_err(line: str) -> None:
    print(line, file=sys.stderr)


def _base_offset(path: str) -> int:
    """The offset a file's name starts with (``<offset>.log``; the tiered layouts'
    ``<offset>-<segment id>.log``); 0 when none."""
    m = TIERED_NAME.fullmatch(os.path.basename(path))
    try:
        return int(m["offset"] if m else os.path.basename(path).split(".")[0])
    except ValueError:
        return 0


def _bool(b) -> str:
    return "true" if b else "false"


def dump_log(path: str, args, title: str, summaries: Summaries, files: "Files") -> None:
    """Print ``title``, then every batch (and with deep iteration every record) of a
    segment or KRaft snapshot. O(file size); an object: one ranged GET."""
    data = files.read(path, args.max_bytes)
    print(title)
    print_data = _print_data(args)
    deep = args.deep_iteration or print_data
    valid = 0
    last_offset = -1
    non_consecutive: dict[int, int] = {}
    try:
        for batch in decode_batches(data, allow_incomplete=True, path=path):
            print(batch_line(batch))
            if deep:
                for record in _records(batch):
                    if record.offset != last_offset + 1:  # Kafka's check, also of the first record
                        non_consecutive[last_offset] = record.offset
                    last_offset = record.offset
                    print(record_line(batch, record, args))
            valid = batch.position + batch.size
    except RecordFormatError as e:
        print(f"pylog dump: {e}", file=sys.stderr)
    trailing = len(data) - valid
    if trailing > 0 and args.max_bytes == INT32_MAX:  # a --max-bytes cut is not damage
        print(f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}")
    if non_consecutive:
        summaries.non_consecutive.setdefault(java_absolute_path(path), {}).update(non_consecutive)


def _records(batch):
    try:
        return batch.records(verify=False)
    except PylogError as e:
        print(f"pylog dump: {e}", file=sys.stderr)
        return []


def batch_line(batch) -> str:
    if batch.magic >= 2:
        head = (f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.record_count} "
                f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
                f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
                f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
                f"isTransactional: {_bool(batch.is_transactional)} isControl: {_bool(batch.is_control)} "
                f"deleteHorizonMs: {_optional_long(batch.delete_horizon_ms)}")
    else:
        head = f"offset: {batch.last_offset}"
    return (f"{head} position: {batch.position} {batch.timestamp_type}: {batch.max_timestamp} "
            f"size: {batch.size} magic: {batch.magic} compresscodec: {batch.compression} "
            f"crc: {batch.crc} isvalid: {_bool(batch.is_valid())}")


def record_line(batch, record, args) -> str:
    parts = []
    if not args.skip_record_metadata:
        key_size = -1 if record.key is None else len(record.key)
        value_size = -1 if record.value is None else len(record.value)
        parts.append(f"{RECORD_INDENT} offset: {record.offset} {batch.timestamp_type}: {record.timestamp} "
                     f"keySize: {key_size} valueSize: {value_size}")
        if batch.magic >= 2:
            seq = -1 if batch.base_sequence < 0 else \
                increment_sequence(batch.base_sequence, record.offset - batch.base_offset)
            parts.append(f" sequence: {seq} headerKeys: [{','.join(_header_key(k) for k, _ in record.headers)}]")
        else:
            # a wrapper's inner messages passed their own CRC check when decoded
            valid = batch.is_valid() if batch.compression_id == 0 else True
            parts.append(f" isValid: {_bool(valid)} crc: {record.crc}")
        if batch.is_control:
            parts.append(" " + _control_text(batch, record))
    if _print_data(args) and not batch.is_control:
        prefix = f"{RECORD_INDENT} " if args.skip_record_metadata else " "
        key, payload = _payload_parser(args)(record)
        if key is not None:
            parts.append(f"{prefix}key: {key}")
            prefix = " "
        if payload is not None:
            parts.append(f"{prefix}payload: {payload}")
    return "".join(parts)


def _print_data(args) -> bool:
    """Kafka prints keys and payloads with --print-data-log or any decoder option."""
    return args.print_data_log or getattr(args, "offsets_decoder", False) or \
        getattr(args, "transaction_log_decoder", False) or getattr(args, "cluster_metadata_decoder", False) or \
        getattr(args, "remote_log_metadata_decoder", False) or \
        getattr(args, "value_decoder", None) is not None


def _payload_parser(args):
    """``record -> (key text or None, payload text or None)``: the hook where a decoder
    option chooses how keys and payloads print."""
    if getattr(args, "offsets_decoder", False):
        return lambda r: GROUP_RECORDS.dump_text(r.key, r.value, r.offset)
    if getattr(args, "transaction_log_decoder", False):
        return lambda r: TXN_RECORDS.dump_text(r.key, r.value, r.offset)
    if getattr(args, "cluster_metadata_decoder", False):  # no keys for metadata records, as Kafka's parser
        return lambda r: (None, metadata_text(r.value, r.offset))
    if getattr(args, "remote_log_metadata_decoder", False):
        return lambda r: (None, remote_metadata_text(r.value, r.offset))
    decode_value = VALUE_DECODERS[getattr(args, "value_decoder", None) or "utf8"]
    return lambda r: (None if r.key is None else _text(r.key), None if r.value is None else decode_value(r.value))


def _control_text(batch, record) -> str:
    if record.control_type in ("COMMIT", "ABORT"):
        return f"endTxnMarker: {record.control_type} coordinatorEpoch: {record.coordinator_epoch}"
    try:
        text = control_text(record.control_type_id, record.value)
    except InvalidRecordError as e:
        raise InvalidRecordError(f"record at offset {record.offset}: {e.reason}", position=batch.position) from None
    return text or f"controlType: {record.control_type}({record.control_type_id})"


def _header_key(key: str) -> str:
    """A header key as Kafka prints it (keys that are not UTF-8 are read with surrogateescape)."""
    return java_utf8_text(key.encode("utf-8", "surrogateescape"))


def _text(b: bytes) -> str:
    """Bytes as Kafka's StringDecoder makes them text (:func:`java_utf8_text`)."""
    return java_utf8_text(bytes(b))


REPLACEMENT = "\ufffd"


def java_utf8_text(data: bytes) -> str:
    """``data`` decoded as Java's ``new String(data, UTF_8)`` decodes it, so that bytes that
    are not UTF-8 print as Kafka's tool prints them. Valid UTF-8 decodes alike; Java replaces
    malformed input by its own rules (one U+FFFD for a whole encoded surrogate, where Python's
    ``errors="replace"`` writes three). O(len(data))."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "".join(_java_utf8_chars(data))


def _continues(b: int) -> bool:
    return b & 0xC0 == 0x80


def _java_utf8_chars(data: bytes):
    """The characters of JDK 17's ``String.decodeUTF8_UTF16`` with replacement, byte rule
    for byte rule."""
    n = len(data)
    i = 0
    while i < n:
        b1 = data[i]
        i += 1
        if b1 < 0x80:
            yield chr(b1)
        elif 0xC2 <= b1 <= 0xDF:
            if i < n and _continues(data[i]):
                yield chr((b1 & 0x1F) << 6 | data[i] & 0x3F)
                i += 1
            else:
                yield REPLACEMENT
                if i >= n:
                    return
        elif 0xE0 <= b1 <= 0xEF:
            i, char, stop = _three_bytes(data, i, b1)
            yield char
            if stop:
                return
        elif 0xF0 <= b1 <= 0xF7:
            i, char, stop = _four_bytes(data, i, b1)
            yield char
            if stop:
                return
        else:
            yield REPLACEMENT


def _three_bytes(data: bytes, i: int, b1: int) -> tuple[int, str, bool]:
    """(next index, character, stop) for a three-byte lead at ``i - 1``."""
    n = len(data)
    if i + 1 < n:
        b2, b3 = data[i], data[i + 1]
        bad_second = (b1 == 0xE0 and b2 & 0xE0 == 0x80) or not _continues(b2)
        if bad_second or not _continues(b3):
            return i + (0 if bad_second else 1), REPLACEMENT, False
        c = (b1 & 0x0F) << 12 | (b2 & 0x3F) << 6 | b3 & 0x3F
        return i + 2, REPLACEMENT if 0xD800 <= c <= 0xDFFF else chr(c), False
    if i < n and ((b1 == 0xE0 and data[i] & 0xE0 == 0x80) or not _continues(data[i])):
        return i, REPLACEMENT, False
    return i, REPLACEMENT, True


def _bad_four_byte_start(b1: int, b2: int) -> bool:
    return b1 > 0xF4 or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and b2 & 0xF0 != 0x80) \
        or not _continues(b2)


def _four_bytes(data: bytes, i: int, b1: int) -> tuple[int, str, bool]:
    """(next index, character, stop) for a four-byte lead at ``i - 1``."""
    n = len(data)
    if i + 2 < n:
        b2, b3, b4 = data[i], data[i + 1], data[i + 2]
        c = (b1 & 0x07) << 18 | (b2 & 0x3F) << 12 | (b3 & 0x3F) << 6 | b4 & 0x3F
        if _continues(b2) and _continues(b3) and _continues(b4) and 0x10000 <= c <= 0x10FFFF:
            return i + 3, chr(c), False
        skipped = 0 if _bad_four_byte_start(b1, b2) else (1 if not _continues(b3) else 2)
        return i + skipped, REPLACEMENT, False
    if b1 > 0xF4 or (i < n and _bad_four_byte_start(b1, data[i])):
        return i, REPLACEMENT, False
    i += 1
    return i, REPLACEMENT, not (i < n and not _continues(data[i]))


def _json_text(b: bytes) -> str:
    """A JSON payload on one line (compact separators); text that is not JSON prints as utf8."""
    try:
        return json.dumps(json.loads(b), separators=(",", ":"), ensure_ascii=False)
    except ValueError:
        return _text(b)


#: --value-decoder choices: payload bytes -> printed text
VALUE_DECODERS = {"utf8": _text, "json": _json_text, "hex": lambda b: binascii.hexlify(b).decode()}


def dump_index(path: str, args, summaries: Summaries, files: "Files", *, time_index: bool) -> None:
    """An offset or time index as Kafka's tool prints it: each entry (stopping at the
    first zero entry after the first, as Kafka does for a preallocated file), checked
    against the segment's ``.log``; ``--index-sanity-check`` runs the check a log's open
    runs instead. O(entries x a batch read); an object: a GET of it, of the ``.log`` and,
    for a time index, of the ``.index``."""
    data = files.read(path)
    segment = path[: path.rfind(".")]
    log_data = (lambda: files.read(segment + LOG_SUFFIX) if files.exists(segment + LOG_SUFFIX) else None)
    offsets = (lambda: files.read(segment + INDEX_SUFFIX) if files.exists(segment + INDEX_SUFFIX) else b"")
    dump_index_bytes(path, data, log_data, offsets, args, summaries, time_index=time_index)


def dump_index_bytes(path: str, data: bytes, log_data, offset_index, args, summaries: Summaries, *,
                     time_index: bool) -> None:
    """:func:`dump_index` of the index bytes ``data`` named ``path``; ``log_data()`` gives
    the segment's bytes (None without them), ``offset_index()`` its offset index's (read
    only when needed)."""
    entry = TIME_INDEX_ENTRY if time_index else OFFSET_INDEX_ENTRY
    base = _base_offset(path)
    n = len(data) // entry.size
    if n == 0 and not time_index:
        print(f"{path} is empty.")
        return
    if args.index_sanity_check:
        _sanity_check(path, base, data, time_index)
        return
    log_bytes = log_data()
    entries = entry.iter_unpack(memoryview(data)[:n * entry.size])  # lazily: a preallocated index is mostly zeros
    if time_index:
        _dump_time_entries(path, base, entries, log_bytes, offset_index(), args, summaries)
    else:
        _dump_offset_entries(path, base, entries, log_bytes, args, summaries)


def _sanity_check(path: str, base: int, data: bytes, time_index: bool) -> None:
    """Kafka's ``--index-sanity-check``: the check a broker's startup runs on a whole
    index file before trusting it (its last entry against its base offset and, for a time
    index, its first timestamp; its size a multiple of the entry size)."""
    entry = TIME_INDEX_ENTRY if time_index else OFFSET_INDEX_ENTRY
    n = len(data) // entry.size
    what = "time index" if time_index else "index"
    if n:
        last_a, last_b = entry.unpack_from(data, (n - 1) * entry.size)
        first_a, _ = entry.unpack_from(data, 0)
        last_offset = base + (last_b if time_index else last_a)
        if time_index and last_a < first_a:
            raise CorruptIndexError(f"Corrupt time index found, time index file ({java_absolute_path(path)}) has "
                                    f"non-zero size but the last timestamp is {last_a} which is less than the first "
                                    f"timestamp {first_a}", path=path)
        if last_offset < base:
            raise CorruptIndexError(f"Corrupt {what} found, {what} file ({java_absolute_path(path)}) has non-zero size "
                                    f"but the last offset is {last_offset} which is less than the "
                                    f"{'first' if time_index else 'base'} offset {base}", path=path)
    if len(data) % entry.size:
        raise CorruptIndexError(f"{'Time index' if time_index else 'Index'} file {java_absolute_path(path)} is "
                                f"corrupt, found {len(data)} bytes which is neither positive nor a multiple of "
                                f"{entry.size}",
                                path=path)
    print(f"{path} passed sanity check.")


def _first_batch_at(log_data: bytes, position: int, size: int):
    """The first batch at ``position`` of the segment's bytes (None past the end)."""
    return next(decode_batches(log_data[position:position + size], allow_incomplete=True), None)


def _dump_offset_entries(path: str, base: int, entries: list, log_data, args, summaries: Summaries) -> None:
    mismatches: dict[int, int] = {}
    for i, (relative, position) in enumerate(entries):
        offset = base + relative
        if offset == base and i > 0:
            break
        head = None if log_data is None else _first_batch_at(log_data, position, args.max_message_size)
        if head is not None and head.last_offset != offset:
            mismatches[offset] = head.last_offset
        if not args.verify_index_only:
            print(f"offset: {offset} position: {position}")
    if mismatches:
        summaries.index_mismatches.setdefault(java_absolute_path(path), {}).update(mismatches)


def _dump_time_entries(path: str, base: int, entries: list, log_data, offset_index: bytes, args,
                       summaries: Summaries) -> None:
    """Each entry's batch is found from the offset index's position for it; its largest
    record timestamp must be the entry's, and the entries' timestamps must rise."""
    offsets = _offset_index_of(offset_index, base)
    mismatched, out_of_order, not_found = [], [], []
    previous = -1
    for i, (ts, relative) in enumerate(entries):
        offset = base + relative
        if offset == base and i > 0:
            break
        batch = None
        if log_data is not None:
            _, position = offsets.lookup(offset)
            batch = next((b for b in decode_batches(log_data[position:], allow_incomplete=True)
                          if b.last_offset >= offset), None)
        if batch is None or batch.last_offset != offset:
            not_found.append((offset, -1 if batch is None else batch.last_offset))
        else:
            largest = max((r.timestamp for r in batch), default=-1)
            if largest != ts:
                mismatched.append((ts, largest))
            if previous >= ts:
                out_of_order.append((ts, previous))
        if not args.verify_index_only:
            print(f"timestamp: {ts} offset: {offset}")
        previous = ts
    absolute = java_absolute_path(path)
    for found, into in ((mismatched, summaries.time_mismatches), (out_of_order, summaries.time_out_of_order),
                        (not_found, summaries.time_not_found)):
        if found:
            into.setdefault(absolute, []).extend(found)


def _txn_entries(data: bytes, path: str) -> list[AbortedTxn]:
    """The entries of ``.txnindex`` bytes; :class:`CorruptIndexError` for bad bytes."""
    if len(data) % TXN_INDEX_ENTRY_BYTES:
        raise CorruptIndexError(f"transaction index size {len(data)} is not a multiple of {TXN_INDEX_ENTRY_BYTES}",
                                path=path)
    out = []
    for pos in range(0, len(data), TXN_INDEX_ENTRY_BYTES):
        version, pid, first, last, lso = TXN_INDEX_ENTRY.unpack_from(data, pos)
        if version > TXN_INDEX_VERSION:
            raise CorruptIndexError(f"transaction index entry at {pos} has unknown version {version}", path=path)
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def _offset_index_of(data: bytes, base: int):
    """An in-memory :class:`OffsetIndex` of the ``.index`` bytes ``data``: its entries up to
    the first that does not increase, as the index reads its file."""
    import numpy as np

    index = OffsetIndex(None, base, writable=False)
    raw = np.frombuffer(data, dtype=OffsetIndex.dtype(), count=len(data) // OffsetIndex.entry.size)
    keys, values = raw["k"].astype(np.int64), raw["v"].astype(np.int64)
    n = index._valid_prefix(keys, values)
    index.set_entries(keys[:n], values[:n])
    return index


def dump_txn_index(path: str, data: bytes) -> None:
    """One line per aborted transaction of the ``.txnindex`` bytes ``data``. O(file size)."""
    for t in _txn_entries(data, path):
        print(f"version: 0 producerId: {t.producer_id} firstOffset: {t.first_offset} "
              f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}")


def dump_snapshot(path: str, data: bytes) -> None:
    """One line per producer of a producer-state snapshot (the bytes ``data``); its last
    batch's fields only when it has one, as Kafka prints them. O(file size)."""
    for e in parse_snapshot(data, path):
        line = (f"producerId: {e.producer_id} producerEpoch: {e.epoch} coordinatorEpoch: {e.coordinator_epoch} "
                f"currentTxnFirstOffset: {_optional_long(e.current_txn_first_offset)} "
                f"lastTimestamp: {e.last_timestamp}")
        if e.batches:
            b = e.batches[0]
            line += (f" firstSequence: {b.first_seq} lastSequence: {b.last_seq} lastOffset: {b.last_offset} "
                     f"offsetDelta: {b.last_offset - b.first_offset} timestamp: {b.timestamp}")
        print(line)


def _optional_long(value: int | None) -> str:
    """Java's ``OptionalLong.toString()``."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"
