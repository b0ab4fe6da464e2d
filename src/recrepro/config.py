"""Configuration loading outside Snakemake: the same schema, the same defaults.

The workflow validates its config in ``workflow/rules/common.smk`` with
``snakemake.utils.validate``; :func:`load_config` does the same for the CLI and the
tests, and :func:`check_config` adds the cross-checks a schema cannot express.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SCHEMA_RELATIVE = Path("workflow") / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """The configuration is invalid; the message names the offending key."""


def repo_root() -> Path:
    """The checkout holding ``workflow/`` (the package is installed editable from it)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / SCHEMA_RELATIVE).is_file():
            return parent
    raise FileNotFoundError(f"cannot find {SCHEMA_RELATIVE} above {here}")


def expand_dotted_keys(config: dict[str, Any]) -> dict[str, Any]:
    """Turn ``{"data.mirror": x}`` (as given by ``--config data.mirror=x``) into ``{"data": {"mirror": x}}``."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            value = expand_dotted_keys(value)
        if isinstance(key, str) and "." in key:
            head, rest = key.split(".", 1)
            node = out.setdefault(head, {})
            if not isinstance(node, dict):
                raise ConfigError(f"config key {key!r}: {head!r} is not a section")
            _merge(node, expand_dotted_keys({rest: value}))
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            _merge(out[key], value)
        else:
            out[key] = value
    return out


#: Top-level switches a user flips on the command line (``--config from_records=true``).
#: Snakemake hands ``--config`` values over as strings; these are read as YAML booleans.
CLI_BOOLEAN_KEYS = ("from_records",)
_BOOLEAN_WORDS = {"true": True, "yes": True, "on": True, "1": True,
                  "false": False, "no": False, "off": False, "0": False}


def coerce_cli_booleans(config: dict[str, Any]) -> dict[str, Any]:
    """``{"from_records": "true"}`` -> ``{"from_records": True}``; other words are left for the schema to reject."""
    for key in CLI_BOOLEAN_KEYS:
        value = config.get(key)
        if isinstance(value, str) and value.strip().lower() in _BOOLEAN_WORDS:
            config[key] = _BOOLEAN_WORDS[value.strip().lower()]
    return config


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _default_filling_validator():
    import jsonschema

    base = jsonschema.Draft202012Validator

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = _copy(sub["default"])
        yield from base.VALIDATORS["properties"](validator, properties, instance, schema)

    return jsonschema.validators.extend(base, {"properties": set_defaults})


def _copy(value: Any) -> Any:
    import copy

    return copy.deepcopy(value)


def validate_config(config: dict[str, Any], schema_path: Path | None = None) -> dict[str, Any]:
    """Validate ``config`` against the schema (filling defaults in place) and cross-check it."""
    schema = yaml.safe_load((schema_path or repo_root() / SCHEMA_RELATIVE).read_text())
    validator = _default_filling_validator()(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(top level)"
        raise ConfigError(f"config key {where}: {first.message}")
    check_config(config)
    return config


def check_config(config: dict[str, Any]) -> None:
    """Cross-checks the schema cannot express: tier entries name known protocols and evaluated splits."""
    protocols = config.get("protocols", {})
    eval_splits = config.get("evaluation", {}).get("splits", {})
    for tier, block in (config.get("tiers") or {}).items():
        for i, entry in enumerate(block.get("data", [])):
            where = f"tiers/{tier}/data/{i}"
            if entry["protocol"] not in protocols:
                raise ConfigError(f"config key {where}/protocol: unknown protocol {entry['protocol']!r}; "
                                  f"known: {sorted(protocols)}")
            if entry["split"] not in eval_splits:
                raise ConfigError(f"config key {where}/split: no evaluation.splits entry for {entry['split']!r}")
    if config.get("tier") not in (config.get("tiers") or {}):
        raise ConfigError(f"config key tier: no tiers/{config.get('tier')} block")


def load_config(path: str | Path = "config.yaml", overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Read a YAML config, apply ``overrides`` (dotted keys allowed), validate and fill defaults."""
    config = yaml.safe_load(Path(path).read_text()) or {}
    if overrides:
        _merge(config, expand_dotted_keys(overrides))
    return validate_config(config)


__all__ = ["ConfigError", "load_config", "validate_config", "check_config", "expand_dotted_keys", "repo_root"]
