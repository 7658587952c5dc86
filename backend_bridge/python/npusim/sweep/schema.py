"""The chip's parameter schema (declared once in parameters.def, read through ``npusim._C``), used to check axis
values before any point runs."""

import difflib
import functools

import npusim


@functools.cache
def parameters():
    """{"section.key": {type, default, unit, min, max, description}} for every declared parameter."""
    return {row["name"]: row for row in npusim._C.parameter_schema()}


def base_configuration(base):
    """Every parameter of a preset or YAML file, keyed "section.key" (the C++ loader validates it)."""
    values = npusim._C.configuration(str(base), npusim.config_dirs())
    return {name: values[name] for name in parameters()}


def check_name(name):
    """Raises ValueError unless `name` is a declared parameter."""
    if name not in parameters():
        close = difflib.get_close_matches(name, parameters(), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ValueError(f"unknown parameter '{name}'{hint}")


def text_choices(name):
    """The values a text parameter accepts: its schema row's unit lists them, separated by '|', as the C++ loader
    reads them (an empty unit: any text)."""
    unit = parameters()[name]["unit"]
    return unit.split("|") if unit else []


def check_value(name, value):
    """The value converted to the parameter's type; raises ValueError with the reason when it does not fit."""
    check_name(name)
    row = parameters()[name]
    if row["type"] == "text":
        if not isinstance(value, str):
            raise ValueError(f"'{name}' must be text, found {value!r}")
        choices = text_choices(name)
        if choices and value not in choices:
            raise ValueError(f"'{name}' = '{value}' is not one of {', '.join(choices)}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"'{name}' must be a number, found {value!r}")
    if row["type"] == "integer":
        if float(value) != int(value):
            raise ValueError(f"'{name}' must be an integer, found {value!r}")
        value = int(value)
    else:
        value = float(value)
    if not row["min"] <= value <= row["max"]:
        unit = f" {row['unit']}" if row["unit"] else ""
        raise ValueError(f"'{name}' = {value} is outside [{row['min']:g}, {row['max']:g}]{unit}")
    return value
