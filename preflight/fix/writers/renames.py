"""Struct field names that hide characters, renamed in a Parquet/Arrow clean output.

A struct field's name (``meta.so\\u200burce``) is the schema's, shared by every record: a
record holding a value under it cannot have the key mended alone, so ``fix`` sets it aside
(``key_not_mendable``). The records left in the clean output hold no value there (null
throughout, or the character checks would have flagged them), so renaming the field in the
clean output's schema changes no value: the hidden character leaves the schema too, and a
``datasets`` folder's feature names (its ``huggingface`` metadata) follow. A name that the
mending would make equal to a sibling's is kept as it is (two fields cannot share a name;
the manifest says so). A column's own name (top level) is kept: a field the rules may name.
A JSON Lines output from such an input renames the same keys in each record it writes
(``renamed_record``), and keeps the same column names: its manifest lists the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from preflight.checks.nested_strings import escaped, odd_key

Mend = Callable[[str], str]


def renamed_schema(schema: pa.Schema, mend: Mend
                   ) -> tuple[pa.Schema, list[dict[str, str]]]:
    """``schema`` with each struct field name that ``mend`` changes renamed, and what was
    renamed or kept (``{"field": 'meta["so\\u200burce"]', "to": "source"}``, or ``"kept"``
    with why)."""
    done: list[dict[str, str]] = []
    fields = []
    for f in schema:
        if odd_key(f.name) and mend(f.name) != f.name:  # said: a check of the output flags it
            done.append({"field": _quoted(f.name), "from": f.name,
                         "kept": "a column's own name (the rules may name it): rename it "
                                 "upstream; a check of the clean output still flags it"})
        fields.append(f.with_type(_renamed(f.type, mend, _quoted(f.name), done)))
    if not any("to" in d for d in done):
        for d in done:
            del d["from"]
        return schema, done
    metadata = dict(schema.metadata or {})
    if b"huggingface" in metadata:
        moved = {d["from"]: d["to"] for d in done if "to" in d}
        info = json.loads(metadata[b"huggingface"])
        metadata[b"huggingface"] = json.dumps(_renamed_keys(info, moved)).encode()
    out = pa.schema(fields, metadata=metadata or None)
    for d in done:
        del d["from"]
    return out, done


def renamed_table(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` (in the schema ``schema`` was renamed from) in ``schema``: the same
    buffers, only the names changed."""
    columns = [pa.chunked_array([chunk.view(f.type) for chunk in column.chunks], type=f.type)
               for column, f in zip(table.columns, schema, strict=True)]
    return pa.Table.from_arrays(columns, schema=schema)


def renamed_record(record: dict[str, Any], schema: pa.Schema, named: pa.Schema
                   ) -> dict[str, Any]:
    """``record`` (its values as read in ``schema``) with the struct fields' keys renamed as
    in ``named``: a JSON Lines output from Arrow input names them as a Parquet one does."""
    return _renamed_value(record, pa.struct(list(schema)), pa.struct(list(named)))


def _renamed_value(value: Any, dtype: pa.DataType, named: pa.DataType) -> Any:
    if value is None or dtype == named:
        return value
    if pa.types.is_struct(dtype) and isinstance(value, dict):
        fields = {dtype.field(k).name: (named.field(k).name, dtype.field(k).type,
                                        named.field(k).type) for k in range(dtype.num_fields)}
        out = {}
        for key, item in value.items():
            new, old_type, new_type = fields.get(key, (key, None, None))
            out[new] = item if old_type is None else _renamed_value(item, old_type, new_type)
        return out
    if isinstance(value, list) and hasattr(dtype, "value_type") and not pa.types.is_map(dtype):
        return [_renamed_value(v, dtype.value_type, named.value_type) for v in value]
    return value


def _renamed(dtype: pa.DataType, mend: Mend, at: str, done: list[dict[str, str]]
             ) -> pa.DataType:
    if pa.types.is_struct(dtype):
        olds = [dtype.field(k).name for k in range(dtype.num_fields)]
        news = [mend(n) if odd_key(n) else n for n in olds]
        fields = []
        for k, (old, new) in enumerate(zip(olds, news, strict=True)):
            where = f'{at}["{escaped(old)}"]' if odd_key(old) else f"{at}.{old}"
            if new != old and (news.count(new) > 1 or new in olds):
                done.append({"field": where, "from": old,
                             "kept": f"{new!r} is another field of the same struct"})
                new = old
            elif new != old:
                done.append({"field": where, "from": old, "to": new})
            f = dtype.field(k)
            fields.append(pa.field(new, _renamed(f.type, mend, where, done), f.nullable,
                                   f.metadata))
        return pa.struct(fields)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or (
            pa.types.is_fixed_size_list(dtype)):
        item = dtype.value_field
        inner = _renamed(item.type, mend, f"{at}[*]", done)
        if inner == item.type:
            return dtype
        item = item.with_type(inner)
        if pa.types.is_fixed_size_list(dtype):
            return pa.list_(item, dtype.list_size)
        return pa.large_list(item) if pa.types.is_large_list(dtype) else pa.list_(item)
    return dtype  # a map's keys are values, mended as such; other types hold no names


def _quoted(name: str) -> str:
    return f'["{escaped(name)}"]' if odd_key(name) else name


def _renamed_keys(value: Any, moved: dict[str, str]) -> Any:
    """A ``datasets`` features description with the renamed fields' keys renamed."""
    if isinstance(value, dict):
        return {moved.get(k, k): _renamed_keys(v, moved) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed_keys(v, moved) for v in value]
    return value
