"""courier.errors: one class per status, the status table, docstrings as messages."""

from __future__ import annotations

import re

import pytest

from courier import errors

NON_OK = [status for status in errors.Status if status is not errors.Status.OK]


def all_error_classes() -> list[type[errors.CourierError]]:
    """CourierError and its subclasses in courier.errors (other modules may add more)."""
    found: list[type[errors.CourierError]] = []
    pending: list[type[errors.CourierError]] = [errors.CourierError]
    while pending:
        cls = pending.pop()
        if cls.__module__ == errors.__name__:
            found.append(cls)
        pending += cls.__subclasses__()
    return found


@pytest.mark.parametrize("status", NON_OK, ids=lambda status: status.name)
def test_status_table_round_trips_every_status(status: errors.Status) -> None:
    raised = errors.for_status(status, "told so")

    assert raised.status is status
    assert raised.message == "told so"
    assert errors.for_status(int(status)).status is status  # plain ints work too


def test_each_status_has_its_own_class() -> None:
    classes = {type(errors.for_status(status)) for status in NON_OK}
    assert len(classes) == len(NON_OK)


@pytest.mark.parametrize("code", [0, max(errors.Status) + 1, 255, -1])
def test_ok_and_unknown_codes_become_internal_errors(code: int) -> None:
    raised = errors.for_status(code)
    assert type(raised) is errors.InternalError
    assert str(code) in raised.message


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda cls: cls.__name__)
def test_docstring_is_the_default_message(cls: type[errors.CourierError]) -> None:
    assert cls.__doc__, f"{cls.__name__} needs a docstring"
    first_line = cls.__doc__.strip().splitlines()[0]

    assert cls().message == first_line
    assert str(cls()) == first_line
    assert cls("custom").message == "custom"


def test_known_default_messages() -> None:
    assert errors.QueueEmpty().message == "Queue is empty for you."
    assert errors.ClientOnline().message == "Client is already online."


def test_payload_too_large_carries_size_and_limit() -> None:
    error = errors.PayloadTooLarge(size=70000, limit=65536)
    assert (error.size, error.limit) == (70000, 65536)
    assert error.message == "message body is 70000 bytes; the limit is 65536"
    assert errors.PayloadTooLarge().message == "Message body is too large."


def test_the_tree_in_the_module_docstring_is_the_class_tree() -> None:
    """Each line of the drawn tree names a class, its parent (by indent) and its status."""
    doc = errors.__doc__ or ""
    parents: dict[int, type[errors.CourierError]] = {0: errors.CourierError}
    drawn = set()
    for line in doc.splitlines():
        match = re.match(r"^\s*((?:│   |    )*)[├└]── (\w+)\s+(\w+)?", line)
        if not match:
            continue
        depth = len(match.group(1)) // 4 + 1
        cls = getattr(errors, match.group(2))
        assert cls.__bases__ == (parents[depth - 1],), match.group(2)
        if match.group(3) and match.group(3).isupper():
            assert cls.status is errors.Status[match.group(3)], match.group(2)
        parents[depth] = cls
        drawn.add(cls)
    assert drawn == set(all_error_classes()) - {errors.CourierError}
