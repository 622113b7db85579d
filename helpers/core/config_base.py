"""The base of every config model: unknown keys are errors, values are validated on assignment."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    """Base of every config model: unknown keys are errors, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


PositiveInt = Annotated[int, Field(gt=0)]


PositiveInt = Annotated[int, Field(gt=0)]
