"""A feature's settings as one typed, frozen object, read once through the settings schema.

A component used to read each of its settings where it needed it, repeating the name and the
default (``settings.getint("WARC_MAX_SIZE", defaults.WARC_MAX_SIZE)``), so the same setting
could be read with two defaults or two types, and a bad value surfaced deep in a constructor.
A feature now declares its settings once, as the fields of a :class:`FeatureConfig` (each field
aliased to its setting's name, its default the one of ``crawler.config.defaults``), and builds
the object once with :meth:`FeatureConfig.from_settings`. The values go through the one schema
(``crawler.config.schema``), so a bad one is refused with the same one-line ``NAME: problem``
as from ``-s``, scrapyd or a site config (:class:`~crawler.config.schema.SettingsError`).

A knob of the expert setting ``TUNING`` (crawler/config/tuning.py) is a field too, made with
:func:`knob`: the feature reads it with its settings, and never learns where it came from.

The bottom layer: pydantic and ``crawler.config`` only, no Scrapy (``settings`` is anything with
a ``get(name)``: Scrapy's settings, or a dict in a test).
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

from crawler.config import defaults
from crawler.config.schema import read_settings
from crawler.config.tuning import knob_default

_KNOB = "TUNING."  # the alias of a knob's field: TUNING.<knob>


def setting(name: str) -> Any:
    """A field that stands for the setting ``name``, with that setting's default."""
    return Field(getattr(defaults, name), alias=name)


def knob(name: str) -> Any:
    """A field that stands for the ``TUNING`` knob ``name``, with that knob's default."""
    return Field(knob_default(name), alias=_KNOB + name)


class FeatureConfig(BaseModel):
    """The settings of one feature (subclass it, one field per setting, each made with
    :func:`setting`)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    @classmethod
    def setting_names(cls) -> dict[str, str]:
        """Each setting's name and the field that holds it."""
        return {str(info.alias): key for key, info in cls.model_fields.items()}

    @classmethod
    def from_settings(cls, settings: Any) -> Self:
        """The feature's settings as read (a missing one: its default); raises
        :class:`~crawler.config.schema.SettingsError` with every problem, one line each."""
        names = cls.setting_names()
        knobs = {n.removeprefix(_KNOB): key for n, key in names.items() if n.startswith(_KNOB)}
        plain = [n for n in names if not n.startswith(_KNOB)]
        values = read_settings([*plain, "TUNING"] if knobs else plain, settings.get)
        tuned = values.pop("TUNING", None) or {}
        data = {names[name]: value for name, value in values.items()}
        data.update({key: tuned[k] for k, key in knobs.items() if k in tuned})
        return cls.model_validate(data)
