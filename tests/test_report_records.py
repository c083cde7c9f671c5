"""The replay report's records survive their JSON form: what a sweep reads back is what the replay wrote."""
from __future__ import annotations

import json
from dataclasses import asdict

from hypothesis import given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.coderun.run import LevelUse, RuntimeStats
from ckpt.hostexec.compare import VerifyResult, WorstElement
from ckpt.replay.closeness import Closeness, TensorCloseness
from ckpt.replay.report import CodeRunRecord, CodeStatus, record_from_json

names = st.text(alphabet="abcdefgh_0123", min_size=1, max_size=8)
counts = st.integers(min_value=0, max_value=10**6)
floats = st.floats(allow_nan=False, allow_infinity=False, width=32)

worst = st.builds(WorstElement, tensor=names, index=st.lists(counts, max_size=3).map(tuple), actual=floats,
                  expected=floats, abs_diff=floats)
golden = st.builds(VerifyResult, errors=counts, compared=counts, tensors=counts, failed=st.lists(names, max_size=3),
                   worst=st.none() | worst, nan_inputs=st.lists(names, max_size=2),
                   errors_by_tensor=st.dictionaries(names, counts, max_size=3),
                   max_abs_diff=st.dictionaries(names, floats, max_size=3))
use = st.builds(LevelUse, peak=counts, end=counts, allocated=counts)
stats = st.builds(RuntimeStats, levels=st.dictionaries(st.sampled_from(["L1", "L2", "L3"]), use, max_size=3),
                  forks=counts, dma_transfers=counts, dma_bytes=counts, ram_copies=counts, ram_bytes=counts)
positive = st.floats(min_value=0, max_value=1e3, allow_nan=False, width=32)
tensor_closeness = st.builds(TensorCloseness, tensor=names, distance=positive, scale=positive, updated=st.booleans(),
                             other_flow=st.none() | positive)
closeness = st.builds(Closeness, tensors=st.lists(tensor_closeness, max_size=3),
                      off=st.dictionaries(names, names, max_size=2))
code_run = st.builds(CodeRunRecord, flow=st.sampled_from(["tiled", "non_tiled"]),
                     status=st.sampled_from(list(CodeStatus)), reason=st.none() | names,
                     weights=st.sampled_from(["in-place", "out-of-place"]), golden=st.none() | golden,
                     graph_order=st.none() | st.sampled_from(["bit-identical", "differs"]),
                     differing=st.lists(names, max_size=3), steps=st.lists(golden, max_size=4),
                     stats=st.none() | stats, closeness=st.none() | closeness)


@settings(max_examples=property_examples(60), deadline=None)
@given(code_run)
def test_a_code_run_record_read_back_from_json_equals_the_one_written(record):
    again = record_from_json(CodeRunRecord, json.loads(json.dumps(asdict(record))))
    assert again == record
    assert again.ok == record.ok and again.trains == record.trains and again.verdict == record.verdict
