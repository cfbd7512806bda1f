"""The parser (Rust, ``native/``) against its golden records
(tests/parser_golden.py, tests/golden/parser/): byte-identical messages, events
and stats on every sample capture, every crafted edge case, compressed and
merged files, damaged files, partitions, the limits reached and mutated
captures.  The records were written from tables equal to the Python dissector's
the parser was ported from (the differential oracle these tests compared it
with until it was removed); what each capture must show is asserted besides.

The extension must be built (a missing one fails the import of
``nfstrace.parsers.native``, with how to build it).
"""

from __future__ import annotations

import gzip
import random
import struct
from pathlib import Path

import parser_golden
import pytest
from conftest import SAMPLES

from nfstrace.config import ParseLimits
from nfstrace.errors import CaptureError
from nfstrace.parsers import native, stats
from nfstrace.protocol import nfs2 as nfs2_protocol
from nfstrace.protocol import nfs4 as nfs4_protocol
from nfstrace.protocol import nfs4_steps
from nfstrace.protocol.nfs3 import FILE_SYNC
from nfstrace.schema import EVENT_KINDS

try:
    from crafted import (
        make_backends,
        make_crafted,
        make_damaged,
        make_frames,
        make_nfs2_callbacks,
        make_nfs4_orphans,
        make_rpc_ports,
        make_tcp_damage,
        make_unanswered,
        make_writes,
    )
    from crafted.make_crafted import (
        CLIENT,
        NFS_PORT,
        SERVER,
        Capture,
        TcpConn,
        eth,
        getattr_call,
        opaque,
        record,
        rpc_call,
        rpc_reply,
        u32,
        udp_pkt,
    )
except ImportError:  # pragma: no cover - run from the repository root
    from tests.crafted import (
        make_backends,
        make_crafted,
        make_damaged,
        make_frames,
        make_nfs2_callbacks,
        make_nfs4_orphans,
        make_rpc_ports,
        make_tcp_damage,
        make_unanswered,
        make_writes,
    )
    from tests.crafted.make_crafted import (
        CLIENT,
        NFS_PORT,
        SERVER,
        Capture,
        TcpConn,
        eth,
        getattr_call,
        opaque,
        record,
        rpc_call,
        rpc_reply,
        u32,
        udp_pkt,
    )

SAMPLE_CAPTURES = sorted(SAMPLES.glob("*.pcap"))
# Inputs the cargo-fuzz target (native/fuzz) found crashing the native parser
REGRESSIONS = sorted((Path(__file__).parent / "regressions" / "native").iterdir())


def assert_golden(key: str, paths: list[Path], limits: ParseLimits | None = None) -> tuple:
    """The Rust parser's tables of paths are its golden record KEY."""
    got = native.parse([str(p) for p in paths], limits)
    parser_golden.check(key, parser_golden.record(got, paths))
    return got


@pytest.mark.parametrize("capture", SAMPLE_CAPTURES, ids=lambda p: p.name)
def test_tables_on_samples(capture: Path) -> None:
    messages = assert_golden(f"samples/{capture.name}", [capture])[0]
    assert len(messages) > 0


@pytest.mark.parametrize("capture", REGRESSIONS, ids=lambda p: p.name)
def test_fuzz_regressions(capture: Path) -> None:
    assert_golden(f"regressions/{capture.name}", [capture])


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("crafted_native")
    captures: dict[str, Path] = {}
    for module in (
        make_crafted,
        make_frames,
        make_writes,
        make_backends,
        make_nfs4_orphans,
        make_unanswered,
        make_tcp_damage,
        make_rpc_ports,
        make_nfs2_callbacks,
    ):
        captures.update(module.build_all(out))
    return captures


def test_tables_on_every_crafted_capture(crafted: dict[str, Path]) -> None:
    """Every edge case the crafted builders make (link layers, fragments,
    record marking, windows, mirrors, compressed files, pcapng...)."""
    assert len(crafted) >= 45
    for name, path in sorted(crafted.items()):
        try:
            assert_golden(f"crafted/{name}", [path])
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None


def test_tables_on_merged_files(crafted: dict[str, Path]) -> None:
    assert_golden("merged/merge_a+merge_b", [crafted["merge_a"], crafted["merge_b"]])
    # The same file twice: every frame comes twice at the same time (ties: the
    # first file first), so each second copy is a mirror duplicate.
    got = assert_golden("merged/sample-twice", [SAMPLE_CAPTURES[0], SAMPLE_CAPTURES[0]])
    assert got[2].duplicate_frames * 2 == got[2].frames > 0


# Damage of every class (tests/crafted/make_damaged.py), read with small limits
# so that each bound is reached: the parser must do what it did when it was
# compared with the reference (its golden records).
SMALL_LIMITS = ParseLimits(
    max_connections=32,
    max_directions=40,
    max_pending_bytes_total=3_000,
    max_pending_calls=50,
    max_events_per_kind=20,
    max_ip_reassembly_bytes=20_000,
    max_fragments_per_datagram=16,
    max_ip_reassemblies=64,
)
DAMAGED = {
    "ip_len_lie": lambda: make_damaged.ip_len_lie(),
    "tcp_hl_lie": lambda: make_damaged.tcp_hl_lie(),
    "huge_record_mark": make_damaged.huge_record_mark,
    "opaque_past_end": make_damaged.opaque_past_end,
    "many_credentials": make_damaged.many_credentials,
    "huge_op_count": make_damaged.huge_op_count,
    "seq_jumps": make_damaged.seq_jumps,
    "one_wild_segment": make_damaged.one_wild_segment,
    "many_flows": lambda: make_damaged.many_flows(300),
    "many_fragments": lambda: make_damaged.many_fragments(200),
    "repeated_fragment": lambda: make_damaged.repeated_fragment(300),
}


@pytest.mark.parametrize("name", sorted(DAMAGED))
@pytest.mark.parametrize("limits", [None, SMALL_LIMITS], ids=["default-limits", "small-limits"])
def test_tables_on_damaged_captures(name: str, limits: ParseLimits | None, tmp_path: Path) -> None:
    path = DAMAGED[name]().write(tmp_path / f"{name}.pcap")
    kind = "default" if limits is None else "small"
    got = assert_golden(f"damaged/{name}-{kind}-limits", [path], limits)
    if limits is not None and name in ("many_flows", "many_fragments"):
        assert got[2].anomalies  # the bounds were reached


def test_nfs2_and_callbacks_decoded_by_rust(crafted: dict[str, Path]) -> None:
    """NFSv2, NFSv4 NULL and the callback program are decoded by the Rust crate
    (the Python decoders are gone): every NFSv2 procedure named, WRITEs stable,
    every callback operation found."""
    nfs2_messages = native.parse([str(crafted["nfs2_procedures"])])[0]
    callbacks = native.parse([str(crafted["nfs4_callbacks"])])[0]
    assert set(nfs2_protocol.PROC_NAMES) <= set(nfs2_messages.op.astype(str))
    writes = nfs2_messages[(nfs2_messages.op == "WRITE") & (nfs2_messages.nfs_decode == "ok")]
    assert (writes.stable[writes.msgtype == "call"] == FILE_SYNC).all()
    assert (
        writes.committed[(writes.msgtype == "reply") & (writes.nfs_status == 0)] == FILE_SYNC
    ).all()
    assert {"ok", "truncated"} <= set(nfs2_messages.nfs_decode.astype(str))
    ops = {op for names in callbacks.ops.astype(str) for op in names.split()}
    assert set(nfs4_protocol.CB_OPERATIONS.values()) <= ops
    assert {"NULL", "proc2", "CB_NULL", "proc5", "CB_COMPOUND"} <= set(callbacks.op.astype(str))
    assert {"ok", "partial", "truncated"} <= set(callbacks.nfs_decode.astype(str))
    assert (callbacks.slot >= 0).sum() > 10  # CB_SEQUENCE found after the first operation


def test_unusable_files_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("empty.pcap").write_bytes(b"")
    Path("notes.txt").write_text("not a capture at all\n")
    expected = {
        "missing.pcap": "no such file (missing.pcap)",
        ".": "is a directory, not a capture file (.)",
        "empty.pcap": "empty file (empty.pcap)",
        "notes.txt": "not a pcap or pcapng capture file (notes.txt)",
    }
    for path, text in expected.items():
        with pytest.raises(CaptureError) as got:
            native.parse([path])
        assert str(got.value) == text


@pytest.fixture(scope="module")
def long_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sample's frames 40 times over, each copy 10 s later (~34k frames)."""
    data = (SAMPLES / "v3-tcp-nfscp-w1m-d0-l0.s256.pcap").read_bytes()
    assert struct.unpack_from("<I", data, 0)[0] == 0xA1B2C3D4  # little-endian, µs
    records, pos = [], 24
    while pos < len(data):
        sec, usec, caplen, wire = struct.unpack_from("<IIII", data, pos)
        records.append((sec, usec, caplen, wire, data[pos + 16 : pos + 16 + caplen]))
        pos += 16 + caplen
    out = bytearray(data[:24])
    for copy in range(40):
        for sec, usec, caplen, wire, frame in records:
            out += struct.pack("<IIII", sec + 10 * copy, usec, caplen, wire) + frame
    path = tmp_path_factory.mktemp("long") / "long.pcap"
    path.write_bytes(bytes(out))
    return path


def test_cut_off_files_give_their_result_and_a_warning(tmp_path: Path, long_capture: Path) -> None:
    data = long_capture.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) * 2 // 3])
    got = assert_golden("cut/pcap", [cut])
    assert any("cut off" in w for w in got[2].warnings)
    packed = gzip.compress(data)
    cut_gz = tmp_path / "cut.pcap.gz"
    cut_gz.write_bytes(packed[: len(packed) * 2 // 3])
    got = assert_golden("cut/pcap-gz", [cut_gz])
    assert any("decompression stopped" in w for w in got[2].warnings)
    assert len(got[0]) > 0


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
def test_progress_reported_and_interrupt_raised(
    tmp_path: Path, long_capture: Path, packed: bool
) -> None:
    """The parser reports (frames, bytes read from the file on disk) every
    16,384 frames: the bytes growing, within the file (of a compressed file its
    packed bytes: the progress bar's share and ETA)."""
    path = long_capture
    if packed:
        path = tmp_path / "long.pcap.gz"
        path.write_bytes(gzip.compress(long_capture.read_bytes(), mtime=0))
    size = path.stat().st_size
    seen: list[tuple[int, int]] = []
    native.parse([str(path)], progress=lambda n, b: seen.append((n, b)))
    assert [n for n, _ in seen] == [0x4000, 0x8000]
    done = [b for _, b in seen]
    assert 0 < done[0] <= done[1] <= size, (done, size)

    def interrupt(n: int, done: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        native.parse([str(long_capture)], progress=interrupt)


def _mutations(data: bytes, rng: random.Random) -> bytes:
    """A capture damaged as real files are: bits flipped, lengths bent, cut."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        what = rng.random()
        at = rng.randrange(24, len(buf))
        if what < 0.5:
            buf[at] ^= 1 << rng.randrange(8)
        elif what < 0.8:
            struct.pack_into(">H", buf, min(at, len(buf) - 2), rng.randrange(1 << 16))
        else:
            del buf[at : at + rng.randrange(1, 64)]
    if rng.random() < 0.3:
        del buf[rng.randrange(24, len(buf)) :]
    return bytes(buf)


@pytest.mark.slow
def test_mutated_captures(tmp_path: Path) -> None:
    """Damaged input (fixed seed): a result or the documented CaptureError,
    never another exception; damage said in warnings; and the tables each
    mutation gave when the parser was compared with the reference (one digest
    of its golden record per mutation)."""
    rng = random.Random(20261122)
    sources = [p.read_bytes()[:120_000] for p in SAMPLE_CAPTURES if ".s256." in p.name] + [
        p.read_bytes()[:60_000] for p in SAMPLE_CAPTURES
    ]
    digests: dict[str, str] = {}
    warned = 0
    for i in range(300):
        path = tmp_path / f"m{i}.pcap"
        data = _mutations(rng.choice(sources), rng)
        path.write_bytes(data)
        try:
            got = native.parse([str(path)])
        except CaptureError as e:
            digests[str(i)] = f"CaptureError: {str(e).replace(str(tmp_path) + '/', '')}"
            continue
        digests[str(i)] = parser_golden.digest(parser_golden.record(got, [path]))
        messages, _events, parse_stats = got
        assert parse_stats.frames <= len(data) // 16, i  # a record header at least each
        assert parse_stats.calls + parse_stats.replies == parse_stats.messages == len(messages)
        warned += bool(parse_stats.warnings)
    assert warned > 100  # bent lengths and cut files are said, not silently absorbed
    parser_golden.check("mutated", {"digests": digests})


@pytest.mark.parametrize("spacing_ns", [100, 400])
def test_copies_past_the_frames_bound(tmp_path: Path, spacing_ns: int) -> None:
    """More frames in one window than MAX_RECENT_FRAMES (the older generation
    dropped early): the copies skipped are those of the frames remembered.  At 100 ns apart the
    9,000 frames span one window (copies of the first ones are forgotten); at
    400 ns the generations turn on time and only copies within the window count."""
    base = bytes(
        make_crafted.eth(
            make_crafted.udp_pkt(make_crafted.CLIENT, make_crafted.SERVER, 999, 998, b"\0" * 40)
        )
    )
    cap = make_crafted.Capture()
    originals = []
    for i in range(9000):
        data = bytearray(base)
        data[18:20] = (i & 0xFFFF).to_bytes(2, "big")
        data[-4:] = i.to_bytes(4, "big")
        originals.append(bytes(data))
        cap.frames.append((make_crafted.BASE_NS + i * spacing_ns, bytes(data), len(data)))
    end = make_crafted.BASE_NS + 9000 * spacing_ns
    for k, i in enumerate((0, 2000, 4095, 4096, 5000, 8999)):
        cap.frames.append((end + k, originals[i], len(originals[i])))
    path = cap.write(tmp_path / "many.pcap", nano=True)
    b = assert_golden(f"frames-bound/spacing-{spacing_ns}", [path])
    dup = lambda ev: list(ev.loc[ev["kind"] == "frame_duplicate", "frame"])  # noqa: E731
    assert b[2].duplicate_frames == len(dup(b[1])) > 0
    # 100 ns: the copies of originals 4096, 5000 and 8999 (the first 4,096 were
    # dropped with their generation); 400 ns: only 8999's is within 1 ms
    assert dup(b[1]) == ([9004, 9005, 9006] if spacing_ns == 100 else [9006])


def test_copies_of_frames_of_many_lengths(tmp_path: Path) -> None:
    """The Rust parser keeps its copies of recent frames in buffers reused from
    the generation it dropped: frames of many lengths, over more generations than
    one, then copies of some of them; the copies of the frames remembered are
    skipped (a reused buffer that kept its old bytes would miss them)."""
    cap = make_crafted.Capture()
    originals = []
    for i in range(9000):
        body = bytes([i % 251]) * (40 + (i * 37) % 1400)
        data = bytearray(
            bytes(
                make_crafted.eth(
                    make_crafted.udp_pkt(make_crafted.CLIENT, make_crafted.SERVER, 999, 998, body)
                )
            )
        )
        data[18:20] = (i & 0xFFFF).to_bytes(2, "big")
        data[-4:] = i.to_bytes(4, "big")
        originals.append(bytes(data))
        cap.frames.append((make_crafted.BASE_NS + i * 100, bytes(data), len(data)))
    end = make_crafted.BASE_NS + 9000 * 100
    for k, i in enumerate((0, 4096, 5000, 7000, 8191, 8192, 8999)):
        cap.frames.append((end + k, originals[i], len(originals[i])))
    path = cap.write(tmp_path / "lengths.pcap", nano=True)
    b = assert_golden("frames-bound/many-lengths", [path])
    dup = lambda ev: list(ev.loc[ev["kind"] == "frame_duplicate", "frame"])  # noqa: E731
    assert b[2].duplicate_frames == len(dup(b[1]))
    # generations turn at 4,096 frames: the first (originals 0-4095) is dropped
    # when the third begins, so every copy but the first is one
    assert dup(b[1]) == [9002, 9003, 9004, 9005, 9006, 9007]


def test_extension_knows_every_event_kind_and_anomaly() -> None:
    """Built from the tables generated from Python (native/src/tables.rs): a
    stale build would name events or anomalies otherwise."""
    ext = native._native
    assert list(ext.EVENT_KINDS) == list(EVENT_KINDS), (
        "the native extension was built from other event kinds: rebuild it"
    )
    assert list(ext.ANOMALIES) == list(stats.ANOMALIES), (
        "the native extension was built from other anomalies: rebuild it"
    )


def test_partitions(tmp_path: Path) -> None:
    """ParseLimits.partitions: every frame in one partition (zlib's CRC-32 of
    its addresses: the partitions' messages add up to the whole's), the tables
    of each partition its golden record's."""
    from conftest import bench_module

    bench = bench_module()
    capture = tmp_path / "meta.pcap"
    bench.replicate_small_rpcs(bench.METADATA_SOURCE, capture, 3000)  # 16 clients
    whole = len(native.parse([str(capture)])[0])
    sizes = []
    for i in range(3):
        got = assert_golden(
            f"partitions/{i}-of-3", [capture], ParseLimits(partition=i, partitions=3)
        )
        sizes.append(len(got[0]))
    assert all(sizes) and sum(sizes) == whole
    # ParseLimits.buckets: the same bucket table read the same way by both
    buckets = tuple(b % 3 for b in range(7))
    sizes = []
    for i in range(3):
        limits = ParseLimits(partition=i, partitions=3, buckets=buckets)
        got = assert_golden(f"partitions/{i}-of-3-buckets", [capture], limits)
        sizes.append(len(got[0]))
    assert all(sizes) and sum(sizes) == whole


def _nfs4_every_operation(path: Path) -> Path:
    """A COMPOUND call and reply per NFSv4 operation (nfs4_steps.ARGS, RESULTS
    and ERROR_RESULTS: what the Rust step programs are generated from), several
    times each, the operation's body made of small random words (0-3: counts
    and switches that take each arm of its shape, lengths that stay inside the
    message), then a GETATTR.  Whether that GETATTR is found, and so the
    decoded fields, depends on every item of the first operation's shape."""
    rng = random.Random(19)
    cap = Capture()
    xid = 0x19000

    def words() -> bytes:
        return u32(*(rng.choice((0, 0, 1, 1, 2, 3)) for _ in range(rng.randrange(0, 48))))

    def send(call: bytes, reply: bytes) -> None:
        cap.add(eth(udp_pkt(CLIENT, SERVER, 900, NFS_PORT, call)))
        cap.add(eth(udp_pkt(SERVER, CLIENT, NFS_PORT, 900, reply)))

    error_bodies = sorted(nfs4_steps.ERROR_RESULTS)
    for op in sorted(nfs4_steps.ARGS):
        errors = [status for o, status in error_bodies if o == op]
        for status in [0, 0, 0, 0, *errors]:
            xid += 1
            args = opaque(b"") + u32(1, 2, op) + words() + u32(nfs4_protocol.OP_GETATTR, 1, 2)
            call = rpc_call(xid, nfs4_protocol.NFSPROC4_COMPOUND, args, vers=4)
            res = u32(op, status) + words() + u32(nfs4_protocol.OP_GETATTR, 0, 1, 2, 0)
            reply = rpc_reply(xid, u32(status) + opaque(b"") + u32(2) + res)
            send(call, reply)
    return cap.write(path)


def test_every_nfs4_operation_is_stepped(tmp_path: Path) -> None:
    messages = assert_golden(
        "nfs4-every-operation", [_nfs4_every_operation(tmp_path / "ops.pcap")]
    )[0]
    seen = {op for ops in messages["ops"].astype(str) for op in ops.split()}
    assert {nfs4_protocol.OPERATIONS[op] for op in nfs4_steps.ARGS} <= seen
    # Random bodies mostly do not end where the operation does (the walk then
    # meets an unknown operation: partial); some do (the GETATTR is read: ok).
    # Which, message by message, is the golden record's (assert_same): what the
    # Python reference's step functions gave.
    decoded = messages["nfs_decode"].astype(str).value_counts()
    assert decoded.get("ok", 0) > 50 and decoded.get("partial", 0) > 50, decoded


def _half_sent_calls(path: Path, connections: int) -> Path:
    """Connections that each send the first half of a GETATTR call and go
    quiet: with fewer connections allowed, the idlest are forgotten with a
    message cut short."""
    cap = Capture()
    for i in range(connections):
        conn = TcpConn(cap, 700 + i)
        conn.handshake()
        conn.client_send(record(getattr_call(0x7700 + i))[:60])
    return cap.write(path)


def test_tables_past_the_limits(tmp_path: Path, long_capture: Path) -> None:
    """ParseLimits.max_messages and max_connections reached: the parse stops
    (or forgets, cutting messages) where it did when compared with the reference."""
    got = assert_golden("limits/max-messages", [long_capture], ParseLimits(max_messages=1000))
    assert got[2].anomalies["messages_limit"] > 0
    cut = _half_sent_calls(tmp_path / "half.pcap", 40)
    got = assert_golden("limits/max-connections", [cut], ParseLimits(max_connections=8))
    assert got[2].anomalies["messages_cut_by_limits"] > 0


@pytest.mark.slow
def test_the_compared_captures_show_every_event_kind_and_anomaly(
    crafted: dict[str, Path], tmp_path: Path, long_capture: Path
) -> None:
    """Every event kind and anomaly the parser can record appears in a capture
    the tests above hold to a golden record (samples, crafted, damaged with both
    limits, past the limits): one that none showed could change unseen."""
    runs: list[tuple[Path, ParseLimits | None]] = [(p, None) for p in SAMPLE_CAPTURES]
    runs += [(p, None) for p in crafted.values()]
    for name, make in DAMAGED.items():
        path = make().write(tmp_path / f"{name}.pcap")
        runs += [(path, None), (path, SMALL_LIMITS)]
    runs += [(long_capture, ParseLimits(max_messages=1000))]
    runs += [(_half_sent_calls(tmp_path / "half.pcap", 40), ParseLimits(max_connections=8))]
    kinds: set[str] = set()
    anomalies: set[str] = set()
    for path, limits in runs:
        _, events, parse_stats = native.parse([str(path)], limits)
        kinds |= set(events["kind"].astype(str))
        anomalies |= {name for name, n in parse_stats.anomalies.items() if n}
    assert set(EVENT_KINDS) - kinds == set()
    assert set(stats.ANOMALIES) - anomalies == set()
