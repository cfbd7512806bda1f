"""The kernel's figures per mount and operation (analysis/mounts.py) against
the client's own mountstats (parsers/mountstats.py, analysis/kernel_stats.py),
on real Linux-client captures (sample-pcaps/kernel/, made with the kvm lab:
each JSON holds the guest's /proc/self/mountstats before and after dd)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import nfstrace
from nfstrace.analysis.diagnosis import DiagnosisOptions
from nfstrace.analysis.kernel_stats import capture_limits, slot_findings, with_kernel
from nfstrace.analysis.kernel_stats import notes as kernel_notes
from nfstrace.analysis.mounts import kernel_op, mount_operations
from nfstrace.cli import app
from nfstrace.errors import ExitStatus, UsageError
from nfstrace.parsers.mountstats import parse_mountstats, read_mountstats

KERNEL = Path(__file__).resolve().parent.parent / "sample-pcaps" / "kernel"
CAPTURES = sorted(KERNEL.glob("*.pcap"))
NCONNECT = KERNEL / "kvm-v3-ganesha-nconnect4-d0-l0.pcap"
V41 = KERNEL / "kvm-v41-knfsd-d0-l0.pcap"
runner = CliRunner()


def _copies(capture: Path, where: Path) -> tuple[Path, Path]:
    """The guest's mountstats before and after dd, from the lab's JSON, as files."""
    raw = json.loads(capture.with_suffix(".json").read_text())["client"]["mountstats"]
    before, after = where / f"{capture.stem}.before.txt", where / f"{capture.stem}.after.txt"
    before.write_text(raw["raw_before"])
    after.write_text(raw["raw_after"])
    return before, after


@cache
def _loaded(capture: Path) -> nfstrace.Trace:
    raw = json.loads(capture.with_suffix(".json").read_text())["client"]["mountstats"]
    mountstats = read_mountstats_texts(raw["raw_before"], raw["raw_after"])
    config = nfstrace.AnalysisConfig(diagnosis=DiagnosisOptions(mountstats=mountstats))
    return nfstrace.load(capture, config)


def read_mountstats_texts(before: str, after: str):  # (the parser's, without files)
    from nfstrace.parsers.mountstats import Mountstats

    return Mountstats(after=parse_mountstats(after), before=parse_mountstats(before))


def test_the_kernel_samples_are_there() -> None:
    assert len(CAPTURES) == 9 and all(p.with_suffix(".json").exists() for p in CAPTURES)


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.stem)
def test_counts_and_bytes_equal_mountstats(capture: Path) -> None:
    """Every operation the kernel counted between its two copies: the capture
    holds as many calls, transmissions and errors, and the same bytes to the
    byte (RPC messages with their record marks sent, without received)."""
    (k,) = _loaded(capture).diagnosis.mounts.kernel
    counted = k.operations[k.operations["kernel_ops"] > 0]
    assert {"WRITE", "COMMIT"} <= set(counted["op"])
    for col in ("ops", "trans", "errors", "bytes_sent", "bytes_recv"):
        assert (counted[col] == counted[f"kernel_{col}"]).all(), counted
    assert k.missed_calls == 0 and not k.since_mount
    # the mount's calls before the first copy are the capture's extra calls
    assert k.extra_calls == int(k.operations["ops_diff"].clip(lower=0).sum()) > 0


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.stem)
def test_times_bracket_the_kernels(capture: Path) -> None:
    """The documented gap: the kernel's RTT clock starts when the call is handed
    to its socket, at or before its last packet leaves, and stops once the
    reply is read, after its last packet came: never shorter than the capture's
    RTT from the call's last packet.  Its execute time starts earlier still
    (queued in the client): never shorter than the capture's.  A call of one
    packet (COMMIT) has no transmission to hide: the two RTTs differ by the
    guest's own send and receive work, emulated on a loaded host here (0.6 to
    14 ms in these samples; the printed totals are whole ms, truncated: 1 ms
    of slack per call)."""
    (k,) = _loaded(capture).diagnosis.mounts.kernel
    ops = k.operations[k.operations["kernel_ops"] > 0].set_index("op")
    slack = 1.0 / ops["kernel_ops"]
    assert (ops["rtt_last_ms"] <= ops["kernel_rtt_ms"] + slack).all(), ops
    assert (ops["exe_ms"] <= ops["kernel_exe_ms"] + slack).all(), ops
    commit = ops.loc["COMMIT"]
    assert commit["rtt_ms"] == commit["rtt_last_ms"]  # one packet
    assert 0 <= commit["kernel_rtt_ms"] + 1 - commit["rtt_ms"] <= 16
    # the kernel's queue (task start -> hand-over) is within execute - RTT
    # (which also holds the reply's decoding)
    rest = ops["kernel_exe_ms"] - ops["kernel_rtt_ms"] + 2 * slack
    assert ((ops["kernel_queue_ms"] >= 0) & (ops["kernel_queue_ms"] <= rest)).all(), ops


def test_nconnect_is_one_mount_of_several_connections() -> None:
    mounts = _loaded(NCONNECT).diagnosis.mounts
    nfs = mounts.mounts
    assert len(nfs) == 1 and nfs.loc[0, "connections"] == 4
    assert len(nfs.loc[0, "client_ports"].split()) == 4
    (k,) = mounts.kernel
    assert len(k.transports) == 4  # the kernel's xprt lines, one per connection
    writes = k.operations.set_index("op").loc["WRITE"]
    assert writes["ops"] == writes["kernel_ops"] == 4
    assert int(k.transports["sends"].sum()) >= writes["kernel_trans"]


def test_nfsv41_compounds_are_named_as_the_kernel_names_them() -> None:
    ops = _loaded(V41).diagnosis.mounts.operations
    names = set(ops["op"])
    assert {"WRITE", "COMMIT", "OPEN", "CLOSE", "LOOKUP_ROOT", "EXCHANGE_ID"} <= names
    assert "SEQUENCE" not in names and "PUTFH" not in names
    mounts = _loaded(V41).diagnosis.mounts.mounts
    assert mounts.loc[0, "minor"] == 1 and mounts.loc[0, "session_slots"] >= 1


def test_kernel_op() -> None:
    assert kernel_op(3, "WRITE", "") == "WRITE"
    assert kernel_op(4, "GETATTR", "SEQUENCE PUTFH GETATTR CLOSE") == "CLOSE"
    assert kernel_op(4, "LAYOUTRETURN", "SEQUENCE PUTFH LAYOUTRETURN CLOSE GETATTR") == "CLOSE"
    assert kernel_op(4, "GETATTR", "SEQUENCE PUTROOTFH GETFH GETATTR") == "LOOKUP_ROOT"
    assert kernel_op(4, "GETATTR", "SEQUENCE PUTFH GETATTR") == "GETATTR"
    assert kernel_op(4, "NULL", "") == "NULL"


def test_per_operation_figures_from_the_transactions() -> None:
    """nfsiostat's columns from the capture: ops/s and kB/s over the mount's
    span, kB/op of bytes sent and received, RTT/exe means in ms."""
    trace = _loaded(KERNEL / "kvm-v3-ganesha-d0-l0.pcap")
    m = mount_operations(trace.transactions)
    assert m.operations.equals(trace.diagnosis.mounts.operations)
    w = m.operations.set_index("op").loc["WRITE"]
    mount = m.mounts.iloc[0]
    assert w["kb_per_op"] == pytest.approx((w["bytes_sent"] + w["bytes_recv"]) / 1024 / w["ops"])
    assert w["ops_per_s"] == pytest.approx(w["ops"] / mount["seconds"])
    tx = trace.transactions
    writes = tx[tx["op"].astype(str).eq("WRITE")]
    assert w["exe_ms"] == pytest.approx(writes["latency_ns"].mean() / 1e6)
    assert w["rtt_last_ms"] == pytest.approx(writes["srt_ns"].mean() / 1e6)


# ---- the mountstats format --------------------------------------------------------

TEXT = """device rootfs mounted on / with fstype rootfs
device /dev/sda1 mounted on /home with fstype ext4
device 10.0.0.5:/export mounted on /mnt/a\\040b with fstype nfs statvers=1.1
\topts:\trw,vers=3,rsize=1048576,wsize=1048576,hard,proto=tcp,mountaddr=10.0.0.5
\tage:\t100
\tsome future line:\t1 2 3
\tevents:\t0 1 2
\tbytes:\t0 4096 0 0 0 4096 0 1
\tRPC iostats version: 1.1  p/v: 100003/3 (nfs)
\txprt:\ttcp 800 1 1 0 0 10 10 0 12 4 3 0 9 17
\tper-op statistics
\t        NULL: 1 1 0 44 24 0 0 0 0
\t       WRITE: 8 9 1 8400 1088 400 80 500 1 77
\t     GETATTR: 2 2 0 200 240 0 1 1
\t     garbage line here
device [2001:db8::5]:/x mounted on /mnt/v4 with fstype nfs4 statvers=1.1
\topts:\trw,vers=4.1,clientaddr=2001:db8::7
\tage:\t5
\tRPC iostats version: 1.1  p/v: 100003/4 (nfs)
\txprt:\tudp 700 0 3 3 0 3 0 2 0 0
\tper-op statistics
\t       WRITE: 1 1 0 100 100 0 1 1 0
"""


def test_parse_mountstats_keeps_nfs_mounts_and_skips_the_rest() -> None:
    a, b = parse_mountstats(TEXT)
    assert (a.server, a.export, a.mountpoint, a.fstype) == (
        "10.0.0.5",
        "/export",
        "/mnt/a b",
        "nfs",
    )
    assert a.nfs_version == (3, None) and a.age_s == 100 and (a.prog, a.vers) == (100003, 3)
    w = a.ops["WRITE"]
    assert (w.ops, w.trans, w.timeouts, w.bytes_sent, w.rtt_ms, w.errors) == (8, 9, 1, 8400, 80, 1)
    assert a.ops["GETATTR"].errors is None  # a statvers 1.0 line: 8 numbers
    (t,) = a.transports
    assert t.kind == "tcp" and t.get("srcport") == 800 and t.get("bklog_u") == 4
    assert t.get("max_slots") == 3 and t.get("pending_u") == 9 and t.get("field13") == 17
    assert a.events["dentryrevalidate"] == 1 and a.bytes["normalwritebytes"] == 4096
    assert (b.server, b.nfs_version) == ("2001:db8::5", (4, 1))
    assert b.transports[0].kind == "udp" and b.transports[0].get("max_slots") == 2


def _write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_read_mountstats_refuses_what_is_not_one(tmp_path: Path) -> None:
    good = _write(tmp_path / "ok.txt", TEXT)
    cases = {
        "cannot read": tmp_path / "missing.txt",
        "binary data": _write(tmp_path / "bin", b"\x00\x01device "),
        "no 'device' line": _write(tmp_path / "text", "hello\n"),
        "no NFS mount": _write(
            tmp_path / "ext4", "device /dev/sda1 mounted on / with fstype ext4\n"
        ),
    }
    for what, path in cases.items():
        with pytest.raises(UsageError, match=what):
            read_mountstats([str(path)])
    with pytest.raises(UsageError, match="one or two files"):
        read_mountstats([str(good)] * 3)
    later = _write(tmp_path / "later.txt", TEXT.replace("WRITE: 8 9 1 8400", "WRITE: 9 10 1 9450"))
    assert read_mountstats([str(good), str(later)]).before is not None
    with pytest.raises(UsageError, match="smaller in the second file"):
        read_mountstats([str(later), str(good)])


# ---- the findings -----------------------------------------------------------------


def _mountstats_with(capture: Path, **xprt: int):
    """The sample's copies with the WRITEs' queue made large and the
    transport's counters of ``xprt`` (bklog_u, sending_u) set in the later copy."""
    raw = json.loads(capture.with_suffix(".json").read_text())["client"]["mountstats"]
    after = raw["raw_after"]
    lines = []
    for line in after.splitlines():
        fields = line.split()
        if fields[:1] == ["xprt:"]:
            names = ["srcport", "bind_count", "connect_count", "connect_time", "idle_time"]
            names += ["sends", "recvs", "bad_xids", "req_u", "bklog_u", "max_slots"]
            names += ["sending_u", "pending_u"]
            values = dict(zip(names, fields[2:], strict=True)) | {
                k: str(v) for k, v in xprt.items()
            }
            line = "\txprt:\ttcp " + " ".join(values[n] for n in names)
        elif fields[:1] == ["WRITE:"]:
            n = [int(x) for x in fields[1:]]
            n[5] += 1000 * n[0]  # 1 s queued per WRITE
            n[7] += 1000 * n[0]
            line = "\t       WRITE: " + " ".join(map(str, n))
        lines.append(line)
    return read_mountstats_texts(raw["raw_before"], "\n".join(lines) + "\n")


def test_a_slot_table_backlog_is_a_finding_with_its_remedy() -> None:
    capture = KERNEL / "kvm-v3-ganesha-d0-l0.pcap"
    tx = _loaded(capture).transactions
    full = with_kernel(mount_operations(tx), _mountstats_with(capture, bklog_u=5000))
    (f,) = slot_findings(full)
    assert f.kind == "slot_queue" and f.severity == "problem"
    assert "sunrpc.tcp_max_slot_table_entries" in f.title and "nconnect" in f.title
    assert f.details["queue"] == "slots" and f.details["backlog"] > 1
    assert "transmit_queue" not in {n.kind for n in kernel_notes(full)}
    # waiting to send (the connection busy) is its pace, not a slot shortage: a note
    busy = with_kernel(mount_operations(tx), _mountstats_with(capture, bklog_u=0, sending_u=5000))
    assert slot_findings(busy) == []
    (note,) = [n for n in kernel_notes(busy) if n.kind == "transmit_queue"]
    assert "waiting to transmit" in note.title and note.severity == "info"
    # nothing queued: nothing said
    plain = with_kernel(mount_operations(tx), read_mountstats_texts(*_raw(capture)))
    assert slot_findings(plain) == []
    assert [n.kind for n in kernel_notes(plain)] == ["mountstats"]


def test_an_nfsv41_session_slot_wait_is_a_finding() -> None:
    """Queued, waiting neither for an RPC slot nor to send, every session slot
    the capture saw awaiting a reply at each transmission: the session's slots."""
    trace = _loaded(V41)
    full = _mountstats_with(V41, bklog_u=0, sending_u=0, pending_u=10**6)
    (f,) = slot_findings(with_kernel(mount_operations(trace.transactions), full))
    assert f.details["queue"] == "session" and "max_session_slots" in f.title
    # the same queue with the slots mostly idle: no reason to blame them
    idle = _mountstats_with(V41, bklog_u=0, sending_u=0, pending_u=0)
    assert slot_findings(with_kernel(mount_operations(trace.transactions), idle)) == []


def _raw(capture: Path) -> tuple[str, str]:
    raw = json.loads(capture.with_suffix(".json").read_text())["client"]["mountstats"]
    return raw["raw_before"], raw["raw_after"]


def test_mountstats_of_another_server_is_not_compared() -> None:
    capture = KERNEL / "kvm-v3-ganesha-d0-l0.pcap"
    before, after = (t.replace("169.254.77.2", "10.9.9.9") for t in _raw(capture))
    mounts = with_kernel(mount_operations(_loaded(capture).transactions),
                         read_mountstats_texts(before, after))  # fmt: skip
    assert mounts.kernel == () and mounts.unmatched == ("10.9.9.9:/export on /mnt/nfs (NFSv3)",)
    (f,) = slot_findings(mounts)
    assert f.kind == "mountstats_unmatched" and "169.254.77.1 → 169.254.77.2 NFSv3" in f.title


def test_a_capture_missing_calls_the_kernel_counted_says_so() -> None:
    capture = KERNEL / "kvm-v3-ganesha-d0-l0.pcap"
    tx = _loaded(capture).transactions
    writes = tx["op"].astype(str).eq("WRITE")
    first_write = tx.index[writes][0]
    short = tx.drop(index=first_write)  # a capture that lost a WRITE
    mounts = with_kernel(mount_operations(short), read_mountstats_texts(*_raw(capture)))
    (k,) = mounts.kernel
    assert k.missed_calls == 1
    (limit,) = capture_limits(mounts)
    assert "missed 1 calls" in limit and "WRITE" in limit
    # one copy (since the mount): a capture started later is no loss
    since = with_kernel(mount_operations(short), read_mountstats_texts("", _raw(capture)[1]))
    assert since.kernel[0].since_mount and capture_limits(since) == []


# ---- the command line -------------------------------------------------------------


def test_analyze_with_mountstats_end_to_end(tmp_path: Path) -> None:
    capture = KERNEL / "kvm-v3-ganesha-d0-l0.pcap"
    before, after = _copies(capture, tmp_path)
    out = tmp_path / "s.json"
    r = runner.invoke(
        app,
        ["analyze", str(capture), "--mountstats", str(before), str(after), "--no-report", "--full",
         "--json", str(out)],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "mountstats: calls equal for 3 of 3 operations" in r.stdout
    assert "mountstats beside the capture" in r.stdout and "queue ms" in r.stdout
    mounts = json.loads(out.read_text())["diagnosis"]["mounts"]
    (k,) = mounts["mountstats"]
    assert k["mount"] == "169.254.77.2:/export on /mnt/nfs (NFSv3)" and not k["since_mount"]
    assert "server address" in k["matched_by"]
    write = next(o for o in k["operations"] if o["op"] == "WRITE")
    assert write["ops"] == write["kernel_ops"] == 2
    notes = json.loads(out.read_text())["diagnosis"]["notes"]
    assert any(n["kind"] == "mountstats" for n in notes)
    # the option repeated, and one copy alone (since the mount), work too
    for args in (
        ["--mountstats", str(before), "--mountstats", str(after)],
        ["--mountstats", str(after)],
    ):
        r = runner.invoke(app, ["analyze", str(capture), *args, "--no-report"])
        assert r.exit_code == 0, r.output
        assert "mountstats:" in r.stdout


def test_the_report_has_the_mounts_section(tmp_path: Path) -> None:
    capture = KERNEL / "kvm-v41-ganesha-d0-l0.pcap"
    before, after = _copies(capture, tmp_path)
    report = tmp_path / "r.html"
    r = runner.invoke(app, ["analyze", str(capture), "--mountstats", str(before), str(after),
                            "-o", str(report)])  # fmt: skip
    assert r.exit_code == 0, r.output
    page = report.read_text()
    assert '<section id="mounts">' in page and 'id="mountstats-0"' in page
    assert "avg RTT ms" in page and "queue ms (kernel)" in page


@pytest.mark.parametrize(
    ("content", "text"),
    [
        (None, "cannot read"),
        (b"\x89PNG\r\n\x00", "binary data"),
        ("just words\n", "no 'device' line"),
        ("device /dev/sda mounted on / with fstype ext4\n", "no NFS mount"),
    ],
)
def test_bad_mountstats_files_are_a_usage_error(tmp_path: Path, content, text: str) -> None:
    path = tmp_path / "m.txt"
    if content is not None:
        _write(path, content)
    r = runner.invoke(app, ["analyze", str(NCONNECT), "--mountstats", str(path), "--no-report"])
    assert r.exit_code == ExitStatus.USAGE, r.output
    assert "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0].startswith("nfstrace: error: --mountstats")
        and text in lines[0]
    )


def test_copies_in_the_wrong_order_are_a_usage_error(tmp_path: Path) -> None:
    before, after = _copies(NCONNECT, tmp_path)
    r = runner.invoke(app, ["analyze", str(NCONNECT), "--mountstats", str(after), str(before),
                            "--no-report"])  # fmt: skip
    assert r.exit_code == ExitStatus.USAGE and "give the earlier copy first" in r.stderr


def test_mountstats_files_are_inputs_no_output_may_overwrite(tmp_path: Path) -> None:
    before, after = _copies(NCONNECT, tmp_path)
    kept = after.read_text()
    r = runner.invoke(app, ["analyze", str(NCONNECT), "--mountstats", str(before), str(after),
                            "--json", str(after), "--no-report"])  # fmt: skip
    assert r.exit_code == ExitStatus.USAGE, r.output
    assert after.read_text() == kept


def test_load_takes_the_option_too() -> None:
    trace = _loaded(NCONNECT)
    assert trace.diagnosis.mounts.kernel
    assert isinstance(trace.diagnosis.mounts.operations, pd.DataFrame)
