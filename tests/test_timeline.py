"""The timeline (nfstrace/analysis/timeline.py): every kind of event in one
time-ordered table, each kind capped with a note."""

from __future__ import annotations

import pandas as pd
from conftest import SAMPLES

from nfstrace.analysis.timeline import TIMELINE_COLUMNS, timeline
from nfstrace.trace import load


def _of(trace, max_per_kind: int = 200):
    d = trace.diagnosis
    return timeline(
        trace.transactions,
        trace.events,
        d.stalls.stalls if d.stalls is not None else None,
        d.repeats.retransmissions,
        d.writes.verifier_changes if d.writes is not None else None,
        max_per_kind,
    )


def test_every_kind_in_time_order() -> None:
    trace = load(SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.5.pcap")  # loss: re-sends, TCP repeats
    shown = _of(trace)
    table = shown.table
    assert list(table.columns) == list(TIMELINE_COLUMNS)
    pd.testing.assert_frame_equal(table, trace.diagnosis.timeline.table)  # the diagnosis's
    assert table["t_ns"].is_monotonic_increasing
    kinds = set(table["kind"])
    assert "tcp_retransmission" in kinds and "tcp_syn" in kinds
    assert table["kind"].value_counts().max() <= 200
    # every parser event of a kind with few rows is there
    events = trace.events["kind"].astype(str).value_counts()
    for kind, n in events[events <= 200].items():
        assert (table["kind"] == kind).sum() == n
    assert all(
        note.split(":")[0] in set(events[events > 200].index) | {"stall"} for note in shown.notes
    )


def test_a_kind_past_its_cap_keeps_the_longest_and_says_so() -> None:
    trace = load(SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.5.pcap")
    whole = _of(trace).table
    cut = _of(trace, max_per_kind=2)
    many = whole["kind"].value_counts()
    many = many[many > 2]
    assert len(many)
    for kind, n in many.items():
        assert (cut.table["kind"] == kind).sum() == 2
        assert f"{kind}: 2 of {n:,} shown" in cut.notes
    assert cut.table["t_ns"].is_monotonic_increasing


def test_json_summary_holds_the_timeline() -> None:
    from nfstrace.reports.export import summary

    trace = load(SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.5.pcap")
    got = summary(trace)["diagnosis"]["timeline"]
    assert len(got["events"]) == len(trace.diagnosis.timeline.table) > 0
    first = got["events"][0]
    assert set(first) == set(TIMELINE_COLUMNS) and isinstance(first["t_ns"], int)
