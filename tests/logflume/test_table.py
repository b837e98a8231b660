"""The admin commands' tables (logflume/table.py): text as Kafka's tools print them,
JSON keyed by the column names."""

import io
import json

import pytest

from logflume.table import Table, column_key


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("LOG-END-OFFSET", "log_end_offset"),
        ("#PARTITIONS", "partitions"),
        ("TransactionalId", "transactional_id"),
        ("CurrentTransactionStartTimeMs", "current_transaction_start_time_ms"),
        ("Duration(min)", "duration_min"),
        ("GROUP", "group"),
    ],
)
def test_column_names_become_snake_case_keys(name, key):
    assert column_key(name) == key


def test_text_aligns_columns_and_shows_missing_cells_as_the_placeholder():
    table = Table(["GROUP", "LAG", "CONSUMER-ID"])
    table.add("readers", 10, None)
    table.add("a", None, "c-1")
    out = io.StringIO()
    table.print(out=out)
    assert out.getvalue().splitlines() == [
        "GROUP   LAG CONSUMER-ID",
        "readers 10  -",
        "a       -   c-1",
    ]


def test_json_keeps_numbers_and_gives_null_for_missing_cells():
    table = Table(["TransactionalId", "ProducerId"], missing="None", sep="\t")
    table.add("t-1", None)
    table.add("t-2", 7)
    out = io.StringIO()
    table.print("json", out)
    assert json.loads(out.getvalue()) == [
        {"transactional_id": "t-1", "producer_id": None},
        {"transactional_id": "t-2", "producer_id": 7},
    ]
