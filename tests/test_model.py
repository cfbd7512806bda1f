"""The transactional latency model: arithmetic against the study's numbers, estimation on
hand-built transactions, and lab captures of one workload at two injected delays."""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tshark_ref
from conftest import SAMPLES, ground_truth, load_sample

from nfstrace.analysis.model import (
    PARAMETERS,
    _commit_server_seconds_per_byte,
    cycle_throughput_bps,
    fit_model,
    what_if,
)
from nfstrace.analysis.model_inputs import ModelOverrides, overrides_from_options, parse_what_if
from nfstrace.analysis.quality import HANDSHAKE_KINDS, assess_capture
from nfstrace.jsonable import jsonable
from nfstrace.schema import TRANSACTION_DTYPES
from nfstrace.units import parse_duration, parse_rate, parse_size

try:
    from crafted import make_frames as mf
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_frames as mf

US = 1_000  # ns
T0 = 1_700_000_000 * 10**9

# ----------------------------------------------------------------- hand-built tables


def make_tx(rows: list[dict]) -> pd.DataFrame:
    """A transactions table (TRANSACTION_COLUMNS) from a few fields per row."""
    defaults = {
        "client": "10.0.0.1",
        "server": "10.0.0.2",
        "prog": 100003,
        "vers": 3,
        "proc": 0,
        "op": "NULL",
        "ops": "",
        "n_calls": 1,
        "n_replies": 1,
        "status": 0,
        "stable": -1,
        "committed": -1,
        "count": -1,
        "offset": -1,
        "write_bytes": 0,
        "read_bytes": 0,
        "fh": "aa",
        "call_bytes": 100,
    }
    full = []
    for r in rows:
        row = {**defaults, **r}
        row.setdefault("t_call_end_ns", row["t_call_ns"])
        row["t_reply_ns"] = row["t_call_ns"] + row["latency_ns"]
        full.append(row)
    df = pd.DataFrame(full)
    for col, dtype in TRANSACTION_DTYPES.items():
        if col not in df:  # what the test does not care about: 0 or missing
            df[col] = 0 if dtype in ("int64", "int32") else None
        df[col] = df[col].astype(dtype)
    return df


def trivial(t_ns: int, latency_ns: int, op: str = "NULL") -> dict:
    return {"op": op, "t_call_ns": t_ns, "latency_ns": latency_ns}


def sequential_writes(
    n: int, block: int, latency_ns: int, gap_ns: int, start_ns: int, committed: int = 0
) -> list[dict]:
    rows, t = [], start_ns
    for i in range(n):
        rows.append(
            {
                "op": "WRITE",
                "proc": 7,
                "t_call_ns": t,
                "latency_ns": latency_ns,
                "count": block,
                "offset": i * block,
                "stable": committed,
                "committed": committed,
                "write_bytes": block,
                "call_bytes": block + 140,
            }
        )
        t += latency_ns + gap_ns
    return rows


# ---------------------------------------------------- the study's numbers (Table 9.4)

BLOCK = 8192  # 8 KiB
T_SER = BLOCK * 8 / 1e9  # 65.536 µs at 1 Gbit/s
T_B_BEAST = 175.98e-6
T_OP = 61.87e-6


@pytest.mark.parametrize(
    ("round_trip", "t_op", "mbit_s"),
    [(192.68e-6, T_OP, 132.11), (192.68e-6, 0.0, 150.94), (175.39e-6, T_OP, 136.88)],
    ids=["switched", "no T_op", "crossover"],
)
def test_reference_values(round_trip: float, t_op: float, mbit_s: float) -> None:
    got = cycle_throughput_bps(BLOCK, round_trip / 2, T_SER, T_B_BEAST, t_op) / 1e6
    assert got == pytest.approx(mbit_s, abs=0.01)


@cache
def study_model():
    """A sequential 8 KiB trace whose trivial RPCs (the server's own time) and client
    gap give T_op = 61.87 µs once the study's round trip, 1 Gbit/s link and Beast disk
    are given.  The WRITE latencies play no part in the parameters."""
    gap = 20 * US
    server = round(T_OP * 1e9) - gap  # the server's time for a trivial RPC
    rows = [trivial(T0 + i * 1000 * US, round(192.68e-6 * 1e9) + server) for i in range(3)]
    rows += sequential_writes(50, BLOCK, 400 * US, gap, T0 + 10_000 * US)
    overrides = ModelOverrides(rtt_s=192.68e-6, link_rate_bps=1e9, disk_rate_Bps=BLOCK / T_B_BEAST)
    return fit_model(make_tx(rows), capture_point="client", overrides=overrides)


def test_reference_values_through_fit_and_what_if() -> None:
    r = study_model()
    assert r.parameter("T_op") == pytest.approx(T_OP, abs=1e-9)
    assert r.terms["2·T_prop"] == pytest.approx(192.68e-6)
    assert r.terms["T_ser"] == pytest.approx(65.536e-6)
    assert r.terms["T_B"] == pytest.approx(175.98e-6)
    seq = r.predictions.set_index("scenario").loc["sequential (1 WRITE in flight)"]
    assert seq["predicted_mbit_s"] == pytest.approx(132.11, abs=0.01)
    table = what_if(r, ["rtt=175.39us", "rtt=-17.29us"]).set_index("change")
    assert table["predicted_mbit_s"].to_list() == pytest.approx([136.88, 136.88], abs=0.01)
    # the study's switched network: the round trip is the largest term (192.68 of 496.07 µs)
    assert r.dominant == "2·T_prop"
    assert r.dominant_text.startswith("the network round trip is 39% of each cycle")


def test_what_if_changes_move_the_right_terms() -> None:
    r = study_model()
    base = r.cycle()
    t = what_if(r, ["disk=2x", "link=10G", "block=64K", "outstanding=16", "rtt=2x"])
    t = t.set_index("change")
    faster_disk = base.t_cycle_s - base.terms["T_B"] / 2
    assert t.loc["disk=2x", "t_cycle_us"] == pytest.approx(faster_disk * 1e6)
    assert t.loc["link=10G", "t_cycle_us"] == pytest.approx(
        (base.t_cycle_s - base.terms["T_ser"] * 0.9) * 1e6
    )
    # a 64 KiB block: T_ser and T_B grow 8x, the round trip and T_op do not
    big = base.terms["2·T_prop"] + 8 * (base.terms["T_ser"] + base.terms["T_B"]) + T_OP
    assert t.loc["block=64K", "t_cycle_us"] == pytest.approx(big * 1e6)
    # 16 in flight: bounded by the disk (8 KiB per 175.98 µs = 372 Mbit/s), not 16x
    assert t.loc["outstanding=16", "predicted_mbit_s"] == pytest.approx(BLOCK * 8 / T_B_BEAST / 1e6)
    assert t.loc["outstanding=16", "dominant"] == "disk rate"
    assert t.loc["rtt=2x", "t_cycle_us"] == pytest.approx((base.t_cycle_s + 192.68e-6) * 1e6)


# --------------------------------------------------------------------------- units


def test_parsers_accept_human_units() -> None:
    assert parse_duration("1ms") == pytest.approx(1e-3)
    assert parse_duration("250us") == parse_duration("250 µs") == pytest.approx(250e-6)
    assert parse_duration("0.5s") == 0.5
    with pytest.raises(ValueError, match="needs a unit: 200ms or 200s"):
        parse_duration("200")  # issue 18: silently 200 s before
    assert parse_rate("10G") == parse_rate("10Gbit/s") == 10e9
    assert parse_rate("100Mbps") == 100e6
    assert parse_rate("200MB/s") == 1.6e9  # bytes
    assert parse_size("64K") == parse_size("64KiB") == 65536
    assert parse_size("1M") == 1048576 and parse_size("1MB") == 10**6
    assert parse_size("8192") == 8192
    o = overrides_from_options(rtt="1ms", link_rate="10G", disk_rate="200MB/s", block="64K")
    assert o == ModelOverrides(
        rtt_s=1e-3, link_rate_bps=10e9, disk_rate_Bps=200e6, block_bytes=65536
    )


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_duration, "fast"),
        (parse_duration, "-1ms"),
        (parse_duration, "5 parsecs"),
        (parse_rate, "0G"),
        (parse_rate, "lots"),
        (parse_size, "1.5"),
        (parse_size, "big"),
    ],
)
def test_parsers_reject_nonsense_clearly(parse, text: str) -> None:
    with pytest.raises(ValueError, match=repr(text).strip("'")):
        parse(text)


def test_parse_what_if() -> None:
    w = parse_what_if("rtt=+5ms,link=10G")
    assert w.rtt_delta_s == pytest.approx(5e-3) and w.link_rate_bps == 10e9
    assert parse_what_if("rtt=-1ms").rtt_delta_s == pytest.approx(-1e-3)
    assert parse_what_if("rtt=10ms").rtt_s == pytest.approx(10e-3)
    assert parse_what_if("disk=2x").disk_factor == 2.0
    assert parse_what_if("disk=200MB/s").disk_rate_Bps == 200e6
    assert parse_what_if("outstanding=16").outstanding == 16
    assert parse_what_if("block=1M").block_bytes == 1048576
    for bad in ("speed=2x", "rtt", "rtt=", "outstanding=0", "link=fast"):
        with pytest.raises(ValueError, match="what-if"):
            parse_what_if(bad)


# ------------------------------------------------------------------ estimation rules


def test_three_transactions_cannot_estimate() -> None:
    rows = [trivial(T0, 100 * US), trivial(T0 + 500 * US, 120 * US, "GETATTR")]
    rows += sequential_writes(1, 65536, 900 * US, 0, T0 + 1000 * US)
    r = fit_model(make_tx(rows))
    params = r.parameters.set_index("name")
    assert params["value_s"].isna().all()
    assert params["method"].str.startswith("cannot estimate: ").all()
    assert math.isnan(r.t_cycle_s) and r.dominant == ""
    model_rows = ~r.predictions["scenario"].str.startswith("Little's law")
    assert r.predictions.loc[model_rows, "predicted_mbit_s"].isna().all()
    d = json.loads(json.dumps(jsonable(r), allow_nan=False))
    assert [p["name"] for p in d["parameters"]] == list(PARAMETERS)
    for p in d["parameters"]:
        assert p["value_s"] is None and p["method"].startswith("cannot estimate")
        assert isinstance(p["samples"], int)
    assert r.findings()[0].kind == "model_cannot_estimate"


def test_handshake_gives_t_prop_and_is_preferred() -> None:
    rows = [trivial(T0 + i * 1000 * US, 900 * US) for i in range(5)]
    events = pd.DataFrame(
        {
            "ts_ns": [T0 - 900 * US, T0 - 500 * US, T0 - 400 * US],
            "conn": [1, 1, 1],
            "kind": ["tcp_syn", "tcp_syn_ack", "tcp_handshake_ack"],
        }
    )
    p = fit_model(make_tx(rows), events).parameters.set_index("name").loc["T_prop"]
    assert p["value_s"] == pytest.approx(250e-6)  # (ACK - SYN) / 2
    assert "handshake" in p["method"] and p["samples"] == 1
    p = fit_model(make_tx(rows), None).parameters.set_index("name").loc["T_prop"]
    assert p["value_s"] == pytest.approx(450e-6) and "trivial" in p["method"]
    assert p["samples"] == 5


def test_handshake_round_trips_exact_with_incomplete_handshakes() -> None:
    # conn 2 has only a SYN, conn 3 a re-sent SYN: the round trips stay exact
    # nanoseconds (epoch ns in float64 would round to 256 ns)
    events = pd.DataFrame(
        {
            "ts_ns": [T0 + 1, T0 + 100_000, T0 + 123_457, T0 + 5, T0, T0 + 300, T0 + 1_001],
            "conn": [1, 1, 1, 2, 3, 3, 3],
            "kind": ["tcp_syn", "tcp_syn_ack", "tcp_handshake_ack", "tcp_syn"]
            + ["tcp_syn", "tcp_syn", "tcp_handshake_ack"],
        }
    )
    p = fit_model(make_tx([trivial(T0, 900 * US)]), events).parameters.set_index("name")
    assert p.loc["T_prop", "samples"] == 2
    assert p.loc["T_prop", "value_s"] == 701 / 1e9 / 2  # conn 3: last SYN to the ACK
    # (median - min) / 2, the median of two being their mean
    assert p.loc["T_prop", "spread_s"] == pytest.approx((123_456 - 701) / 4 / 1e9, abs=1e-15)


def test_server_side_capture_point() -> None:
    rows = [trivial(T0 + i * 1000 * US, 30 * US) for i in range(5)]
    rows += sequential_writes(10, 65536, 400 * US, 0, T0 + 10_000 * US)
    tx = make_tx(rows)
    given = ModelOverrides(link_rate_bps=10e9, disk_rate_Bps=1e9)
    r = fit_model(tx, capture_point="server", overrides=given)
    t_prop = r.parameters.set_index("name").loc["T_prop"]
    # no handshake, no ACKs: the client's one-at-a-time metadata calls, each sent
    # when the last reply reached it, give the round trip plus its turnaround
    assert t_prop["value_s"] == pytest.approx(970e-6 / 2) and "server side" in t_prop["method"]
    # with the round trip given, T_op is the server's time for the trivial RPCs, all
    # of their call->reply here (the WRITEs' 400 µs play no part) ...
    r = fit_model(tx, capture_point="server", overrides=replace_rtt(given, 2e-3))
    assert r.parameter("T_op") == pytest.approx(30e-6)
    # ... and the client kept more in flight than the server saw (Little's law)
    assert r.outstanding_mean == pytest.approx(r.outstanding_seen * (400e-6 + 2e-3) / 400e-6)
    client = fit_model(tx, capture_point="client", overrides=replace_rtt(given, 2e-3))
    assert client.outstanding_mean == client.outstanding_seen


def replace_rtt(o: ModelOverrides, rtt: float) -> ModelOverrides:
    return ModelOverrides(rtt, o.link_rate_bps, o.disk_rate_Bps, o.block_bytes)


def test_t_b_from_file_sync_vs_unstable_and_from_commit() -> None:
    rows = [trivial(T0 + i * 1000 * US, 100 * US) for i in range(3)]
    rows += sequential_writes(4, 32768, 300 * US, 50 * US, T0 + 10_000 * US, committed=0)
    rows += sequential_writes(4, 32768, 1300 * US, 50 * US, T0 + 20_000 * US, committed=2)
    p = fit_model(make_tx(rows)).parameters.set_index("name").loc["T_B"]
    assert p["value_s"] == pytest.approx(1e-3) and "FILE_SYNC" in p["method"]
    assert p["samples"] == 8
    # a COMMIT of the 4 UNSTABLE WRITEs (128 KiB) taking 100 µs + 2.1 ms at the server
    rows.append(
        {"op": "COMMIT", "proc": 21, "t_call_ns": T0 + 30_000 * US, "latency_ns": 2200 * US}
    )
    p = fit_model(make_tx(rows)).parameters.set_index("name").loc["T_B"]
    assert p["value_s"] == pytest.approx(2.1e-3 / 4) and "COMMIT" in p["method"]
    assert p["samples"] == 1


def test_prediction_is_not_littles_law() -> None:
    """The prediction rests on the parameters alone: WRITEs three times slower than
    the model's cycle leave the prediction where it was and show as an error;
    Little's law (mean in flight x block / mean latency), a check of the
    measurement, equals the measured throughput whatever the WRITEs took."""
    overrides = ModelOverrides(rtt_s=192.68e-6, link_rate_bps=1e9, disk_rate_Bps=BLOCK / T_B_BEAST)
    rows = [trivial(T0 + i * 1000 * US, round((192.68e-6 + 41.87e-6) * 1e9)) for i in range(3)]
    fast = fit_model(
        make_tx(rows + sequential_writes(50, BLOCK, 300 * US, 20 * US, T0 + 10_000 * US)),
        capture_point="client",
        overrides=overrides,
    )
    slow = fit_model(
        make_tx(rows + sequential_writes(50, BLOCK, 900 * US, 20 * US, T0 + 10_000 * US)),
        capture_point="client",
        overrides=overrides,
    )
    assert fast.predictions["scenario"].tolist() == [
        "sequential (1 WRITE in flight)",
        "the client's maximum concurrency (1)",
        "Little's law check (mean in flight x block / mean latency)",
    ]
    p_fast, p_slow = (m.predictions.set_index("scenario") for m in (fast, slow))
    row = "the client's maximum concurrency (1)"
    assert p_fast.loc[row, "predicted_mbit_s"] == pytest.approx(p_slow.loc[row, "predicted_mbit_s"])
    assert slow.measured_mbit_s < 0.4 * fast.measured_mbit_s
    assert p_slow.loc[row, "error_pct"] - p_fast.loc[row, "error_pct"] > 100  # points
    little = "Little's law check (mean in flight x block / mean latency)"
    for p, m in ((p_fast, fast), (p_slow, slow)):
        assert p.loc[little, "measured_mbit_s"] == pytest.approx(m.measured_mbit_s)
        assert p.loc[little, "predicted_mbit_s"] == pytest.approx(m.measured_mbit_s, rel=0.05)
    assert any("trivial RPCs" in i for i in fast.inputs)
    assert any("maximum WRITEs in flight" in i for i in fast.inputs)


# ------------------------------------------------ lab captures at two injected delays
#
# The workload: the lab's NFSv3-over-UDP client writing 1 MiB in 32 KiB WRITEs with 3
# outstanding (a fixed window of transactions in flight, the study's setting), at no added
# delay (d0: kernel bridge) and at 2 and 10 ms (impair.py bridge), made in one lab run.
# The d2/d10 runs also have a server-side capture: with both ends on one clock it measures
# the delay the bridge really added (nominal delay + the bridge's own 0.1-0.2 ms each way).
#
# Figures (issue 5; sample-pcaps, tshark 4.0):
#   T_prop d0 20.5 µs; d2 1183 µs vs injected one way 1141.0 µs measured (nominal 1000)
#   + 20.5 = 1161.5 µs (+21.5 µs, +1.9%); d10 5180 µs vs 5147.5 + 20.5 = 5168.0 µs (+12 µs,
#   +0.2%).  Against the nominal delay d2 would be +162.5 µs off (the bridge's own delay).
#   Fitted on d2, rtt=+8ms -> 63.30 Mbit/s vs 65.92 measured at d10 (-4.0%); fitted on d10,
#   rtt=-8ms -> 214.15 vs 212.52 measured at d2 (+0.8%).  Five lab runs of the scenario:
#   d2 -> d10 -1.1% to -8.0%, d10 -> d2 -4.8% to +12.0%.
#
# Not this workload: the lab's nfs-cp over TCP writing 1 MiB (16 x 64 KiB sent at once,
# v3-tcp-nfscp-w64k-d*): the transfer is over within TCP slow start, so its time grows by
# about six round trips per added round trip, which a model of transactions in flight does
# not see.  Fitted on d2 it predicted d10 at +24% to +35% over four fresh lab runs (-2% on the
# committed pair, whose d2 run had a slow bridge).  Only its T_prop is checked below.

UDP = {d: SAMPLES / f"v3-udp-py-w32k-{d}-l0.pcap" for d in ("d0", "d2", "d10")}
TCP_D2 = SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.pcap"
TCP_D10 = SAMPLES / "v3-tcp-nfscp-w64k-d10-l0.pcap"
SMALL_FRAME = 300  # bytes of IP datagram: a trivial RPC, never queued behind a 32 KiB WRITE


@cache
def lab(capture: Path, with_events: bool = True):
    t = load_sample(capture)
    events = t.events if with_events else None
    return fit_model(t.transactions, events, capture_point="client", messages=t.messages)


def nominal_one_way_s(capture: Path) -> float:
    return ground_truth(capture)["impairment"]["added_rtt_ms"] / 2 / 1e3


def _frame_times(capture: Path) -> dict[tuple[int, str], int]:
    """tshark's time (ns) of each small single-frame RPC message, by (xid, call/reply)."""
    rows = tshark_ref.fields(
        str(capture),
        ["rpc.xid", "rpc.msgtyp", "frame.time_epoch"],
        f"rpc && ip.len < {SMALL_FRAME}",
    )
    out = {}
    for xid, msgtyp, epoch in rows:
        sec, _, frac = epoch.partition(".")
        key = (int(xid, 16), "call" if msgtyp == "0" else "reply")
        assert key not in out, f"{key} twice: not a loss-free run"
        out[key] = int(sec) * 10**9 + int(frac.ljust(9, "0")[:9])
    return out


def injected_one_way_s(capture: Path) -> float:
    """The one-way delay the bridge really added: small frames' time at the server-side
    capture minus at the client side (calls), and the reverse (replies); the mean of the
    two directions' medians.  Both tcpdumps run on one host: one clock."""
    client = _frame_times(capture)
    server = _frame_times(capture.with_name(capture.name.replace(".pcap", ".server-side.pcap")))
    both = client.keys() & server.keys()
    c2s = [server[k] - client[k] for k in both if k[1] == "call"]
    s2c = [client[k] - server[k] for k in both if k[1] == "reply"]
    assert len(c2s) >= 5 and len(s2c) >= 5
    return (float(np.median(c2s)) + float(np.median(s2c))) / 2 / 1e9


def within(got: float, want: float) -> bool:
    """The issue's tolerance: 10% or 100 µs, whichever is larger."""
    return abs(got - want) <= max(0.10 * want, 100e-6)


@pytest.mark.parametrize("delay", ["d2", "d10"])
def test_t_prop_is_the_injected_delay_plus_the_no_delay_t_prop(delay: str) -> None:
    """T_prop(dX) = half the injected round trip (as the bridge really applied it) +
    T_prop(d0), within 10% or 100 µs.  The bridge adds its own 0.1-0.2 ms each way to the
    nominal delay (the lab's README: 0.25-0.5 ms per round trip)."""
    capture = UDP[delay]
    t_prop_0 = lab(UDP["d0"]).parameter("T_prop")
    injected = injected_one_way_s(capture)
    nominal = nominal_one_way_s(capture)
    assert nominal <= injected <= nominal + 0.25e-3, (nominal, injected)
    t_prop = lab(capture).parameter("T_prop")
    assert within(t_prop, injected + t_prop_0), (t_prop, injected, t_prop_0)
    assert 0 < t_prop_0 < 100e-6  # the kernel bridge: microseconds
    if delay == "d10":  # 10% of 5 ms also covers the bridge's own delay
        assert within(t_prop, nominal + t_prop_0)


def test_what_if_rtt_predicts_the_longer_round_trip() -> None:
    """Fitted on d2, asked for d10's round trip, the model predicts the d10 capture's
    measured WRITE throughput within 15% (as a change of the injected delay, and as
    d10's own round trip): there the round trip is nearly all of each cycle.

    The other way it over-predicts d2 (by about half): its parameters come from
    the trace's other observations (trivial RPCs for the server's time), not from
    the WRITEs it predicts, and leave out the server's time for each WRITE's data,
    which weighs at a short round trip -- the time budget shows it as ``server``."""
    m2, m10 = lab(UDP["d2"]), lab(UDP["d10"])
    delta_ms = (nominal_one_way_s(UDP["d10"]) - nominal_one_way_s(UDP["d2"])) * 2e3
    rtt_us = 2 * m10.parameter("T_prop") * 1e6
    table = what_if(m2, [f"rtt={delta_ms:+g}ms", f"rtt={rtt_us:.1f}us"])
    for predicted in table["predicted_mbit_s"]:
        assert predicted == pytest.approx(m10.measured_mbit_s, rel=0.15)
    back = what_if(m10, [f"rtt={-delta_ms:+g}ms"])["predicted_mbit_s"].iloc[0]
    assert back > 1.2 * m2.measured_mbit_s  # an upper bound: the server's time is missing
    # the delay really changed the throughput (and the window of 3 stayed in use)
    assert m10.measured_mbit_s < 0.5 * m2.measured_mbit_s
    assert 2.5 <= m2.outstanding_mean <= 3 and m2.outstanding_max == 3


@pytest.mark.parametrize("with_events", [True, False], ids=["as loaded", "trivial RPCs"])
def test_tcp_t_prop_follows_the_injected_delay(with_events: bool) -> None:
    """The TCP runs (no server-side capture): each against the other, both through the
    bridge: T_prop(d10) = T_prop(d2) + (10 - 2) ms / 2, and the other way round."""
    p2 = lab(TCP_D2, with_events).parameter("T_prop")
    p10 = lab(TCP_D10, with_events).parameter("T_prop")
    extra = nominal_one_way_s(TCP_D10) - nominal_one_way_s(TCP_D2)
    assert extra == pytest.approx(4e-3)
    assert within(p10, p2 + extra), (p2, p10)
    assert within(p2, p10 - extra), (p2, p10)


@pytest.mark.parametrize("capture", [UDP["d2"], UDP["d10"], TCP_D2, TCP_D10], ids=lambda p: p.name)
def test_lab_parameters_carry_method_and_samples(capture: Path) -> None:
    r = lab(capture)
    d = json.loads(json.dumps(jsonable(r), allow_nan=False))
    for p in d["parameters"]:
        assert p["value_s"] is not None and p["value_s"] >= 0
        assert p["method"] and not p["method"].startswith("cannot")
        assert p["samples"] >= 1
    gt = ground_truth(capture)
    assert r.block_bytes == gt["server"]["export_maxwrite"]
    assert r.measured_mbit_s > 0 and r.dominant in r.terms
    p = r.predictions.set_index("scenario")
    little = p.loc["Little's law check (mean in flight x block / mean latency)"]
    assert abs(little["error_pct"]) < 15  # the measurement is consistent
    model = p.loc[f"the client's maximum concurrency ({r.outstanding_max})"]
    assert math.isfinite(model["error_pct"])  # a real check: what it says is in the budget


def test_render_model_shows_parameters_predictions_and_what_if() -> None:
    from rich.console import Console

    from nfstrace.reports.model_view import render_model

    console = Console(record=True, width=200)
    r = study_model()
    render_model(fit_model_with_what_if(r), console)
    text = console.export_text()
    assert "the network round trip is 39% of each cycle" in text
    assert "132.1" in text  # the sequential prediction
    assert "given round trip (--rtt) / 2" in text
    assert "rtt=+5ms" in text


def fit_model_with_what_if(r):
    from dataclasses import replace

    return replace(r, what_if=what_if(r, ["rtt=+5ms"]))


def _commit_per_byte_reference(tx: pd.DataFrame, writes: pd.DataFrame, rtt: float) -> list:
    """The definition, one COMMIT at a time."""
    commits = tx[(tx["op"] == "COMMIT") & (tx["status"].fillna(-1) == 0)]
    commits = commits[(commits["n_calls"] == 1) & (commits["n_replies"] >= 1)]
    commits = commits.sort_values("t_call_ns")
    unstable = writes[writes["committed"].fillna(-1) == 0]
    out, previous = [], {}
    for c in commits.itertuples(index=False):
        same = unstable if pd.isna(c.fh) else unstable[unstable["fh"] == c.fh]
        since = previous.get(c.fh, -(2**62))
        done = same[(same["t_reply_ns"] > since) & (same["t_reply_ns"] <= c.t_call_ns)]
        nbytes = int(done["write_bytes"].sum()) or max(int(c.count) if pd.notna(c.count) else 0, 0)
        previous[c.fh] = int(c.t_call_ns)
        server = c.latency_ns / 1e9 - rtt
        if nbytes > 0 and server > 0:
            out.append(server / nbytes)
    return out


def test_commit_time_per_byte_counts_each_files_writes_since_its_last_commit() -> None:
    rng = np.random.default_rng(3)
    rows = []
    for i in range(300):
        t = T0 + i * 100 * US
        fh = rng.choice(["aa", "bb", "cc", None], p=[0.4, 0.3, 0.25, 0.05])
        if rng.random() < 0.8:
            size = int(rng.choice([4096, 65536]))
            level = int(rng.choice([0, 0, 0, 2]))  # mostly UNSTABLE, some FILE_SYNC
            rows.append(
                {
                    "op": "WRITE",
                    "proc": 7,
                    "t_call_ns": t,
                    "latency_ns": 150 * US,
                    "count": size,
                    "committed": level,
                    "write_bytes": size,
                    "fh": fh or "aa",
                }
            )
        else:
            rows.append(
                {
                    "op": "COMMIT",
                    "t_call_ns": t,
                    "latency_ns": int(rng.integers(10, 900)) * US,
                    "status": int(rng.choice([0, 0, 0, 70])),
                    "count": int(rng.choice([0, 8192, -1])),
                    "fh": fh,
                }
            )
    tx = make_tx(rows)
    writes = tx[(tx["op"] == "WRITE") & (tx["write_bytes"] > 0)]
    expected = _commit_per_byte_reference(tx, writes, 200e-6)
    assert len(expected) > 20
    assert _commit_server_seconds_per_byte(tx, writes, 200e-6).tolist() == expected


# ------------------------------------------------ captures without TCP handshakes


def _without_handshakes(capture: Path, capture_point: str):
    """The model as on a capture started after the connections opened (their
    handshake events removed)."""
    t = load_sample(capture)
    events = t.events[~t.events["kind"].isin(HANDSHAKE_KINDS)]
    return fit_model(t.transactions, events, capture_point=capture_point, messages=t.messages)


def test_data_ack_t_prop_follows_the_injected_delay_without_handshakes() -> None:
    """Mid-stream TCP captures: T_prop from data->ACK round trips is the nominal delay
    plus what the bridge adds (0.1-0.2 ms each way, up to 0.25 ms as measured on the
    UDP runs above) within the issue's tolerance, and d10 - d2 = 4 ms one way.  (The
    handshakes give 1322.5 us at d2, whose run had a slow bridge, and 5256 us at d10;
    data->ACK 1178.5 and 5215 us.)"""
    got = {}
    for capture in (TCP_D2, TCP_D10):
        p = _without_handshakes(capture, "client").parameters.set_index("name").loc["T_prop"]
        assert p["method"].startswith("TCP data->ACK") and p["samples"] == 4, p["method"]
        nominal = nominal_one_way_s(capture)
        assert nominal <= p["value_s"] <= nominal + 0.25e-3 + 100e-6, p["value_s"]
        got[capture] = p["value_s"]
    extra = nominal_one_way_s(TCP_D10) - nominal_one_way_s(TCP_D2)
    assert within(got[TCP_D10], got[TCP_D2] + extra), got


def test_data_ack_t_prop_at_the_server_side() -> None:
    """Server side: the server's data waits the round trip for the client's ACK.  The
    same lossy run captured at both ends gives the same T_prop (the client side from
    its handshakes)."""
    server_side = SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.5.server-side.pcap"
    p = _without_handshakes(server_side, "server").parameters.set_index("name").loc["T_prop"]
    assert "server's data to the client's ACK" in p["method"]
    client = lab(SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.5.pcap").parameter("T_prop")
    assert within(p["value_s"], client), (p["value_s"], client)


def test_data_ack_t_prop_on_crafted_mid_stream_capture(tmp_path: Path) -> None:
    """No handshake, one GETATTR: the smallest data->ACK round trip of the client's data
    (a re-sent segment and a TSO burst not timed) halves to T_prop."""
    path = mf.build_ack_rtt(tmp_path)["ack_rtt"]
    t = load_sample(path)
    q = assess_capture(t.messages, t.transactions, t.events, t.stats)
    assert q.capture_point == "client"
    r = fit_model(t.transactions, t.events, capture_point=q.capture_point)
    p = r.parameters.set_index("name").loc["T_prop"]
    assert p["value_s"] == pytest.approx(min(mf.ACK_RTT_CLIENT_US) * 1e-6 / 2, abs=1e-12)
    assert p["samples"] == 1 and p["method"].startswith("TCP data->ACK")


CAUSES = SAMPLES / "causes"


def test_model_that_misses_the_measured_rate_gives_no_advice() -> None:
    """A slow server (8 ms in each WRITE) is outside the model's terms: its
    prediction is far above the measured rate, so it says so and prices no remedy;
    a rate-limited link is inside them: the prediction fits and the advice stands."""
    slow = load_sample(CAUSES / "v3-tcp-nfsrs-w64k-srv8ms-d0-l0.pcap").diagnosis
    assert slow.model.prediction_ratio > 10 and not slow.model.fits
    assert slow.model.dominant_text.startswith("the model does not account for the measured")
    assert "help most" not in slow.model.dominant_text
    link = load_sample(CAUSES / "v3-tcp-nfsrs-w1m-rate50mbit-d0-l0.pcap").diagnosis
    assert link.model.fits and link.model.prediction_ratio == pytest.approx(1.0, abs=0.1)
    assert link.model.dominant == "T_ser" and "a faster link" in link.model.dominant_text
    assert jsonable(link.model)["fits"] is True


def test_round_trip_remedy_priced_by_the_counterfactual() -> None:
    """Both injected 10 ms: the remedy quotes the predicted gain of round trips
    at a LAN's (counterfactual.py), in words and as ``speedup_if_removed``; one
    WRITE at a time (nfs-rs over v4.1) gains far more than 16 in flight."""
    gains = {}
    for name in ("v41-tcp-nfsrs-w64k-d10-l0", "v3-tcp-nfscp-w64k-d10-l0"):
        d = load_sample(CAUSES / f"{name}.pcap").diagnosis
        assert d.verdict.primary == "round_trip"
        rt = next(f for f in d.findings if f.kind == "round_trip")
        gain = rt.details["speedup_if_removed"]
        assert f"fixing it would make the writes about {gain:.1f}x faster" in rt.title
        assert "WRITEs in flight" in rt.title
        gains[name] = gain
    assert gains["v41-tcp-nfsrs-w64k-d10-l0"] > 10 > gains["v3-tcp-nfscp-w64k-d10-l0"] > 2


def test_t_op_from_small_metadata_rpcs_without_trivial_ones() -> None:
    """An NFSv4.1 client that sends two GETATTRs and no other trivial RPC: T_op
    from its small metadata compounds (OPEN, LAYOUTGET, CLOSE ...), never from the
    WRITEs or COMMITs being predicted."""
    t = load_sample(CAUSES / "v41-tcp-nfsrs-w1m-pause200ms-d0-l0.pcap")
    tx = t.transactions
    trivial = tx[tx["op"].isin(["GETATTR", "SEQUENCE", "NULL", "ACCESS"])]
    assert len(trivial) < 3
    m = t.diagnosis.model
    row = m.parameters.set_index("name").loc["T_op"]
    assert "small metadata RPCs" in row["method"] and row["samples"] >= 3
    assert 0 <= row["value_s"] < 2e-3
    # the same capture with only its data operations left cannot estimate it
    data = tx[tx["op"].isin(["WRITE", "COMMIT"]) | (tx["prog"] != tx["prog"].iloc[-1])]
    again = fit_model(data, capture_point="client", overrides=ModelOverrides(rtt_s=1e-4))
    assert math.isnan(again.parameter("T_op"))
