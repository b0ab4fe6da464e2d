"""Configuration: one schema, the same defaults and the same short errors everywhere.

The workflow prepares its config in ``workflow/rules/common.smk`` with
:func:`prepare_config` (dotted keys nested, ``--config`` strings typed, schema defaults
filled); :func:`load_config` does the same for the CLI and the tests, and
:func:`check_config` adds the cross-checks a schema cannot express. Every failure is a
:class:`ConfigError` of a few lines: the key, its path, what is allowed and, where a
close name exists, a "did you mean".
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

SCHEMA_RELATIVE = Path("workflow") / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """The configuration is invalid; the message names the offending key."""


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses a key given twice in one mapping (YAML says keys are
    unique; the safe loader keeps the last value without a word)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
            first: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in first:
                        raise ConfigError(f"{key_node.start_mark.name}: line {line}, column "
                                          f"{key_node.start_mark.column + 1}: duplicate key {key!r} (first "
                                          f"given at line {first[key]}); YAML keys must be unique")
                    first[key] = line
                except TypeError:  # an unhashable key: the base class names it
                    pass
        return super().construct_mapping(node, deep=deep)


def load_yaml_file(path: str | Path) -> Any:
    """Read a YAML config file with :class:`UniqueKeyLoader`.

    Raises
    ------
    ConfigError
        A YAML syntax error (the file, line and column, and what YAML expected) or a
        duplicate key (the key, its line and the line it was first given at).
    """
    path = Path(path)
    text = path.read_text()
    try:
        loader = UniqueKeyLoader(text)
        loader.name = str(path)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        def at(mark: Any) -> str:
            return f"line {mark.line + 1}, column {mark.column + 1}"

        mark = exc.problem_mark or exc.context_mark
        message = f"{path}: YAML syntax error at {at(mark) if mark is not None else '(position unknown)'}: "
        message += str(exc.problem or exc.context)
        if exc.context and exc.problem and exc.context_mark is not None:
            message += f" ({exc.context}, which starts at {at(exc.context_mark)})"
        raise ConfigError(message) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from None


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


_BOOLEAN_WORDS = {"true": True, "yes": True, "on": True, "1": True,
                  "false": False, "no": False, "off": False, "0": False}
_NULL_WORDS = {"null", "~", "none", ""}
_JSON_TYPES = {"boolean": bool, "integer": int, "number": (int, float), "null": type(None),
               "string": str, "array": list, "object": dict}


def coerce_config_strings(config: Any, schema: dict[str, Any]) -> Any:
    """Type the strings of ``config`` where the schema asks for something else.

    Snakemake reads a nested ``--config`` value (``'data={allow_download: false}'``) with
    YAML's base loader, which keeps every scalar a string; a top-level ``from_records=true``
    arrives as a string too. Each string at a place whose schema type is boolean, integer,
    number or null (and not string) is read as that type when it is one (``"false"`` ->
    False, ``"1e-3"`` -> 0.001, ``"null"`` -> None); anything else is left for the schema to
    reject with its usual message. Returns the (new) value; dicts and lists are rebuilt.
    """
    return _coerce(config, schema, schema)


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            break
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        node = target
    return node if isinstance(node, dict) else {}


def _coerce(value: Any, node: dict[str, Any], root: dict[str, Any]) -> Any:
    node = _resolve(node, root)
    for key in ("oneOf", "anyOf"):
        if key in node and isinstance(value, str):
            for branch in node[key]:
                typed = _coerce(value, branch, root)
                if typed is not value:
                    return typed
    if isinstance(value, dict):
        props = node.get("properties", {})
        extra = node.get("additionalProperties")
        out = {}
        for key, item in value.items():
            sub = props.get(key, extra if isinstance(extra, dict) else {})
            out[key] = _coerce(item, sub, root)
        return out
    if isinstance(value, list):
        items = node.get("items")
        return [_coerce(v, items, root) if isinstance(items, dict) else v for v in value]
    if isinstance(value, str):
        return _typed_scalar(value, node)
    return value


def _typed_scalar(text: str, node: dict[str, Any]) -> Any:
    """``text`` as the schema's type (see :func:`coerce_config_strings`), or ``text`` itself."""
    types = node.get("type")
    types = [types] if isinstance(types, str) else list(types or [])
    enum = node.get("enum")
    if "string" in types or (enum is not None and text in enum):
        # a string is allowed here, except that null words mean null where null is allowed too
        return None if "null" in types and text.strip().lower() in _NULL_WORDS else text
    word = text.strip().lower()
    candidates: list[Any] = []
    if word in _NULL_WORDS:
        candidates.append(None)
    if word in _BOOLEAN_WORDS and word not in ("0", "1"):
        candidates.append(_BOOLEAN_WORDS[word])
    for number in (int, float):
        try:
            candidates.append(number(text))
        except ValueError:
            pass
    if word in ("0", "1"):
        candidates.append(_BOOLEAN_WORDS[word])
    for candidate in candidates:
        if enum is not None and candidate in enum and type(candidate) in {type(e) for e in enum}:
            return candidate
        if any(_is_type(candidate, t) for t in types):
            return candidate
    return text


def _is_type(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    if name == "integer":
        return isinstance(value, int)  # "2.5" stays a string and the schema names it
    return isinstance(value, _JSON_TYPES.get(name, ()))


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


def load_schema(schema_path: Path | None = None) -> dict[str, Any]:
    """The config schema (``workflow/schemas/config.schema.yaml`` of this checkout by default)."""
    return yaml.safe_load((schema_path or repo_root() / SCHEMA_RELATIVE).read_text())


def validate_config(config: dict[str, Any], schema_path: Path | None = None) -> dict[str, Any]:
    """Validate ``config`` against the schema (filling defaults in place) and cross-check it.

    Raises
    ------
    ConfigError
        A few lines naming the first offending key (see :func:`describe_schema_error`).
    """
    schema = load_schema(schema_path)
    validator = _default_filling_validator()(schema)
    errors = list(validator.iter_errors(config))
    if errors:
        import jsonschema

        raise ConfigError(describe_schema_error(jsonschema.exceptions.best_match(errors)))
    check_config(config)
    return config


def prepare_config(config: dict[str, Any], schema_path: Path | None = None) -> dict[str, Any]:
    """What the workflow does to ``config`` before using it: nest dotted keys, type the
    strings ``--config`` gives (:func:`coerce_config_strings`), validate and fill defaults."""
    config = coerce_config_strings(expand_dotted_keys(config), load_schema(schema_path))
    return validate_config(config, schema_path)


_MAX_LISTED = 24  # allowed names shown in an error; longer lists end with "..."
_SCHEMA_HINT = "see workflow/schemas/config.schema.yaml"


def describe_schema_error(error: Any) -> str:
    """A short message for one ``jsonschema`` error: the key and its path, what is allowed
    and, for a misspelt name, the closest allowed one.

    The path is written as in the YAML file, sections joined by ``/`` and list entries by
    their index (``tiers/smoke/data/0/dataset``).
    """
    path = [str(p) for p in error.absolute_path]
    where = "/".join(path) or "(top level)"
    section = f"section {where!r}" if path else "the top level"
    validator = error.validator
    lines: list[str]
    if validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = list(error.schema.get("properties", {}))
        unknown = [k for k in error.instance if k not in allowed]
        key = unknown[0] if unknown else "?"
        full = "/".join([*path, str(key)])
        lines = [f"config key {full!r}: unknown key in {section}",
                 f"  allowed keys: {_listed(allowed)}"]
        lines += _did_you_mean(str(key), allowed)
    elif validator == "enum":
        allowed = [str(v) for v in error.validator_value]
        lines = [f"config key {where}: {error.instance!r} is not allowed",
                 f"  allowed values: {_listed(allowed)}"]
        lines += _did_you_mean(str(error.instance), allowed)
    elif validator == "type":
        wanted = error.validator_value
        wanted = " or ".join(wanted) if isinstance(wanted, list) else wanted
        lines = [f"config key {where}: {error.instance!r} is not of type {wanted}"]
        if isinstance(error.instance, str):
            lines.append("  on the command line, give a section as YAML: --config 'data={allow_download: false}'")
    elif validator == "required":
        lines = [f"config key {where}: {error.message}"]
    else:
        lines = [f"config key {where}: {_shorten(error.message)}"]
    description = error.schema.get("description") if isinstance(error.schema, dict) else None
    if description and validator != "additionalProperties":
        lines.append(f"  ({_shorten(' '.join(str(description).split()))})")
    lines.append(f"  {_SCHEMA_HINT}")
    return "\n".join(lines)


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:_MAX_LISTED])
    return shown + (", ..." if len(names) > _MAX_LISTED else "")


def _did_you_mean(word: str, allowed: list[str]) -> list[str]:
    close = difflib.get_close_matches(word, allowed, n=1, cutoff=0.6)
    return [f"  did you mean {close[0]!r}?"] if close else []


def _shorten(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


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


def check_config_files(paths: list[str | Path]) -> None:
    """Read each existing file of ``paths`` with :func:`load_yaml_file` (:class:`ConfigError` on a
    syntax error or a duplicate key): the workflow calls it before Snakemake reads them."""
    for path in paths:
        if Path(path).is_file():
            load_yaml_file(path)


def load_config(path: str | Path = "config.yaml", overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Read a YAML config, apply ``overrides`` (dotted keys allowed), validate and fill defaults."""
    config = load_yaml_file(path) or {}
    if overrides:
        _merge(config, expand_dotted_keys(overrides))
    return prepare_config(config)


__all__ = ["ConfigError", "UniqueKeyLoader", "check_config_files", "load_config", "load_yaml_file", "prepare_config",
           "validate_config", "check_config", "coerce_config_strings", "describe_schema_error", "expand_dotted_keys",
           "load_schema", "repo_root"]
