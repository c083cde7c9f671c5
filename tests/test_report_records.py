"""The replay report's records survive their JSON form: what a sweep reads back is what the replay wrote."""
from __future__ import annotations

import json
from dataclasses import asdict

from hypothesis import given, settings
from hypothesis import strategies as st

from ckpt.replay.report import CodeRunRecord, GoldenRecord, WorstRecord, record_from_json

names = st.text(alphabet="abcdefgh_0123", min_size=1, max_size=8)
counts = st.integers(min_value=0, max_value=10**6)
floats = st.floats(allow_nan=False, allow_infinity=False, width=32)

worst = st.builds(WorstRecord, tensor=names, index=st.lists(counts, max_size=3), actual=floats, expected=floats,
                  abs_diff=floats)
golden = st.builds(GoldenRecord, errors=counts, compared=counts, tensors=counts, failed=st.lists(names, max_size=3),
                   worst=st.none() | worst, nan_inputs=st.lists(names, max_size=2),
                   by_output=st.dictionaries(names, counts, max_size=3))
code_run = st.builds(CodeRunRecord, flow=st.sampled_from(["tiled", "non_tiled"]),
                     status=st.sampled_from(["ran", "failed", "not run"]), reason=st.none() | names,
                     weights=st.sampled_from(["in-place", "out-of-place"]), golden=st.none() | golden,
                     graph_order=st.none() | st.sampled_from(["bit-identical", "differs"]),
                     differing=st.lists(names, max_size=3), steps=st.lists(golden, max_size=4),
                     memory=st.dictionaries(names, st.dictionaries(names, counts, max_size=3), max_size=2),
                     counts=st.dictionaries(names, counts, max_size=3))


@settings(max_examples=60, deadline=None)
@given(code_run)
def test_a_code_run_record_read_back_from_json_equals_the_one_written(record):
    again = record_from_json(CodeRunRecord, json.loads(json.dumps(asdict(record))))
    assert again == record
    assert again.ok == record.ok and again.trains == record.trains and again.verdict == record.verdict
