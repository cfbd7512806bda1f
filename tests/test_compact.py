"""The tables stay compact (issue 17: memory per packet): text columns are
categories (each distinct address, operation list or handle stored once), not a
string per row.  Memory itself is measured by the benchmark; this guards the
column types that make it small."""

from __future__ import annotations

import pandas as pd
from conftest import SAMPLES

from nfstrace.match import match
from nfstrace.parsers import native
from nfstrace.schema import EVENT_DTYPES, MESSAGE_DTYPES, TRANSACTION_DTYPES

MESSAGE_TEXT = ("src", "dst", "auth_machine", "op", "ops", "op_status", "fh", "name", "verifier",
                "session")  # fmt: skip
TRANSACTION_TEXT = ("client", "server", "op", "ops", "session", "op_status", "verifier")


def test_schema_text_columns_are_categories() -> None:
    assert all(MESSAGE_DTYPES[c] == "category" for c in MESSAGE_TEXT)
    assert all(TRANSACTION_DTYPES[c] == "category" for c in TRANSACTION_TEXT)
    assert "string" not in MESSAGE_DTYPES.values()
    assert "string" not in EVENT_DTYPES.values()  # src, dst, kind


def test_tables_are_compact() -> None:
    messages, _, _ = native.parse([str(SAMPLES / "v3-udp-py-w32k-d0-l0.pcap")])
    tx = match(messages)
    for table, text in ((messages, MESSAGE_TEXT), (tx, TRANSACTION_TEXT)):
        for c in text:
            assert isinstance(table[c].dtype, pd.CategoricalDtype), c
            # only the values present, sorted (as astype("category") makes them)
            values = table[c].astype(object)
            assert list(table[c].cat.categories) == sorted(set(values.dropna())), c
    # bytes per row, categories included (82 messages, 41 transactions): 354 and
    # 501 with a string per row
    assert messages.memory_usage(deep=True).sum() / len(messages) < 250
    assert tx.memory_usage(deep=True).sum() / len(tx) < 460
