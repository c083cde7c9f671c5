"""How many examples a property test draws: every one in a full run (CI's, `pytest` without a marker filter), a
third in a run that leaves the slow tests out, the fast tier, whose job is to answer within a minute."""

QUICK = False            # set by conftest.py before any test module is imported


def property_examples(full: int) -> int:
    """The number of examples to draw, for a property whose full strength is `full`."""
    return max(10, full // 3) if QUICK else full
