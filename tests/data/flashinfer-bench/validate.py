#!/usr/bin/env python3
"""Check JSON documents against a JSON Schema (standard library only).

Supports the keywords flashinfer-trace.schema.json uses: $ref (local),
type, const, enum, required, properties, additionalProperties, items,
minItems, minLength, minimum, pattern, anyOf, allOf, if/then.

usage: validate.py SCHEMA DEF FILE...   (DEF: a name under $defs; a .jsonl
FILE is checked line by line). Exit 0 when every document is valid, 1 and a
line per problem otherwise.
"""
import json
import re
import sys

TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def check(root, schema, value, where, errors):
    if "$ref" in schema:
        node = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        check(root, node, value, where, errors)
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(TYPES[t](value) for t in types):
            errors.append(f"{where}: expected {'/'.join(types)}, got {json.dumps(value)[:60]}")
            return
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: expected {json.dumps(schema['const'])}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {json.dumps(value)} is not one of {schema['enum']}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{where}: empty string")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if TYPES["number"](value) and "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{where}: {value} < {schema['minimum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{where}: missing {key}")
        props = schema.get("properties", {})
        for key, v in value.items():
            if key in props:
                check(root, props[key], v, f"{where}.{key}", errors)
            elif isinstance(schema.get("additionalProperties"), dict):
                check(root, schema["additionalProperties"], v, f"{where}.{key}", errors)
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{where}: fewer than {schema['minItems']} items")
        if "items" in schema:
            for i, v in enumerate(value):
                check(root, schema["items"], v, f"{where}[{i}]", errors)
    if "anyOf" in schema:
        tries = [valid(root, s, value, where) for s in schema["anyOf"]]
        if all(tries):
            # The closest alternative says what is wrong.
            # (not one whose type or const differs at this level).
            near = [t for t in tries if not any(e.startswith(f"{where}: expected") for e in t)]
            errors.extend(min(near or tries, key=len))
    for s in schema.get("allOf", []):
        check(root, s, value, where, errors)
    if "if" in schema and not valid(root, schema["if"], value) and "then" in schema:
        check(root, schema["then"], value, where, errors)


def valid(root, schema, value, where="$"):
    """The problems of value (empty list when valid)."""
    errors = []
    check(root, schema, value, where, errors)
    return errors


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    root = json.load(open(argv[1]))
    schema = {"$ref": "#/$defs/" + argv[2]}
    bad = 0
    for path in argv[3:]:
        with open(path) as f:
            docs = [json.loads(l) for l in f if l.strip()] if path.endswith(".jsonl") else [json.load(f)]
        for n, doc in enumerate(docs, 1):
            for e in valid(root, schema, doc):
                print(f"{path}:{n}: {e}")
                bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
