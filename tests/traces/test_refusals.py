"""What the writers of traces turn down, each answered with its HTTP status."""

import pytest

from traces.refusals import BadTrace, CaptureUnavailable, DeviceBusy, StorageFull, TraceRefused


@pytest.mark.parametrize(
    "refusal, status",
    [(BadTrace, 400), (DeviceBusy, 409), (CaptureUnavailable, 409), (StorageFull, 507)],
)
def test_each_refusal_carries_the_status_to_answer_with(refusal, status):
    err = refusal("because")
    assert isinstance(err, TraceRefused) and err.status == status and str(err) == "because"


def test_one_except_clause_catches_every_refusal():
    caught = []
    for refusal in (BadTrace, DeviceBusy, CaptureUnavailable, StorageFull):
        try:
            raise refusal("no")
        except TraceRefused as err:
            caught.append(err.status)
    assert caught == [400, 409, 409, 507]
