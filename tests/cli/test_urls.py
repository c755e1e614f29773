"""The CLI on object storage URLs: ``describe``, ``dump``, ``verify``, ``get-offsets`` and
``console-consumer`` on a log dir copied to the loopback S3 endpoint print what they print
for the local dir (the path shown aside); a damaged object is reported by its URL; a
missing bucket or object, no credentials and an unreachable endpoint are one line on stderr
and exit code 1, never a traceback or a credential."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import pylog
from pylog.cli.main import main
from tests.s3_endpoint import ACCESS_KEY, REGION, SECRET_KEY

SEGMENT_BYTES = 2048
TS = 1_700_000_000_000


def _fill(root) -> None:
    """``events-0``: several segments, a committed and an aborted transaction, a topic
    config; ``events-1`` and ``other-0`` a few records."""
    with pylog.LogManager(root, segment_bytes=SEGMENT_BYTES, index_interval_bytes=128) as m:
        m.create_topic("events", partitions=2, config={"retention_ms": 3_600_000})
        m.create_topic("other", partitions=1)
        log = m.log("events", 0)
        for i in range(120):
            log.append([pylog.Record(b"value-%d" % i * 4, key=b"k%d" % (i % 5), timestamp=TS + i * 10)])
        for pid, commit in ((7, True), (8, False)):
            log.append([pylog.Record(b"txn-%d" % pid, timestamp=TS + 5000)], producer_id=pid, producer_epoch=0,
                       base_sequence=0, is_transactional=True)
            log.append_txn_marker(pid, 0, commit=commit)
        for i in range(30):
            log.append([pylog.Record(b"after-%d" % i, timestamp=TS + 6000 + i)])
        m.log("events", 1).append([pylog.Record(b"one", timestamp=TS), pylog.Record(b"two", timestamp=TS + 1)])
        m.log("other", 0).append([pylog.Record(b"v", key=b"k", timestamp=TS)])


@pytest.fixture(scope="module")
def copied(s3, tmp_path_factory):
    """A pylog log dir on disk and the same files in a bucket: (local root, its URL)."""
    root = tmp_path_factory.mktemp("cli-urls") / "data"
    _fill(root)
    url = s3.url(s3.bucket(), "backup", "data")
    s3.upload_dir(root, url)
    return root, url


@pytest.fixture
def aws_env(s3, monkeypatch):
    """Credentials and endpoint from the standard AWS environment, as a user's shell has them."""
    for name, value in (("AWS_ACCESS_KEY_ID", ACCESS_KEY), ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
                        ("AWS_ENDPOINT_URL", s3.endpoint_url), ("AWS_DEFAULT_REGION", REGION)):
        monkeypatch.setenv(name, value)


def run(capsys, *args) -> tuple[int, str, str]:
    """``pylog ARGS`` in this process: (exit code, stdout, stderr)."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def run_process(*args, env: dict) -> subprocess.CompletedProcess:
    """``pylog ARGS`` in a fresh process with ``env`` only (plus PATH and PYTHONPATH)."""
    base = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.getcwd(), "HOME": os.environ.get("HOME", "/"),
            "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true"}
    return subprocess.run([sys.executable, "-m", "pylog", *map(str, args)], capture_output=True, text=True,
                          env={**base, **env}, timeout=120)


def same_output(capsys, local_args, url_args, *, local: str, url: str) -> str:
    """Run a command on the local dir and on its URL; both succeed and print the same
    (the URL replaced by the local path); the local output."""
    code, expected, err = run(capsys, *local_args)
    assert code == 0, err
    code, got, err = run(capsys, *url_args)
    assert code == 0, err
    assert got.replace(url, local) == expected
    return expected


# -- describe -------------------------------------------------------------------------------------

@pytest.mark.parametrize("options", [[], ["--json"], ["--raw", "--topic", "events"]])
def test_describe_of_a_bucket_prints_what_it_prints_for_the_local_dir(capsys, aws_env, copied, options):
    root, url = copied
    out = same_output(capsys, ["describe", root, *options], ["describe", url, *options], local=str(root), url=url)
    assert "events" in out


def test_describe_of_a_partition_directory_url_shows_that_partition(capsys, aws_env, copied):
    root, url = copied
    same_output(capsys, ["describe", root / "events-0"], ["describe", url + "/events-0"], local=str(root), url=url)


def test_s3a_and_storage_options_instead_of_the_environment(capsys, s3, copied):
    root, url = copied
    s3a = "s3a" + url[len("s3"):]
    options = ["--storage-option", f"key={ACCESS_KEY}", "--storage-option", f"secret={SECRET_KEY}",
               "--storage-option", f"client_kwargs.endpoint_url={s3.endpoint_url}",
               "--storage-option", f"client_kwargs.region_name={REGION}"]
    code, expected, _ = run(capsys, "describe", root, "--json")
    code, got, err = run(capsys, "describe", s3a, "--json", *options)
    assert code == 0, err
    assert got == expected
