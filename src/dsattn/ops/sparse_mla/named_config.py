"""Launch configurations as text (the DSATTN_*_CONFIG variables of the Gluon kernels): 'field=value' pairs separated by
commas, a dataclass's field names, integer values, each field at most once, fields left out at the dataclass's
defaults. Named, not positional, so that removing a field can never shift the meaning of the fields after it."""
from __future__ import annotations

import dataclasses


def parse_named(cls, spec: str, var: str, example: str):
    """spec -> cls(**fields); ValueError naming `var` (the environment variable) for anything else. The caller checks
    the values."""
    names = [f.name for f in dataclasses.fields(cls)]
    kw = {}
    try:
        for part in spec.split(","):
            key, value = part.split("=")
            key = key.strip()
            if key not in names or key in kw:
                raise ValueError
            kw[key] = int(value)
    except ValueError:
        raise ValueError(f"{var} must be field=value pairs separated by commas, fields from {names} (those left out "
                         f"take {cls.__name__}'s defaults), e.g. {example!r}; got {spec!r}") from None
    return cls(**kw)


def named_spec(cfg) -> str:
    """The text of cfg, every field named (parse_named(type(cfg), named_spec(cfg), ...) == cfg)."""
    return ",".join(f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg))
