"""Calls and replies the capture saw only part of (issue 16, items 7 and 8):
a call never answered stops holding anything up after
``pace.UNANSWERED_HORIZON_NS``; a reply just before the first captured send of
its xid is that call's earlier (duplicate) reply, not a reply without call."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from test_match import MS, T0, messages

import nfstrace
from nfstrace.analysis.pace import UNANSWERED_HORIZON_NS, outstanding_steps
from nfstrace.match import MatchConfig, match

try:
    from crafted import make_unanswered as mu
except ImportError:  # pragma: no cover - run from the repository root
    from tests.crafted import make_unanswered as mu

S = 1_000_000_000


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return mu.build_all(tmp_path_factory.mktemp("unanswered"))


def test_calls_given_up_hold_no_silence(captures: dict[str, Path]) -> None:
    """Two portmap calls never answered, then 1,511 s without a packet: not a
    silence while calls were outstanding (they were given up after 60 s).  The
    30 s silence after an unanswered GETATTR is one: its client still waits."""
    trace = nfstrace.load(captures["unanswered_portmap"])
    gaps = trace.diagnosis.quality.gaps
    base = mu.mc.BASE_NS + mu.SILENCE_NS + mu.WAIT_NS
    assert gaps[["start_ns", "end_ns", "outstanding"]].values.tolist() == [
        [base, base + mu.WAIT_NS, 1]
    ]
    titles = [f.title for f in trace.diagnosis.quality.findings() if f.kind == "long_silence"]
    assert len(titles) == 1 and "(30.000 s in all)" in titles[0]


def test_unanswered_calls_leave_the_outstanding_count(captures: dict[str, Path]) -> None:
    trace = nfstrace.load(captures["unanswered_portmap"])
    steps = outstanding_steps(trace.transactions)
    t0 = mu.mc.BASE_NS
    level = dict(zip(steps["t_ns"].tolist(), steps["outstanding"].tolist(), strict=True))
    # the two GETPORT calls (1 ms apart) are outstanding for 60 s after their send
    assert level[t0] == 1 and level[t0 + 1_000_000] == 2
    assert level[t0 + UNANSWERED_HORIZON_NS] == 1
    assert level[t0 + 1_000_000 + UNANSWERED_HORIZON_NS] == 0
    # the unanswered GETATTR is still outstanding at the end of the trace (30 s < 60 s)
    assert steps["outstanding"].iloc[-2] == 2


def test_reply_before_the_captured_resend_is_a_duplicate_reply(
    captures: dict[str, Path],
) -> None:
    trace = nfstrace.load(captures["reply_before_resend"])
    tx = trace.transactions.set_index("xid")
    assert len(tx) == 2 and (tx["n_calls"] == 1).all()  # no reply without call
    assert tx.loc[mu.RESENT_XID, "n_replies"] == 2
    # answered by the reply to the captured send, 300 µs after the first frame
    assert tx.loc[mu.RESENT_XID, "t_reply_ns"] == mu.mc.BASE_NS + 300_000 + 0
    assert tx.loc[mu.RESENT_XID, "latency_ns"] == 300_000 - mu.RESEND_AFTER_REPLY_NS
    assert trace.diagnosis.repeats.duplicate_replies == 1


def _lone_reply_then_call(reply_extra: dict, call_t: int, answered: bool = True) -> pd.DataFrame:
    rows = [
        {"msgtype": "reply", "t": 0, "xid": 7, **reply_extra},
        {"msgtype": "call", "t": call_t, "xid": 7},
    ]
    if answered:
        rows.append({"msgtype": "reply", "t": call_t + MS, "xid": 7})
    return match(messages(rows), MatchConfig(xid_reuse_ns=100 * MS))


def test_which_lone_replies_answered_an_uncaptured_send() -> None:
    # just before the first captured send, not heard: the call's duplicate reply
    tx = _lone_reply_then_call({}, 1 * MS)
    assert tx["n_calls"].tolist() == [1] and tx["n_replies"].tolist() == [2]
    # the client's TCP acknowledged it before sending: heard, so a new call (xid reused)
    tx = _lone_reply_then_call({"acked_ns": T0 + MS // 2}, 1 * MS)
    assert sorted(tx["n_calls"].tolist()) == [0, 1]
    # further than xid_reuse_ns before the send: another use of the xid
    tx = _lone_reply_then_call({}, 200 * MS)
    assert sorted(tx["n_calls"].tolist()) == [0, 1]
    # the captured send is not answered: the lone reply stays a reply without call
    tx = _lone_reply_then_call({}, 1 * MS, answered=False)
    assert sorted(tx["n_calls"].tolist()) == [0, 1]
    assert tx["n_replies"].tolist() == [0, 1] or tx["n_replies"].tolist() == [1, 0]
