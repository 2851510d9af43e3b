"""GcOptions: SlateDB's defaults, the min-age floor and its explicit override."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from slate_ops.gc import ALL_RESOURCES, MIN_AGE_FLOOR, GcOptions


def test_defaults_follow_slatedb() -> None:
    options = GcOptions()
    for name in AGES:
        assert getattr(options, name) == timedelta(seconds=300)
    assert options.interval == timedelta(seconds=600)
    assert options.delete_wal_fences is False
    assert options.resources == ALL_RESOURCES
    assert timedelta(seconds=120) == MIN_AGE_FLOOR


AGES = ["manifest_min_age", "compactions_min_age", "wal_min_age", "compacted_min_age"]


@pytest.mark.parametrize("name", AGES)
def test_min_age_below_the_floor_is_refused(name: str) -> None:
    with pytest.raises(ValidationError, match=f"{name} 1min 59s is below the floor of 2min"):
        GcOptions.model_validate({name: "119s"})
    assert getattr(GcOptions.model_validate({name: "2min"}), name) == timedelta(minutes=2)


def test_unsafe_min_age_needs_the_explicit_flag() -> None:
    with pytest.raises(ValidationError, match="allow_unsafe_min_age"):
        GcOptions.with_min_age(timedelta(seconds=1))
    options = GcOptions.with_min_age(timedelta(seconds=1), allow_unsafe_min_age=True)
    assert options.wal_min_age == options.manifest_min_age == timedelta(seconds=1)


def test_options_are_frozen_and_strict() -> None:
    options = GcOptions()
    with pytest.raises(ValidationError):
        options.interval = timedelta(seconds=1)  # type: ignore[misc]
    with pytest.raises(ValidationError):
        GcOptions.model_validate({"min_age": "10min"})
    with pytest.raises(ValidationError):
        GcOptions.model_validate({"resources": ["wal", "bogus"]})
    assert GcOptions.model_validate({"resources": ["wal"]}).runs("wal")
    assert not GcOptions.model_validate({"resources": ["wal"]}).runs("manifest")
