"""The bench document's JSON Schema (:data:`SCHEMA`) and :func:`validate` (schema and
figures that must agree with each other)."""
from __future__ import annotations

import math

from .config import SCHEMA_ID, STATUSES, TOLERANCES


# ----------------------------------------------------------------------------- schema
_NUM = {"type": ["number", "null"]}
_INT = {"type": ["integer", "null"]}
_STR = {"type": ["string", "null"]}
_COPY = {
    "type": ["object", "null"],
    "required": ["bytes", "buffer_bytes", "buffers", "ms", "gbps", "samples", "what"],
    "properties": {"bytes": {"type": "integer", "minimum": 1}, "buffer_bytes": {"type": "integer"},
                   "buffers": {"type": "integer", "minimum": 1}, "ms": {"type": "number"},
                   "gbps": {"type": "number"}, "samples": {"type": "integer"},
                   "what": {"type": "string"}},
}
_ROW = {
    "type": "object",
    "required": ["op", "library", "variant", "status", "reason", "check", "max_error", "timing",
                 "ms", "ms_p10", "ms_p90", "samples", "host_us", "host_bound", "bytes_read",
                 "bytes_written", "gbps", "copy_gbps", "pct_of_copy", "images_per_s", "speedup",
                 "in_dtype", "out_dtype", "out_shape", "note", "params", "extra"],
    "properties": {
        "op": {"type": "string"},
        "library": {"type": "string", "description": "'gpuaug' or the peer library"},
        "variant": {"type": "string", "description": "gpuaug backend, or the peer call timed"},
        "status": {"enum": list(STATUSES)},
        "reason": _STR,
        "check": {"enum": ["pass", "fail", None]},
        "max_error": _NUM,
        "timing": {"enum": ["events", "wall", "marginal", None]},
        "ms": _NUM, "ms_p10": _NUM, "ms_p90": _NUM,
        "samples": {"type": "integer", "minimum": 0},
        "host_us": _NUM,
        "loop_ms": {"type": ["number", "null"],
                    "description": "ms per call over back-to-back calls and one sync (GPU only)"},
        "host_bound": {"type": "boolean"},
        "bytes_read": _INT, "bytes_written": _INT,
        "gbps": _NUM, "copy_gbps": _NUM, "pct_of_copy": _NUM, "images_per_s": _NUM,
        "speedup": {"type": ["number", "null"],
                    "description": "peer ms / fastest checked gpuaug ms (peers only)"},
        "in_dtype": _STR, "out_dtype": _STR,
        "out_shape": {"type": ["array", "null"], "items": {"type": "integer"}},
        "note": {"type": "string"},
        "params": {"type": "object", "additionalProperties": {"type": "string"}},
        "extra": {"type": "object"},
    },
    "additionalProperties": False,
}
_SUMMARY = {
    "type": "object",
    "required": ["op", "gpuaug_variant", "gpuaug_ms", "gpuaug_gbps", "pct_of_copy", "fastest_peer",
                 "fastest_peer_ms", "speedup_over_fastest_peer"],
    "properties": {"op": {"type": "string"}, "gpuaug_variant": _STR, "gpuaug_ms": _NUM,
                   "gpuaug_gbps": _NUM, "pct_of_copy": _NUM, "fastest_peer": _STR,
                   "fastest_peer_ms": _NUM, "speedup_over_fastest_peer": _NUM},
    "additionalProperties": False,
}
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": SCHEMA_ID,
    "title": "gpuaug bench results (one case)",
    "type": "object",
    "required": ["schema", "created", "config", "device", "versions", "ceilings", "rows", "summary",
                 "elapsed_s"],
    "properties": {
        "schema": {"const": SCHEMA_ID},
        "created": {"type": "string", "description": "UTC, ISO 8601"},
        "config": {
            "type": "object",
            "required": ["ops", "batch", "height", "width", "channels", "dtype", "layout", "backends",
                         "peers", "libraries", "repeat", "warmup", "device", "buffers", "seed",
                         "check_batch", "budget_s", "case", "input_bytes"],
            "properties": {
                "ops": {"type": "array", "items": {"type": "string"}},
                "batch": {"type": "integer", "minimum": 1},
                "height": {"type": "integer", "minimum": 1},
                "width": {"type": "integer", "minimum": 1},
                "channels": {"type": "integer", "minimum": 1},
                "dtype": {"enum": list(TOLERANCES)},
                "layout": {"enum": ["NHWC", "NCHW"]},
                "backends": {"type": "array", "items": {"enum": ["cuda", "numba", "cpu"]}},
                "peers": {"type": "boolean"},
                "libraries": {"type": ["array", "null"], "items": {"type": "string"}},
                "repeat": {"type": "integer", "minimum": 1},
                "warmup": {"type": "integer", "minimum": 0},
                "device": {"enum": ["gpu", "cpu"]},
                "buffers": {"type": "integer", "minimum": 1},
                "seed": {"type": "integer"},
                "check_batch": {"type": "integer"},
                "ref_workers": {"type": "integer"},
                "budget_s": _NUM,
                "case": {"type": "string"},
                "input_bytes": {"type": "integer", "minimum": 1},
            },
        },
        "device": {
            "type": "object",
            "required": ["kind", "name", "compute_capability", "memory_bytes", "l2_bytes", "sm_count",
                         "driver", "cuda_driver", "cuda_runtime"],
            "properties": {"kind": {"enum": ["gpu", "cpu"]}, "name": {"type": "string"},
                           "compute_capability": _STR, "memory_bytes": _INT, "l2_bytes": _INT,
                           "sm_count": _INT, "driver": _STR, "cuda_driver": _STR,
                           "cuda_runtime": _STR},
        },
        "versions": {"type": "object", "required": ["python", "gpuaug", "numpy"],
                     "additionalProperties": _STR},
        "ceilings": {
            "type": "object",
            "required": ["copy_large", "h2d_pinned", "d2h_pinned", "h2d_pageable", "copy_same_size"],
            "properties": {"copy_large": _COPY, "h2d_pinned": _COPY, "d2h_pinned": _COPY,
                           "h2d_pageable": _COPY,
                           "copy_same_size": {"type": "array", "items": _COPY}},
        },
        "rows": {"type": "array", "items": _ROW},
        "summary": {"type": "array", "items": _SUMMARY},
        "elapsed_s": {"type": "number", "minimum": 0},
    },
}

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _type_ok(value, t) -> bool:
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return isinstance(value, _TYPES[t])


def schema_errors(value, schema=None, path="$") -> list:
    """Errors of ``value`` against a JSON Schema (the subset :data:`SCHEMA` uses: type,
    enum, const, required, properties, additionalProperties, items, minimum)."""
    schema = SCHEMA if schema is None else schema
    errs = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_type_ok(value, t) for t in types):
            return [f"{path}: expected {' or '.join(types)}, got {type(value).__name__} {value!r:.60}"]
    if "enum" in schema and value not in schema["enum"]:
        errs.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        errs.append(f"{path}: expected {schema['const']!r}, got {value!r}")
    if "minimum" in schema and isinstance(value, (int, float)) and value < schema["minimum"]:
        errs.append(f"{path}: {value} < minimum {schema['minimum']}")
    if isinstance(value, dict):
        for k in schema.get("required", ()):
            if k not in value:
                errs.append(f"{path}: missing {k!r}")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for k, v in value.items():
            if k in props:
                errs += schema_errors(v, props[k], f"{path}.{k}")
            elif extra is False:
                errs.append(f"{path}: unexpected key {k!r}")
            elif isinstance(extra, dict):
                errs += schema_errors(v, extra, f"{path}.{k}")
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            errs += schema_errors(v, schema["items"], f"{path}[{i}]")
    return errs


def consistency_errors(doc) -> list:
    """Figures that disagree: GB/s = bytes / time, images/s = N / time, % = GB/s / copy."""
    errs = []
    n = doc["config"]["batch"]

    def close(a, b):
        return abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1e-12)

    for i, r in enumerate(doc["rows"]):
        where = f"rows[{i}] ({r['op']} {r['library']} {r['variant']})"
        if r["status"] == "ok":
            for k in ("ms", "gbps", "images_per_s", "bytes_read", "bytes_written"):
                if r[k] is None:
                    errs.append(f"{where}: status ok but {k} is null")
            if errs:
                continue
            if r["ms"] <= 0:
                errs.append(f"{where}: ms {r['ms']} <= 0")
                continue
            b = r["bytes_read"] + r["bytes_written"]
            if not close(r["gbps"], b / r["ms"] / 1e6):
                errs.append(f"{where}: gbps {r['gbps']} != bytes/time {b / r['ms'] / 1e6}")
            if not close(r["images_per_s"], n / r["ms"] * 1e3):
                errs.append(f"{where}: images_per_s {r['images_per_s']} != N/time")
            if r["copy_gbps"] and r["pct_of_copy"] is not None and \
                    not close(r["pct_of_copy"], 100 * r["gbps"] / r["copy_gbps"]):
                errs.append(f"{where}: pct_of_copy disagrees with gbps / copy_gbps")
            if r["ms_p10"] is not None and r["timing"] != "marginal" and \
                    not (r["ms_p10"] <= r["ms"] * (1 + 1e-9) and r["ms"] <= r["ms_p90"] * (1 + 1e-9)):
                errs.append(f"{where}: median {r['ms']} outside [p10, p90]")
        elif r["ms"] is not None:
            errs.append(f"{where}: status {r['status']!r} but has a time")
        if r["status"] != "ok" and not r["reason"]:
            errs.append(f"{where}: status {r['status']!r} without a reason")
    for c in [doc["ceilings"][k] for k in ("copy_large", "h2d_pinned", "d2h_pinned", "h2d_pageable")] + \
            list(doc["ceilings"]["copy_same_size"]):
        if c and not close(c["gbps"], c["bytes"] / c["ms"] / 1e6):
            errs.append(f"ceiling {c['what']} {c['bytes']} B: gbps disagrees with bytes/time")
    return errs


def validate(doc) -> list:
    """Every schema error and inconsistency of a bench document (empty list: valid)."""
    errs = schema_errors(doc)
    if errs:
        return errs
    return consistency_errors(doc)


def row_errors(rows, keys, *, bools=(), ok_positive=(), ok_nonnegative=()):
    """Problems with the rows of a table document (the end-to-end bench and its scaling
    section): each row has every key of ``keys`` (name -> type or tuple of types; a bool
    passes only for the names in ``bools``), and an ok row (``status == "ok"``) has finite
    floats > 0 under ``ok_positive`` and >= 0 under ``ok_nonnegative``."""
    out = []
    for i, r in enumerate(rows):
        for k, t in keys.items():
            if k not in r:
                out.append(f"rows[{i}]: missing {k}")
            elif not isinstance(r[k], t) or (isinstance(r[k], bool) and k not in bools):
                out.append(f"rows[{i}].{k}: {type(r[k]).__name__}")
        if r.get("status") == "ok":
            for k, low_ok in [(k, False) for k in ok_positive] + [(k, True) for k in ok_nonnegative]:
                v = r.get(k)
                if not isinstance(v, float) or not math.isfinite(v) or v < 0 or (v == 0 and not low_ok):
                    out.append(f"rows[{i}].{k}: {v!r} for an ok row")
    return out
